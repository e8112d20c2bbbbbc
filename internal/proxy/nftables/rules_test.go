package nftables

import (
	"net"
	"net/netip"
	"slices"
	"strings"
	"testing"

	gocmp "github.com/google/go-cmp/cmp"
	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/svcnet/svcnet/internal/proxy"
)

// testService is default/name on 10.96.0.x:8080 → :80 with ready
// endpoints on this node.
func testService(name string, proto corev1.Protocol, nodePort int32, ip byte, eps ...string) *proxy.Service {
	p := &proxy.ServicePort{Name: "", Protocol: proto, Port: 8080, NodePort: nodePort,
		ClusterIPs: []netip.Addr{netip.AddrFrom4([4]byte{10, 96, 0, 10 + ip})}}
	for _, e := range eps {
		p.Endpoints = append(p.Endpoints, proxy.Endpoint{Addr: netip.MustParseAddr(e), Port: 80, Ready: true, Serving: true, Local: true})
	}
	return &proxy.Service{Name: types.NamespacedName{Namespace: "default", Name: name}, Ports: []*proxy.ServicePort{p}}
}

var testNode = node{podCIDRs: []netip.Prefix{netip.MustParsePrefix("10.244.0.0/24")}}

func TestRenderLocalPolicyAffinityAndFirewall(t *testing.T) {
	s := testService("web", corev1.ProtocolTCP, 30080, 1, "10.244.0.5")
	p := s.Ports[0]
	p.Endpoints = append(p.Endpoints, proxy.Endpoint{Addr: netip.MustParseAddr("10.244.1.9"), Port: 80, Ready: true, Serving: true})
	p.ExternalLocal, p.AffinitySeconds = true, 60
	p.LoadBalancerIPs = []netip.Addr{netip.MustParseAddr("192.0.2.10")}
	p.SourceRanges = []netip.Prefix{netip.MustParsePrefix("198.51.100.0/24")}
	var c counts
	got := text(renderService(ipv4, testNode, s, &c))
	const ep0, ep1 = "endpoint-XJBAEG42-default/web/tcp/__10.244.0.5/80", "endpoint-RYKT42NN-default/web/tcp/__10.244.1.9/80"
	const aff0, aff1 = "affinity-XJBAEG42-default/web/tcp/__10.244.0.5/80", "affinity-RYKT42NN-default/web/tcp/__10.244.1.9/80"
	const svc, local, ext, fw = "service-PFISGYVC-default/web/tcp/", "local-PFISGYVC-default/web/tcp/",
		"external-PFISGYVC-default/web/tcp/", "firewall-PFISGYVC-default/web/tcp/"
	want := strings.NewReplacer("EP0", ep0, "EP1", ep1, "AFF0", aff0, "AFF1", aff1, "SVC", svc, "LOCAL", local, "EXT", ext, "FW", fw).Replace(`chain EP1
	ip saddr 10.244.1.9 jump mark-for-masquerade
	update @AFF1 { ip saddr }
	meta l4proto tcp dnat to 10.244.1.9:80
chain EP0
	ip saddr 10.244.0.5 jump mark-for-masquerade
	update @AFF0 { ip saddr }
	meta l4proto tcp dnat to 10.244.0.5:80
chain EXT
	ip saddr 10.244.0.0/24 goto SVC
	fib saddr type local jump mark-for-masquerade
	fib saddr type local goto SVC
	goto LOCAL
chain FW
	ip saddr 198.51.100.0/24 return
	drop
chain LOCAL
	ip saddr @AFF0 goto EP0
	goto EP0
chain SVC
	ip daddr 10.96.0.11 tcp dport 8080 ip saddr != 10.244.0.0/24 jump mark-for-masquerade
	ip saddr @AFF0 goto EP0
	ip saddr @AFF1 goto EP1
	numgen random mod 2 == 0 goto EP0
	goto EP1
set AFF1 timeout 1m0s
set AFF0 timeout 1m0s
element cluster-ips { 10.96.0.11 }
element firewall-ips { 192.0.2.10 . tcp . 8080 comment "default/web LoadBalancer" : goto FW }
element service-ips { 10.96.0.11 . tcp . 8080 comment "default/web ClusterIP" : goto SVC }
element service-ips { 192.0.2.10 . tcp . 8080 comment "default/web LoadBalancer" : goto EXT }
element service-nodeports { tcp . 30080 comment "default/web NodePort" : goto EXT }
`)
	if diff := gocmp.Diff(want, got); diff != "" {
		t.Errorf("rendered ruleset (-want +got):\n%s", diff)
	}
	if c != (counts{}) {
		t.Errorf("no-local-endpoint counts %+v", c)
	}
}

func TestRenderWithoutUsableEndpoints(t *testing.T) {
	var c counts
	// No endpoints at all: the cluster IP and the NodePort reject.
	got := text(renderService(ipv4, testNode, testService("empty", corev1.ProtocolTCP, 30081, 2), &c))
	want := `element cluster-ips { 10.96.0.12 }
element no-endpoint-nodeports { tcp . 30081 comment "default/empty NodePort" : goto reject-chain }
element no-endpoint-services { 10.96.0.12 . tcp . 8080 comment "default/empty ClusterIP" : goto reject-chain }
`
	if got != want {
		t.Errorf("without endpoints:\n%s\nwant:\n%s", got, want)
	}

	// internalTrafficPolicy Local with endpoints on other nodes only: the
	// cluster IP drops (not rejects), the NodePort still serves.
	s := testService("remote", corev1.ProtocolUDP, 30082, 3)
	s.Ports[0].InternalLocal = true
	s.Ports[0].Endpoints = []proxy.Endpoint{{Addr: netip.MustParseAddr("10.244.1.4"), Port: 53, Ready: true, Serving: true}}
	got = text(renderService(ipv4, testNode, s, &c))
	for _, want := range []string{
		`element no-endpoint-services { 10.96.0.13 . udp . 8080 comment "default/remote ClusterIP" : drop }`,
		`element service-nodeports { udp . 30082 comment "default/remote NodePort" : goto external-`,
		"meta l4proto udp dnat to 10.244.1.4:53",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("internalTrafficPolicy Local without local endpoints lacks %q:\n%s", want, got)
		}
	}
	if strings.Contains(got, "service-ips") {
		t.Errorf("the cluster IP is captured without a local endpoint:\n%s", got)
	}
	if c.noLocalInternal != 1 || c.noLocalExternal != 0 {
		t.Errorf("counts %+v", c)
	}
	// An IPv4 Service puts nothing in the ip6 table.
	if got := text(renderService(ipv6, testNode, s, &c)); got != "" {
		t.Errorf("ip6 table gets:\n%s", got)
	}
}

func TestPartialSyncTouchesOnlyWhatChanged(t *testing.T) {
	var c counts
	before := renderService(ipv4, testNode, testService("web", corev1.ProtocolTCP, 0, 1, "10.244.0.5", "10.244.0.6"), &c)
	after := renderService(ipv4, testNode, testService("web", corev1.ProtocolTCP, 0, 1, "10.244.0.6"), &c)
	p := &plan{}
	p.diff(before, after)
	var written []string
	for _, ch := range p.write {
		written = append(written, ch.name)
	}
	gone := "endpoint-XJBAEG42-default/web/tcp/__10.244.0.5/80"
	svc := "service-PFISGYVC-default/web/tcp/"
	if !gocmp.Equal(written, []string{svc}) || !gocmp.Equal(p.flush, []string{svc, gone}) || !gocmp.Equal(p.delChains, []string{gone}) {
		t.Errorf("plan writes %v, flushes %v, deletes %v", written, p.flush, p.delChains)
	}
	if len(p.addElems) != 0 || len(p.delElems) != 0 || len(p.addSets) != 0 || len(p.delSets) != 0 {
		t.Errorf("plan changes elements or sets: %+v", p)
	}

	// The same state again: nothing to do.
	p = &plan{}
	p.diff(after, renderService(ipv4, testNode, testService("web", corev1.ProtocolTCP, 0, 1, "10.244.0.6"), &c))
	if len(p.write)+len(p.flush)+len(p.delChains)+len(p.addElems)+len(p.delElems) != 0 {
		t.Errorf("an unchanged Service plans %+v", p)
	}
}

func TestStaleUDPFlows(t *testing.T) {
	udp := func(eps ...string) *proxy.Service { return testService("dns", corev1.ProtocolUDP, 0, 0, eps...) }
	got := staleFlows(map[string]proxy.Change{
		"replaced": {Previous: udp("10.244.0.7"), Current: udp("10.244.0.8")},
		"tcp":      {Previous: testService("web", corev1.ProtocolTCP, 0, 1, "10.244.0.5")},
	})
	want := []flow{{dst: netip.MustParseAddr("10.96.0.10"), port: 8080, endpoint: netip.MustParseAddrPort("10.244.0.7:80")}}
	if !slices.Equal(got, want) {
		t.Errorf("replaced endpoint: stale flows %+v, want %+v", got, want)
	}
	// The same pod, another targetPort: the old port's flows go.
	moved := udp("10.244.0.7")
	moved.Ports[0].Endpoints[0].Port = 90
	got = staleFlows(map[string]proxy.Change{"moved": {Previous: udp("10.244.0.7"), Current: moved}})
	if !slices.Equal(got, want) {
		t.Errorf("changed target port: stale flows %+v, want %+v", got, want)
	}
	// The filter matches by the reply's source address and port.
	ct := func(replyPort uint16) *netlink.ConntrackFlow {
		c := &netlink.ConntrackFlow{}
		c.Forward.Protocol, c.Forward.DstIP, c.Forward.DstPort = unix.IPPROTO_UDP, net.ParseIP("10.96.0.10"), 8080
		c.Reverse.SrcIP, c.Reverse.SrcPort = net.ParseIP("10.244.0.7"), replyPort
		return c
	}
	if !want[0].MatchConntrackFlow(ct(80)) || want[0].MatchConntrackFlow(ct(90)) {
		t.Error("the stale flow's filter does not tell the endpoint's ports apart")
	}
	// From no endpoint to one: the flows to the Service itself go (they
	// were never DNATed).
	got = staleFlows(map[string]proxy.Change{"first": {Previous: udp(), Current: udp("10.244.0.8")}})
	want = []flow{{dst: netip.MustParseAddr("10.96.0.10"), port: 8080}}
	if !slices.Equal(got, want) {
		t.Errorf("first endpoint: stale flows %+v, want %+v", got, want)
	}
}

func TestRenderFirewallAllowsTheNodeWhenARangeHoldsIt(t *testing.T) {
	fw := func(n node) string {
		s := testService("web", corev1.ProtocolTCP, 0, 1, "10.244.0.5")
		s.Ports[0].LoadBalancerIPs = []netip.Addr{netip.MustParseAddr("192.0.2.10")}
		s.Ports[0].SourceRanges = []netip.Prefix{netip.MustParsePrefix("172.31.0.0/16")}
		var out []string
		for _, l := range strings.Split(text(renderService(ipv4, n, s, &counts{})), "\n") {
			if (strings.HasPrefix(l, "\tip saddr") && strings.HasSuffix(l, " return")) || l == "\tdrop" {
				out = append(out, strings.TrimSpace(l))
			}
		}
		return strings.Join(out, "; ")
	}
	inRange := testNode
	inRange.ips = []netip.Addr{netip.MustParseAddr("172.31.254.1")}
	if got, want := fw(inRange), "ip saddr 172.31.0.0/16 return; ip saddr 192.0.2.10 return; drop"; got != want {
		t.Errorf("a node inside the source ranges: firewall %q, want %q", got, want)
	}
	outside := testNode
	outside.ips = []netip.Addr{netip.MustParseAddr("198.51.100.1")}
	if got, want := fw(outside), "ip saddr 172.31.0.0/16 return; drop"; got != want {
		t.Errorf("a node outside the source ranges: firewall %q, want %q", got, want)
	}
}

// After DNAT, a new connection still to a cluster IP (a port its Service
// lacks) is rejected, and one to another address of the Service ranges
// (of the family) dropped, from forwarded and from the node's own traffic.
func TestSkeletonChecksClusterIPs(t *testing.T) {
	got := text(skeleton(ipv4, []netip.Prefix{netip.MustParsePrefix("10.96.0.0/12"), netip.MustParsePrefix("fd00:10:96::/112")}))
	for _, want := range []string{
		"chain cluster-ips-check\n\tip daddr @cluster-ips goto reject-chain\n\tip daddr 10.96.0.0/12 drop\nchain ",
		"chain filter-forward\n\tct state new jump cluster-ips-check\n",
		"chain filter-output-post-dnat\n\tct state new jump cluster-ips-check\n",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("the skeleton lacks\n%s\nin:\n%s", want, got)
		}
	}
}
