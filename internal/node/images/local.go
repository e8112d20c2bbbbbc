package images

import (
	"archive/tar"
	"bytes"
	"context"
	"debug/elf"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/static"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// File is one entry of a layer the node assembles from its own files.
type File struct {
	// Path is where it is in the image: absolute.
	Path string
	// Source is a host file whose content it takes (following links);
	// Data is the content when there is no Source.
	Source string
	Data   []byte
	// Link makes it a symbolic link to Link.
	Link string
	// Dir makes it a directory.
	Dir bool
	// Mode is its permission bits (and sticky and setuid bits); zero:
	// 0755 for a directory or a Source that is executable, 0644
	// otherwise.
	Mode fs.FileMode
}

// Assemble builds an image of layers of host files (the lowest first)
// with config, and stores it as a pull would, under repository's digest
// and tag: a layer that the store holds already is not unpacked again. The
// tar of a layer is the same for the same files, so assembling an image
// again on each start of the node costs no disk.
func (s *Store) Assemble(ctx context.Context, repository, tag string, cfg v1.Config, layers ...[]File) (*Image, error) {
	img := empty.Image
	for i, files := range layers {
		b, err := layerTar(files)
		if err != nil {
			return nil, fmt.Errorf("assemble %s layer %d: %w", repository, i, err)
		}
		if img, err = mutate.AppendLayers(img, static.NewLayer(b, types.OCIUncompressedLayer)); err != nil {
			return nil, fmt.Errorf("assemble %s: %w", repository, err)
		}
	}
	cf, err := img.ConfigFile()
	if err != nil {
		return nil, fmt.Errorf("assemble %s: %w", repository, err)
	}
	cf = cf.DeepCopy()
	cf.OS, cf.Architecture, cf.Variant = s.platform.OS, s.platform.Architecture, s.platform.Variant
	cf.Config = cfg
	if img, err = mutate.ConfigFile(img, cf); err != nil {
		return nil, fmt.Errorf("assemble %s: %w", repository, err)
	}
	digest, err := img.Digest()
	if err != nil {
		return nil, fmt.Errorf("assemble %s: %w", repository, err)
	}
	return s.put(ctx, img, repository+"@"+digest.String(), repository+":"+tag)
}

// layerTar is the tar of files, each with the directories above it,
// sorted by path, owned by root and dated at the epoch.
func layerTar(files []File) ([]byte, error) {
	byPath := map[string]File{}
	for _, f := range files {
		p := path.Clean("/" + f.Path)
		f.Path = p
		byPath[p] = f
		for d := path.Dir(p); d != "/"; d = path.Dir(d) {
			if _, ok := byPath[d]; !ok {
				byPath[d] = File{Path: d, Dir: true}
			}
		}
	}
	paths := slices.Sorted(maps.Keys(byPath))
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, p := range paths {
		f := byPath[p]
		h := &tar.Header{Name: strings.TrimPrefix(p, "/"), Mode: int64(f.Mode.Perm()), Format: tar.FormatPAX}
		if f.Mode&fs.ModeSticky != 0 {
			h.Mode |= 0o1000
		}
		if f.Mode&fs.ModeSetuid != 0 {
			h.Mode |= 0o4000
		}
		body := f.Data
		switch {
		case f.Dir:
			h.Typeflag, h.Name = tar.TypeDir, h.Name+"/"
			if f.Mode == 0 {
				h.Mode = 0o755
			}
		case f.Link != "":
			h.Typeflag, h.Linkname, h.Mode = tar.TypeSymlink, f.Link, 0o777
		default:
			h.Typeflag = tar.TypeReg
			if f.Source != "" {
				fi, err := os.Stat(f.Source)
				if err != nil {
					return nil, err
				}
				if body, err = os.ReadFile(f.Source); err != nil {
					return nil, err
				}
				if f.Mode == 0 {
					h.Mode = int64(fi.Mode().Perm())
				}
			}
			if h.Mode == 0 {
				h.Mode = 0o644
			}
			h.Size = int64(len(body))
		}
		if err := tw.WriteHeader(h); err != nil {
			return nil, err
		}
		if _, err := tw.Write(body); err != nil {
			return nil, err
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// ExecutableFiles are what a host executable needs to run in an image:
// its ELF interpreter and the shared libraries it loads, at the paths the
// host has them, found as the dynamic loader does without its cache (the
// executable's RUNPATH, then the system's library directories). A
// statically linked executable needs none.
func ExecutableFiles(exe string) ([]File, error) {
	var out []File
	seen := map[string]bool{}
	var add func(file string) error
	add = func(file string) error {
		f, err := elf.Open(file)
		if err != nil {
			return fmt.Errorf("read %s: %w", file, err)
		}
		defer f.Close()
		for _, p := range f.Progs {
			if p.Type != elf.PT_INTERP {
				continue
			}
			b := make([]byte, p.Filesz)
			if _, err := p.ReadAt(b, 0); err != nil {
				return fmt.Errorf("read %s's interpreter: %w", file, err)
			}
			interp := strings.TrimRight(string(b), "\x00")
			if !seen[interp] {
				seen[interp] = true
				out = append(out, File{Path: interp, Source: interp})
			}
		}
		needed, err := f.ImportedLibraries()
		if err != nil {
			return fmt.Errorf("read %s's libraries: %w", file, err)
		}
		rpath, _ := f.DynString(elf.DT_RPATH)
		runpath, _ := f.DynString(elf.DT_RUNPATH)
		var dirs []string
		for _, p := range slices.Concat(rpath, runpath) {
			for _, d := range filepath.SplitList(p) {
				dirs = append(dirs, strings.ReplaceAll(d, "$ORIGIN", filepath.Dir(file)))
			}
		}
		for _, lib := range needed {
			p, err := findLibrary(lib, dirs, f.Class, f.Machine)
			if err != nil {
				return fmt.Errorf("%s: %w", file, err)
			}
			if seen[p] {
				continue
			}
			seen[p] = true
			out = append(out, File{Path: p, Source: p})
			if err := add(p); err != nil {
				return err
			}
		}
		return nil
	}
	if err := add(exe); err != nil {
		return nil, err
	}
	return out, nil
}

// findLibrary finds a shared library by its DT_NEEDED name in the
// executable's own directories, then the system's, taking only one built
// for the executable's class and machine (an i386 libc does not do for an
// amd64 program).
func findLibrary(name string, own []string, class elf.Class, machine elf.Machine) (string, error) {
	multiarch, _ := filepath.Glob("/lib/*-linux-gnu*")
	usrMultiarch, _ := filepath.Glob("/usr/lib/*-linux-gnu*")
	dirs := slices.Concat(own, multiarch, usrMultiarch, []string{"/lib64", "/usr/lib64", "/lib", "/usr/lib"})
	for _, d := range dirs {
		p := filepath.Join(d, name)
		f, err := elf.Open(p)
		if err != nil {
			continue
		}
		ok := f.Class == class && f.Machine == machine
		f.Close()
		if ok {
			return p, nil
		}
	}
	return "", fmt.Errorf("shared library %s: %w", name, fs.ErrNotExist)
}
