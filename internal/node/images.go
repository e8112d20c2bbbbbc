package node

import (
	"cmp"
	"fmt"
	"os"
	"os/exec"
	"path"
	"slices"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"

	"github.com/svcnet/svcnet/internal/node/builtin"
)

// Image is how the node runs an image it does not pull: a built-in program,
// a host executable, or a fixed command, with the image's entrypoint and
// default arguments.
type Image struct {
	// Builtin names a program built into svcnet (nginx, httpd, agnhost,
	// http-echo, pause, coredns, ingress-controller,
	// regression-issue-74839, sample-apiserver, etcd, nonewprivs).
	Builtin string `json:"builtin,omitempty"`
	// Host is a host executable that plays the image's binaries, as the
	// host's busybox plays busybox's applets (chosen by argv[0]).
	Host string `json:"host,omitempty"`
	// Entrypoint and Cmd are the image's ENTRYPOINT and CMD.
	Entrypoint []string `json:"entrypoint,omitempty"`
	Cmd        []string `json:"cmd,omitempty"`
	// Binaries are paths inside the image that mean the built-in program
	// when a container's command names them (agnhost's /agnhost).
	Binaries []string `json:"binaries,omitempty"`
	// Programs are other built-in programs the image holds, by their
	// absolute path in it (agnhost's /coredns).
	Programs map[string]string `json:"programs,omitempty"`
	// Applets is a multi-call host binary (busybox) whose applets fill in
	// the image's tools after the PATH's own, as an Alpine base image's
	// busybox does under the packages installed over it.
	Applets string `json:"applets,omitempty"`
	// LocalhostCert says the image holds /localhost.crt and
	// /localhost.key, a certificate for localhost that signs itself, as
	// agnhost's image does (its test-webserver serves the first, which
	// upstream's StatefulSet tests move away to fail a readiness probe).
	LocalhostCert bool `json:"localhostCert,omitempty"`
	// Executables are host programs the image holds (curl): under runc
	// the node puts those the host has, with their libraries, into the
	// image it assembles; host processes find them on the host's PATH.
	Executables []string `json:"executables,omitempty"`
	// Setuid is a path in the image where its built-in program is a copy
	// of svcnet's executable owned by root with the setuid bit, and runs
	// from there under runc, as upstream's nonewprivs image has its nnp:
	// the program gains root's effective uid unless the container may not
	// escalate privileges. (A host process runs it without the bit.)
	Setuid string `json:"setuid,omitempty"`
	// Files are the image's own files, their content by absolute, clean
	// path (upstream's update-demo images hold their /data.json and
	// picture): under runc a layer of the image the node assembles, for a
	// host process bound read-only at their paths in its mount namespace.
	Files map[string]string `json:"files,omitempty"`
}

// alpineOSRelease is alpine:3.21's /etc/os-release.
const alpineOSRelease = `NAME="Alpine Linux"
ID=alpine
VERSION_ID=3.21.3
PRETTY_NAME="Alpine Linux v3.21"
HOME_URL="https://alpinelinux.org/"
BUG_REPORT_URL="https://gitlab.alpinelinux.org/alpine/aports/-/issues"
`

// ImageTable maps image names (without tag or digest, docker.io/library/
// implied) to how they run.
type ImageTable map[string]Image

// DefaultImages make upstream's tutorial manifests run unchanged.
func DefaultImages() ImageTable {
	// agnhost's image is Alpine with bind-tools, curl, netcat-openbsd and
	// iproute2 over busybox: the host's tools first, busybox for the rest.
	// Without arguments it pauses (its CMD), as upstream's DaemonSet
	// conformance pods expect.
	// Its image holds coredns too, which upstream's DNS tests run.
	// Its base is alpine:3.21, whose /etc/os-release it keeps (upstream's
	// ImageVolume test reads it from the kitten image, built on agnhost).
	agnhost := Image{Builtin: builtin.Agnhost, Binaries: []string{"/agnhost", "/agnhost-2", "agnhost"}, Cmd: []string{"pause"}, Applets: "busybox",
		Programs: map[string]string{"/coredns": builtin.CoreDNS}, LocalhostCert: true,
		Executables: []string{"curl", "wget", "nc", "dig", "nslookup", "host", "ip", "getent"},
		Files:       map[string]string{"/etc/os-release": alpineOSRelease}}
	pause := Image{Builtin: builtin.Pause, Binaries: []string{"/pause", "pause"}}
	busybox := Image{Host: "busybox", Cmd: []string{"sh"}}
	coredns := Image{Builtin: builtin.CoreDNS, Binaries: []string{"/coredns", "coredns"}}
	kubectl := Image{Entrypoint: []string{"kubectl"}, Executables: []string{"kubectl"}}
	ingress := Image{Builtin: builtin.IngressController, Binaries: []string{"/svcnet-ingress", "svcnet-ingress"}}
	nautilus, kitten := updateDemoImage(agnhost, "nautilus", paintNautilus), updateDemoImage(agnhost, "kitten", paintKitten)
	// upstream's sample-apiserver image: Alpine, the server at
	// /sample-apiserver (its ENTRYPOINT).
	sampleAPIServer := Image{Builtin: builtin.SampleAPIServer, Binaries: []string{"/sample-apiserver"},
		Entrypoint: []string{"/sample-apiserver"}, Applets: "busybox"}
	// Kubernetes' etcd image: etcd at /usr/local/bin, no ENTRYPOINT or
	// CMD; etcd's own images run it by their CMD.
	k8sEtcd := Image{Builtin: builtin.Etcd, Binaries: []string{"/usr/local/bin/etcd", "etcd"}}
	etcd := Image{Builtin: builtin.Etcd, Binaries: []string{"/usr/local/bin/etcd", "etcd"}, Cmd: []string{"/usr/local/bin/etcd"}}
	return ImageTable{
		"nginx":                       {Builtin: builtin.Nginx, Binaries: []string{"nginx", "/usr/sbin/nginx", "/docker-entrypoint.sh"}},
		"nginxinc/nginx-unprivileged": {Builtin: builtin.Nginx, Binaries: []string{"nginx", "/usr/sbin/nginx"}},
		"httpd":                       {Builtin: builtin.Httpd, Binaries: []string{"httpd-foreground", "httpd"}},
		"registry.k8s.io/e2e-test-images/agnhost": agnhost,
		"k8s.gcr.io/e2e-test-images/agnhost":      agnhost,
		"registry.k8s.io/pause":                   pause,
		"k8s.gcr.io/pause":                        pause,
		"hashicorp/http-echo":                     {Builtin: builtin.HTTPEcho, Binaries: []string{"/http-echo", "http-echo"}},
		"curlimages/curl":                         {Entrypoint: []string{"curl"}, Executables: []string{"curl"}},
		"registry.k8s.io/kubectl":                 kubectl,
		"bitnami/kubectl":                         kubectl,
		"busybox":                                 busybox,
		"registry.k8s.io/e2e-test-images/busybox": busybox,
		"gcr.io/google-containers/busybox":        busybox,
		"registry.k8s.io/e2e-test-images/nginx":   {Builtin: builtin.Nginx, Binaries: []string{"nginx"}},
		"registry.k8s.io/nginx-slim":              {Builtin: builtin.Nginx, Binaries: []string{"nginx"}},
		"registry.k8s.io/e2e-test-images/httpd":   {Builtin: builtin.Httpd, Binaries: []string{"httpd-foreground", "httpd"}},
		// kubectl's Update Demo tests: agnhost's test-webserver with a
		// picture and its data.json.
		"registry.k8s.io/e2e-test-images/nautilus": nautilus,
		"registry.k8s.io/e2e-test-images/kitten":   kitten,
		"registry.k8s.io/serve_hostname":           {Builtin: builtin.Agnhost, Cmd: []string{"serve-hostname"}},
		"registry.k8s.io/coredns/coredns":          coredns,
		// Debian with dnsutils and coredns at /coredns: glibc's resolver
		// for upstream's DNS tests.
		"registry.k8s.io/e2e-test-images/glibc-dns-testing": {Applets: "busybox", Cmd: []string{"sh"},
			Programs:    map[string]string{"/coredns": builtin.CoreDNS},
			Executables: []string{"dig", "nslookup", "host", "getent"}},
		"coredns/coredns":              coredns,
		"svcnet.io/ingress-controller": ingress,
		// The server of upstream's conntrack test for invalid
		// out-of-window segments (kubernetes#74839).
		"registry.k8s.io/e2e-test-images/regression-issue-74839": {Builtin: builtin.BoomServer, Binaries: []string{"/regression-issue-74839"}},
		// The aggregated API server of upstream's Aggregator conformance
		// test, with an etcd of its own in the pod.
		"registry.k8s.io/e2e-test-images/sample-apiserver": sampleAPIServer,
		"k8s.gcr.io/e2e-test-images/sample-apiserver":      sampleAPIServer,
		"registry.k8s.io/etcd":                             k8sEtcd,
		"k8s.gcr.io/etcd":                                  k8sEtcd,
		"gcr.io/etcd-development/etcd":                     etcd,
		"quay.io/coreos/etcd":                              etcd,
		// A setuid-root program that prints its effective uid: upstream's
		// tests of allowPrivilegeEscalation.
		"registry.k8s.io/e2e-test-images/nonewprivs": {Builtin: builtin.Nonewprivs, Binaries: []string{"/usr/local/bin/nnp", "nnp"},
			Cmd: []string{"nnp"}, Setuid: "/usr/local/bin/nnp", Applets: "busybox"},
		// kube-proxy's base image, with the netfilter tools: upstream's
		// tests read a node's conntrack table from it.
		"registry.k8s.io/build-image/distroless-iptables": {Applets: "busybox", Cmd: []string{"sh"},
			Executables: []string{"iptables", "ip6tables", "iptables-save", "nft", "conntrack"}},
	}
}

// LoadImageTable reads a YAML or JSON file of image entries and lays them
// over the defaults.
func LoadImageTable(file string) (ImageTable, error) {
	t := DefaultImages()
	if file == "" {
		return t, nil
	}
	b, err := os.ReadFile(file)
	if err != nil {
		return nil, fmt.Errorf("read image table: %w", err)
	}
	var extra ImageTable
	if err := yaml.UnmarshalStrict(b, &extra); err != nil {
		return nil, fmt.Errorf("parse image table %s: %w", file, err)
	}
	for name, img := range extra {
		for p := range img.Files {
			if !path.IsAbs(p) || path.Clean(p) != p {
				return nil, fmt.Errorf("image table %s: image %s: file %q: not an absolute, clean path", file, name, p)
			}
		}
		t[imageName(name)] = img
	}
	return t, nil
}

// imageName strips the tag, the digest and the implied docker.io/library/.
func imageName(ref string) string {
	if i := strings.IndexByte(ref, '@'); i >= 0 {
		ref = ref[:i]
	}
	if i := strings.LastIndexByte(ref, ':'); i > strings.LastIndexByte(ref, '/') {
		ref = ref[:i]
	}
	for _, p := range []string{"docker.io/", "index.docker.io/"} {
		ref = strings.TrimPrefix(ref, p)
	}
	return strings.TrimPrefix(ref, "library/")
}

// imageRef is the fully qualified reference a runtime reports for image.
func imageRef(image string) string {
	name := imageName(image)
	tag := "latest"
	rest := image
	if i := strings.IndexByte(rest, '@'); i >= 0 {
		rest = rest[:i]
	}
	if i := strings.LastIndexByte(rest, ':'); i > strings.LastIndexByte(rest, '/') {
		tag = rest[i+1:]
	}
	first, _, found := strings.Cut(name, "/")
	if !found || !strings.ContainsAny(first, ".:") && first != "localhost" {
		if !found {
			name = "library/" + name
		}
		name = "docker.io/" + name
	}
	return name + ":" + tag
}

// errImageUnknown is an image the table does not know for a container
// without a command: nothing to run.
type errImageUnknown struct{ image string }

func (e errImageUnknown) Error() string {
	return fmt.Sprintf("svcnet pulls no images: image %q has no entry in the node's image table and the container sets no command; "+
		"map it with `svcnet node --image-table FILE` (or `svcnet up --image-table FILE`), or give the container a command that runs on the host",
		e.image)
}

// command is what a container runs: the executable and its argv.
type command struct {
	path string
	argv []string
	// imageID is what the container status reports as the image's ID.
	imageID string
	// builtin is set for a built-in program, which says when it has
	// started (containerSpec.WaitReady).
	builtin bool
}

// tableRun is what a container of an image in the table runs.
type tableRun struct {
	img Image
	// program is the built-in program argv are the arguments of; ""
	// when argv is a command of the image's own.
	program string
	argv    []string
	// argv0 is the path in the image the built-in program was started
	// by (agnhost's /agnhost or /agnhost-2), which it sees as its name.
	argv0 string
}

// plan applies the image's entrypoint and CMD to the container's command
// and args as a container runtime does, and tells a run of the built-in
// program from a command (a shell) of the image's; known is false for an
// image the table does not hold.
func (t ImageTable) plan(c *corev1.Container) (run tableRun, known bool) {
	img, known := t[imageName(c.Image)]
	if !known {
		return tableRun{}, false
	}
	argv := img.Entrypoint
	switch {
	case len(c.Command) > 0:
		argv = append(append([]string{}, c.Command...), c.Args...)
	case len(c.Args) > 0:
		argv = append(append([]string{}, argv...), c.Args...)
	default:
		argv = append(append([]string{}, argv...), img.Cmd...)
	}
	if len(argv) > 0 && img.Programs[argv[0]] != "" {
		return tableRun{img: img, program: img.Programs[argv[0]], argv: argv[1:], argv0: argv[0]}, true
	}
	if img.Builtin != "" {
		if len(argv) > 0 && slices.Contains(img.Binaries, argv[0]) {
			return tableRun{img: img, program: img.Builtin, argv: argv[1:], argv0: argv[0]}, true
		}
		if len(c.Command) == 0 {
			// The image's entrypoint: its first binary.
			return tableRun{img: img, program: img.Builtin, argv: argv, argv0: cmp.Or(append(slices.Clone(img.Binaries), img.Builtin)...)}, true
		}
	}
	return tableRun{img: img, argv: argv}, true
}

// builtinArgv is the command line that runs run's built-in program from
// the svcnet executable self: after "--", the program's own argv, its
// name first.
func builtinArgv(self string, run tableRun, c *corev1.Container) []string {
	return append([]string{self, "node", "image", run.program, "--ports=" + tcpPorts(c), "--", run.argv0}, run.argv...)
}

// resolve maps the container's command to a host process: the built-in
// program, the host executable that plays the image, or a command from
// the host's PATH.
func (t ImageTable) resolve(self string, c *corev1.Container) (command, error) {
	run, known := t.plan(c)
	switch {
	case !known && len(c.Command) == 0:
		return command{}, errImageUnknown{image: c.Image}
	case !known:
		return hostCommand(append(append([]string{}, c.Command...), c.Args...), "host://"+c.Image)
	case run.program != "":
		return command{path: self, argv: builtinArgv(self, run, c), imageID: "svcnet://builtin/" + run.program, builtin: true}, nil
	case len(run.argv) == 0:
		return command{}, fmt.Errorf("image %q has no command to run", c.Image)
	case run.img.Host != "":
		p, err := exec.LookPath(run.img.Host)
		if err != nil {
			return command{}, fmt.Errorf("image %q runs the host's %s: %w", c.Image, run.img.Host, err)
		}
		// The host binary picks its applet by argv[0].
		argv := append([]string{path.Base(run.argv[0])}, run.argv[1:]...)
		return command{path: p, argv: argv, imageID: "host://" + p}, nil
	}
	// A command from elsewhere in the image (a shell): the host's.
	return hostCommand(run.argv, "host://"+imageName(c.Image))
}

// hostCommand runs argv[0] from the host's PATH.
func hostCommand(argv []string, imageID string) (command, error) {
	p, err := exec.LookPath(argv[0])
	if err != nil {
		return command{}, fmt.Errorf("exec: %q: executable file not found on the node: %w", argv[0], err)
	}
	return command{path: p, argv: argv, imageID: imageID}, nil
}

// tcpPorts lists the container's TCP ports for the built-in servers.
func tcpPorts(c *corev1.Container) string {
	var ps []string
	for _, p := range c.Ports {
		if p.Protocol == "" || p.Protocol == corev1.ProtocolTCP {
			ps = append(ps, strconv.Itoa(int(p.ContainerPort)))
		}
	}
	return strings.Join(ps, ",")
}
