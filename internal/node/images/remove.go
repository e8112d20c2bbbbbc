package images

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
)

// Remove deletes image id: its references, its record, then every layer
// that no image holds (its own, and any a crash left behind). It returns
// the image's size, as the store reports it (what a pull fetches). A pull
// or assembly under way holds the removal off, so that a layer it found
// present is not taken from under it.
func (s *Store) Remove(id string) (int64, error) {
	s.writing.Lock()
	defer s.writing.Unlock()
	s.mu.Lock()
	defer s.mu.Unlock()
	img, err := s.image(id)
	if err != nil {
		return 0, err
	}
	for _, ref := range slices.Concat(img.RepoTags, img.RepoDigests) {
		file := filepath.Join(s.dir, "refs", escape(ref))
		if cur, err := os.ReadFile(file); err == nil && string(cur) == id {
			if err := os.Remove(file); err != nil {
				return 0, fmt.Errorf("image store: %w", err)
			}
		}
	}
	// The record goes before the layers: a crash in between leaves layers
	// no image holds, which the next removal frees.
	if err := os.Remove(s.recordPath(id)); err != nil && !errors.Is(err, os.ErrNotExist) {
		return 0, fmt.Errorf("image store: %w", err)
	}
	return img.Size, s.removeUnheldLayers()
}

// removeUnheldLayers deletes the layers no image record holds; s.writing
// is held.
func (s *Store) removeUnheldLayers() error {
	all, err := s.List()
	if err != nil {
		return err
	}
	held := map[string]bool{}
	for _, img := range all {
		for _, l := range img.Layers {
			held[filepath.Base(s.layerDir(l))] = true
		}
	}
	dir := filepath.Join(s.dir, "layers")
	entries, err := os.ReadDir(dir)
	if err != nil {
		return fmt.Errorf("image store: %w", err)
	}
	for _, e := range entries {
		if held[e.Name()] || strings.HasPrefix(e.Name(), tmpPrefix) {
			continue
		}
		// Renamed first, so that a crash leaves a temporary directory,
		// which Open removes, not half a layer.
		tmp := filepath.Join(dir, tmpPrefix+e.Name())
		if err := os.Rename(filepath.Join(dir, e.Name()), tmp); err != nil {
			return fmt.Errorf("image store: %w", err)
		}
		if err := os.RemoveAll(tmp); err != nil {
			return fmt.Errorf("image store: %w", err)
		}
	}
	return nil
}
