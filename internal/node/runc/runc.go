// Package runc runs a container from an OCI bundle with the runc binary,
// as containerd's shim drives it: the caller (the container's shim) is
// the child subreaper, `runc create` starts the container's init with
// the caller's standard streams passed through, `runc start` lets it run,
// and the caller waits for the init itself, which the end of `runc
// create` left its child; `runc delete` removes what is left (the
// cgroup, runc's state). The bundle's root file system is an overlay of
// the image's unpacked layers with a writable layer of the container's
// own.
package runc

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"

	specs "github.com/opencontainers/runtime-spec/specs-go"
	"golang.org/x/sys/unix"
)

// Runtime is the runc binary and the directory of its state.
type Runtime struct {
	// Binary is runc's path; Root its --root (state of the containers).
	Binary string `json:"binary"`
	Root   string `json:"root"`
}

// Find returns the runc on PATH with its state under root.
func Find(root string) (*Runtime, error) {
	p, err := exec.LookPath("runc")
	if err != nil {
		return nil, fmt.Errorf("runc: %w", err)
	}
	return &Runtime{Binary: p, Root: root}, nil
}

// Usable says why runc cannot run containers here, if it cannot: it is
// not on PATH, or no cgroup file system is mounted and MountCgroups cannot
// mount them.
func Usable() error {
	if _, err := exec.LookPath("runc"); err != nil {
		return fmt.Errorf("runc: %w", err)
	}
	mounts, err := cgroupMounts("/proc/self/mountinfo")
	if err != nil {
		return fmt.Errorf("runc: %w", err)
	}
	if !hasCgroups(mounts) {
		return errors.New("runc: no cgroup file system is mounted (in /proc/self/mountinfo)")
	}
	return nil
}

// hasCgroups says whether mounts hold a cgroup file system.
func hasCgroups(mounts []mountEntry) bool {
	return slices.ContainsFunc(mounts, func(m mountEntry) bool { return m.fstype != "tmpfs" })
}

// mountEntry is a line of a mountinfo file.
type mountEntry struct {
	point, fstype, options string
}

// cgroupMounts lists the cgroup file systems of a mountinfo file, and the
// tmpfs that holds cgroup v1's hierarchies, in mount order.
func cgroupMounts(mountinfo string) ([]mountEntry, error) {
	b, err := os.ReadFile(mountinfo)
	if err != nil {
		return nil, err
	}
	var out []mountEntry
	for line := range strings.SplitSeq(string(b), "\n") {
		// ID PARENT MAJ:MIN ROOT POINT OPTIONS [OPTIONAL...] - TYPE SOURCE SUPER
		before, after, ok := strings.Cut(line, " - ")
		fields, super := strings.Fields(before), strings.Fields(after)
		if !ok || len(fields) < 5 || len(super) < 3 {
			continue
		}
		e := mountEntry{point: fields[4], fstype: super[0], options: super[2]}
		switch {
		case e.fstype == "cgroup" || e.fstype == "cgroup2":
		case e.fstype == "tmpfs" && e.point == "/sys/fs/cgroup":
		default:
			continue
		}
		out = append(out, e)
	}
	return out, nil
}

// MountCgroups mounts the cgroup file systems that PID 1 sees into this
// process's mount namespace when it has none and is not PID 1's own, as
// under `ip netns exec`, which mounts a sysfs of its own over /sys: runc
// finds the cgroups of its containers there. The mounts stay in this
// namespace.
func MountCgroups() error {
	mine, err := cgroupMounts("/proc/self/mountinfo")
	if err != nil || hasCgroups(mine) {
		return err
	}
	if self, err := os.Readlink("/proc/self/ns/mnt"); err == nil {
		if init, err := os.Readlink("/proc/1/ns/mnt"); err == nil && init == self {
			return errors.New("mount cgroups: none is mounted in the host's mount namespace")
		}
	}
	// PID 1's mounts are those of its namespace (which a sandbox may
	// keep us from naming): having cgroups where this one has none, it is
	// another.
	theirs, err := cgroupMounts("/proc/1/mountinfo")
	if err != nil {
		return fmt.Errorf("mount cgroups: %w", err)
	}
	if !hasCgroups(theirs) {
		return errors.New("mount cgroups: none is mounted in PID 1's mount namespace either")
	}
	// Nothing mounted below /sys here may reach another namespace.
	if err := unix.Mount("", "/sys", "", unix.MS_REC|unix.MS_SLAVE, ""); err != nil {
		return fmt.Errorf("mount cgroups: make /sys a slave mount: %w", err)
	}
	var done []string
	for _, m := range theirs {
		if err := mountCgroup(m); err != nil {
			for _, p := range slices.Backward(done) {
				_ = unix.Unmount(p, unix.MNT_DETACH)
			}
			return fmt.Errorf("mount cgroups: %w", err)
		}
		done = append(done, m.point)
	}
	return nil
}

// mountCgroup mounts one of PID 1's cgroup file systems (or their tmpfs)
// here, with its options.
func mountCgroup(m mountEntry) error {
	if err := os.MkdirAll(m.point, 0o755); err != nil {
		return err
	}
	// "rw" and "ro" are the mount's flags, not the file system's.
	var data []string
	for o := range strings.SplitSeq(m.options, ",") {
		if o != "rw" && o != "ro" {
			data = append(data, o)
		}
	}
	if err := unix.Mount(m.fstype, m.point, m.fstype, unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC, strings.Join(data, ",")); err != nil {
		return fmt.Errorf("%s on %s: %w", m.fstype, m.point, err)
	}
	return nil
}

// BecomeSubreaper makes this process the parent of the containers' init
// processes once `runc create` exits; call it before Create.
func BecomeSubreaper() error {
	if err := unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0); err != nil {
		return fmt.Errorf("become child subreaper: %w", err)
	}
	return nil
}

// Bundle is a container's bundle directory: config.json, rootfs (the
// overlay's mount point) and the overlay's writable upper and work
// directories.
type Bundle string

// Rootfs is where the root file system is mounted.
func (b Bundle) Rootfs() string { return filepath.Join(string(b), "rootfs") }

// Write mounts the overlay of layers (topmost first) with the bundle's
// own writable layer at Rootfs, in the caller's mount namespace, and
// writes spec, its root pointed there, as config.json.
func (b Bundle) Write(spec *specs.Spec, layers []string) error {
	upper, work := filepath.Join(string(b), "upper"), filepath.Join(string(b), "work")
	for _, d := range []string{b.Rootfs(), upper, work} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return fmt.Errorf("bundle: %w", err)
		}
	}
	if len(layers) == 0 {
		return fmt.Errorf("bundle: an image without layers")
	}
	if err := mountOverlay(b.Rootfs(), layers, upper, work); err != nil {
		return err
	}
	s := *spec
	root := *spec.Root
	root.Path = b.Rootfs()
	s.Root = &root
	data, err := json.Marshal(&s)
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(string(b), "config.json"), data, 0o600); err != nil {
		return fmt.Errorf("bundle: %w", err)
	}
	return nil
}

// Unmount detaches the root file system that Write mounted.
func (b Bundle) Unmount() error {
	if err := unix.Unmount(b.Rootfs(), unix.MNT_DETACH); err != nil && err != unix.EINVAL && err != unix.ENOENT {
		return fmt.Errorf("unmount %s: %w", b.Rootfs(), err)
	}
	return nil
}

// cwd serializes mountOverlay's changes of the process's working
// directory: one process mounts the root file systems of many containers.
var cwd sync.Mutex

// MountLayers mounts the overlay of layers (topmost first) read-only at
// target, as an image volume shows its image; empty is an empty
// directory, a second lower layer for an image of one layer (overlayfs
// takes no fewer than two without an upper one).
func MountLayers(target string, layers []string, empty string) error {
	if len(layers) == 0 {
		return fmt.Errorf("mount an image without layers at %s", target)
	}
	if len(layers) == 1 {
		layers = []string{layers[0], empty}
	}
	return mountOverlay(target, layers, "", "")
}

// mountOverlay mounts the overlay of layers (topmost first) with upper
// and work at target, read-only without them. Mount options are one page
// at most, so layers in one directory (the image store's) are named
// relative to it, as containerd does: the process's working directory is
// that directory for the mount's time.
func mountOverlay(target string, layers []string, upper, work string) error {
	lower := layers
	dir := filepath.Dir(layers[0])
	shared := true
	for _, l := range layers {
		shared = shared && filepath.Dir(l) == dir
	}
	if shared {
		lower = make([]string, len(layers))
		for i, l := range layers {
			lower[i] = filepath.Base(l)
		}
		cwd.Lock()
		defer cwd.Unlock()
		prev, err := os.Getwd()
		if err != nil {
			return fmt.Errorf("mount an overlay at %s: %w", target, err)
		}
		if err := os.Chdir(dir); err != nil {
			return fmt.Errorf("mount an overlay at %s: %w", target, err)
		}
		defer os.Chdir(prev)
	}
	opts := "lowerdir=" + strings.Join(lower, ":")
	var flags uintptr = unix.MS_RDONLY
	if upper != "" {
		opts += ",upperdir=" + upper + ",workdir=" + work
		flags = 0
	}
	if err := unix.Mount("overlay", target, "overlay", flags, opts); err != nil {
		return fmt.Errorf("mount the overlay of %d layers at %s: %w", len(layers), target, err)
	}
	return nil
}

// Create runs `runc create` for bundle as container id with cmd's
// standard streams, which become the container's: files (or nil), as
// anything else would be copied by a pipe that only the container's end
// closes. cmd's extra files are passed on to the container's process as
// descriptors 3 and up. It returns the host PID of the container's init.
func (r *Runtime) Create(cmd *exec.Cmd, bundle Bundle, id string) (int, error) {
	pidFile := filepath.Join(string(bundle), "init.pid")
	// runc's own errors go to its log as JSON lines; the last says why.
	// Its output would be the container's: the streams are passed on.
	logFile := filepath.Join(string(bundle), "runc.log")
	cmd.Path = r.Binary
	cmd.Args = []string{r.Binary, "--root", r.Root, "--log", logFile, "--log-format", "json",
		"create", "--bundle", string(bundle), "--pid-file", pidFile}
	if n := len(cmd.ExtraFiles); n > 0 {
		// The descriptors after the standard streams go to the container.
		cmd.Args = append(cmd.Args, "--preserve-fds", strconv.Itoa(n))
	}
	cmd.Args = append(cmd.Args, id)
	if err := cmd.Run(); err != nil {
		return 0, fmt.Errorf("runc create: %w%s", err, lastError(logFile))
	}
	b, err := os.ReadFile(pidFile)
	if err != nil {
		return 0, fmt.Errorf("runc create: %w", err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		return 0, fmt.Errorf("runc create: pid file: %w", err)
	}
	inits.Store(pid, struct{}{})
	return pid, nil
}

// inits are the container inits that Create made and Wait has not yet
// reaped: not strays.
var inits sync.Map

// ReapStrays reaps the zombies of runc's init stages (processes named
// "runc:[...]") that a failed create leaves to the subreaper, which no
// Wait would ever take. Call it in the subreaper after a failed Create or
// a container's end.
func ReapStrays() {
	self := os.Getpid()
	stats, _ := filepath.Glob("/proc/[0-9]*/stat")
	for _, f := range stats {
		b, err := os.ReadFile(f)
		if err != nil {
			continue
		}
		// pid (comm) state ppid ...
		s := string(b)
		open, end := strings.IndexByte(s, '('), strings.LastIndexByte(s, ')')
		if open < 0 || end < open {
			continue
		}
		fields := strings.Fields(s[end+1:])
		if len(fields) < 2 || fields[0] != "Z" || fields[1] != strconv.Itoa(self) || !strings.HasPrefix(s[open+1:end], "runc:[") {
			continue
		}
		pid, err := strconv.Atoi(strings.TrimSpace(s[:open]))
		if err != nil {
			continue
		}
		if _, waited := inits.Load(pid); waited {
			continue
		}
		var ws unix.WaitStatus
		_, _ = unix.Wait4(pid, &ws, unix.WNOHANG, nil)
	}
}

// lastError is the last error runc logged.
func lastError(logFile string) string {
	b, _ := os.ReadFile(logFile)
	lines := bytes.Split(bytes.TrimSpace(b), []byte("\n"))
	for i := len(lines) - 1; i >= 0; i-- {
		var e struct{ Level, Msg string }
		if json.Unmarshal(lines[i], &e) == nil && e.Level == "error" {
			return ": " + e.Msg
		}
	}
	return ""
}

// Start lets the created container id run.
func (r *Runtime) Start(ctx context.Context, id string) error {
	return r.run(ctx, "start", id)
}

// Update changes the cgroup limits of running container id: its memory
// limit (and swap, kept equal) in bytes, its CPU quota per 100ms period
// and its CPU shares; a zero limit or quota is left as it is.
func (r *Runtime) Update(ctx context.Context, id string, memory, cpuQuota int64, cpuShares uint64) error {
	args := []string{"update", "--cpu-share", strconv.FormatUint(cpuShares, 10)}
	if cpuQuota > 0 {
		args = append(args, "--cpu-period", "100000", "--cpu-quota", strconv.FormatInt(cpuQuota, 10))
	}
	if memory > 0 {
		m := strconv.FormatInt(memory, 10)
		args = append(args, "--memory", m, "--memory-swap", m)
	}
	return r.run(ctx, append(args, id)...)
}

// Delete removes container id (killing it if it still runs).
func (r *Runtime) Delete(ctx context.Context, id string) error {
	return r.run(ctx, "delete", "--force", id)
}

func (r *Runtime) run(ctx context.Context, args ...string) error {
	out, err := exec.CommandContext(ctx, r.Binary, append([]string{"--root", r.Root}, args...)...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("runc %s: %w: %s", args[0], err, bytes.TrimSpace(out))
	}
	return nil
}

// Wait waits for the container's init pid (a child of this subreaper)
// to end and returns its status.
func Wait(pid int) (unix.WaitStatus, error) {
	var ws unix.WaitStatus
	for {
		_, err := unix.Wait4(pid, &ws, 0, nil)
		if err == unix.EINTR {
			continue
		}
		inits.Delete(pid)
		if err != nil {
			return ws, fmt.Errorf("wait for the container's init %d: %w", pid, err)
		}
		return ws, nil
	}
}

// OOMKilled reports whether the kernel's OOM killer killed a process of
// the container's memory cgroup (cgroupsPath as its spec gives it): the
// oom_kill count of cgroup v2's memory.events or v1's memory.oom_control.
// Read it before Delete removes the cgroup.
func OOMKilled(cgroupsPath string) bool {
	for _, f := range []string{
		filepath.Join("/sys/fs/cgroup", cgroupsPath, "memory.events"),
		filepath.Join("/sys/fs/cgroup/memory", cgroupsPath, "memory.oom_control"),
	} {
		b, err := os.ReadFile(f)
		if err != nil {
			continue
		}
		for line := range strings.Lines(string(b)) {
			if n, ok := strings.CutPrefix(strings.TrimSpace(line), "oom_kill "); ok {
				return n != "0"
			}
		}
	}
	return false
}

// RemoveCgroupParent removes the cgroup parent (a name under the root of
// each hierarchy) that containers' cgroupsPaths were under, once runc has
// removed theirs: best effort, as another node's containers may still be
// in it.
func RemoveCgroupParent(parent string) {
	dirs, _ := filepath.Glob(filepath.Join("/sys/fs/cgroup", "*", parent))
	for _, d := range append(dirs, filepath.Join("/sys/fs/cgroup", parent)) {
		_ = os.Remove(d)
	}
}
