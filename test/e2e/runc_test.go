package e2e

import (
	"archive/tar"
	"bytes"
	"debug/elf"
	"fmt"
	"io"
	"log"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
)

// TestRuncImages: with --runtime runc, a Deployment of an image from a
// registry (go-containerregistry's, on loopback) runs isolated: its
// containers see the image's root, not the host's, write to layers of
// their own, run as the user asked; an absent image with pull policy
// Never and a missing tag wait with the kubelet's reasons.
func TestRuncImages(t *testing.T) {
	needRoot(t)
	if _, err := exec.LookPath("runc"); err != nil || !staticELF("/bin/busybox") {
		if os.Getenv("CI") != "" {
			t.Fatal("CI installs runc and busybox-static (.ci/run)")
		}
		t.Skip("needs runc and busybox-static")
	}
	reg := httptest.NewServer(registry.New(registry.Logger(log.New(io.Discard, "", 0))))
	defer reg.Close()
	host := strings.TrimPrefix(reg.URL, "http://")
	image := host + "/e2e/busybox:1"
	pushBusyboxImage(t, image)

	// Registered first, run last: after the cluster has stopped its pods.
	t.Cleanup(cleanupCgroups)
	c := startNodeCluster(t, "--runtime", "runc")
	hostFile := fmt.Sprintf("/tmp/svcnet-e2e-runc-%d", os.Getpid())
	c.withStdin(fmt.Sprintf(`apiVersion: apps/v1
kind: Deployment
metadata: {name: isolated}
spec:
  replicas: 2
  selector: {matchLabels: {app: isolated}}
  template:
    metadata: {labels: {app: isolated}}
    spec:
      nodeName: %s
      terminationGracePeriodSeconds: 2
      securityContext: {runAsUser: 1000}
      containers:
      - name: main
        image: %s
        command: [sh, -c]
        args: ['ls /; echo uid=$(id -u); cat %[3]s 2>/dev/null || echo no-file; echo $HOSTNAME > %[3]s; echo wrote=$(cat %[3]s); exec sleep 3600']
`, nodeName, image, hostFile), "apply", "-f", "-")

	var pods []string
	eventually(t, 90*time.Second, func() string {
		out, _ := c.kubectl("", "get", "pods", "-l", "app=isolated", "-o", `jsonpath={range .items[?(@.status.phase=="Running")]}{.metadata.name} {end}`)
		if pods = strings.Fields(out); len(pods) != 2 {
			return fmt.Sprintf("running pods %q; pods: %s; events: %s", out, c.must("get", "pods", "-o", "wide"), c.must("get", "events"))
		}
		return ""
	})
	for _, p := range pods {
		var logs string
		eventually(t, 30*time.Second, func() string {
			logs, _ = c.kubectl("", "logs", p)
			if !strings.Contains(logs, "wrote=") {
				return "logs of " + p + ": " + logs
			}
			return ""
		})
		lines := strings.Fields(logs)
		for _, want := range []string{"image-root", "uid=1000", "no-file", "wrote=" + p} {
			if !strings.Contains(" "+strings.Join(lines, " ")+" ", " "+want+" ") {
				t.Errorf("pod %s: output lacks %q (the image's root, its user, its own writable layer):\n%s", p, want, logs)
			}
		}
		if strings.Contains(logs, "usr") || strings.Contains(logs, "home") {
			t.Errorf("pod %s sees the host's root:\n%s", p, logs)
		}
		if id := c.jsonpath("pod", p, "{.status.containerStatuses[0].imageID}"); !strings.HasPrefix(id, host+"/e2e/busybox@sha256:") {
			t.Errorf("pod %s: imageID %q, want the repo digest", p, id)
		}
	}
	if _, err := os.Stat(hostFile); err == nil {
		os.Remove(hostFile)
		t.Errorf("a container's write to %s reached the host", hostFile)
	}
	events := c.must("get", "events", "--field-selector", "involvedObject.name="+pods[0])
	if !strings.Contains(events, `Pulling image "`+image+`"`) && !strings.Contains(events, `already present on machine`) {
		t.Errorf("no pull events for %s:\n%s", pods[0], events)
	}

	// The kubelet's waiting reasons for images that cannot be had.
	c.pod("never", host+"/e2e/absent:1", "    imagePullPolicy: Never\n")
	c.pod("missing", host+"/e2e/busybox:nosuch", "")
	waitReason := func(pod, want, msg string) {
		eventually(t, 60*time.Second, func() string {
			st := c.jsonpath("pod", pod, "{.status.containerStatuses[0].state.waiting}")
			if !strings.Contains(st, `"reason":"`+want+`"`) || !strings.Contains(st, msg) {
				return fmt.Sprintf("pod %s waiting %s, want %s with %q", pod, st, want, msg)
			}
			return ""
		})
	}
	waitReason("never", "ErrImageNeverPull", `Container image \"`+host+`/e2e/absent:1\" is not present with pull policy of Never`)
	// ErrImagePull lasts until the next sync; its events stay.
	missing := host + "/e2e/busybox:nosuch"
	waitReason("missing", "ImagePullBackOff", `Back-off pulling image \"`+missing+`\": ErrImagePull: `)
	events = c.must("get", "events", "--field-selector", "involvedObject.name=missing")
	for _, want := range []string{`Failed to pull image "` + missing + `": failed to pull and unpack image`, missing + ": not found", "Error: ErrImagePull"} {
		if !strings.Contains(events, want) {
			t.Errorf("events of pod missing lack %q:\n%s", want, events)
		}
	}
}

// staticELF reports whether the executable at path needs no loader.
func staticELF(path string) bool {
	f, err := elf.Open(path)
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

// pushBusyboxImage pushes to ref an image of one layer: the host's
// static busybox as /bin/sh and its applets, /tmp, and a file
// /image-root that tells the image's root from the host's.
func pushBusyboxImage(t *testing.T, ref string) {
	t.Helper()
	bb, err := os.ReadFile("/bin/busybox")
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	add := func(h *tar.Header, body []byte) {
		h.Size = int64(len(body))
		if err := tw.WriteHeader(h); err != nil {
			t.Fatal(err)
		}
		if _, err := tw.Write(body); err != nil {
			t.Fatal(err)
		}
	}
	add(&tar.Header{Name: "bin/", Typeflag: tar.TypeDir, Mode: 0o755}, nil)
	add(&tar.Header{Name: "bin/busybox", Typeflag: tar.TypeReg, Mode: 0o755}, bb)
	for _, a := range []string{"sh", "ls", "cat", "id", "echo", "sleep"} {
		add(&tar.Header{Name: "bin/" + a, Typeflag: tar.TypeSymlink, Linkname: "busybox", Mode: 0o777}, nil)
	}
	add(&tar.Header{Name: "tmp/", Typeflag: tar.TypeDir, Mode: 0o1777}, nil)
	add(&tar.Header{Name: "image-root", Typeflag: tar.TypeReg, Mode: 0o644}, []byte("x"))
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	b := buf.Bytes()
	layer, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(b)), nil })
	if err != nil {
		t.Fatal(err)
	}
	img, err := mutate.AppendLayers(empty.Image, layer)
	if err != nil {
		t.Fatal(err)
	}
	if img, err = mutate.Config(img, v1.Config{Cmd: []string{"sh"}, Env: []string{"PATH=/bin"}}); err != nil {
		t.Fatal(err)
	}
	r, err := name.ParseReference(ref)
	if err != nil {
		t.Fatal(err)
	}
	if err := remote.Write(r, img); err != nil {
		t.Fatal(err)
	}
}

// cleanupCgroups removes the parent cgroup the node's containers had,
// once empty.
func cleanupCgroups() {
	dirs, _ := filepath.Glob("/sys/fs/cgroup/*/svcnet")
	for _, d := range append(dirs, "/sys/fs/cgroup/svcnet") {
		_ = os.Remove(d)
	}
}
