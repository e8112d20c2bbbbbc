package images

import (
	"archive/tar"
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/authn/kubernetes"
	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"golang.org/x/sys/unix"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/svcnet/svcnet/internal/node/images/imagetest"
)

// needRoot skips a test that unpacks layers (ownership, whiteout device
// nodes and overlayfs's xattrs need root) outside CI.
func needRoot(t *testing.T) {
	t.Helper()
	if os.Geteuid() != 0 {
		if os.Getenv("CI") != "" {
			t.Fatal("CI runs as root: unpacking layers needs it")
		}
		t.Skip("unpacking layers needs root (owners, whiteout device nodes, overlayfs xattrs)")
	}
}

// serveRegistry runs imagetest's registry until the test ends.
func serveRegistry(t *testing.T, user, password string) string {
	host, stop := imagetest.Registry(user, password)
	t.Cleanup(stop)
	return host
}

// entry is one tar member of a test layer.
type entry struct {
	name, body string
	dir        bool
	// link makes the entry a symbolic link to it.
	link string
}

func layer(t *testing.T, entries ...entry) v1.Layer {
	t.Helper()
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, e := range entries {
		h := &tar.Header{Name: e.name, Mode: 0o644, Size: int64(len(e.body)), Typeflag: tar.TypeReg, Uid: 1000, Gid: 1000}
		if e.dir {
			h = &tar.Header{Name: e.name, Mode: 0o755, Typeflag: tar.TypeDir}
		}
		if e.link != "" {
			h = &tar.Header{Name: e.name, Mode: 0o777, Typeflag: tar.TypeSymlink, Linkname: e.link}
		}
		if err := tw.WriteHeader(h); err != nil {
			t.Fatal(err)
		}
		if _, err := io.WriteString(tw, e.body); err != nil {
			t.Fatal(err)
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	b := buf.Bytes()
	l, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(b)), nil })
	if err != nil {
		t.Fatal(err)
	}
	return l
}

func image(t *testing.T, cfg v1.Config, arch string, layers ...v1.Layer) v1.Image {
	t.Helper()
	img, err := mutate.AppendLayers(empty.Image, layers...)
	if err != nil {
		t.Fatal(err)
	}
	cf, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	cf = cf.DeepCopy()
	cf.OS, cf.Architecture, cf.Config = "linux", arch, cfg
	if img, err = mutate.ConfigFile(img, cf); err != nil {
		t.Fatal(err)
	}
	return img
}

func push(t *testing.T, ref string, img v1.Image, opts ...remote.Option) {
	t.Helper()
	r, err := name.ParseReference(ref)
	if err != nil {
		t.Fatal(err)
	}
	if err := remote.Write(r, img, opts...); err != nil {
		t.Fatal(err)
	}
}

// noCredentials keeps the host's Docker config out of the tests.
var noCredentials = authn.NewMultiKeychain()

func open(t *testing.T, dir string, o Options) *Store {
	t.Helper()
	if o.Keychain == nil {
		o.Keychain = noCredentials
	}
	s, err := Open(dir, o)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestReference(t *testing.T) {
	for in, want := range map[string]string{
		"busybox":                      "docker.io/library/busybox:latest",
		"busybox:1.36":                 "docker.io/library/busybox:1.36",
		"docker.io/library/nginx:1.27": "docker.io/library/nginx:1.27",
		"hashicorp/http-echo":          "docker.io/hashicorp/http-echo:latest",
		"registry.k8s.io/pause:3.10":   "registry.k8s.io/pause:3.10",
		"localhost:5000/team/app@sha256:" + strings.Repeat("a", 64): "localhost:5000/team/app@sha256:" + strings.Repeat("a", 64),
	} {
		r, err := ParseReference(in)
		if err != nil {
			t.Errorf("%s: %v", in, err)
			continue
		}
		if r.String() != want {
			t.Errorf("%s: %s, want %s", in, r, want)
		}
	}
	if _, err := ParseReference("UPPER/case"); err == nil {
		t.Error("an invalid reference parsed")
	}
}

// TestPull: an image of two layers, the second deleting a file and
// making a directory opaque, is unpacked layer by layer, and overlayfs
// over its layers shows the image's file system; the image and its
// references outlive the store (a restarted node).
func TestPull(t *testing.T) {
	needRoot(t)
	host := serveRegistry(t, "", "")
	base := layer(t, entry{name: "bin/", dir: true}, entry{name: "bin/hello", body: "#!hello"},
		entry{name: "etc/", dir: true}, entry{name: "etc/gone", body: "old"},
		entry{name: "data/", dir: true}, entry{name: "data/a", body: "a"})
	top := layer(t, entry{name: "etc/.wh.gone"}, entry{name: "data/", dir: true},
		entry{name: "data/.wh..wh..opq"}, entry{name: "data/b", body: "b"}, entry{name: "etc/passwd", link: "/etc/shadow"})
	cfg := v1.Config{Entrypoint: []string{"/bin/hello"}, Cmd: []string{"world"}, Env: []string{"PATH=/bin", "A=1"}, WorkingDir: "/data", User: "1000:1000"}
	img := image(t, cfg, "amd64", base, top)
	push(t, host+"/team/app:v1", img)

	dir := t.TempDir()
	s := open(t, dir, Options{})
	got, err := s.Pull(context.Background(), host+"/team/app:v1", nil)
	if err != nil {
		t.Fatal(err)
	}
	id, _ := img.ConfigName()
	digest, _ := img.Digest()
	cf, _ := img.ConfigFile()
	if got.ID != id.String() || !slices.Equal(got.RepoTags, []string{host + "/team/app:v1"}) ||
		!slices.Equal(got.RepoDigests, []string{host + "/team/app@" + digest.String()}) || got.Size <= 0 ||
		!slices.Equal(got.Layers, []string{cf.RootFS.DiffIDs[0].String(), cf.RootFS.DiffIDs[1].String()}) ||
		!slices.Equal(got.Config.Entrypoint, cfg.Entrypoint) || got.Config.User != "1000:1000" || got.Config.WorkingDir != "/data" {
		t.Fatalf("pulled %+v", got)
	}

	// The whiteouts are overlayfs's: a 0/0 character device, an opaque
	// directory's xattr.
	dirs := s.LayerDirs(got)
	var st unix.Stat_t
	if err := unix.Lstat(filepath.Join(dirs[0], "etc/gone"), &st); err != nil || st.Mode&unix.S_IFMT != unix.S_IFCHR || st.Rdev != 0 {
		t.Errorf("etc/gone in the top layer: %v, mode %o rdev %d; want a 0/0 character device", err, st.Mode, st.Rdev)
	}
	opq := make([]byte, 8)
	if n, err := unix.Lgetxattr(filepath.Join(dirs[0], "data"), "trusted.overlay.opaque", opq); err != nil || string(opq[:n]) != "y" {
		t.Errorf("data in the top layer is not opaque: %v %q", err, opq[:max(n, 0)])
	}
	if err := unix.Lstat(filepath.Join(dirs[1], "bin/hello"), &st); err != nil || st.Uid != 1000 {
		t.Errorf("bin/hello in the base layer: %v, owner %d", err, st.Uid)
	}

	merged := t.TempDir()
	if err := unix.Mount("overlay", merged, "overlay", unix.MS_RDONLY, "lowerdir="+strings.Join(dirs, ":")); err != nil {
		t.Fatalf("mount the image's layers: %v", err)
	}
	defer unix.Unmount(merged, unix.MNT_DETACH)
	var names []string
	for _, p := range []string{"bin/hello", "etc/gone", "data/a", "data/b"} {
		if _, err := os.Lstat(filepath.Join(merged, p)); err == nil {
			names = append(names, p)
		}
	}
	if !slices.Equal(names, []string{"bin/hello", "data/b"}) {
		t.Errorf("the image's root holds %v, want [bin/hello data/b]", names)
	}

	// ReadFile sees what overlayfs shows, and follows no link out of the
	// image.
	for path, want := range map[string]string{"bin/hello": "#!hello", "/data/b": "b", "data/a": "", "etc/gone": "", "etc/passwd": "", "../../etc/hostname": ""} {
		b, err := s.ReadFile(got, path)
		if want == "" && !errors.Is(err, os.ErrNotExist) || want != "" && (err != nil || string(b) != want) {
			t.Errorf("ReadFile %s: %q %v, want %q", path, b, err, want)
		}
	}

	// A second image on the same base layer leaves the unpacked layer as
	// it is (a marker survives), and a restarted store finds both.
	marker := filepath.Join(dirs[1], "marker")
	if err := os.WriteFile(marker, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	push(t, host+"/team/other:v1", image(t, v1.Config{Cmd: []string{"sh"}}, "amd64", base))
	if _, err := s.Pull(context.Background(), host+"/team/other:v1", nil); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(marker); err != nil {
		t.Errorf("the shared layer was unpacked again: %v", err)
	}
	s2 := open(t, dir, Options{})
	for _, ref := range []string{host + "/team/app:v1", host + "/team/app@" + digest.String()} {
		if again, err := s2.Lookup(ref); err != nil || again.ID != got.ID {
			t.Errorf("lookup %s after a restart: %+v %v", ref, again, err)
		}
	}
	if list, err := s2.List(); err != nil || len(list) != 2 {
		t.Errorf("list: %d images, %v", len(list), err)
	}

	// A tag pushed anew names the new image alone.
	push(t, host+"/team/app:v1", image(t, v1.Config{Cmd: []string{"new"}}, "amd64", base))
	moved, err := s2.Pull(context.Background(), host+"/team/app:v1", nil)
	if err != nil {
		t.Fatal(err)
	}
	if old, err := s2.image(got.ID); err != nil || slices.Contains(old.RepoTags, host+"/team/app:v1") || moved.ID == got.ID {
		t.Errorf("after the tag moved, the old image still has it: %+v %v", old, err)
	}
	if _, err := s2.Lookup(host + "/team/app:v2"); !errors.Is(err, ErrNotFound) {
		t.Errorf("lookup of a tag never pulled: %v", err)
	}
}

// TestPullPlatform: a multi-platform index gives the node's platform's
// image; its repo digest is the index's.
func TestPullPlatform(t *testing.T) {
	needRoot(t)
	host := serveRegistry(t, "", "")
	l := layer(t, entry{name: "f", body: "x"})
	idx := mutate.AppendManifests(empty.Index,
		mutate.IndexAddendum{Add: image(t, v1.Config{Env: []string{"ARCH=arm64"}}, "arm64", l),
			Descriptor: v1.Descriptor{Platform: &v1.Platform{OS: "linux", Architecture: "arm64"}}},
		mutate.IndexAddendum{Add: image(t, v1.Config{Env: []string{"ARCH=amd64"}}, "amd64", l),
			Descriptor: v1.Descriptor{Platform: &v1.Platform{OS: "linux", Architecture: "amd64"}}})
	ref, _ := name.ParseReference(host + "/multi:1")
	if err := remote.WriteIndex(ref, idx); err != nil {
		t.Fatal(err)
	}
	s := open(t, t.TempDir(), Options{Platform: &v1.Platform{OS: "linux", Architecture: "amd64"}})
	got, err := s.Pull(context.Background(), host+"/multi:1", nil)
	if err != nil {
		t.Fatal(err)
	}
	d, _ := idx.Digest()
	if !slices.Equal(got.Config.Env, []string{"ARCH=amd64"}) || got.RepoDigests[0] != host+"/multi@"+d.String() {
		t.Errorf("pulled %+v from the index %s", got, d)
	}
}

// TestPullErrors: a missing tag and a registry wanting credentials fail
// with containerd's messages; an image pull secret's credentials pull.
func TestPullErrors(t *testing.T) {
	needRoot(t)
	host := serveRegistry(t, "alice", "s3cret")
	auth := remote.WithAuth(&authn.Basic{Username: "alice", Password: "s3cret"})
	push(t, host+"/private:1", image(t, v1.Config{Cmd: []string{"run"}}, "amd64", layer(t, entry{name: "f", body: "x"})), auth)
	s := open(t, t.TempDir(), Options{})
	ctx := context.Background()

	_, err := s.Pull(ctx, host+"/private:1", nil)
	want := `failed to pull and unpack image "` + host + `/private:1": failed to resolve reference "` + host +
		`/private:1": pull access denied, repository does not exist or may require authorization: 401 Unauthorized`
	if err == nil || err.Error() != want {
		t.Errorf("pull without credentials:\n got %v\nwant %s", err, want)
	}

	secret := corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: "regcred", Namespace: "default"},
		Type:       corev1.SecretTypeDockerConfigJson,
		Data: map[string][]byte{corev1.DockerConfigJsonKey: []byte(`{"auths":{"` + host +
			`":{"username":"alice","password":"s3cret"}}}`)},
	}
	kc, err := kubernetes.NewFromPullSecrets(ctx, []corev1.Secret{secret})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Pull(ctx, host+"/private:1", kc); err != nil {
		t.Errorf("pull with the image pull secret: %v", err)
	}

	_, err = s.Pull(ctx, host+"/private:nosuch", kc)
	ref := host + "/private:nosuch"
	want = `failed to pull and unpack image "` + ref + `": failed to resolve reference "` + ref + `": ` + ref + `: not found`
	if err == nil || err.Error() != want {
		t.Errorf("pull of a missing tag:\n got %v\nwant %s", err, want)
	}
}

// TestPullMirror: Docker Hub's images come from the mirror, and are
// known by their Docker Hub names.
func TestPullMirror(t *testing.T) {
	needRoot(t)
	mirror := serveRegistry(t, "", "")
	push(t, mirror+"/library/busybox:1.36", image(t, v1.Config{Cmd: []string{"sh"}}, "amd64", layer(t, entry{name: "f", body: "x"})))
	s := open(t, t.TempDir(), Options{Mirror: mirror})
	got, err := s.Pull(context.Background(), "busybox:1.36", nil)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(got.RepoTags, []string{"docker.io/library/busybox:1.36"}) || !strings.HasPrefix(got.RepoDigests[0], "docker.io/library/busybox@sha256:") {
		t.Errorf("pulled %+v", got)
	}
	if _, err := s.Lookup("docker.io/library/busybox:1.36"); err != nil {
		t.Error(err)
	}
}

// TestOpenRemovesLeftovers: what a crash left half-written is gone when
// the store opens again.
func TestOpenRemovesLeftovers(t *testing.T) {
	dir := t.TempDir()
	open(t, dir, Options{})
	half := filepath.Join(dir, "layers", tmpPrefix+"123")
	if err := os.MkdirAll(filepath.Join(half, "bin"), 0o700); err != nil {
		t.Fatal(err)
	}
	open(t, dir, Options{})
	if _, err := os.Stat(half); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("a half-unpacked layer is left: %v", err)
	}
}
