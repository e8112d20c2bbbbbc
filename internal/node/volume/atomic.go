// Package volume builds the contents of the node's projected volumes
// (configMap, secret, downwardAPI, projected) and writes them the way the
// kubelet's atomic writer does, so that a running container sees a whole
// old or a whole new set of files, never a mix.
//
// A volume directory written by Write looks like the kubelet's:
//
//	..2024_05_01_10_00_00.1234567/   one generation of the files
//	..data -> ..2024_05_01_10_00_00.1234567
//	color -> ..data/color            what the user sees, a link per top-level name
//
// An update writes a new generation beside the old one, then renames a new
// ..data link over the old one (rename is atomic), then removes the old
// generation. A container that bind-mounts the directory sees the swap; one
// that bind-mounts a single file (subPath) keeps the file it was given, as
// upstream.
package volume

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// File is one file of a volume's payload.
type File struct {
	Data []byte
	// Mode holds the permission bits.
	Mode fs.FileMode
}

const (
	dataLink    = "..data"
	newDataLink = "..data_tmp"
	// maxPathLength and maxFileNameLength bound a payload path as upstream.
	maxPathLength     = 4096
	maxFileNameLength = 255
)

// Write makes dir hold exactly payload (paths relative to dir). It does
// nothing when the current generation already holds the same files with the
// same modes, and reports whether it wrote a new one.
func Write(dir string, payload map[string]File) (bool, error) {
	clean := make(map[string]File, len(payload))
	for p, f := range payload {
		if err := validatePath(p); err != nil {
			return false, err
		}
		clean[filepath.Clean(p)] = f
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return false, fmt.Errorf("create volume dir: %w", err)
	}
	old, err := os.Readlink(filepath.Join(dir, dataLink))
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return false, fmt.Errorf("read %s: %w", dataLink, err)
	}
	if old != "" && sameFiles(filepath.Join(dir, old), clean) && visibleLinksExist(dir, clean) {
		return false, nil
	}

	gen, err := os.MkdirTemp(dir, time.Now().UTC().Format("..2006_01_02_15_04_05."))
	if err != nil {
		return false, fmt.Errorf("create a new generation: %w", err)
	}
	if err := os.Chmod(gen, 0o755); err != nil {
		return false, fmt.Errorf("chmod %s: %w", gen, err)
	}
	if err := writeFiles(gen, clean); err != nil {
		_ = os.RemoveAll(gen)
		return false, err
	}
	tmp := filepath.Join(dir, newDataLink)
	if err := os.Remove(tmp); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return false, fmt.Errorf("remove stale %s: %w", newDataLink, err)
	}
	if err := os.Symlink(filepath.Base(gen), tmp); err != nil {
		_ = os.RemoveAll(gen)
		return false, fmt.Errorf("link the new generation: %w", err)
	}
	if err := os.Rename(tmp, filepath.Join(dir, dataLink)); err != nil {
		_ = os.RemoveAll(gen)
		return false, fmt.Errorf("swap %s: %w", dataLink, err)
	}
	if err := makeVisibleLinks(dir, clean); err != nil {
		return true, err
	}
	if old != "" && old != filepath.Base(gen) {
		if err := os.RemoveAll(filepath.Join(dir, old)); err != nil {
			return true, fmt.Errorf("remove the old generation: %w", err)
		}
	}
	return true, removeStaleLinks(dir, clean)
}

// validatePath rejects what upstream's atomic writer rejects: absolute
// paths, '..' elements, leading '..', and overlong names.
func validatePath(p string) error {
	switch {
	case p == "":
		return errors.New("invalid path: must not be empty")
	case len(p) > maxPathLength:
		return fmt.Errorf("invalid path: must be less than or equal to %d characters", maxPathLength)
	case filepath.IsAbs(p):
		return fmt.Errorf("invalid path %q: must be relative path", p)
	case strings.HasPrefix(p, ".."):
		return fmt.Errorf("invalid path %q: must not start with '..'", p)
	}
	for _, seg := range strings.Split(p, "/") {
		if seg == ".." {
			return fmt.Errorf("invalid path %q: must not contain '..'", p)
		}
		if len(seg) > maxFileNameLength {
			return fmt.Errorf("invalid path %q: each element must be less than or equal to %d characters", p, maxFileNameLength)
		}
	}
	return nil
}

// sameFiles reports whether gen holds exactly payload.
func sameFiles(gen string, payload map[string]File) bool {
	n := 0
	err := filepath.WalkDir(gen, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			return nil
		}
		rel, _ := filepath.Rel(gen, path)
		f, ok := payload[rel]
		if !ok {
			return errors.New("extra file")
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		if info.Mode().Perm() != f.Mode.Perm() {
			return errors.New("mode differs")
		}
		b, err := os.ReadFile(path)
		if err != nil || !bytes.Equal(b, f.Data) {
			return errors.New("content differs")
		}
		n++
		return nil
	})
	return err == nil && n == len(payload)
}

func writeFiles(gen string, payload map[string]File) error {
	for p, f := range payload {
		full := filepath.Join(gen, p)
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			return fmt.Errorf("create dir for %s: %w", p, err)
		}
		if err := os.WriteFile(full, f.Data, f.Mode.Perm()); err != nil {
			return fmt.Errorf("write %s: %w", p, err)
		}
		// WriteFile's mode is subject to the umask.
		if err := os.Chmod(full, f.Mode.Perm()); err != nil {
			return fmt.Errorf("chmod %s: %w", p, err)
		}
	}
	return nil
}

// topLevel are the first elements of the payload's paths, the names a
// user sees in the volume.
func topLevel(payload map[string]File) map[string]bool {
	names := map[string]bool{}
	for p := range payload {
		first, _, _ := strings.Cut(p, "/")
		names[first] = true
	}
	return names
}

func visibleLinksExist(dir string, payload map[string]File) bool {
	for name := range topLevel(payload) {
		if _, err := os.Lstat(filepath.Join(dir, name)); err != nil {
			return false
		}
	}
	return true
}

func makeVisibleLinks(dir string, payload map[string]File) error {
	for name := range topLevel(payload) {
		link := filepath.Join(dir, name)
		if _, err := os.Lstat(link); err == nil {
			continue
		}
		if err := os.Symlink(filepath.Join(dataLink, name), link); err != nil {
			return fmt.Errorf("link %s: %w", name, err)
		}
	}
	return nil
}

// removeStaleLinks removes the user-visible links of names no longer in
// the payload; generations and ..data are the writer's own.
func removeStaleLinks(dir string, payload map[string]File) error {
	names := topLevel(payload)
	entries, err := os.ReadDir(dir)
	if err != nil {
		return fmt.Errorf("read volume dir: %w", err)
	}
	var errs []error
	for _, e := range entries {
		n := e.Name()
		if strings.HasPrefix(n, "..") || names[n] {
			continue
		}
		if e.Type()&fs.ModeSymlink != 0 {
			errs = append(errs, os.Remove(filepath.Join(dir, n)))
		}
	}
	return errors.Join(errs...)
}
