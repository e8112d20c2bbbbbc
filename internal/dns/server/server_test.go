package server

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/miekg/dns"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/svcnet/svcnet/internal/dns/dnstest"
	"github.com/svcnet/svcnet/internal/dns/forward"
	"github.com/svcnet/svcnet/internal/dns/hosts"
	"github.com/svcnet/svcnet/internal/dns/records"
)

// example is an upstream that knows www.example.com (A 192.0.2.53) and
// denies other names.
var example = dns.HandlerFunc(func(w dns.ResponseWriter, r *dns.Msg) {
	m := new(dns.Msg).SetReply(r)
	m.RecursionAvailable = true
	if r.Question[0].Name == "www.example.com." && r.Question[0].Qtype == dns.TypeA {
		rr, _ := dns.NewRR("www.example.com. 60 IN A 192.0.2.53")
		m.Answer = append(m.Answer, rr)
	} else {
		m.Rcode = dns.RcodeNameError
	}
	_ = w.WriteMsg(m)
})

// start serves a cluster with a ClusterIP Service web (10.96.0.20), a
// headless Service big with 100 endpoints, and an ExternalName Service
// db (www.example.com), forwarding to upstream (tried for 500ms), whose
// forwarder logs to the returned Logs. Queries go to the returned address
// over UDP or TCP.
func start(t *testing.T, upstream dns.Handler) (string, *Server, *dnstest.Logs) {
	t.Helper()
	ix := records.New(records.Config{Zone: "cluster.local", TTL: 5})
	ix.SetNamespace("default")
	ix.SetService(&corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "web"},
		Spec: corev1.ServiceSpec{ClusterIP: "10.96.0.20", ClusterIPs: []string{"10.96.0.20"}, Ports: []corev1.ServicePort{{Name: "http", Protocol: corev1.ProtocolTCP, Port: 80}}}})
	ix.SetService(&corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "big"},
		Spec: corev1.ServiceSpec{ClusterIP: corev1.ClusterIPNone}})
	ix.SetService(&corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "db"},
		Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeExternalName, ExternalName: "www.example.com"}})
	es := &discoveryv1.EndpointSlice{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "big-1",
		Labels: map[string]string{discoveryv1.LabelServiceName: "big"}}, AddressType: discoveryv1.AddressTypeIPv4}
	for i := range 100 {
		es.Endpoints = append(es.Endpoints, discoveryv1.Endpoint{Addresses: []string{fmt.Sprintf("10.244.%d.%d", i/250, i%250+1)}})
	}
	ix.SetEndpointSlice(es)

	reg := prometheus.NewRegistry()
	logs, logger := dnstest.NewLogs()
	fwd, err := forward.New(forward.Config{Upstreams: []string{dnstest.Serve(t, upstream)}, Timeout: 500 * time.Millisecond, Registerer: reg, Logger: logger})
	if err != nil {
		t.Fatal(err)
	}
	s, err := New(nil, ix, fwd, reg)
	if err != nil {
		t.Fatal(err)
	}
	pc, ln := dnstest.Listen(t)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	var probing sync.WaitGroup
	probing.Go(func() { fwd.Run(ctx) })
	go func() { done <- s.Serve(ctx, pc, ln) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Serve: %v", err)
		}
		probing.Wait()
	})
	return pc.LocalAddr().String(), s, logs
}

func TestServerAnswersOverUDPAndTCP(t *testing.T) {
	addr, s, _ := start(t, example)
	for _, network := range []string{"udp", "tcp"} {
		resp := dnstest.Query(t, network, addr, "web.default.svc.cluster.local.", dns.TypeA, 0)
		if !resp.Authoritative || resp.Rcode != dns.RcodeSuccess || len(resp.Answer) != 1 ||
			resp.Answer[0].String() != "web.default.svc.cluster.local.\t5\tIN\tA\t10.96.0.20" {
			t.Errorf("%s: %v", network, resp)
		}
		resp = dnstest.Query(t, network, addr, "nope.default.svc.cluster.local.", dns.TypeA, 0)
		if resp.Rcode != dns.RcodeNameError || len(resp.Ns) != 1 || resp.Ns[0].Header().Rrtype != dns.TypeSOA {
			t.Errorf("%s NXDOMAIN: %v", network, resp)
		}
	}
	if got := testutil.ToFloat64(s.responses.WithLabelValues("cluster.local.", "NXDOMAIN")); got != 2 {
		t.Errorf("NXDOMAIN responses counted %v, want 2", got)
	}
}

func TestServerForwardsOtherNames(t *testing.T) {
	addr, _, _ := start(t, example)
	resp := dnstest.Query(t, "udp", addr, "www.example.com.", dns.TypeA, 0)
	if resp.Authoritative || !resp.RecursionAvailable || len(resp.Answer) != 1 || resp.Answer[0].(*dns.A).A.String() != "192.0.2.53" {
		t.Errorf("forwarded answer: %v", resp)
	}
	// An ExternalName's target is followed upstream.
	resp = dnstest.Query(t, "udp", addr, "db.default.svc.cluster.local.", dns.TypeA, 0)
	if len(resp.Answer) != 2 || resp.Answer[0].String() != "db.default.svc.cluster.local.\t5\tIN\tCNAME\twww.example.com." ||
		resp.Answer[1].(*dns.A).A.String() != "192.0.2.53" {
		t.Errorf("ExternalName: %v", resp)
	}
}

// Once the forwarder finds that no upstream answers, a forwarded query
// gets SERVFAIL at once instead of after the upstream's timeout; cluster
// names are answered all along.
func TestServerFailsForwardedQueriesFastWhenNoUpstreamAnswers(t *testing.T) {
	addr, _, logs := start(t, dns.HandlerFunc(func(dns.ResponseWriter, *dns.Msg) {}))
	if resp := dnstest.Query(t, "udp", addr, "www.example.com.", dns.TypeA, 0); resp.Rcode != dns.RcodeServerFailure {
		t.Fatalf("rcode %s, want SERVFAIL", dns.RcodeToString[resp.Rcode])
	}
	logs.Wait(t, "no upstream DNS resolver answers; forwarded queries get SERVFAIL until one does", 1, 5*time.Second)
	began := time.Now()
	resp := dnstest.Query(t, "udp", addr, "www.example.com.", dns.TypeA, 0)
	if took := time.Since(began); resp.Rcode != dns.RcodeServerFailure || took > 200*time.Millisecond {
		t.Errorf("with the upstream down: rcode %s after %s, want SERVFAIL at once", dns.RcodeToString[resp.Rcode], took)
	}
	if resp := dnstest.Query(t, "udp", addr, "web.default.svc.cluster.local.", dns.TypeA, 0); resp.Rcode != dns.RcodeSuccess {
		t.Errorf("cluster name: rcode %s", dns.RcodeToString[resp.Rcode])
	}
}

func TestServerTruncatesForUDPClients(t *testing.T) {
	addr, _, _ := start(t, example)
	const name = "big.default.svc.cluster.local."
	plain := dnstest.Query(t, "udp", addr, name, dns.TypeA, 0)
	plain.Compress = true // Len as sent
	if !plain.Truncated || len(plain.Answer) == 0 || len(plain.Answer) >= 100 || plain.Len() > dns.MinMsgSize {
		t.Errorf("UDP without EDNS0: TC %v, %d records, %d bytes", plain.Truncated, len(plain.Answer), plain.Len())
	}
	edns := dnstest.Query(t, "udp", addr, name, dns.TypeA, 1232)
	edns.Compress = true
	opt := edns.IsEdns0()
	if opt == nil || opt.UDPSize() != 1232 || edns.Len() > 1232 || len(edns.Answer) <= len(plain.Answer) {
		t.Errorf("UDP with EDNS0 1232: OPT %v, %d records, %d bytes", opt, len(edns.Answer), edns.Len())
	}
	full := dnstest.Query(t, "tcp", addr, name, dns.TypeA, 0)
	if full.Truncated || len(full.Answer) != 100 {
		t.Errorf("TCP: TC %v, %d records", full.Truncated, len(full.Answer))
	}
	seen := map[netip.Addr]bool{}
	for _, rr := range full.Answer {
		a, _ := netip.AddrFromSlice(rr.(*dns.A).A.To4())
		seen[a] = true
	}
	if len(seen) != 100 {
		t.Errorf("TCP answer has %d distinct addresses", len(seen))
	}
}

// BenchmarkServeUDP asks for Service names over UDP on loopback with
// 10,000 Services loaded; b.N queries spread over parallel clients.
func BenchmarkServeUDP(b *testing.B) {
	ix := records.New(records.Config{Zone: "cluster.local", TTL: 5})
	ix.SetNamespace("default")
	const services = 10000
	for i := range services {
		ip := fmt.Sprintf("10.96.%d.%d", i/250, i%250+1)
		ix.SetService(&corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: fmt.Sprintf("svc-%d", i)},
			Spec: corev1.ServiceSpec{ClusterIP: ip, ClusterIPs: []string{ip}, Ports: []corev1.ServicePort{{Name: "http", Protocol: corev1.ProtocolTCP, Port: 80}}}})
	}
	s, err := New(nil, ix, nil, prometheus.NewRegistry())
	if err != nil {
		b.Fatal(err)
	}
	pc, ln := dnstest.Listen(b)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Serve(ctx, pc, ln) }()
	defer func() {
		cancel()
		<-done
	}()
	addr := pc.LocalAddr().String()
	var next atomic.Int64
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		conn, err := net.Dial("udp", addr)
		if err != nil {
			b.Error(err)
			return
		}
		defer conn.Close()
		co := &dns.Conn{Conn: conn}
		for pb.Next() {
			name := fmt.Sprintf("svc-%d.default.svc.cluster.local.", next.Add(1)%services)
			if err := co.WriteMsg(new(dns.Msg).SetQuestion(name, dns.TypeA)); err != nil {
				b.Error(err)
				return
			}
			if resp, err := co.ReadMsg(); err != nil || len(resp.Answer) != 1 {
				b.Errorf("%s: %v %v", name, resp, err)
				return
			}
		}
	})
}

// A context that ends before the listeners have started still stops
// Serve: a shutdown that raced the start once left it serving for ever.
func TestServeReturnsWhenCancelledBeforeStart(t *testing.T) {
	s, err := New(nil, records.New(records.Config{Zone: "cluster.local", TTL: 5}), nil, prometheus.NewRegistry())
	if err != nil {
		t.Fatal(err)
	}
	for range 20 {
		pc, ln := dnstest.Listen(t)
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		done := make(chan error, 1)
		go func() { done <- s.Serve(ctx, pc, ln) }()
		select {
		case err := <-done:
			if err != nil {
				t.Fatalf("Serve: %v", err)
			}
		case <-time.After(10 * time.Second):
			t.Fatal("Serve still serving 10s after its context ended")
		}
		pc.Close()
		ln.Close()
	}
}

// exchangeFunc is an Exchanger of a function.
type exchangeFunc func(*dns.Msg) (*dns.Msg, error)

func (f exchangeFunc) Exchange(_ context.Context, req *dns.Msg) (*dns.Msg, error) { return f(req) }

// The hosts table answers first; a name it does not hold fails without
// fallthrough, and goes on to the cluster's records and the forwarder
// with it. A server may have no cluster records at all.
func TestHostsAnswerFirst(t *testing.T) {
	h := hosts.New(0)
	h.Add("1.1.1.1", "web.default.svc.cluster.local", "notexistname.resolv.conf.local")
	ix := records.New(records.Config{Zone: "cluster.local", TTL: 5})
	ix.SetNamespace("default")
	ix.SetService(&corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "db"},
		Spec: corev1.ServiceSpec{ClusterIP: "10.96.0.30", ClusterIPs: []string{"10.96.0.30"}, Ports: []corev1.ServicePort{{Name: "http", Protocol: corev1.ProtocolTCP, Port: 80}}}})
	upstream := exchangeFunc(func(req *dns.Msg) (*dns.Msg, error) {
		resp := new(dns.Msg).SetReply(req)
		resp.Answer = []dns.RR{&dns.A{Hdr: dns.RR_Header{Name: req.Question[0].Name, Rrtype: dns.TypeA, Class: dns.ClassINET, Ttl: 30}, A: net.IPv4(192, 0, 2, 1)}}
		return resp, nil
	})
	ask := func(s *Server, name string) string {
		resp, _ := s.answer(context.Background(), new(dns.Msg).SetQuestion(name, dns.TypeA))
		if len(resp.Answer) == 0 {
			return dns.RcodeToString[resp.Rcode]
		}
		return resp.Answer[0].(*dns.A).A.String()
	}
	for _, tc := range []struct {
		fall     bool
		ix       *records.Index
		name     string
		want     string
		describe string
	}{
		{false, nil, "notexistname.resolv.conf.local.", "1.1.1.1", "a hosts name"},
		{false, nil, "other.example.", "SERVFAIL", "another name, no fallthrough"},
		{true, nil, "other.example.", "192.0.2.1", "another name, fallthrough, no records"},
		{true, ix, "web.default.svc.cluster.local.", "1.1.1.1", "hosts before the cluster's records"},
		{true, ix, "db.default.svc.cluster.local.", "10.96.0.30", "a cluster name, fallthrough"},
	} {
		h.Fallthrough = tc.fall
		s, err := New(h, tc.ix, upstream, prometheus.NewRegistry())
		if err != nil {
			t.Fatal(err)
		}
		if got := ask(s, tc.name); got != tc.want {
			t.Errorf("%s: %s is %s, want %s", tc.describe, tc.name, got, tc.want)
		}
	}
}
