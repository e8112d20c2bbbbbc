package images

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"

	"github.com/containerd/containerd/v2/pkg/archive"
	"github.com/google/go-containerregistry/pkg/authn"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/remote/transport"
)

// Pull fetches the image ref names for the store's platform, with
// keychain's credentials (a pod's image pull secrets; nil: none) before
// the node's own, unpacks the layers it does not hold yet, and returns
// the image. Pulls of one reference at the same time with the node's
// credentials alone are one pull; one with a pod's credentials is its
// own, so that it proves them.
func (s *Store) Pull(ctx context.Context, ref string, keychain authn.Keychain) (*Image, error) {
	r, err := ParseReference(ref)
	if err != nil {
		return nil, err
	}
	pull := func() (*Image, error) {
		kc := s.opts.Keychain
		if keychain != nil {
			kc = authn.NewMultiKeychain(keychain, kc)
		}
		img, err := s.pull(ctx, r, kc)
		if err != nil {
			return nil, fmt.Errorf("failed to pull and unpack image %q: %w", r.String(), err)
		}
		return img, nil
	}
	if keychain != nil {
		return pull()
	}
	v, err, _ := s.pulls.Do(r.String(), func() (any, error) { return pull() })
	if err != nil {
		return nil, err
	}
	return v.(*Image), nil
}

func (s *Store) pull(ctx context.Context, r Reference, kc authn.Keychain) (*Image, error) {
	opts := []remote.Option{remote.WithContext(ctx), remote.WithAuthFromKeychain(kc), remote.WithPlatform(s.platform)}
	desc, err := s.resolve(r, opts)
	if err != nil {
		return nil, err
	}
	img, err := desc.Image()
	if err != nil {
		return nil, fmt.Errorf("no image for platform %s in %q: %w", s.platform, r.String(), err)
	}
	tag := ""
	if r.Tag() != "" {
		tag = r.String()
	}
	return s.put(ctx, img, r.Repository()+"@"+desc.Digest.String(), tag)
}

// put unpacks the layers of img the store does not hold yet and records
// it under its repository digest and tag (none when empty).
func (s *Store) put(ctx context.Context, img v1.Image, repoDigest, tag string) (*Image, error) {
	s.writing.RLock()
	defer s.writing.RUnlock()
	id, err := img.ConfigName()
	if err != nil {
		return nil, fmt.Errorf("read config digest: %w", err)
	}
	cf, err := img.ConfigFile()
	if err != nil {
		return nil, fmt.Errorf("read config %s: %w", id, err)
	}
	m, err := img.Manifest()
	if err != nil {
		return nil, fmt.Errorf("read manifest: %w", err)
	}
	layers, err := img.Layers()
	if err != nil {
		return nil, fmt.Errorf("read layers: %w", err)
	}
	if len(layers) != len(cf.RootFS.DiffIDs) {
		return nil, fmt.Errorf("image %s has %d layers and %d DiffIDs", id, len(layers), len(cf.RootFS.DiffIDs))
	}
	out := &Image{ID: id.String(), Size: m.Config.Size, Config: cf.Config}
	for i, l := range layers {
		size, err := l.Size()
		if err != nil {
			return nil, fmt.Errorf("layer %d: %w", i, err)
		}
		out.Size += size
		diffID := cf.RootFS.DiffIDs[i]
		if err := s.unpack(ctx, l, diffID); err != nil {
			return nil, err
		}
		out.Layers = append(out.Layers, diffID.String())
	}
	out.RepoDigests = []string{repoDigest}
	refs := []string{repoDigest}
	if tag != "" {
		out.RepoTags = []string{tag}
		refs = append(refs, tag)
	}
	return s.record(out, refs...)
}

// resolve finds the manifest (or index) r names: on the mirror first for
// Docker Hub's images when there is one, then on the registry itself.
func (s *Store) resolve(r Reference, opts []remote.Option) (*remote.Descriptor, error) {
	if s.opts.Mirror != "" && r.onHub() {
		if mr, err := r.via(s.opts.Mirror); err == nil {
			if desc, err := remote.Get(mr, opts...); err == nil {
				return desc, nil
			}
		}
	}
	desc, err := remote.Get(r.ref, opts...)
	if err != nil {
		return nil, resolveError(r, err)
	}
	return desc, nil
}

// resolveError says why a reference did not resolve in containerd's
// words: "not found" for a missing repository, tag or digest, "pull
// access denied" when the registry wants credentials the node lacks.
func resolveError(r Reference, err error) error {
	var te *transport.Error
	if errors.As(err, &te) {
		switch te.StatusCode {
		case http.StatusNotFound:
			return fmt.Errorf("failed to resolve reference %q: %s: not found", r.String(), r.String())
		case http.StatusUnauthorized, http.StatusForbidden:
			return fmt.Errorf("failed to resolve reference %q: pull access denied, repository does not exist or may require authorization: %d %s",
				r.String(), te.StatusCode, http.StatusText(te.StatusCode))
		}
		for _, d := range te.Errors {
			if d.Code == transport.ManifestUnknownErrorCode || d.Code == transport.NameUnknownErrorCode {
				return fmt.Errorf("failed to resolve reference %q: %s: not found", r.String(), r.String())
			}
		}
	}
	return fmt.Errorf("failed to resolve reference %q: %w", r.String(), err)
}

// unpack applies layer l into its directory unless it is there already,
// checking that the uncompressed tar is the DiffID the config names.
func (s *Store) unpack(ctx context.Context, l v1.Layer, diffID v1.Hash) error {
	dst := s.layerDir(diffID.String())
	if _, err := os.Stat(dst); err == nil {
		return nil
	}
	tmp, err := os.MkdirTemp(filepath.Join(s.dir, "layers"), tmpPrefix)
	if err != nil {
		return fmt.Errorf("image store: %w", err)
	}
	defer os.RemoveAll(tmp)
	// A layer's root is the container's root: 0755 unless its tar says.
	if err := os.Chmod(tmp, 0o755); err != nil {
		return fmt.Errorf("image store: %w", err)
	}
	rc, err := l.Uncompressed()
	if err != nil {
		return fmt.Errorf("fetch layer %s: %w", diffID, err)
	}
	defer rc.Close()
	h := sha256.New()
	tee := io.TeeReader(rc, h)
	if _, err := archive.Apply(ctx, tmp, tee, archive.WithConvertWhiteout(archive.OverlayConvertWhiteout)); err != nil {
		return fmt.Errorf("unpack layer %s: %w", diffID, err)
	}
	// The tar's end padding is part of the digest.
	if _, err := io.Copy(io.Discard, tee); err != nil {
		return fmt.Errorf("fetch layer %s: %w", diffID, err)
	}
	if got := "sha256:" + hex.EncodeToString(h.Sum(nil)); diffID.Algorithm != "sha256" || got != diffID.String() {
		return fmt.Errorf("layer %s: content has digest %s", diffID, got)
	}
	if err := os.Rename(tmp, dst); err != nil {
		if _, statErr := os.Stat(dst); statErr == nil {
			// Another image's pull unpacked the same layer meanwhile.
			return nil
		}
		return fmt.Errorf("image store: %w", err)
	}
	return nil
}
