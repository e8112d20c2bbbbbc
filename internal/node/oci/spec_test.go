package oci

import (
	"slices"
	"testing"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	specs "github.com/opencontainers/runtime-spec/specs-go"
)

// TestMerge: the kubelet's documented rules for command and args
// (kubernetes.io "Define a Command and Arguments for a Container": the
// table of image Entrypoint/Cmd against container command/args).
func TestMerge(t *testing.T) {
	img := v1.Config{Entrypoint: []string{"/ep-1"}, Cmd: []string{"foo", "bar"}, WorkingDir: "/srv", User: "1000",
		Env: []string{"PATH=/usr/bin", "A=image", "B=image"}}
	for _, tc := range []struct {
		name          string
		command, args []string
		want          []string
	}{
		{"neither: entrypoint and cmd", nil, nil, []string{"/ep-1", "foo", "bar"}},
		{"command: the command alone", []string{"/ep-2"}, nil, []string{"/ep-2"}},
		{"args: the entrypoint with them", nil, []string{"zoo", "boo"}, []string{"/ep-1", "zoo", "boo"}},
		{"both: the command with the args", []string{"/ep-2"}, []string{"zoo", "boo"}, []string{"/ep-2", "zoo", "boo"}},
	} {
		p, err := Merge(img, tc.command, tc.args, []string{"B=pod", "C=pod"}, "")
		if err != nil || !slices.Equal(p.Args, tc.want) {
			t.Errorf("%s: %v %v, want %v", tc.name, p.Args, err, tc.want)
		}
		if !slices.Equal(p.Env, []string{"PATH=/usr/bin", "A=image", "B=pod", "C=pod"}) || p.Cwd != "/srv" || p.User != "1000" {
			t.Errorf("%s: env %v cwd %s user %s", tc.name, p.Env, p.Cwd, p.User)
		}
	}
	p, _ := Merge(v1.Config{Cmd: []string{"sh"}}, nil, nil, nil, "/work")
	if p.Cwd != "/work" || !slices.Equal(p.Args, []string{"sh"}) {
		t.Errorf("cmd only with a working dir: %+v", p)
	}
	p, _ = Merge(v1.Config{Cmd: []string{"sh"}}, nil, nil, nil, "")
	if p.Cwd != "/" {
		t.Errorf("no working dir anywhere: %q, want /", p.Cwd)
	}
	if _, err := Merge(v1.Config{}, nil, nil, nil, ""); err == nil {
		t.Error("an image and a container without a command merged")
	}
}

func TestCapabilities(t *testing.T) {
	if got := Capabilities(nil, nil, false); !slices.Equal(got, DefaultCapabilities) {
		t.Errorf("default: %v", got)
	}
	got := Capabilities([]string{"NET_ADMIN"}, []string{"NET_RAW", "MKNOD"}, false)
	if slices.Contains(got, "CAP_NET_RAW") || slices.Contains(got, "CAP_MKNOD") || !slices.Contains(got, "CAP_NET_ADMIN") {
		t.Errorf("add NET_ADMIN, drop NET_RAW and MKNOD: %v", got)
	}
	if got := Capabilities([]string{"NET_BIND_SERVICE"}, []string{"ALL"}, false); !slices.Equal(got, []string{"CAP_NET_BIND_SERVICE"}) {
		t.Errorf("drop ALL, add NET_BIND_SERVICE: %v", got)
	}
	if got := Capabilities([]string{"ALL"}, []string{"NET_RAW"}, false); slices.Contains(got, "CAP_NET_RAW") || !slices.Contains(got, "CAP_SYS_ADMIN") {
		t.Errorf("add ALL, drop NET_RAW: %v", got)
	}
	if got := Capabilities([]string{"NET_ADMIN"}, []string{"net_admin"}, false); slices.Contains(got, "CAP_NET_ADMIN") {
		t.Errorf("add and drop NET_ADMIN: the drop wins, got %v", got)
	}
	if got := Capabilities([]string{"all"}, []string{"ALL"}, false); len(got) != 0 {
		t.Errorf("add ALL, drop ALL: %v, want none", got)
	}
	if got := Capabilities(nil, []string{"ALL"}, true); !slices.Contains(got, "CAP_SYS_ADMIN") {
		t.Errorf("privileged: %v", got)
	}
}

func TestSpec(t *testing.T) {
	s := Spec(Container{
		Process: Process{Args: []string{"sh"}, Cwd: "/"}, UID: 1000, GID: 1000, Groups: []uint32{2000},
		Hostname: "web-0", NetNS: "/run/netns/pod", Rootfs: "/b/rootfs", ReadOnlyRoot: true,
		Mounts:      []Mount{{Source: "/pod/etc/hosts", Destination: "/etc/hosts", ReadOnly: true}},
		CgroupsPath: "/svcnet/pod/c", MemoryLimit: 32 << 20, CPUQuota: 50000, CPUShares: 256,
	})
	if s.Root.Path != "/b/rootfs" || !s.Root.Readonly || s.Hostname != "web-0" || s.Process.User.UID != 1000 ||
		!slices.Equal(s.Process.User.AdditionalGids, []uint32{2000}) {
		t.Errorf("spec: %+v %+v", s.Root, s.Process.User)
	}
	var net specs.LinuxNamespace
	cgroupNS := false
	for _, ns := range s.Linux.Namespaces {
		switch ns.Type {
		case specs.NetworkNamespace:
			net = ns
		case specs.CgroupNamespace:
			cgroupNS = true
		}
	}
	if net.Path != "/run/netns/pod" || !cgroupNS || len(s.Linux.Namespaces) != 6 {
		t.Errorf("namespaces: %+v", s.Linux.Namespaces)
	}
	last := s.Mounts[len(s.Mounts)-1]
	if last.Destination != "/etc/hosts" || last.Source != "/pod/etc/hosts" || !slices.Contains(last.Options, "ro") {
		t.Errorf("bind mount: %+v", last)
	}
	r := s.Linux.Resources
	if *r.Memory.Limit != 32<<20 || *r.CPU.Quota != 50000 || *r.CPU.Period != 100000 || *r.CPU.Shares != 256 {
		t.Errorf("resources: %+v %+v", r.Memory, r.CPU)
	}
	if len(s.Linux.MaskedPaths) == 0 || !slices.Contains(s.Linux.ReadonlyPaths, "/proc/sys") {
		t.Errorf("masked %v read-only %v", s.Linux.MaskedPaths, s.Linux.ReadonlyPaths)
	}
	if s.Linux.Seccomp != nil {
		t.Errorf("unconfined by default, got a seccomp profile")
	}
	def := Spec(Container{Process: Process{Args: []string{"sh"}}, SeccompRuntimeDefault: true}).Linux.Seccomp
	if def == nil || def.DefaultAction != specs.ActErrno || len(def.Syscalls) == 0 {
		t.Errorf("RuntimeDefault: %+v, want containerd's profile (errno unless allowed)", def)
	}
}

// "All" capabilities are those of the node's own bounding set, as
// containerd's: a machine without CAP_SYS_RESOURCE gives none.
func TestBoundingCapabilities(t *testing.T) {
	got := boundingCapabilities("Name:\tsvcnet\nCapPrm:\t000001fffeffffff\nCapBnd:\t000001fffeffffff\n")
	if len(got) != len(allCapabilities)-1 || slices.Contains(got, "CAP_SYS_RESOURCE") || !slices.Contains(got, "CAP_CHECKPOINT_RESTORE") {
		t.Errorf("CapBnd 1fffeffffff: %v", got)
	}
	if got := boundingCapabilities("CapBnd:\t0000000000000001\n"); !slices.Equal(got, []string{"CAP_CHOWN"}) {
		t.Errorf("CapBnd 1: %v", got)
	}
	if got := boundingCapabilities("Name:\tx\n"); len(got) != len(allCapabilities) {
		t.Errorf("no CapBnd: %d capabilities", len(got))
	}
}
