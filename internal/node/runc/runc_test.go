package runc

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/svcnet/svcnet/internal/node/images/imagetest"
	"github.com/svcnet/svcnet/internal/node/oci"
)

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
		} else if !imagetest.StaticBusybox() {
			why = imagetest.BusyboxPath + " is not static (Debian package busybox-static)"
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
	t.Cleanup(func() { RemoveCgroupParent(cgroupParent) })
	return rt
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
	b, err := os.ReadFile(imagetest.BusyboxPath)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "bin/busybox"), b, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, a := range imagetest.Applets {
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

// TestOOMKilled: a process that outgrows the container's memory limit is
// killed, and the cgroup says by whom.
func TestOOMKilled(t *testing.T) {
	rt := prerequisites(t)
	bundle := Bundle(t.TempDir())
	id := "svcnet-runc-test-" + filepath.Base(string(bundle))
	cgroup := "/" + cgroupParent + "/" + id
	spec := oci.Spec(oci.Container{
		Process:     oci.Process{Args: []string{"sh", "-c", "x=$(head -c 67108864 /dev/zero | tr '\\0' a); echo survived"}, Env: []string{"PATH=/bin"}, Cwd: "/"},
		CgroupsPath: cgroup,
		MemoryLimit: 32 << 20,
	})
	spec.Linux.Namespaces[len(spec.Linux.Namespaces)-1].Path = ""
	if err := bundle.Write(spec, []string{busyboxLayer(t)}); err != nil {
		t.Fatal(err)
	}
	defer unix.Unmount(bundle.Rootfs(), unix.MNT_DETACH)
	ctx := context.Background()
	pid, err := rt.Create(&exec.Cmd{}, bundle, id)
	if err != nil {
		t.Fatal(err)
	}
	defer rt.Delete(ctx, id)
	if err := rt.Start(ctx, id); err != nil {
		t.Fatal(err)
	}
	ws, err := Wait(pid)
	if err != nil {
		t.Fatal(err)
	}
	if !ws.Signaled() || ws.Signal() != unix.SIGKILL || !OOMKilled(cgroup) {
		t.Errorf("a 64 MiB process under a 32 MiB limit ended with %v (signal %v), OOM killed %v", ws.ExitStatus(), ws.Signal(), OOMKilled(cgroup))
	}
}

// TestManyLayers: an image of many layers under a long data dir mounts
// (its lowerdir option would pass the page mount(2) takes).
func TestManyLayers(t *testing.T) {
	prerequisites(t)
	store := filepath.Join(t.TempDir(), strings.Repeat("d", 100), strings.Repeat("e", 100), "layers")
	var layers []string
	for i := range 60 {
		l := filepath.Join(store, fmt.Sprintf("%064d", i))
		if err := os.MkdirAll(l, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(l, fmt.Sprintf("f%d", i)), nil, 0o644); err != nil {
			t.Fatal(err)
		}
		layers = append([]string{l}, layers...) // topmost first
	}
	bundle := Bundle(t.TempDir())
	spec := oci.Spec(oci.Container{Process: oci.Process{Args: []string{"true"}, Cwd: "/"}})
	if err := bundle.Write(spec, layers); err != nil {
		t.Fatal(err)
	}
	defer unix.Unmount(bundle.Rootfs(), unix.MNT_DETACH)
	for _, f := range []string{"f0", "f59"} {
		if _, err := os.Stat(filepath.Join(bundle.Rootfs(), f)); err != nil {
			t.Errorf("the root lacks %s of a layer: %v", f, err)
		}
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

func TestCgroupMounts(t *testing.T) {
	file := filepath.Join(t.TempDir(), "mountinfo")
	info := `22 27 0:21 / /proc rw,relatime - proc proc rw
23 27 0:22 / /sys rw,relatime - sysfs sysfs rw
31 23 0:28 / /sys/fs/cgroup rw,relatime - tmpfs tmpfs rw,mode=755
35 31 0:32 / /sys/fs/cgroup/memory rw,relatime shared:9 - cgroup cgroup rw,memory
40 31 0:37 / /sys/fs/cgroup/systemd rw,relatime - cgroup cgroup rw,xattr,name=systemd
41 31 0:38 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw,nsdelegate
50 27 0:40 / /tmp rw - tmpfs tmpfs rw
`
	if err := os.WriteFile(file, []byte(info), 0o644); err != nil {
		t.Fatal(err)
	}
	got, err := cgroupMounts(file)
	if err != nil {
		t.Fatal(err)
	}
	want := []mountEntry{
		{point: "/sys/fs/cgroup", fstype: "tmpfs", options: "rw,mode=755"},
		{point: "/sys/fs/cgroup/memory", fstype: "cgroup", options: "rw,memory"},
		{point: "/sys/fs/cgroup/systemd", fstype: "cgroup", options: "rw,xattr,name=systemd"},
		{point: "/sys/fs/cgroup/unified", fstype: "cgroup2", options: "rw,nsdelegate"},
	}
	if !slices.Equal(got, want) {
		t.Errorf("cgroup mounts %+v, want %+v", got, want)
	}
}
