package runc

import (
	"context"
	"debug/elf"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/svcnet/svcnet/internal/node/oci"
)

// staticBusybox is Debian's busybox-static, which .ci/run installs: an
// image's whole root file system in one binary.
const staticBusybox = "/bin/busybox"

// cgroupParent holds the tests' containers' cgroups.
const cgroupParent = "svcnet-runc-test"

func prerequisites(t *testing.T) *Runtime {
	t.Helper()
	why := ""
	switch {
	case os.Geteuid() != 0:
		why = "runc needs root"
	default:
		if _, err := exec.LookPath("runc"); err != nil {
			why = "runc is not installed (Debian package runc)"
		} else if !static(staticBusybox) {
			why = staticBusybox + " is not static (Debian package busybox-static)"
		}
	}
	if why != "" {
		if os.Getenv("CI") != "" {
			t.Fatal(why)
		}
		t.Skip(why)
	}
	rt, err := Find(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	if err := BecomeSubreaper(); err != nil {
		t.Fatal(err)
	}
	// runc removes a container's cgroup, not the parent the test named.
	t.Cleanup(func() {
		parents, _ := filepath.Glob("/sys/fs/cgroup/*/" + cgroupParent)
		for _, p := range append(parents, "/sys/fs/cgroup/"+cgroupParent) {
			_ = os.Remove(p)
		}
	})
	return rt
}

// static reports whether the executable at path needs no dynamic loader.
func static(path string) bool {
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

// busyboxLayer is a layer directory holding busybox as /bin/sh and its
// applets, and an empty /tmp.
func busyboxLayer(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	if err := os.MkdirAll(filepath.Join(dir, "bin"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(filepath.Join(dir, "tmp"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(filepath.Join(dir, "tmp"), 0o1777); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(staticBusybox)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "bin/busybox"), b, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, a := range []string{"sh", "ls", "cat", "id", "echo"} {
		if err := os.Symlink("busybox", filepath.Join(dir, "bin", a)); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// TestRun: a container runs isolated in its bundle: it sees the image's
// root, not the host's, as the user asked; its writes land in its own
// writable layer; its exit status reaches the subreaper.
func TestRun(t *testing.T) {
	rt := prerequisites(t)
	layer := busyboxLayer(t)
	bundle := Bundle(t.TempDir())
	id := "svcnet-runc-test-" + filepath.Base(string(bundle))
	spec := oci.Spec(oci.Container{
		Process:     oci.Process{Args: []string{"sh", "-c", "ls /; id -u; echo written > /tmp/x; cat /tmp/x; exit 3"}, Env: []string{"PATH=/bin"}, Cwd: "/"},
		UID:         1000,
		GID:         1000,
		Hostname:    "c",
		CgroupsPath: "/" + cgroupParent + "/" + id,
		MemoryLimit: 64 << 20,
	})
	// No pod network namespace here: a new, empty one.
	spec.Linux.Namespaces[len(spec.Linux.Namespaces)-1].Path = ""
	if err := bundle.Write(spec, []string{layer}); err != nil {
		t.Fatal(err)
	}
	defer unix.Unmount(bundle.Rootfs(), unix.MNT_DETACH)

	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	cmd := &exec.Cmd{Stdout: w, Stderr: w}
	pid, err := rt.Create(cmd, bundle, id)
	w.Close()
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	defer rt.Delete(ctx, id)
	if err := rt.Start(ctx, id); err != nil {
		t.Fatal(err)
	}
	ws, err := Wait(pid)
	if err != nil {
		t.Fatal(err)
	}
	out, _ := io.ReadAll(r)
	if ws.ExitStatus() != 3 {
		t.Errorf("exit status %d, want 3; output:\n%s", ws.ExitStatus(), out)
	}
	lines := strings.Fields(string(out))
	for _, want := range []string{"bin", "tmp", "proc", "1000", "written"} {
		if !strings.Contains(" "+strings.Join(lines, " ")+" ", " "+want+" ") {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(string(out), "usr") || strings.Contains(string(out), "etc") {
		t.Errorf("the container sees the host's root:\n%s", out)
	}
	if b, err := os.ReadFile(filepath.Join(string(bundle), "upper/tmp/x")); err != nil || string(b) != "written\n" {
		t.Errorf("the write is not in the container's own layer: %q %v", b, err)
	}
	if _, err := os.Stat(filepath.Join(layer, "tmp/x")); err == nil {
		t.Error("the write reached the image's layer")
	}
}

// TestCreateError: runc's reason reaches the caller.
func TestCreateError(t *testing.T) {
	rt := prerequisites(t)
	bundle := Bundle(t.TempDir())
	spec := oci.Spec(oci.Container{Process: oci.Process{Args: []string{"/no/such"}, Cwd: "/"}})
	spec.Linux.Namespaces[len(spec.Linux.Namespaces)-1].Path = ""
	if err := bundle.Write(spec, []string{busyboxLayer(t)}); err != nil {
		t.Fatal(err)
	}
	defer unix.Unmount(bundle.Rootfs(), unix.MNT_DETACH)
	id := "svcnet-runc-test-" + filepath.Base(string(bundle))
	_, err := rt.Create(&exec.Cmd{}, bundle, id)
	defer rt.Delete(context.Background(), id)
	if err == nil || !strings.Contains(err.Error(), "/no/such") {
		t.Errorf("create of a missing executable: %v", err)
	}
}
