package node

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestExpand(t *testing.T) {
	vars := map[string]string{"A": "1", "B": "two"}
	lookup := func(k string) (string, bool) { v, ok := vars[k]; return v, ok }
	for in, want := range map[string]string{
		"plain":           "plain",
		"$(A)-$(B)":       "1-two",
		"$$(A)":           "$(A)",
		"$(MISSING)":      "$(MISSING)",
		"$(A":             "$(A",
		"cost $5 $(A)":    "cost $5 1",
		"trailing $":      "trailing $",
		"$$$(A)":          "$1",
		"$(A)$(A)$$$$(B)": "11$$(B)",
	} {
		if got := expand(in, lookup); got != want {
			t.Errorf("expand(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestServiceLinks(t *testing.T) {
	env := map[string]string{}
	serviceLinks(env, &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "my-svc.v2"},
		Spec: corev1.ServiceSpec{ClusterIP: "10.96.0.20", Ports: []corev1.ServicePort{
			{Port: 80, Protocol: corev1.ProtocolTCP},
			{Name: "dns-udp", Port: 53, Protocol: corev1.ProtocolUDP},
		}},
	})
	want := map[string]string{
		"MY_SVC_V2_SERVICE_HOST":         "10.96.0.20",
		"MY_SVC_V2_SERVICE_PORT":         "80",
		"MY_SVC_V2_SERVICE_PORT_DNS_UDP": "53",
		"MY_SVC_V2_PORT":                 "tcp://10.96.0.20:80",
		"MY_SVC_V2_PORT_80_TCP":          "tcp://10.96.0.20:80",
		"MY_SVC_V2_PORT_80_TCP_PROTO":    "tcp",
		"MY_SVC_V2_PORT_80_TCP_PORT":     "80",
		"MY_SVC_V2_PORT_80_TCP_ADDR":     "10.96.0.20",
		"MY_SVC_V2_PORT_53_UDP":          "udp://10.96.0.20:53",
		"MY_SVC_V2_PORT_53_UDP_PROTO":    "udp",
		"MY_SVC_V2_PORT_53_UDP_PORT":     "53",
		"MY_SVC_V2_PORT_53_UDP_ADDR":     "10.96.0.20",
	}
	if d := cmp.Diff(want, env); d != "" {
		t.Errorf("service links (-want +got):\n%s", d)
	}
	if got := envName("3d-printer"); got != "_3D_PRINTER" {
		t.Errorf("envName = %q", got)
	}
}

func TestPodResolvConf(t *testing.T) {
	host := parseResolvConf([]byte("# host\nnameserver 192.0.2.53\nsearch corp.example\noptions edns0\n"))
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "shop"}}
	got := string(podResolvConf(pod, host, "10.96.0.10", "cluster.local"))
	want := "search shop.svc.cluster.local svc.cluster.local cluster.local corp.example\nnameserver 10.96.0.10\noptions ndots:5\n"
	if got != want {
		t.Errorf("ClusterFirst:\n%s\nwant\n%s", got, want)
	}
	pod.Spec.DNSPolicy = corev1.DNSDefault
	if got := string(podResolvConf(pod, host, "10.96.0.10", "cluster.local")); got != "search corp.example\nnameserver 192.0.2.53\noptions edns0\n" {
		t.Errorf("Default:\n%s", got)
	}
	two := "2"
	pod.Spec.DNSPolicy = corev1.DNSNone
	pod.Spec.DNSConfig = &corev1.PodDNSConfig{Nameservers: []string{"1.1.1.1"}, Searches: []string{"a.example"},
		Options: []corev1.PodDNSConfigOption{{Name: "ndots", Value: &two}, {Name: "rotate"}}}
	if got := string(podResolvConf(pod, host, "10.96.0.10", "cluster.local")); got != "search a.example\nnameserver 1.1.1.1\noptions ndots:2 rotate\n" {
		t.Errorf("None with dnsConfig:\n%s", got)
	}
}

func TestPodHosts(t *testing.T) {
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "web-0", Namespace: "shop"},
		Spec: corev1.PodSpec{Hostname: "web-0", Subdomain: "web", HostAliases: []corev1.HostAlias{{IP: "10.1.2.3", Hostnames: []string{"foo", "bar"}}}}}
	b, err := podHosts(pod, "10.244.0.7", "cluster.local")
	if err != nil {
		t.Fatal(err)
	}
	got := string(b)
	for _, want := range []string{"# Kubernetes-managed hosts file.\n127.0.0.1\tlocalhost\n", "10.244.0.7\tweb-0.web.shop.svc.cluster.local\tweb-0\n",
		"\n# Entries added by HostAliases.\n10.1.2.3\tfoo\tbar\n"} {
		if !strings.Contains(got, want) {
			t.Errorf("hosts lacks %q:\n%s", want, got)
		}
	}
}

func TestResolveImages(t *testing.T) {
	table := DefaultImages()
	for _, tc := range []struct {
		c    corev1.Container
		argv []string
	}{
		{corev1.Container{Image: "nginx:1.27", Ports: []corev1.ContainerPort{{ContainerPort: 8080}}},
			[]string{"/svcnet", "node", "image", "nginx", "--ports=8080", "--", "nginx"}},
		{corev1.Container{Image: "registry.k8s.io/e2e-test-images/agnhost:2.53", Args: []string{"netexec", "--http-port=8080"}},
			[]string{"/svcnet", "node", "image", "agnhost", "--ports=", "--", "/agnhost", "netexec", "--http-port=8080"}},
		{corev1.Container{Image: "registry.k8s.io/e2e-test-images/agnhost:2.66.1"},
			[]string{"/svcnet", "node", "image", "agnhost", "--ports=", "--", "/agnhost", "pause"}},
		{corev1.Container{Image: "registry.k8s.io/e2e-test-images/agnhost:2.53", Command: []string{"/agnhost", "serve-hostname"}},
			[]string{"/svcnet", "node", "image", "agnhost", "--ports=", "--", "/agnhost", "serve-hostname"}},
		{corev1.Container{Image: "docker.io/library/busybox:1.36", Command: []string{"/bin/sh", "-c", "true"}},
			[]string{"sh", "-c", "true"}},
		{corev1.Container{Image: "busybox"}, []string{"sh"}},
		// agnhost sees the path it was started by: /agnhost-2 is a copy.
		{corev1.Container{Image: "registry.k8s.io/e2e-test-images/agnhost:2.66.1", Command: []string{"/agnhost-2"}, Args: []string{"entrypoint-tester", "a"}},
			[]string{"/svcnet", "node", "image", "agnhost", "--ports=", "--", "/agnhost-2", "entrypoint-tester", "a"}},
		// agnhost's image holds coredns, which upstream's DNS tests run.
		{corev1.Container{Image: "registry.k8s.io/e2e-test-images/agnhost:2.66.1", Command: []string{"/coredns"}, Args: []string{"-conf", "/etc/coredns/Corefile"}},
			[]string{"/svcnet", "node", "image", "coredns", "--ports=", "--", "/coredns", "-conf", "/etc/coredns/Corefile"}},
		// The pod of upstream's Aggregator conformance test: the
		// sample-apiserver by its image's ENTRYPOINT, etcd by its path.
		{corev1.Container{Image: "registry.k8s.io/e2e-test-images/sample-apiserver:1.29.2", Args: []string{"--etcd-servers=http://127.0.0.1:2379", "--audit-log-path=-"}},
			[]string{"/svcnet", "node", "image", "sample-apiserver", "--ports=", "--", "/sample-apiserver", "--etcd-servers=http://127.0.0.1:2379", "--audit-log-path=-"}},
		{corev1.Container{Image: "registry.k8s.io/etcd:3.7.0-0", Command: []string{"/usr/local/bin/etcd", "--listen-client-urls", "http://127.0.0.1:2379"}},
			[]string{"/svcnet", "node", "image", "etcd", "--ports=", "--", "/usr/local/bin/etcd", "--listen-client-urls", "http://127.0.0.1:2379"}},
		{corev1.Container{Image: "gcr.io/etcd-development/etcd:v3.6.5"},
			[]string{"/svcnet", "node", "image", "etcd", "--ports=", "--", "/usr/local/bin/etcd"}},
	} {
		cmd, err := table.resolve("/svcnet", &tc.c)
		if err != nil {
			t.Errorf("%s: %v", tc.c.Image, err)
			continue
		}
		if d := cmp.Diff(tc.argv, cmd.argv); d != "" {
			t.Errorf("%s %v %v (-want +got):\n%s", tc.c.Image, tc.c.Command, tc.c.Args, d)
		}
	}
	_, err := table.resolve("/svcnet", &corev1.Container{Image: "example.com/app:1"})
	if _, ok := err.(errImageUnknown); !ok || !strings.Contains(err.Error(), `image "example.com/app:1" has no entry`) {
		t.Errorf("unknown image: %v", err)
	}
	for in, want := range map[string]string{
		"nginx": "docker.io/library/nginx:latest", "hashicorp/http-echo:1.0": "docker.io/hashicorp/http-echo:1.0",
		"registry.k8s.io/pause:3.10": "registry.k8s.io/pause:3.10", "localhost:5000/app": "localhost:5000/app:latest",
	} {
		if got := imageRef(in); got != want {
			t.Errorf("imageRef(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestLastLines(t *testing.T) {
	var recs []logRecord
	for _, l := range []string{
		"2026-01-01T00:00:00Z stdout F one",
		"2026-01-01T00:00:01Z stdout P tw",
		"2026-01-01T00:00:01Z stdout F o",
		"2026-01-01T00:00:02Z stderr F three",
	} {
		r, ok := parseLogLine([]byte(l))
		if !ok {
			t.Fatalf("parse %q", l)
		}
		recs = append(recs, r)
	}
	if got := lastLines(recs, 2); len(got) != 3 || string(got[0].content) != "tw" {
		t.Errorf("last 2 lines: %d records", len(got))
	}
	if got := lastLines(recs, 0); len(got) != 0 {
		t.Errorf("last 0 lines: %d records", len(got))
	}
	var b strings.Builder
	w := &logWriterTo{w: &b, opts: logOptions{timestamps: true}}
	for _, r := range recs[1:3] {
		if _, err := w.write(r); err != nil {
			t.Fatal(err)
		}
	}
	if b.String() != "2026-01-01T00:00:01Z two\n" {
		t.Errorf("partial records joined: %q", b.String())
	}
}

func TestPodHostname(t *testing.T) {
	for _, tc := range []struct {
		pod  corev1.Pod
		want string
	}{
		{corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "web-0"}}, "web-0"},
		{corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "web-0"}, Spec: corev1.PodSpec{Hostname: "db"}}, "db"},
		{corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "web-0"}, Spec: corev1.PodSpec{Hostname: "db", HostNetwork: true, NodeName: "node-a"}}, "node-a"},
		{corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: strings.Repeat("a", 62) + "-b"}}, strings.Repeat("a", 62)},
	} {
		if got := podHostname(&tc.pod); got != tc.want {
			t.Errorf("podHostname(%s, hostname %q, hostNetwork %v) = %q, want %q", tc.pod.Name, tc.pod.Spec.Hostname, tc.pod.Spec.HostNetwork, got, tc.want)
		}
	}
}

func TestSysctlName(t *testing.T) {
	for in, want := range map[string]string{
		"kernel.shm_rmid_forced":              "kernel.shm_rmid_forced",
		"kernel/shm_rmid_forced":              "kernel.shm_rmid_forced",
		"net/ipv4/conf/eno2.100/rp_filter":    "net.ipv4.conf.eno2/100.rp_filter",
		"net.ipv4.conf.eno2/100.rp_filter":    "net.ipv4.conf.eno2/100.rp_filter",
		"net.ipv4.ip_unprivileged_port_start": "net.ipv4.ip_unprivileged_port_start",
	} {
		if got := sysctlName(in); got != want {
			t.Errorf("sysctlName(%q) = %q, want %q", in, got, want)
		}
	}
}
