// Package imagetest makes images for tests and benchmarks without the
// Internet: a registry (go-containerregistry's, in process, on loopback)
// and an image whose whole root file system is the host's static busybox
// (Debian's busybox-static) with its applets.
package imagetest

import (
	"archive/tar"
	"bytes"
	"debug/elf"
	"fmt"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
)

// BusyboxPath is where Debian's busybox-static puts busybox.
const BusyboxPath = "/bin/busybox"

// Marker is a file at the root of the busybox image: a container that
// lists it sees the image's root, not the host's.
const Marker = "image-root"

// Applets are the busybox applets the image links in /bin.
var Applets = []string{"sh", "ls", "cat", "id", "echo", "sleep", "head", "tr", "touch", "hostname", "grep"}

// StaticBusybox reports whether BusyboxPath is a static executable (an
// image's whole root file system with no loader).
func StaticBusybox() bool {
	f, err := elf.Open(BusyboxPath)
	if err != nil {
		return false
	}
	defer f.Close()
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			return false
		}
	}
	return true
}

// Registry serves an empty registry on 127.0.0.1 and returns its
// host:port and the function that stops it. With user set, it wants
// those basic-auth credentials, as a private registry.
func Registry(user, password string) (string, func()) {
	h := registry.New(registry.Logger(log.New(io.Discard, "", 0)))
	if user != "" {
		inner := h
		h = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if u, p, ok := r.BasicAuth(); !ok || u != user || p != password {
				w.Header().Set("WWW-Authenticate", `Basic realm="registry"`)
				http.Error(w, `{"errors":[{"code":"UNAUTHORIZED","message":"authentication required"}]}`, http.StatusUnauthorized)
				return
			}
			inner.ServeHTTP(w, r)
		})
	}
	srv := httptest.NewServer(h)
	return strings.TrimPrefix(srv.URL, "http://"), srv.Close
}

// Busybox is an image of one layer: busybox as /bin/busybox with its
// Applets linked to it, a /tmp for everyone and the Marker file; its
// command is sh, its PATH /bin.
func Busybox() (v1.Image, error) {
	bb, err := os.ReadFile(BusyboxPath)
	if err != nil {
		return nil, err
	}
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	add := func(h *tar.Header, body []byte) error {
		h.Size = int64(len(body))
		if err := tw.WriteHeader(h); err != nil {
			return err
		}
		_, err := tw.Write(body)
		return err
	}
	files := []*tar.Header{
		{Name: "bin/", Typeflag: tar.TypeDir, Mode: 0o755},
		{Name: "bin/busybox", Typeflag: tar.TypeReg, Mode: 0o755},
		{Name: "tmp/", Typeflag: tar.TypeDir, Mode: 0o1777},
		{Name: Marker, Typeflag: tar.TypeReg, Mode: 0o644},
	}
	for _, a := range Applets {
		files = append(files, &tar.Header{Name: "bin/" + a, Typeflag: tar.TypeSymlink, Linkname: "busybox", Mode: 0o777})
	}
	for _, h := range files {
		var body []byte
		switch h.Name {
		case "bin/busybox":
			body = bb
		case Marker:
			body = []byte("x")
		}
		if err := add(h, body); err != nil {
			return nil, fmt.Errorf("busybox image: %w", err)
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	b := buf.Bytes()
	layer, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(b)), nil })
	if err != nil {
		return nil, err
	}
	img, err := mutate.AppendLayers(empty.Image, layer)
	if err != nil {
		return nil, err
	}
	return mutate.Config(img, v1.Config{Cmd: []string{"sh"}, Env: []string{"PATH=/bin"}})
}

// PushBusybox pushes Busybox() to ref.
func PushBusybox(ref string) error {
	img, err := Busybox()
	if err != nil {
		return err
	}
	r, err := name.ParseReference(ref)
	if err != nil {
		return err
	}
	if err := remote.Write(r, img); err != nil {
		return fmt.Errorf("push %s: %w", ref, err)
	}
	return nil
}
