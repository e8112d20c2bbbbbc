package e2e

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/miekg/dns"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/svcnet/svcnet/internal/dns/dnstest"
	"github.com/svcnet/svcnet/internal/netns"
)

// resolver asks DNS questions from inside a network namespace.
type resolver struct {
	nsPath string
	server string // host:port
}

func (r resolver) ask(t *testing.T, network, name string, qtype uint16) *dns.Msg {
	t.Helper()
	resp, err := r.exchange(t, network, name, qtype)
	if err != nil {
		t.Fatalf("%s %s from %s: %v", name, dns.TypeToString[qtype], r.nsPath, err)
	}
	return resp
}

func (r resolver) exchange(t *testing.T, network, name string, qtype uint16) (*dns.Msg, error) {
	var conn net.Conn
	err := netns.Do(r.nsPath, func() (err error) {
		conn, err = net.DialTimeout(network, r.server, 2*time.Second)
		return err
	})
	if err != nil {
		return nil, err
	}
	defer conn.Close()
	c := &dns.Client{Net: network, Timeout: 2 * time.Second}
	resp, _, err := c.ExchangeWithConn(new(dns.Msg).SetQuestion(name, qtype), &dns.Conn{Conn: conn})
	return resp, err
}

// addresses are the A/AAAA records of an answer, sorted.
func addresses(m *dns.Msg) []string {
	var out []string
	for _, rr := range m.Answer {
		switch rr := rr.(type) {
		case *dns.A:
			out = append(out, rr.A.String())
		case *dns.AAAA:
			out = append(out, rr.AAAA.String())
		}
	}
	slices.Sort(out)
	return out
}

// testResolver is the node's upstream in the test: it knows two external
// names, denies the rest, and records what it was asked.
type testResolver struct {
	mu    sync.Mutex
	asked []string
}

func (u *testResolver) ServeDNS(w dns.ResponseWriter, r *dns.Msg) {
	q := r.Question[0]
	u.mu.Lock()
	u.asked = append(u.asked, strings.ToLower(q.Name))
	u.mu.Unlock()
	m := new(dns.Msg).SetReply(r)
	m.RecursionAvailable = true
	known := map[string]string{"my.database.example.com.": "192.0.2.10", "www.example.org.": "192.0.2.20"}
	if ip, ok := known[strings.ToLower(q.Name)]; ok {
		if q.Qtype == dns.TypeA {
			m.Answer = append(m.Answer, &dns.A{Hdr: dns.RR_Header{Name: q.Name, Rrtype: dns.TypeA, Class: dns.ClassINET, Ttl: 60}, A: net.ParseIP(ip)})
		}
	} else {
		m.Rcode = dns.RcodeNameError
	}
	_ = w.WriteMsg(m)
}

func (u *testResolver) questions() []string {
	u.mu.Lock()
	defer u.mu.Unlock()
	return slices.Clone(u.asked)
}

// startDNSCluster starts a node cluster whose DNS forwards to a test
// resolver, and a busybox pod to ask from; it returns a resolver in that
// pod aimed at a coredns pod.
func startDNSCluster(t *testing.T) (*nodeCluster, resolver, *testResolver) {
	c, upstream := startClusterWithUpstream(t)
	c.pod("client", "busybox", "    command: [sleep, \"3600\"]\n")
	c.waitReady("client", "True", 30*time.Second)
	coredns := strings.Fields(c.must("get", "pods", "-n", "kube-system", "-l", "k8s-app=kube-dns", "-o", "jsonpath={.items[*].status.podIP}"))
	if len(coredns) == 0 {
		t.Fatal("no coredns pod has an address")
	}
	return c, resolver{nsPath: c.netnsOf("client"), server: net.JoinHostPort(coredns[0], "53")}, upstream
}

// upstreamOutside is the outside machine (outsideClient's index) that
// plays the Internet's resolver in DNS tests.
const upstreamOutside = 9

// startClusterWithUpstream starts a node cluster whose DNS forwards other
// names to a test resolver on a machine outside the cluster, the
// Internet's resolver for the test: it knows two names and answers
// NXDOMAIN for the rest.
func startClusterWithUpstream(t *testing.T) (*nodeCluster, *testResolver) {
	addr := fmt.Sprintf("172.31.254.%d:53", 4*upstreamOutside+2) // outsideClient's address
	c := startNodeCluster(t, "--dns-upstream", addr)
	outside := outsideClient(t, c.netns, upstreamOutside)
	if outside.ip+":53" != addr {
		t.Fatalf("the outside resolver is at %s, not %s", outside.ip, addr)
	}
	upstream := &testResolver{}
	var pc net.PacketConn
	var ln net.Listener
	if err := netns.Do(outside.ns, func() (err error) {
		if pc, err = net.ListenPacket("udp", addr); err != nil {
			return err
		}
		if ln, err = net.Listen("tcp", addr); err != nil {
			pc.Close()
		}
		return err
	}); err != nil {
		t.Fatalf("test resolver outside the cluster: %v", err)
	}
	dnstest.ServeOn(t, pc, ln, upstream)
	return c, upstream
}

func TestNodeDNS(t *testing.T) {
	t.Parallel()
	c, r, upstream := startDNSCluster(t)
	c.withStdin(`apiVersion: v1
kind: Service
metadata: {name: nginx}
spec:
  selector: {app: nginx}
  ports: [{name: http, port: 8080, targetPort: 80}]
---
apiVersion: v1
kind: Service
metadata: {name: my-db}
spec: {type: ExternalName, externalName: my.database.example.com}
---
apiVersion: v1
kind: Namespace
metadata: {name: stateful}
---
apiVersion: v1
kind: Service
metadata: {name: nginx, namespace: stateful}
spec:
  clusterIP: None
  selector: {app: web}
  ports: [{name: web, port: 80}]
---
apiVersion: apps/v1
kind: StatefulSet
metadata: {name: web, namespace: stateful}
spec:
  serviceName: nginx
  replicas: 3
  podManagementPolicy: Parallel
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web}}
    spec:
      terminationGracePeriodSeconds: 1
      containers:
      - {name: main, image: nginx, ports: [{containerPort: 80}]}
`, "apply", "-f", "-")
	c.pod("nginx", "nginx", "    ports: [{containerPort: 80}]\n")
	clusterIP := c.jsonpath("service", "nginx", "{.spec.clusterIP}")
	const zone = ".svc.cluster.local."

	t.Run("kube-dns selects the coredns pods", func(t *testing.T) {
		if ip := c.must("get", "service", "kube-dns", "-n", "kube-system", "-o", "jsonpath={.spec.clusterIP} {.spec.ports[*].name} {.spec.selector}"); ip != `10.96.0.10 dns dns-tcp metrics {"k8s-app":"kube-dns"}` {
			t.Errorf("kube-dns Service: %q", ip)
		}
		// address/node of each, sorted
		sorted := func(out string) string {
			f := strings.Fields(out)
			slices.Sort(f)
			return strings.Join(f, " ")
		}
		pods := sorted(c.must("get", "pods", "-n", "kube-system", "-l", "k8s-app=kube-dns",
			"-o", "jsonpath={range .items[*]}{.status.podIP}/{.spec.nodeName} {end}"))
		if len(strings.Fields(pods)) != 2 {
			t.Fatalf("coredns pods: %q, want kubeadm's two", pods)
		}
		eventually(t, 10*time.Second, func() string {
			got := sorted(c.must("get", "endpointslices", "-n", "kube-system", "-l", "kubernetes.io/service-name=kube-dns",
				"-o", "jsonpath={range .items[*].endpoints[*]}{.addresses[0]}/{.nodeName} {end}"))
			if got != pods {
				return "kube-dns endpoints: " + got + ", coredns pods: " + pods
			}
			return ""
		})
	})

	t.Run("ClusterIP Service", func(t *testing.T) {
		for _, network := range []string{"udp", "tcp"} {
			resp := r.ask(t, network, "nginx.default"+zone, dns.TypeA)
			if !resp.Authoritative || !slices.Equal(addresses(resp), []string{clusterIP}) || resp.Answer[0].Header().Ttl != 30 {
				t.Errorf("%s A: %v", network, resp)
			}
		}
		// NODATA: the name exists, it has no AAAA; the SOA says for how long.
		resp := r.ask(t, "udp", "nginx.default"+zone, dns.TypeAAAA)
		if resp.Rcode != dns.RcodeSuccess || len(resp.Answer) != 0 || len(resp.Ns) != 1 ||
			resp.Ns[0].String() != fmt.Sprintf("cluster.local.\t30\tIN\tSOA\tns.dns.cluster.local. hostmaster.cluster.local. %d 7200 1800 86400 30", resp.Ns[0].(*dns.SOA).Serial) {
			t.Errorf("AAAA of an IPv4 Service (NODATA): %v", resp)
		}
		resp = r.ask(t, "udp", "_http._tcp.nginx.default"+zone, dns.TypeSRV)
		if len(resp.Answer) != 1 || resp.Answer[0].String() != "_http._tcp.nginx.default.svc.cluster.local.\t30\tIN\tSRV\t0 100 8080 nginx.default.svc.cluster.local." ||
			len(resp.Extra) != 1 || addresses(&dns.Msg{Answer: resp.Extra})[0] != clusterIP {
			t.Errorf("SRV: %v", resp)
		}
		resp = r.ask(t, "udp", reverse(t, clusterIP), dns.TypePTR)
		if len(resp.Answer) != 1 || resp.Answer[0].(*dns.PTR).Ptr != "nginx.default"+zone {
			t.Errorf("PTR of the cluster IP: %v", resp)
		}
	})

	t.Run("search path", func(t *testing.T) {
		// The pod's resolv.conf, as libc reads it: ndots 5 and the
		// namespace's search list turn short names into Service names
		// (the default dnsPolicy, ClusterFirst).
		uid := c.jsonpath("pod", "client", "{.metadata.uid}")
		conf, err := dns.ClientConfigFromFile(filepath.Join(c.dataDir, "node", "pods", uid, "etc", "resolv.conf"))
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(conf.Servers, []string{"10.96.0.10"}) || conf.Ndots != 5 {
			t.Errorf("pod resolv.conf: servers %v ndots %d", conf.Servers, conf.Ndots)
		}
		// Asked where the pod asks: the kube-dns ClusterIP, through the
		// Service proxy to a coredns pod.
		viaService := resolver{nsPath: r.nsPath, server: net.JoinHostPort(conf.Servers[0], conf.Port)}
		for _, short := range []string{"nginx", "nginx.default", "nginx.default.svc", "nginx.default.svc.cluster.local"} {
			var got []string
			for _, name := range conf.NameList(short) {
				if resp := viaService.ask(t, "udp", name, dns.TypeA); resp.Rcode == dns.RcodeSuccess && len(resp.Answer) > 0 {
					got = addresses(resp)
					break
				}
			}
			if !slices.Equal(got, []string{clusterIP}) {
				t.Errorf("%s resolves to %v, want %s", short, got, clusterIP)
			}
		}
	})

	t.Run("from a pod through the kube-dns ClusterIP", func(t *testing.T) {
		// What a pod with the default dnsPolicy does: ask 10.96.0.10,
		// which the Service proxy sends to a coredns pod.
		viaService := resolver{nsPath: r.nsPath, server: "10.96.0.10:53"}
		for _, network := range []string{"udp", "tcp"} {
			resp := viaService.ask(t, network, "nginx.default"+zone, dns.TypeA)
			if !slices.Equal(addresses(resp), []string{clusterIP}) {
				t.Errorf("%s via 10.96.0.10: %v", network, resp)
			}
		}
		resp := viaService.ask(t, "udp", "_http._tcp.nginx.default"+zone, dns.TypeSRV)
		if len(resp.Answer) != 1 || resp.Answer[0].(*dns.SRV).Port != 8080 {
			t.Errorf("SRV via 10.96.0.10: %v", resp)
		}
	})

	t.Run("headless Service of a StatefulSet", func(t *testing.T) {
		var podIPs []string
		eventually(t, 30*time.Second, func() string {
			podIPs = strings.Fields(c.must("get", "pods", "-n", "stateful", "-o", "jsonpath={.items[*].status.podIP}"))
			slices.Sort(podIPs)
			if got := addresses(r.ask(t, "udp", "nginx.stateful"+zone, dns.TypeA)); len(podIPs) != 3 || !slices.Equal(got, podIPs) {
				return fmt.Sprintf("headless answers %v, pods have %v", got, podIPs)
			}
			return ""
		})
		web0 := c.must("get", "pod", "web-0", "-n", "stateful", "-o", "jsonpath={.status.podIP}")
		if got := addresses(r.ask(t, "udp", "web-0.nginx.stateful"+zone, dns.TypeA)); !slices.Equal(got, []string{web0}) {
			t.Errorf("web-0 is %v, want %s", got, web0)
		}
		resp := r.ask(t, "tcp", "_web._tcp.nginx.stateful"+zone, dns.TypeSRV)
		var targets []string
		for _, rr := range resp.Answer {
			srv := rr.(*dns.SRV)
			if srv.Port != 80 || srv.Weight != 33 || srv.Priority != 0 {
				t.Errorf("SRV %v", srv)
			}
			targets = append(targets, srv.Target)
		}
		slices.Sort(targets)
		if want := []string{"web-0.nginx.stateful" + zone, "web-1.nginx.stateful" + zone, "web-2.nginx.stateful" + zone}; !slices.Equal(targets, want) {
			t.Errorf("SRV targets %v, want %v", targets, want)
		}
		if got := addresses(&dns.Msg{Answer: resp.Extra}); !slices.Equal(got, podIPs) {
			t.Errorf("SRV additional addresses %v, want %v", got, podIPs)
		}
		resp = r.ask(t, "udp", reverse(t, web0), dns.TypePTR)
		if len(resp.Answer) != 1 || resp.Answer[0].(*dns.PTR).Ptr != "web-0.nginx.stateful"+zone {
			t.Errorf("PTR of web-0: %v", resp)
		}

		// The StatefulSet recreates a deleted web-0 with a new address:
		// the name follows the EndpointSlice within a second.
		// Not --wait: the StatefulSet recreates web-0 under the same name,
		// and the name following it below is what this test is about.
		c.must("delete", "pod", "web-0", "-n", "stateful", "--wait=false")
		sliceClient := c.clientset().DiscoveryV1().EndpointSlices("stateful")
		var sliceAt, dnsAt time.Time
		var newIP string
		eventually(t, 30*time.Second, func() string {
			if sliceAt.IsZero() {
				if ip := web0Address(t, sliceClient); ip != "" && ip != web0 {
					sliceAt, newIP = time.Now(), ip
				}
			}
			if !sliceAt.IsZero() && dnsAt.IsZero() {
				if got := addresses(r.ask(t, "udp", "web-0.nginx.stateful"+zone, dns.TypeA)); isOnly(got, newIP) {
					dnsAt = time.Now()
				}
			}
			if dnsAt.IsZero() {
				return fmt.Sprintf("web-0 not yet at its new address (slice seen at %v)", sliceAt)
			}
			return ""
		})
		if lag := dnsAt.Sub(sliceAt); lag > time.Second {
			t.Errorf("DNS followed the EndpointSlice after %s, want within 1s", lag)
		}
	})

	t.Run("ExternalName and forwarding", func(t *testing.T) {
		resp := r.ask(t, "udp", "my-db.default"+zone, dns.TypeA)
		if len(resp.Answer) != 2 || resp.Answer[0].String() != "my-db.default.svc.cluster.local.\t30\tIN\tCNAME\tmy.database.example.com." ||
			resp.Answer[1].(*dns.A).A.String() != "192.0.2.10" {
			t.Errorf("ExternalName: %v", resp)
		}
		resp = r.ask(t, "udp", "www.example.org.", dns.TypeA)
		if resp.Authoritative || !slices.Equal(addresses(resp), []string{"192.0.2.20"}) {
			t.Errorf("forwarded name: %v", resp)
		}
		if resp := r.ask(t, "udp", "nope.example.org.", dns.TypeA); resp.Rcode != dns.RcodeNameError {
			t.Errorf("unknown outside name: %v", resp)
		}
	})

	t.Run("NXDOMAIN and the schema version", func(t *testing.T) {
		for _, name := range []string{"nope.default" + zone, "nginx.nowhere" + zone, "web-9.nginx.stateful" + zone} {
			resp := r.ask(t, "udp", name, dns.TypeA)
			if resp.Rcode != dns.RcodeNameError || !resp.Authoritative || len(resp.Ns) != 1 || resp.Ns[0].Header().Rrtype != dns.TypeSOA {
				t.Errorf("%s: %v", name, resp)
			}
		}
		resp := r.ask(t, "udp", "dns-version.cluster.local.", dns.TypeTXT)
		if len(resp.Answer) != 1 || resp.Answer[0].String() != "dns-version.cluster.local.\t28800\tIN\tTXT\t\"1.1.0\"" {
			t.Errorf("dns-version: %v", resp)
		}
		// No question about the cluster domain went upstream.
		for _, q := range upstream.questions() {
			if dns.IsSubDomain("cluster.local.", q) {
				t.Errorf("%s was forwarded upstream", q)
			}
		}
	})
}

// isOnly reports whether got is exactly one.
func isOnly(got []string, one string) bool { return len(got) == 1 && got[0] == one }

// web0Address is web-0's address in the headless Service's slices.
func web0Address(t *testing.T, client interface {
	List(context.Context, metav1.ListOptions) (*discoveryv1.EndpointSliceList, error)
}) string {
	t.Helper()
	list, err := client.List(context.Background(), metav1.ListOptions{LabelSelector: "kubernetes.io/service-name=nginx"})
	if err != nil {
		t.Fatal(err)
	}
	for _, es := range list.Items {
		for _, e := range es.Endpoints {
			if e.Hostname != nil && *e.Hostname == "web-0" && len(e.Addresses) > 0 && (e.Conditions.Ready == nil || *e.Conditions.Ready) {
				return e.Addresses[0]
			}
		}
	}
	return ""
}

func reverse(t *testing.T, ip string) string {
	t.Helper()
	name, err := dns.ReverseAddr(ip)
	if err != nil {
		t.Fatal(err)
	}
	return name
}

// TestDNSAlone: `svcnet dns --conf` serves the cluster from a Corefile, as
// the coredns pods do, and reads it again when it changes (reload).
func TestDNSAlone(t *testing.T) {
	t.Parallel()
	c := startCluster(t)
	port := freePort(t)
	corefile := filepath.Join(t.TempDir(), "Corefile")
	write := func(ttl int) {
		t.Helper()
		conf := fmt.Sprintf(`.:%d {
    kubernetes cluster.local in-addr.arpa ip6.arpa {
       ttl %d
       kubeconfig %s
    }
    reload
}
`, port, ttl, c.kubeconfig())
		if err := os.WriteFile(corefile, []byte(conf), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write(30)
	cmd := exec.Command(binary, "dns", "--conf", corefile)
	var log logBuffer
	cmd.Stdout, cmd.Stderr = &log, &log
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		if err := cmd.Wait(); err != nil {
			t.Errorf("svcnet dns: %v\n%s", err, log.String())
		}
	})
	r := resolver{server: fmt.Sprintf("127.0.0.1:%d", port)}
	ttlOf := func() uint32 {
		resp, err := r.exchange(t, "udp", "kubernetes.default.svc.cluster.local.", dns.TypeA)
		if err != nil || len(resp.Answer) != 1 || resp.Answer[0].(*dns.A).A.String() != "10.96.0.1" {
			return 0
		}
		return resp.Answer[0].Header().Ttl
	}
	eventually(t, 10*time.Second, func() string {
		if got := ttlOf(); got != 30 {
			return fmt.Sprintf("kubernetes.default answers with TTL %d; log:\n%s", got, log.String())
		}
		return ""
	})
	write(7)
	eventually(t, 15*time.Second, func() string {
		if got := ttlOf(); got != 7 {
			return fmt.Sprintf("after the Corefile changed, TTL %d; log:\n%s", got, log.String())
		}
		return ""
	})
}
