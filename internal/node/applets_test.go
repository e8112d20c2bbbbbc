package node

import (
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

func TestWithAppletsPutsTheImagesBinFirst(t *testing.T) {
	bin, err := exec.LookPath("busybox")
	if err != nil {
		t.Skip("no busybox on this machine")
	}
	data := t.TempDir()
	env := []string{"HOME=/root", "PATH=/usr/bin:/bin"}
	got, err := withApplets(data, DefaultImages(), "docker.io/library/busybox:1.36", env)
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(data, "images", "busybox", "bin")
	if !slices.Contains(got, "PATH="+dir+":/usr/bin:/bin") {
		t.Fatalf("env = %v, want the applet dir first on PATH", got)
	}
	if target, err := os.Readlink(filepath.Join(dir, "nslookup")); err != nil || target != bin {
		t.Fatalf("nslookup links to %q (%v), want %s", target, err, bin)
	}
	// The images' shell passes on every variable it was given.
	if sh, err := exec.LookPath(imageShell); err == nil {
		if target, err := os.Readlink(filepath.Join(dir, "sh")); err != nil || target != sh {
			t.Fatalf("sh links to %q (%v), want %s", target, err, sh)
		}
		cmd := exec.Command(filepath.Join(dir, "sh"), "-c", "env")
		cmd.Env = []string{"data-1=value-1", "PATH=" + dir}
		if out, err := cmd.Output(); err != nil || !strings.Contains(string(out), "data-1=value-1\n") {
			t.Fatalf("sh -c env with data-1 set: %v\n%s", err, out)
		}
	}
	// Applied twice (a container's env, then exec), the dir is there once.
	again, err := withApplets(data, DefaultImages(), "busybox", got)
	if err != nil || !slices.Equal(again, got) {
		t.Fatalf("second application = %v (%v), want %v", again, err, got)
	}
	// agnhost's tools: the PATH's own, then busybox's applets.
	ag, err := withApplets(data, DefaultImages(), "registry.k8s.io/e2e-test-images/agnhost:2.53", env)
	if err != nil || !slices.Contains(ag, "PATH=/usr/bin:/bin:"+dir) {
		t.Fatalf("agnhost env = %v (%v), want the applet dir last on PATH", ag, err)
	}
	// Images not played by a host binary keep their env.
	same, err := withApplets(data, DefaultImages(), "nginx", env)
	if err != nil || strings.Join(same, " ") != strings.Join(env, " ") {
		t.Fatalf("nginx env = %v (%v), want it unchanged", same, err)
	}
}

// Under runc, bash stands in for busybox's ash only for a container whose
// environment holds a name ash would drop, in an image of busybox alone.
func TestShellMount(t *testing.T) {
	if _, err := exec.LookPath(imageShell); err != nil {
		t.Skip("no bash on this machine")
	}
	table := DefaultImages()
	busybox, agnhost := table["registry.k8s.io/e2e-test-images/busybox"], table["registry.k8s.io/e2e-test-images/agnhost"]
	for _, tc := range []struct {
		name  string
		entry Image
		env   []string
		want  bool
	}{
		{"shell names", busybox, []string{"PATH=/bin", "_x1=y", "data_1=v"}, false},
		{"a ConfigMap key", busybox, []string{"PATH=/bin", "data-1=value-1"}, true},
		{"a leading digit", busybox, []string{"1x=y"}, true},
		{"image with host executables", agnhost, []string{"data-1=value-1"}, false},
		{"no busybox", table["nginx"], []string{"data-1=value-1"}, false},
	} {
		m, ok := shellMount(tc.entry, tc.env)
		if ok != tc.want || ok && (m.Target != "/bin/sh" || !m.ReadOnly || filepath.Base(m.Source) != imageShell) {
			t.Errorf("%s: mount %+v, %v; want %v", tc.name, m, ok, tc.want)
		}
	}
}
