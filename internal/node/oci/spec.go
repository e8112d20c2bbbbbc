// Package oci builds the OCI runtime spec (a bundle's config.json) that
// runc runs a container by, as containerd's CRI plugin builds it for the
// kubelet: the image's config merged with the container's (command
// replaces the entrypoint, args replace the command, the container's
// environment over the image's), containerd's default mounts, masked
// paths, capabilities and seccomp profile, the container's own PID, IPC,
// UTS and mount namespaces with the pod's network namespace joined, and
// the resource limits as cgroup settings.
package oci

import (
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/containerd/containerd/v2/contrib/seccomp"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	specs "github.com/opencontainers/runtime-spec/specs-go"
)

// Process is what a container runs, merged from the image and the
// container as a container runtime merges them.
type Process struct {
	Args []string
	Env  []string
	Cwd  string
	// User is the image's or the container's user (uid[:gid] or a name),
	// resolved later against the image's /etc/passwd.
	User string
}

// Merge applies a container's command, args, environment and working
// directory to the image's config: a command replaces the entrypoint
// (and the image's command with it), args alone replace the image's
// command; the container's variables override the image's of the same
// name, which keep their place.
func Merge(img v1.Config, command, args, env []string, workingDir string) (Process, error) {
	var argv []string
	switch {
	case len(command) > 0:
		argv = slices.Concat(command, args)
	case len(args) > 0:
		argv = slices.Concat(img.Entrypoint, args)
	default:
		argv = slices.Concat(img.Entrypoint, img.Cmd)
	}
	if len(argv) == 0 {
		return Process{}, fmt.Errorf("no command specified")
	}
	p := Process{Args: argv, Cwd: workingDir, User: img.User}
	if p.Cwd == "" {
		p.Cwd = img.WorkingDir
	}
	if p.Cwd == "" {
		p.Cwd = "/"
	}
	p.Env = mergeEnv(img.Env, env)
	return p, nil
}

// mergeEnv lays over on base: a variable of over replaces base's in
// place; the others follow in over's order.
func mergeEnv(base, over []string) []string {
	out := slices.Clone(base)
	index := map[string]int{}
	for i, kv := range out {
		k, _, _ := strings.Cut(kv, "=")
		index[k] = i
	}
	for _, kv := range over {
		k, _, _ := strings.Cut(kv, "=")
		if i, ok := index[k]; ok {
			out[i] = kv
			continue
		}
		index[k] = len(out)
		out = append(out, kv)
	}
	return out
}

// Container is what the spec is built from.
type Container struct {
	Process Process
	// UID, GID and Groups are the resolved user, group and supplementary
	// groups.
	UID, GID uint32
	Groups   []uint32
	Hostname string
	// NetNS is the path of the pod's network namespace.
	NetNS string
	// PIDNS, when set, is the path of the PID namespace to join (the
	// pod's, with shareProcessNamespace); else the container has its own.
	PIDNS string
	// Rootfs is the mounted root file system; ReadOnlyRoot mounts it
	// read-only.
	Rootfs       string
	ReadOnlyRoot bool
	Mounts       []Mount
	// Privileged gives every capability and the host's devices, with
	// nothing masked.
	Privileged bool
	// CapAdd and CapDrop change the default set (names as Kubernetes
	// gives them, without CAP_; "ALL" drops or adds all).
	CapAdd, CapDrop []string
	// NoNewPrivileges is allowPrivilegeEscalation: false.
	NoNewPrivileges bool
	// SeccompRuntimeDefault filters system calls by containerd's default
	// profile (seccompProfile RuntimeDefault); Seccomp, when set, by
	// that profile instead (Localhost). Neither: unconfined.
	SeccompRuntimeDefault bool
	Seccomp               *specs.LinuxSeccomp
	// CgroupsPath is the container's cgroup; the limits: memory in
	// bytes, CPU quota per 100ms period in microseconds, CPU shares; 0
	// is no limit.
	CgroupsPath string
	MemoryLimit int64
	CPUQuota    int64
	CPUShares   uint64
	// Sysctls are the pod's namespaced kernel parameters, by dotted name.
	Sysctls map[string]string
}

// Mount is a file or directory of the host bound into the container.
type Mount struct {
	Source, Destination string
	ReadOnly            bool
}

// DefaultCapabilities are containerd's default set.
var DefaultCapabilities = []string{
	"CAP_CHOWN", "CAP_DAC_OVERRIDE", "CAP_FSETID", "CAP_FOWNER", "CAP_MKNOD", "CAP_NET_RAW",
	"CAP_SETGID", "CAP_SETUID", "CAP_SETFCAP", "CAP_SETPCAP", "CAP_NET_BIND_SERVICE",
	"CAP_SYS_CHROOT", "CAP_KILL", "CAP_AUDIT_WRITE",
}

// allCapabilities is every capability the kernel knows (privileged).
var allCapabilities = []string{
	"CAP_CHOWN", "CAP_DAC_OVERRIDE", "CAP_DAC_READ_SEARCH", "CAP_FOWNER", "CAP_FSETID", "CAP_KILL",
	"CAP_SETGID", "CAP_SETUID", "CAP_SETPCAP", "CAP_LINUX_IMMUTABLE", "CAP_NET_BIND_SERVICE",
	"CAP_NET_BROADCAST", "CAP_NET_ADMIN", "CAP_NET_RAW", "CAP_IPC_LOCK", "CAP_IPC_OWNER",
	"CAP_SYS_MODULE", "CAP_SYS_RAWIO", "CAP_SYS_CHROOT", "CAP_SYS_PTRACE", "CAP_SYS_PACCT",
	"CAP_SYS_ADMIN", "CAP_SYS_BOOT", "CAP_SYS_NICE", "CAP_SYS_RESOURCE", "CAP_SYS_TIME",
	"CAP_SYS_TTY_CONFIG", "CAP_MKNOD", "CAP_LEASE", "CAP_AUDIT_WRITE", "CAP_AUDIT_CONTROL",
	"CAP_SETFCAP", "CAP_MAC_OVERRIDE", "CAP_MAC_ADMIN", "CAP_SYSLOG", "CAP_WAKE_ALARM",
	"CAP_BLOCK_SUSPEND", "CAP_AUDIT_READ", "CAP_PERFMON", "CAP_BPF", "CAP_CHECKPOINT_RESTORE",
}

// currentCapabilities are the capabilities of the node's own bounding
// set, which containerd gives for "all" (WithAllCurrentCapabilities): a
// container cannot be given one the node lacks (runc fails with EPERM,
// as where the machine itself runs without CAP_SYS_RESOURCE).
var currentCapabilities = sync.OnceValue(func() []string {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return slices.Clone(allCapabilities)
	}
	return boundingCapabilities(string(b))
})

// boundingCapabilities are the capabilities named in a /proc/PID/status
// text's CapBnd mask (all of them when it has none).
func boundingCapabilities(status string) []string {
	for line := range strings.Lines(status) {
		hex, ok := strings.CutPrefix(line, "CapBnd:")
		if !ok {
			continue
		}
		mask, err := strconv.ParseUint(strings.TrimSpace(hex), 16, 64)
		if err != nil {
			break
		}
		var out []string
		for i, c := range allCapabilities {
			if mask&(1<<i) != 0 {
				out = append(out, c)
			}
		}
		return out
	}
	return slices.Clone(allCapabilities)
}

// Capabilities is the set containerd's CRI gives a container: every
// capability when privileged; otherwise the default set, or all of them
// with "ALL" added, or none with "ALL" dropped, then the other adds, then
// the other drops (which win).
func Capabilities(add, drop []string, privileged bool) []string {
	if privileged {
		return slices.Clone(currentCapabilities())
	}
	norm := func(c string) string {
		c = strings.ToUpper(c)
		if c == "ALL" || strings.HasPrefix(c, "CAP_") {
			return c
		}
		return "CAP_" + c
	}
	add, drop = normAll(add, norm), normAll(drop, norm)
	caps := slices.Clone(DefaultCapabilities)
	if slices.Contains(add, "ALL") {
		caps = slices.Clone(currentCapabilities())
	}
	if slices.Contains(drop, "ALL") {
		caps = nil
	}
	for _, a := range add {
		if a != "ALL" && !slices.Contains(caps, a) {
			caps = append(caps, a)
		}
	}
	return slices.DeleteFunc(caps, func(c string) bool { return slices.Contains(drop, c) })
}

func normAll(caps []string, norm func(string) string) []string {
	out := make([]string, len(caps))
	for i, c := range caps {
		out[i] = norm(c)
	}
	return out
}

// Spec is the runtime spec for c.
func Spec(c Container) *specs.Spec {
	caps := Capabilities(c.CapAdd, c.CapDrop, c.Privileged)
	s := &specs.Spec{
		Version:  specs.Version,
		Hostname: c.Hostname,
		Root:     &specs.Root{Path: c.Rootfs, Readonly: c.ReadOnlyRoot},
		Process: &specs.Process{
			// A container's terminal is the shim's: its end is passed
			// in as the standard streams, not made by runc.
			Args: c.Process.Args,
			Env:  c.Process.Env,
			Cwd:  c.Process.Cwd,
			User: specs.User{UID: c.UID, GID: c.GID, AdditionalGids: c.Groups},
			Capabilities: &specs.LinuxCapabilities{
				Bounding: caps, Effective: caps, Permitted: caps,
			},
			NoNewPrivileges: c.NoNewPrivileges,
		},
		Mounts: defaultMounts(c.Privileged),
		Linux: &specs.Linux{
			CgroupsPath: c.CgroupsPath,
			Namespaces: []specs.LinuxNamespace{
				{Type: specs.PIDNamespace, Path: c.PIDNS}, {Type: specs.IPCNamespace}, {Type: specs.UTSNamespace},
				{Type: specs.MountNamespace}, {Type: specs.NetworkNamespace, Path: c.NetNS},
				// Its own cgroup is the root of /sys/fs/cgroup, as
				// containerd's containers see theirs on cgroup v2.
				{Type: specs.CgroupNamespace},
			},
			Resources: resources(c),
			Sysctl:    c.Sysctls,
		},
	}
	switch {
	case c.Seccomp != nil:
		s.Linux.Seccomp = c.Seccomp
	case c.SeccompRuntimeDefault && !c.Privileged:
		// containerd's profile, which allows what the capabilities do.
		s.Linux.Seccomp = seccomp.DefaultProfile(s)
	}
	if !c.Privileged {
		s.Linux.MaskedPaths = []string{
			"/proc/acpi", "/proc/asound", "/proc/kcore", "/proc/keys", "/proc/latency_stats",
			"/proc/timer_list", "/proc/timer_stats", "/proc/sched_debug", "/proc/scsi",
			"/sys/firmware", "/sys/devices/virtual/powercap",
		}
		s.Linux.ReadonlyPaths = []string{"/proc/bus", "/proc/fs", "/proc/irq", "/proc/sys", "/proc/sysrq-trigger"}
	}
	for _, m := range c.Mounts {
		opts := []string{"rbind", "rprivate"}
		if m.ReadOnly {
			opts = append(opts, "ro")
		}
		s.Mounts = append(s.Mounts, specs.Mount{Destination: m.Destination, Type: "bind", Source: m.Source, Options: opts})
	}
	return s
}

// defaultMounts are containerd's: proc, a tmpfs /dev with pts, shm and
// mqueue, sysfs and the cgroups read-only (read-write when privileged).
func defaultMounts(privileged bool) []specs.Mount {
	ro := "ro"
	if privileged {
		ro = "rw"
	}
	return []specs.Mount{
		{Destination: "/proc", Type: "proc", Source: "proc", Options: []string{"nosuid", "noexec", "nodev"}},
		{Destination: "/dev", Type: "tmpfs", Source: "tmpfs", Options: []string{"nosuid", "strictatime", "mode=755", "size=65536k"}},
		{Destination: "/dev/pts", Type: "devpts", Source: "devpts", Options: []string{"nosuid", "noexec", "newinstance", "ptmxmode=0666", "mode=0620", "gid=5"}},
		{Destination: "/dev/shm", Type: "tmpfs", Source: "shm", Options: []string{"nosuid", "noexec", "nodev", "mode=1777", "size=65536k"}},
		{Destination: "/dev/mqueue", Type: "mqueue", Source: "mqueue", Options: []string{"nosuid", "noexec", "nodev"}},
		{Destination: "/sys", Type: "sysfs", Source: "sysfs", Options: []string{"nosuid", "noexec", "nodev", ro}},
		{Destination: "/sys/fs/cgroup", Type: "cgroup", Source: "cgroup", Options: []string{"nosuid", "noexec", "nodev", "relatime", ro}},
	}
}

// resources are the container's cgroup limits; devices as runc's
// default (it adds the standard ones it creates).
func resources(c Container) *specs.LinuxResources {
	r := &specs.LinuxResources{Devices: []specs.LinuxDeviceCgroup{{Allow: c.Privileged, Access: "rwm"}}}
	if c.MemoryLimit > 0 {
		// No swap beyond the limit, as the kubelet's containers.
		r.Memory = &specs.LinuxMemory{Limit: &c.MemoryLimit, Swap: &c.MemoryLimit}
	}
	if c.CPUQuota > 0 || c.CPUShares > 0 {
		r.CPU = &specs.LinuxCPU{}
		if c.CPUQuota > 0 {
			period := uint64(100000)
			r.CPU.Quota, r.CPU.Period = &c.CPUQuota, &period
		}
		if c.CPUShares > 0 {
			r.CPU.Shares = &c.CPUShares
		}
	}
	return r
}
