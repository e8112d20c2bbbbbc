// Package images is the node's image service: it pulls OCI and Docker
// images from registries (go-containerregistry does the registry
// protocol, the platform choice in multi-platform indexes and the
// credentials), keeps each image's config and unpacks each layer once,
// content-addressed by its DiffID, into a directory that overlayfs takes
// as a lower layer (containerd's archive package applies the tar, whiteouts
// turned into overlayfs's). It plays containerd's image service and
// overlayfs snapshotter for the node; the kubelet's part (pull policies,
// back-off, events) is the node agent's.
//
// Layout under the store's directory:
//
//	layers/<diffID hex>/      one unpacked layer, shared by every image holding it
//	images/<config hex>.json  one image: its config, layers and references
//	refs/<reference>          the image ID a tag or digest reference names
//
// A layer is unpacked into a temporary directory and renamed into place;
// an image's record is written before the references to it, so a crash
// leaves no reference to a half-pulled image.
package images

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"syscall"

	"github.com/google/go-containerregistry/pkg/authn"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"golang.org/x/sync/singleflight"
	"golang.org/x/sys/unix"
)

// Image is an image the node holds.
type Image struct {
	// ID is the digest of the image's config (sha256:...), the image ID a
	// container runtime reports.
	ID string `json:"id"`
	// RepoTags and RepoDigests are the references it was pulled by
	// (docker.io/library/busybox:1.36) and the digests they resolved to
	// (docker.io/library/busybox@sha256:...).
	RepoTags    []string `json:"repoTags,omitempty"`
	RepoDigests []string `json:"repoDigests,omitempty"`
	// Size is what a pull fetches: the config and the compressed layers.
	Size int64 `json:"size"`
	// Config is what the image runs: entrypoint, command, environment,
	// working directory and user.
	Config v1.Config `json:"config"`
	// Layers are the DiffIDs of its layers, lowest first.
	Layers []string `json:"layers"`
}

// ErrNotFound is an image the store does not hold.
var ErrNotFound = errors.New("image not found")

// Options configure a store.
type Options struct {
	// Mirror is a registry (host[:port]) that Docker Hub's images are
	// pulled from first, as containerd's registry mirrors: for machines
	// without the Internet. Empty: none.
	Mirror string
	// Keychain holds the node's own registry credentials, tried after a
	// pod's image pull secrets. Nil: the Docker config
	// ($DOCKER_CONFIG/config.json or ~/.docker/config.json).
	Keychain authn.Keychain
	// Platform is the platform chosen from multi-platform images. Nil:
	// linux on the node's architecture.
	Platform *v1.Platform
}

// Store holds the node's images.
type Store struct {
	dir      string
	opts     Options
	platform v1.Platform
	// pulls joins concurrent pulls of one reference.
	pulls singleflight.Group
	// mu orders writes of records and references.
	mu sync.Mutex
	// writing is held shared by each pull and assembly, from the layers'
	// unpacking to the record, and exclusively by a removal.
	writing sync.RWMutex
}

// Open opens (creating) the store in dir and removes what a crash left
// half-written.
func Open(dir string, o Options) (*Store, error) {
	s := &Store{dir: dir, opts: o, platform: v1.Platform{OS: "linux", Architecture: runtime.GOARCH}}
	if o.Platform != nil {
		s.platform = *o.Platform
	}
	if s.opts.Keychain == nil {
		s.opts.Keychain = authn.DefaultKeychain
	}
	for _, sub := range []string{"layers", "images", "refs"} {
		d := filepath.Join(dir, sub)
		if err := os.MkdirAll(d, 0o700); err != nil {
			return nil, fmt.Errorf("image store: %w", err)
		}
		tmps, err := filepath.Glob(filepath.Join(d, tmpPrefix+"*"))
		if err != nil {
			return nil, err
		}
		for _, t := range tmps {
			if err := os.RemoveAll(t); err != nil {
				return nil, fmt.Errorf("image store: remove %s: %w", t, err)
			}
		}
	}
	return s, nil
}

// tmpPrefix names what is being written; Open removes it.
const tmpPrefix = ".tmp-"

// Lookup returns the image ref names, or ErrNotFound.
func (s *Store) Lookup(ref string) (*Image, error) {
	r, err := ParseReference(ref)
	if err != nil {
		return nil, err
	}
	id, err := os.ReadFile(filepath.Join(s.dir, "refs", escape(r.String())))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("%s: %w", r, ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("image store: %w", err)
	}
	return s.image(string(id))
}

// image reads the record of image id.
func (s *Store) image(id string) (*Image, error) {
	b, err := os.ReadFile(s.recordPath(id))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("%s: %w", id, ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("image store: %w", err)
	}
	img := &Image{}
	if err := json.Unmarshal(b, img); err != nil {
		return nil, fmt.Errorf("image store: %s: %w", id, err)
	}
	return img, nil
}

func (s *Store) recordPath(id string) string {
	return filepath.Join(s.dir, "images", strings.TrimPrefix(id, "sha256:")+".json")
}

// List returns every image the store holds.
func (s *Store) List() ([]*Image, error) {
	files, err := filepath.Glob(filepath.Join(s.dir, "images", "*.json"))
	if err != nil {
		return nil, err
	}
	var out []*Image
	for _, f := range files {
		if strings.HasPrefix(filepath.Base(f), tmpPrefix) {
			continue
		}
		img, err := s.image("sha256:" + strings.TrimSuffix(filepath.Base(f), ".json"))
		if errors.Is(err, ErrNotFound) {
			continue // removed meanwhile
		}
		if err != nil {
			return nil, err
		}
		out = append(out, img)
	}
	return out, nil
}

// LayerDirs are the directories of img's unpacked layers, topmost first,
// as overlayfs's lowerdir lists them.
func (s *Store) LayerDirs(img *Image) []string {
	dirs := make([]string, len(img.Layers))
	for i, l := range img.Layers {
		dirs[len(dirs)-1-i] = s.layerDir(l)
	}
	return dirs
}

func (s *Store) layerDir(diffID string) string {
	return filepath.Join(s.dir, "layers", strings.TrimPrefix(diffID, "sha256:"))
}

// record stores img (merging the references of a record it replaces)
// and points refs at it.
func (s *Store) record(img *Image, refs ...string) (*Image, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if old, err := s.image(img.ID); err == nil {
		img.RepoTags = union(old.RepoTags, img.RepoTags)
		img.RepoDigests = union(old.RepoDigests, img.RepoDigests)
	}
	b, err := json.Marshal(img)
	if err != nil {
		return nil, err
	}
	if err := writeFile(s.recordPath(img.ID), b); err != nil {
		return nil, err
	}
	for _, r := range refs {
		file := filepath.Join(s.dir, "refs", escape(r))
		if prev, err := os.ReadFile(file); err == nil && string(prev) != img.ID {
			// A tag moved: the image it named is no longer known by it.
			if err := s.forget(string(prev), r); err != nil {
				return nil, err
			}
		}
		if err := writeFile(file, []byte(img.ID)); err != nil {
			return nil, err
		}
	}
	return img, nil
}

// forget removes ref from image id's references; s.mu is held.
func (s *Store) forget(id, ref string) error {
	img, err := s.image(id)
	if errors.Is(err, ErrNotFound) {
		return nil
	}
	if err != nil {
		return err
	}
	drop := func(refs []string) []string { return slices.DeleteFunc(refs, func(r string) bool { return r == ref }) }
	img.RepoTags, img.RepoDigests = drop(img.RepoTags), drop(img.RepoDigests)
	b, err := json.Marshal(img)
	if err != nil {
		return err
	}
	return writeFile(s.recordPath(id), b)
}

func union(a, b []string) []string {
	out := slices.Clone(a)
	for _, x := range b {
		if !slices.Contains(out, x) {
			out = append(out, x)
		}
	}
	return out
}

// writeFile replaces path's content in one step.
func writeFile(path string, b []byte) error {
	tmp := filepath.Join(filepath.Dir(path), tmpPrefix+filepath.Base(path))
	if err := os.WriteFile(tmp, b, 0o600); err != nil {
		return fmt.Errorf("image store: %w", err)
	}
	if err := os.Rename(tmp, path); err != nil {
		return fmt.Errorf("image store: %w", err)
	}
	return nil
}

// maxReadFile bounds what ReadFile reads: an image's /etc/passwd.
const maxReadFile = 1 << 20

// ReadFile reads the regular file at path in img's root file system as
// overlayfs shows it: from the topmost layer that has it, unless a layer
// above deleted it (a whiteout) or made a directory on its way opaque.
// Symbolic links are not followed (they would lead out of the image), so
// a path through one is not found.
func (s *Store) ReadFile(img *Image, path string) ([]byte, error) {
	parts := strings.Split(strings.Trim(filepath.Clean("/"+path), "/"), "/")
	for _, layer := range s.LayerDirs(img) {
		b, found, hidden, err := readInLayer(layer, parts)
		if err != nil || found {
			return b, err
		}
		if hidden {
			break
		}
	}
	return nil, fmt.Errorf("%s: %w", path, fs.ErrNotExist)
}

// readInLayer looks for parts in one unpacked layer: found with the
// file's content, or hidden when the layer hides the layers below.
func readInLayer(layer string, parts []string) (b []byte, found, hidden bool, err error) {
	p := layer
	opaque := false
	for i, part := range parts {
		p = filepath.Join(p, part)
		fi, err := os.Lstat(p)
		if errors.Is(err, fs.ErrNotExist) {
			return nil, false, opaque, nil
		}
		if err != nil {
			return nil, false, false, fmt.Errorf("image store: %w", err)
		}
		if st, ok := fi.Sys().(*syscall.Stat_t); ok && fi.Mode()&fs.ModeCharDevice != 0 && st.Rdev == 0 {
			return nil, false, true, nil // a whiteout
		}
		if i < len(parts)-1 {
			if !fi.IsDir() {
				return nil, false, true, nil // a file or a link in the way
			}
			opaque = opaque || opaqueDir(p)
			continue
		}
		if !fi.Mode().IsRegular() {
			return nil, false, true, nil
		}
		f, err := os.OpenFile(p, os.O_RDONLY|syscall.O_NOFOLLOW, 0)
		if err != nil {
			return nil, false, false, fmt.Errorf("image store: %w", err)
		}
		defer f.Close()
		b, err := io.ReadAll(io.LimitReader(f, maxReadFile))
		return b, true, false, err
	}
	return nil, false, opaque, nil
}

// opaqueDir reports whether dir is an overlayfs opaque directory.
func opaqueDir(dir string) bool {
	buf := make([]byte, 1)
	n, err := unix.Lgetxattr(dir, "trusted.overlay.opaque", buf)
	return err == nil && n == 1 && buf[0] == 'y'
}
