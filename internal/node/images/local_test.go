package images

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	v1 "github.com/google/go-containerregistry/pkg/v1"
)

func TestAssemble(t *testing.T) {
	dir := t.TempDir()
	s := open(t, dir, Options{})
	host := filepath.Join(t.TempDir(), "prog")
	if err := os.WriteFile(host, []byte("#!/bin/sh\n"), 0o750); err != nil {
		t.Fatal(err)
	}
	base := []File{
		{Path: "/tmp", Dir: true, Mode: 0o777 | fs.ModeSticky},
		{Path: "/etc/passwd", Data: []byte("root:x:0:0::/root:/bin/sh\n")},
	}
	program := []File{{Path: "/usr/bin/prog", Source: host}, {Path: "/bin/sh", Link: "/usr/bin/prog"}}
	cfg := v1.Config{Cmd: []string{"prog"}, Labels: map[string]string{"name": "a"}}
	ctx := context.Background()
	img, err := s.Assemble(ctx, "localhost/a", "svcnet", cfg, base, program)
	if err != nil {
		t.Fatal(err)
	}
	if len(img.Layers) != 2 || !slices.Equal(img.Config.Cmd, []string{"prog"}) || img.RepoTags[0] != "localhost/a:svcnet" ||
		!strings.HasPrefix(img.RepoDigests[0], "localhost/a@sha256:") {
		t.Fatalf("assembled image %+v", img)
	}
	if got, err := s.Lookup("localhost/a:svcnet"); err != nil || got.ID != img.ID {
		t.Fatalf("lookup by tag: %v, %v", got, err)
	}
	if b, err := s.ReadFile(img, "/etc/passwd"); err != nil || !strings.HasPrefix(string(b), "root:") {
		t.Errorf("/etc/passwd: %q, %v", b, err)
	}
	layers := s.LayerDirs(img) // topmost first
	if fi, err := os.Stat(filepath.Join(layers[0], "usr/bin/prog")); err != nil || fi.Mode().Perm() != 0o750 {
		t.Errorf("program in its layer: %v, %v (want mode 0750 from the host file)", fi, err)
	}
	if l, err := os.Readlink(filepath.Join(layers[0], "bin/sh")); err != nil || l != "/usr/bin/prog" {
		t.Errorf("link: %q, %v", l, err)
	}
	if fi, err := os.Stat(filepath.Join(layers[1], "tmp")); err != nil || fi.Mode()&fs.ModeSticky == 0 || fi.Mode().Perm() != 0o777 {
		t.Errorf("/tmp: %v, %v (want sticky 0777)", fi, err)
	}

	// The same files again: the same image and layers, nothing unpacked
	// anew; other config (a label) is another image over the same layers.
	marker := filepath.Join(layers[0], "usr/bin/marker")
	if err := os.WriteFile(marker, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	again, err := s.Assemble(ctx, "localhost/a", "svcnet", cfg, base, program)
	if err != nil || again.ID != img.ID {
		t.Fatalf("assembled again: %+v, %v; want ID %s", again, err, img.ID)
	}
	if _, err := os.Stat(marker); err != nil {
		t.Errorf("the layer was unpacked again: %v", err)
	}
	cfg.Labels = map[string]string{"name": "b"}
	other, err := s.Assemble(ctx, "localhost/b", "svcnet", cfg, base, program)
	if err != nil || other.ID == img.ID || !slices.Equal(other.Layers, img.Layers) {
		t.Fatalf("other image %+v, %v: want another ID over the same layers", other, err)
	}
	if got, _ := s.Lookup("localhost/a:svcnet"); got == nil || !slices.Equal(got.RepoTags, []string{"localhost/a:svcnet"}) {
		t.Errorf("localhost/a's record took other names: %+v", got)
	}

	// Removing an image keeps the layers another holds, and frees a layer
	// no record holds (what a crash between record and layers leaves).
	orphan := filepath.Join(dir, "layers", strings.Repeat("d", 64))
	if err := os.MkdirAll(filepath.Join(orphan, "x"), 0o755); err != nil {
		t.Fatal(err)
	}
	if size, err := s.Remove(img.ID); err != nil || size != img.Size {
		t.Fatalf("remove: %d, %v", size, err)
	}
	if _, err := s.Lookup("localhost/a:svcnet"); !errors.Is(err, ErrNotFound) {
		t.Errorf("removed image found: %v", err)
	}
	for _, l := range s.LayerDirs(other) {
		if _, err := os.Stat(l); err != nil {
			t.Errorf("a layer of the other image went: %v", err)
		}
	}
	if _, err := os.Stat(orphan); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("a layer no image holds stayed: %v", err)
	}
	if list, err := s.List(); err != nil || len(list) != 1 || list[0].ID != other.ID {
		t.Errorf("images after the removal: %v, %v", list, err)
	}
}

func TestExecutableFiles(t *testing.T) {
	// Debian's ls is dynamically linked against libc.
	files, err := ExecutableFiles("/bin/ls")
	if err != nil {
		t.Fatal(err)
	}
	var interp, libc bool
	for _, f := range files {
		if f.Path != f.Source || !filepath.IsAbs(f.Path) {
			t.Errorf("file %+v: want the host's path", f)
		}
		interp = interp || strings.Contains(filepath.Base(f.Path), "ld-linux")
		libc = libc || filepath.Base(f.Path) == "libc.so.6"
	}
	if !interp || !libc {
		t.Errorf("files of /bin/ls %+v: want the ELF interpreter and libc.so.6", files)
	}
	if _, err := ExecutableFiles("/etc/passwd"); err == nil {
		t.Error("a file that is not ELF: no error")
	}
}
