package node

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"maps"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"syscall"

	corev1 "k8s.io/api/core/v1"

	"github.com/svcnet/svcnet/internal/node/images"
)

// An image-table entry's own Files are where the image would have them.
// Under runc they are the topmost layer of the image the node assembles.
// A host process shares the host's file system: each file is bound
// read-only at its path in the container's mount namespace (made there
// by its shim, as the pod's /etc files are), from a copy the node writes
// once under <data-dir>/image-files/<digest of the files>. A volume hides
// the image's files under its mount path, as it hides an image's.

// imageFileLayer is the layer of entry's own files; nil when it has none.
func imageFileLayer(entry Image) []images.File {
	var out []images.File
	for p, content := range entry.Files {
		out = append(out, images.File{Path: p, Data: []byte(content), Mode: 0o644})
	}
	return out
}

// imageFileMounts are the bind mounts that give the host process of the
// container the files of its image's entry, but those under a volume.
func imageFileMounts(dataDir string, table ImageTable, c *corev1.Container) ([]bindFile, error) {
	files := table[imageName(c.Image)].Files
	if len(files) == 0 {
		return nil, nil
	}
	sum := sha256.New()
	for _, p := range slices.Sorted(maps.Keys(files)) {
		fmt.Fprintf(sum, "%s\x00%d\x00%s", p, len(files[p]), files[p])
	}
	dir := filepath.Join(dataDir, "image-files", hex.EncodeToString(sum.Sum(nil)))
	err := buildDir(dir, func(tmp string) error {
		for p, content := range files {
			file := filepath.Join(tmp, p)
			if err := os.MkdirAll(filepath.Dir(file), 0o755); err != nil {
				return err
			}
			if err := os.WriteFile(file, []byte(content), 0o644); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("the files of image %s: %w", c.Image, err)
	}
	var out []bindFile
	for _, target := range slices.Sorted(maps.Keys(files)) {
		hidden := slices.ContainsFunc(c.VolumeMounts, func(m corev1.VolumeMount) bool {
			mp := path.Clean("/" + m.MountPath)
			return mp == "/" || target == mp || strings.HasPrefix(target, mp+"/")
		})
		if !hidden {
			out = append(out, bindFile{Source: filepath.Join(dir, target), Target: target, ReadOnly: true})
		}
	}
	return out, nil
}

// buildDir makes the directory dir with fill, unless it exists: fill
// writes into a directory beside it, renamed into place, so that a
// concurrent first use never sees half a directory (the first of
// concurrent builds wins).
func buildDir(dir string, fill func(tmp string) error) error {
	if _, err := os.Stat(dir); err == nil {
		return nil
	}
	if err := os.MkdirAll(filepath.Dir(dir), 0o755); err != nil {
		return fmt.Errorf("create %s: %w", filepath.Dir(dir), err)
	}
	tmp, err := os.MkdirTemp(filepath.Dir(dir), "."+filepath.Base(dir)+"-")
	if err != nil {
		return fmt.Errorf("create %s: %w", dir, err)
	}
	defer os.RemoveAll(tmp)
	if err := fill(tmp); err != nil {
		return err
	}
	if err := os.Chmod(tmp, 0o755); err != nil {
		return fmt.Errorf("create %s: %w", dir, err)
	}
	if err := os.Rename(tmp, dir); err != nil && !errors.Is(err, os.ErrExist) && !errors.Is(err, syscall.ENOTEMPTY) {
		return fmt.Errorf("create %s: %w", dir, err)
	}
	return nil
}
