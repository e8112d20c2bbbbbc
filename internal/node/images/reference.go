package images

import (
	"fmt"
	"strings"

	"github.com/google/go-containerregistry/pkg/name"
)

// dockerHub is how references name Docker Hub, as containerd and the
// kubelet show them; go-containerregistry says index.docker.io.
const dockerHub = "docker.io"

// Reference is an image reference made whole: registry, repository and
// tag or digest, with docker.io, library/ and :latest implied as a
// container runtime implies them.
type Reference struct {
	ref name.Reference
}

// ParseReference reads an image reference as a pod's container gives it.
func ParseReference(s string) (Reference, error) {
	r, err := name.ParseReference(s)
	if err != nil {
		return Reference{}, fmt.Errorf("parse image reference %q: %w", s, err)
	}
	return Reference{ref: r}, nil
}

// Repository is the whole repository name: docker.io/library/busybox.
func (r Reference) Repository() string {
	reg := r.ref.Context().RegistryStr()
	if reg == name.DefaultRegistry {
		reg = dockerHub
	}
	return reg + "/" + r.ref.Context().RepositoryStr()
}

// String is the whole reference: docker.io/library/busybox:latest, or
// the repository @ the digest.
func (r Reference) String() string {
	if d, ok := r.ref.(name.Digest); ok {
		return r.Repository() + "@" + d.DigestStr()
	}
	return r.Repository() + ":" + r.ref.Identifier()
}

// Tag is the reference's tag; empty for a reference by digest.
func (r Reference) Tag() string {
	if t, ok := r.ref.(name.Tag); ok {
		return t.TagStr()
	}
	return ""
}

// onHub reports whether the image is on Docker Hub (which a mirror may
// stand in for).
func (r Reference) onHub() bool {
	return r.ref.Context().RegistryStr() == name.DefaultRegistry
}

// via is the reference on another registry (a mirror), same repository
// and tag or digest.
func (r Reference) via(registry string) (name.Reference, error) {
	s := registry + "/" + r.ref.Context().RepositoryStr()
	if d, ok := r.ref.(name.Digest); ok {
		return name.NewDigest(s + "@" + d.DigestStr())
	}
	return name.NewTag(s + ":" + r.ref.Identifier())
}

// escape makes a reference a file name.
func escape(ref string) string {
	return strings.NewReplacer("/", "%2F", ":", "%3A", "@", "%40").Replace(ref)
}
