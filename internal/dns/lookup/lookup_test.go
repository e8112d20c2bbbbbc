package lookup

import (
	"context"
	"net"
	"slices"
	"testing"

	"github.com/miekg/dns"
)

// Ask reads A, SRV and CNAME answers as text and says NXDOMAIN, from a
// server on loopback.
func TestAsk(t *testing.T) {
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	mux := dns.NewServeMux()
	mux.HandleFunc("cluster.local.", func(w dns.ResponseWriter, q *dns.Msg) {
		r := new(dns.Msg)
		r.SetReply(q)
		name := q.Question[0].Name
		switch {
		case name == "web.default.svc.cluster.local." && q.Question[0].Qtype == dns.TypeA:
			rr1, _ := dns.NewRR(name + " 5 IN A 10.96.100.10")
			rr2, _ := dns.NewRR(name + " 5 IN A 10.96.100.9")
			r.Answer = append(r.Answer, rr1, rr2)
		case name == "_http._tcp.web.default.svc.cluster.local.":
			rr, _ := dns.NewRR(name + " 5 IN SRV 0 100 80 web.default.svc.cluster.local.")
			r.Answer = append(r.Answer, rr)
		case name == "ext.default.svc.cluster.local.":
			rr, _ := dns.NewRR(name + " 5 IN CNAME example.com.")
			r.Answer = append(r.Answer, rr)
		default:
			r.Rcode = dns.RcodeNameError
		}
		_ = w.WriteMsg(r)
	})
	srv := &dns.Server{PacketConn: pc, Handler: mux}
	go func() { _ = srv.ActivateAndServe() }()
	t.Cleanup(func() { _ = srv.Shutdown() })
	var d net.Dialer
	ctx := context.Background()
	for _, c := range []struct {
		name, typ, rcode string
		records          []string
	}{
		{"web.default.svc.cluster.local", "A", "NOERROR", []string{"10.96.100.10", "10.96.100.9"}},
		{"_http._tcp.web.default.svc.cluster.local", "SRV", "NOERROR", []string{"80 web.default.svc.cluster.local"}},
		{"ext.default.svc.cluster.local", "CNAME", "NOERROR", []string{"example.com"}},
		{"typo.default.svc.cluster.local", "A", "NXDOMAIN", []string{}},
	} {
		a, err := Ask(ctx, d.DialContext, pc.LocalAddr().String(), c.name, c.typ)
		if err != nil || a.Rcode != c.rcode || !slices.Equal(a.Records, c.records) {
			t.Errorf("%s %s: %+v, %v; want %s %v", c.typ, c.name, a, err, c.rcode, c.records)
		}
	}
	if _, err := Ask(ctx, d.DialContext, pc.LocalAddr().String(), "web", "MX"); err == nil {
		t.Error("type MX asked")
	}
}
