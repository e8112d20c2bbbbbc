package records

import (
	"net/netip"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/miekg/dns"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

const serial = 1700000000

// The SOA every negative answer carries.
const soa = "cluster.local.\t5\tIN\tSOA\tns.dns.cluster.local. hostmaster.cluster.local. 1700000000 7200 1800 86400 5"

func svc(ns, name, clusterIP string, mutate func(*corev1.Service), ports ...corev1.ServicePort) *corev1.Service {
	s := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec:       corev1.ServiceSpec{Type: corev1.ServiceTypeClusterIP, ClusterIP: clusterIP, Ports: ports},
	}
	if clusterIP != "" {
		s.Spec.ClusterIPs = []string{clusterIP}
	}
	if mutate != nil {
		mutate(s)
	}
	return s
}

func svcPort(name string, proto corev1.Protocol, port int32) corev1.ServicePort {
	return corev1.ServicePort{Name: name, Protocol: proto, Port: port}
}

type ep struct {
	ip       string
	hostname string
	ready    *bool
}

func endpointSlice(ns, name, service string, family discoveryv1.AddressType, ports []discoveryv1.EndpointPort, eps ...ep) *discoveryv1.EndpointSlice {
	es := &discoveryv1.EndpointSlice{
		ObjectMeta:  metav1.ObjectMeta{Namespace: ns, Name: name, Labels: map[string]string{discoveryv1.LabelServiceName: service}},
		AddressType: family,
		Ports:       ports,
	}
	for _, e := range eps {
		end := discoveryv1.Endpoint{Addresses: []string{e.ip}, Conditions: discoveryv1.EndpointConditions{Ready: e.ready}}
		if e.hostname != "" {
			end.Hostname = ptr.To(e.hostname)
		}
		es.Endpoints = append(es.Endpoints, end)
	}
	return es
}

func slicePort(name string, port int32) discoveryv1.EndpointPort {
	return discoveryv1.EndpointPort{Name: ptr.To(name), Port: ptr.To(port), Protocol: ptr.To(corev1.ProtocolTCP)}
}

// fixture is a cluster shaped after the specification's examples.
func fixture(t *testing.T) *Index {
	t.Helper()
	ix := New(Config{Zone: "cluster.local", TTL: 5, NameServers: []netip.Addr{netip.MustParseAddr("10.96.0.10")}})
	for _, ns := range []string{"default", "kube-system", "other"} {
		ix.SetNamespace(ns)
	}
	headless := func(s *corev1.Service) {
		s.Spec.ClusterIP, s.Spec.ClusterIPs = corev1.ClusterIPNone, []string{corev1.ClusterIPNone}
	}
	https := []discoveryv1.EndpointPort{slicePort("https", 443)}
	for _, s := range []*corev1.Service{
		svc("default", "kubernetes", "10.3.0.1", nil, svcPort("https", corev1.ProtocolTCP, 443)),
		svc("default", "nginx", "10.96.0.20", nil, svcPort("http", corev1.ProtocolTCP, 8080), svcPort("", corev1.ProtocolUDP, 9000)),
		svc("default", "dual", "10.96.0.30", func(s *corev1.Service) { s.Spec.ClusterIPs = []string{"10.96.0.30", "fd00::30"} },
			svcPort("http", corev1.ProtocolTCP, 80)),
		svc("default", "six", "fd00::60", nil, svcPort("http", corev1.ProtocolTCP, 80)),
		svc("default", "headless", "", headless, svcPort("https", corev1.ProtocolTCP, 443)),
		svc("default", "empty", "", headless, svcPort("https", corev1.ProtocolTCP, 443)),
		svc("default", "portless", "", headless),
		svc("default", "tolerant", "", func(s *corev1.Service) { headless(s); s.Spec.PublishNotReadyAddresses = true }),
		svc("default", "foo", "", func(s *corev1.Service) {
			s.Spec.Type, s.Spec.ExternalName = corev1.ServiceTypeExternalName, "www.example.com"
		}),
		svc("default", "alias", "", func(s *corev1.Service) {
			s.Spec.Type, s.Spec.ExternalName = corev1.ServiceTypeExternalName, "kubernetes.default.svc.cluster.local"
		}),
	} {
		ix.SetService(s)
	}
	for _, es := range []*discoveryv1.EndpointSlice{
		endpointSlice("default", "headless-abc", "headless", discoveryv1.AddressTypeIPv4, https,
			ep{ip: "10.3.0.100", hostname: "my-pet"}, ep{ip: "10.3.0.101", hostname: "my-pet-2"},
			ep{ip: "10.3.0.102", ready: ptr.To(true)}, ep{ip: "10.3.0.103", hostname: "sick", ready: ptr.To(false)}),
		endpointSlice("default", "nginx-abc", "nginx", discoveryv1.AddressTypeIPv4,
			[]discoveryv1.EndpointPort{slicePort("http", 80)}, ep{ip: "10.244.0.5"}),
		endpointSlice("default", "portless-abc", "portless", discoveryv1.AddressTypeIPv4, nil, ep{ip: "10.244.0.7", hostname: "only"}),
		endpointSlice("default", "tolerant-abc", "tolerant", discoveryv1.AddressTypeIPv4, nil, ep{ip: "10.244.0.8", ready: ptr.To(false)}),
	} {
		ix.SetEndpointSlice(es)
	}
	ix.modified.Store(serial)
	return ix
}

func render(rrs []dns.RR) []string {
	out := make([]string, len(rrs))
	for i, rr := range rrs {
		out[i] = rr.String()
	}
	return out
}

func TestLookup(t *testing.T) {
	ix := fixture(t)
	const (
		noerror  = dns.RcodeSuccess
		nxdomain = dns.RcodeNameError
	)
	tests := []struct {
		name   string
		qtype  uint16
		rcode  int
		answer []string
		extra  []string
	}{
		// 2.2: the schema version.
		{"dns-version.cluster.local.", dns.TypeTXT, noerror, []string{`dns-version.cluster.local.	28800	IN	TXT	"1.1.0"`}, nil},
		{"dns-version.cluster.local.", dns.TypeA, noerror, nil, nil},
		// 2.3.1 A, and AAAA of an IPv4 Service is NODATA.
		{"kubernetes.default.svc.cluster.local.", dns.TypeA, noerror, []string{"kubernetes.default.svc.cluster.local.	5	IN	A	10.3.0.1"}, nil},
		{"kubernetes.default.svc.cluster.local.", dns.TypeAAAA, noerror, nil, nil},
		{"Kubernetes.Default.SVC.Cluster.Local.", dns.TypeA, noerror, []string{"Kubernetes.Default.SVC.Cluster.Local.	5	IN	A	10.3.0.1"}, nil},
		{"kubernetes.default.svc.cluster.local.", dns.TypeMX, noerror, nil, nil},
		// 2.3.2 AAAA (schema 1.1.0) for IPv6 and dual-stack Services.
		{"six.default.svc.cluster.local.", dns.TypeAAAA, noerror, []string{"six.default.svc.cluster.local.	5	IN	AAAA	fd00::60"}, nil},
		{"six.default.svc.cluster.local.", dns.TypeA, noerror, nil, nil},
		{"dual.default.svc.cluster.local.", dns.TypeA, noerror, []string{"dual.default.svc.cluster.local.	5	IN	A	10.96.0.30"}, nil},
		{"dual.default.svc.cluster.local.", dns.TypeAAAA, noerror, []string{"dual.default.svc.cluster.local.	5	IN	AAAA	fd00::30"}, nil},
		// 2.3.3 SRV per named port, target the Service, its address in additional.
		{"_https._tcp.kubernetes.default.svc.cluster.local.", dns.TypeSRV, noerror,
			[]string{"_https._tcp.kubernetes.default.svc.cluster.local.	5	IN	SRV	0 100 443 kubernetes.default.svc.cluster.local."},
			[]string{"kubernetes.default.svc.cluster.local.	5	IN	A	10.3.0.1"}},
		{"_http._tcp.nginx.default.svc.cluster.local.", dns.TypeSRV, noerror,
			[]string{"_http._tcp.nginx.default.svc.cluster.local.	5	IN	SRV	0 100 8080 nginx.default.svc.cluster.local."},
			[]string{"nginx.default.svc.cluster.local.	5	IN	A	10.96.0.20"}},
		{"_http._tcp.nginx.default.svc.cluster.local.", dns.TypeA, noerror, []string{"_http._tcp.nginx.default.svc.cluster.local.	5	IN	A	10.96.0.20"}, nil},
		{"_http._udp.nginx.default.svc.cluster.local.", dns.TypeSRV, nxdomain, nil, nil},
		{"_nope._tcp.nginx.default.svc.cluster.local.", dns.TypeSRV, nxdomain, nil, nil},
		// The Service's own name: one SRV per port, weights split as CoreDNS.
		{"nginx.default.svc.cluster.local.", dns.TypeSRV, noerror,
			[]string{"nginx.default.svc.cluster.local.	5	IN	SRV	0 50 8080 nginx.default.svc.cluster.local.",
				"nginx.default.svc.cluster.local.	5	IN	SRV	0 50 9000 nginx.default.svc.cluster.local."},
			[]string{"nginx.default.svc.cluster.local.	5	IN	A	10.96.0.20"}},
		{"_http._tcp.dual.default.svc.cluster.local.", dns.TypeSRV, noerror,
			[]string{"_http._tcp.dual.default.svc.cluster.local.	5	IN	SRV	0 50 80 dual.default.svc.cluster.local."},
			[]string{"dual.default.svc.cluster.local.	5	IN	A	10.96.0.30", "dual.default.svc.cluster.local.	5	IN	AAAA	fd00::30"}},
		// 2.4.1 headless: every ready endpoint; per-hostname names.
		{"headless.default.svc.cluster.local.", dns.TypeA, noerror, []string{
			"headless.default.svc.cluster.local.	5	IN	A	10.3.0.100",
			"headless.default.svc.cluster.local.	5	IN	A	10.3.0.101",
			"headless.default.svc.cluster.local.	5	IN	A	10.3.0.102"}, nil},
		{"headless.default.svc.cluster.local.", dns.TypeAAAA, noerror, nil, nil},
		{"my-pet.headless.default.svc.cluster.local.", dns.TypeA, noerror, []string{"my-pet.headless.default.svc.cluster.local.	5	IN	A	10.3.0.100"}, nil},
		{"10-3-0-102.headless.default.svc.cluster.local.", dns.TypeA, noerror, []string{"10-3-0-102.headless.default.svc.cluster.local.	5	IN	A	10.3.0.102"}, nil},
		{"sick.headless.default.svc.cluster.local.", dns.TypeA, nxdomain, nil, nil},
		{"nobody.headless.default.svc.cluster.local.", dns.TypeA, nxdomain, nil, nil},
		{"empty.default.svc.cluster.local.", dns.TypeA, nxdomain, nil, nil},
		// An endpoint of a ClusterIP Service has a name too (CoreDNS).
		{"10-244-0-5.nginx.default.svc.cluster.local.", dns.TypeA, noerror, []string{"10-244-0-5.nginx.default.svc.cluster.local.	5	IN	A	10.244.0.5"}, nil},
		// 2.4.2 headless SRV: one per ready endpoint and named port.
		{"_https._tcp.headless.default.svc.cluster.local.", dns.TypeSRV, noerror, []string{
			"_https._tcp.headless.default.svc.cluster.local.	5	IN	SRV	0 33 443 my-pet.headless.default.svc.cluster.local.",
			"_https._tcp.headless.default.svc.cluster.local.	5	IN	SRV	0 33 443 my-pet-2.headless.default.svc.cluster.local.",
			"_https._tcp.headless.default.svc.cluster.local.	5	IN	SRV	0 33 443 10-3-0-102.headless.default.svc.cluster.local."}, []string{
			"my-pet.headless.default.svc.cluster.local.	5	IN	A	10.3.0.100",
			"my-pet-2.headless.default.svc.cluster.local.	5	IN	A	10.3.0.101",
			"10-3-0-102.headless.default.svc.cluster.local.	5	IN	A	10.3.0.102"}},
		// Endpoints without ports: addresses, but no SRV.
		{"portless.default.svc.cluster.local.", dns.TypeA, noerror, []string{"portless.default.svc.cluster.local.	5	IN	A	10.244.0.7"}, nil},
		{"only.portless.default.svc.cluster.local.", dns.TypeA, noerror, []string{"only.portless.default.svc.cluster.local.	5	IN	A	10.244.0.7"}, nil},
		{"portless.default.svc.cluster.local.", dns.TypeSRV, noerror, nil, nil},
		// publishNotReadyAddresses: not-ready endpoints count.
		{"tolerant.default.svc.cluster.local.", dns.TypeA, noerror, []string{"tolerant.default.svc.cluster.local.	5	IN	A	10.244.0.8"}, nil},
		// 2.5 ExternalName: a CNAME, followed inside the zone.
		{"foo.default.svc.cluster.local.", dns.TypeA, noerror, []string{"foo.default.svc.cluster.local.	5	IN	CNAME	www.example.com."}, nil},
		{"foo.default.svc.cluster.local.", dns.TypeCNAME, noerror, []string{"foo.default.svc.cluster.local.	5	IN	CNAME	www.example.com."}, nil},
		{"alias.default.svc.cluster.local.", dns.TypeA, noerror, []string{
			"alias.default.svc.cluster.local.	5	IN	CNAME	kubernetes.default.svc.cluster.local.",
			"kubernetes.default.svc.cluster.local.	5	IN	A	10.3.0.1"}, nil},
		{"_http._tcp.foo.default.svc.cluster.local.", dns.TypeSRV, nxdomain, nil, nil},
		// 2.6 pod names (pods insecure).
		{"10-244-1-9.default.pod.cluster.local.", dns.TypeA, noerror, []string{"10-244-1-9.default.pod.cluster.local.	5	IN	A	10.244.1.9"}, nil},
		{"10-244-1-9.default.pod.cluster.local.", dns.TypeAAAA, noerror, nil, nil},
		{"fd00--9.default.pod.cluster.local.", dns.TypeAAAA, noerror, []string{"fd00--9.default.pod.cluster.local.	5	IN	AAAA	fd00::9"}, nil},
		{"10-244-1-9.nowhere.pod.cluster.local.", dns.TypeA, nxdomain, nil, nil},
		{"not-an-ip.default.pod.cluster.local.", dns.TypeA, nxdomain, nil, nil},
		// NXDOMAIN for names that do not exist, NODATA for those that do.
		{"nope.default.svc.cluster.local.", dns.TypeA, nxdomain, nil, nil},
		{"nope.default.svc.cluster.local.", dns.TypeTXT, nxdomain, nil, nil},
		{"kubernetes.nowhere.svc.cluster.local.", dns.TypeA, nxdomain, nil, nil},
		{"a.b.c.kubernetes.default.svc.cluster.local.", dns.TypeA, nxdomain, nil, nil},
		{"kubernetes.default.cluster.local.", dns.TypeA, nxdomain, nil, nil},
		{"default.svc.cluster.local.", dns.TypeA, noerror, nil, nil},
		{"svc.cluster.local.", dns.TypeA, noerror, nil, nil},
		{"default.pod.cluster.local.", dns.TypeA, noerror, nil, nil},
		// The apex: SOA, NS, and NODATA for the rest.
		{"cluster.local.", dns.TypeSOA, noerror, []string{soa}, nil},
		{"cluster.local.", dns.TypeNS, noerror, []string{"cluster.local.	5	IN	NS	ns.dns.cluster.local."},
			[]string{"ns.dns.cluster.local.	5	IN	A	10.96.0.10"}},
		{"cluster.local.", dns.TypeA, noerror, nil, nil},
		{"ns.dns.cluster.local.", dns.TypeA, noerror, []string{"ns.dns.cluster.local.	5	IN	A	10.96.0.10"}, nil},
		// 2.3.4 and 2.4.3 PTR: cluster IPs first, then ready endpoints.
		{"1.0.3.10.in-addr.arpa.", dns.TypePTR, noerror, []string{"1.0.3.10.in-addr.arpa.	5	IN	PTR	kubernetes.default.svc.cluster.local."}, nil},
		{"100.0.3.10.in-addr.arpa.", dns.TypePTR, noerror, []string{"100.0.3.10.in-addr.arpa.	5	IN	PTR	my-pet.headless.default.svc.cluster.local."}, nil},
		{"102.0.3.10.in-addr.arpa.", dns.TypePTR, noerror, []string{"102.0.3.10.in-addr.arpa.	5	IN	PTR	10-3-0-102.headless.default.svc.cluster.local."}, nil},
		{"0.6.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.d.f.ip6.arpa.", dns.TypePTR, noerror,
			[]string{"0.6.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.d.f.ip6.arpa.	5	IN	PTR	six.default.svc.cluster.local."}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name+"/"+dns.TypeToString[tt.qtype], func(t *testing.T) {
			res, ok := ix.Lookup(dns.Question{Name: tt.name, Qtype: tt.qtype, Qclass: dns.ClassINET})
			if !ok {
				t.Fatal("not answered by the cluster")
			}
			if res.Rcode != tt.rcode {
				t.Errorf("rcode %s, want %s", dns.RcodeToString[res.Rcode], dns.RcodeToString[tt.rcode])
			}
			if diff := cmp.Diff(tt.answer, render(res.Answer), cmp.Comparer(func(a, b []string) bool {
				return strings.Join(a, "\n") == strings.Join(b, "\n")
			})); diff != "" {
				t.Errorf("answer (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(strings.Join(tt.extra, "\n"), strings.Join(render(res.Extra), "\n")); diff != "" {
				t.Errorf("additional (-want +got):\n%s", diff)
			}
			// Negative answers, and only they, carry the zone's SOA.
			var wantNs []string
			if len(res.Answer) == 0 {
				wantNs = []string{soa}
			}
			if diff := cmp.Diff(strings.Join(wantNs, "\n"), strings.Join(render(res.Ns), "\n")); diff != "" {
				t.Errorf("authority (-want +got):\n%s", diff)
			}
		})
	}
}

func TestLookupLeavesOtherNamesToTheCaller(t *testing.T) {
	ix := fixture(t)
	for _, q := range []dns.Question{
		{Name: "example.com.", Qtype: dns.TypeA},
		{Name: "cluster.local.example.com.", Qtype: dns.TypeA},
		{Name: "4.3.2.1.in-addr.arpa.", Qtype: dns.TypePTR},    // no cluster address
		{Name: "1.0.3.10.in-addr.arpa.", Qtype: dns.TypeA},     // reverse names only answer PTR
		{Name: "103.0.3.10.in-addr.arpa.", Qtype: dns.TypePTR}, // a not-ready endpoint
		{Name: "0.3.10.in-addr.arpa.", Qtype: dns.TypePTR},
	} {
		if res, ok := ix.Lookup(q); ok {
			t.Errorf("%s %s answered by the cluster: %v", q.Name, dns.TypeToString[q.Qtype], res)
		}
	}
}

// The index follows changes: a replaced slice replaces its addresses, a
// deleted Service or slice leaves no record or PTR behind.
func TestIndexFollowsChanges(t *testing.T) {
	ix := fixture(t)
	a := func(name string) []string {
		res, _ := ix.Lookup(dns.Question{Name: name, Qtype: dns.TypeA})
		var ips []string
		for _, rr := range res.Answer {
			ips = append(ips, rr.(*dns.A).A.String())
		}
		return ips
	}
	ptr := func(name string) bool {
		_, ok := ix.Lookup(dns.Question{Name: name, Qtype: dns.TypePTR})
		return ok
	}
	https := []discoveryv1.EndpointPort{slicePort("https", 443)}
	ix.SetEndpointSlice(endpointSlice("default", "headless-abc", "headless", discoveryv1.AddressTypeIPv4, https,
		ep{ip: "10.3.0.200", hostname: "my-pet"}))
	if got := a("my-pet.headless.default.svc.cluster.local."); !cmp.Equal(got, []string{"10.3.0.200"}) {
		t.Errorf("my-pet after the slice changed: %v", got)
	}
	if ptr("100.0.3.10.in-addr.arpa.") || !ptr("200.0.3.10.in-addr.arpa.") {
		t.Error("PTR records did not follow the slice")
	}
	// A second slice of the same Service adds to the first.
	ix.SetEndpointSlice(endpointSlice("default", "headless-def", "headless", discoveryv1.AddressTypeIPv4, https, ep{ip: "10.3.0.201"}))
	if got := a("headless.default.svc.cluster.local."); !cmp.Equal(got, []string{"10.3.0.200", "10.3.0.201"}) {
		t.Errorf("headless with two slices: %v", got)
	}
	ix.DeleteEndpointSlice("default", "headless-abc")
	if got := a("headless.default.svc.cluster.local."); !cmp.Equal(got, []string{"10.3.0.201"}) {
		t.Errorf("headless after a slice was deleted: %v", got)
	}
	if ptr("200.0.3.10.in-addr.arpa.") {
		t.Error("PTR of a deleted slice's address")
	}
	ix.DeleteService("default", "kubernetes")
	if got := a("kubernetes.default.svc.cluster.local."); got != nil || ptr("1.0.3.10.in-addr.arpa.") {
		t.Errorf("deleted Service still answers: %v", got)
	}
	ix.DeleteNamespace("other")
	if res, _ := ix.Lookup(dns.Question{Name: "other.svc.cluster.local.", Qtype: dns.TypeA}); res.Rcode != dns.RcodeNameError {
		t.Errorf("deleted namespace: %s", dns.RcodeToString[res.Rcode])
	}
}
