package forward

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/miekg/dns"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/svcnet/svcnet/internal/dns/dnstest"
)

// upstream answers www.example.com. A with 192.0.2.53 (TTL 60), big.example.com.
// TXT with more than 512 bytes, and NXDOMAIN with an SOA (minimum 30)
// otherwise; it counts the queries it gets by network.
type upstream struct{ udp, tcp atomic.Int32 }

func (u *upstream) ServeDNS(w dns.ResponseWriter, r *dns.Msg) {
	if w.RemoteAddr().Network() == "tcp" {
		u.tcp.Add(1)
	} else {
		u.udp.Add(1)
	}
	m := new(dns.Msg).SetReply(r)
	q := r.Question[0]
	switch q.Name {
	case "www.example.com.":
		rr, _ := dns.NewRR("www.example.com. 60 IN A 192.0.2.53")
		m.Answer = append(m.Answer, rr)
	case "big.example.com.":
		for i := range 20 {
			rr, _ := dns.NewRR(fmt.Sprintf(`big.example.com. 60 IN TXT "record %d with some padding to make it long enough"`, i))
			m.Answer = append(m.Answer, rr)
		}
	default:
		m.Rcode = dns.RcodeNameError
		soa, _ := dns.NewRR("example.com. 300 IN SOA ns.example.com. hostmaster.example.com. 1 7200 1800 86400 30")
		m.Ns = append(m.Ns, soa)
	}
	if w.RemoteAddr().Network() != "tcp" {
		m.Truncate(512)
	}
	_ = w.WriteMsg(m)
}

func newForwarder(t *testing.T, upstreams ...string) (*Forwarder, *prometheus.Registry) {
	t.Helper()
	reg := prometheus.NewRegistry()
	f, err := New(Config{Upstreams: upstreams, Registerer: reg, Timeout: 500 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	return f, reg
}

func ask(t *testing.T, f *Forwarder, name string, qtype uint16) *dns.Msg {
	t.Helper()
	req := new(dns.Msg).SetQuestion(name, qtype)
	resp, err := f.Exchange(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	if resp.Id != req.Id {
		t.Errorf("reply id %d, query id %d", resp.Id, req.Id)
	}
	return resp
}

func TestForwardCachesAnswers(t *testing.T) {
	u := &upstream{}
	f, reg := newForwarder(t, dnstest.Serve(t, u))
	for range 3 {
		resp := ask(t, f, "www.example.com.", dns.TypeA)
		if len(resp.Answer) != 1 || resp.Answer[0].(*dns.A).A.String() != "192.0.2.53" {
			t.Fatalf("answer: %v", resp.Answer)
		}
	}
	if n := u.udp.Load(); n != 1 {
		t.Errorf("upstream asked %d times for one name, want once", n)
	}
	if got := testutil.ToFloat64(f.m.hits.WithLabelValues("success")); got != 2 {
		t.Errorf("cache hits %v, want 2", got)
	}
	// Names differing in case are one entry.
	ask(t, f, "WWW.example.com.", dns.TypeA)
	if n := u.udp.Load(); n != 1 {
		t.Errorf("upstream asked again for the name in other case")
	}
	// A denial is kept too, for its SOA's minimum.
	for range 2 {
		if resp := ask(t, f, "nope.example.com.", dns.TypeA); resp.Rcode != dns.RcodeNameError {
			t.Fatalf("rcode %s", dns.RcodeToString[resp.Rcode])
		}
	}
	if got := testutil.ToFloat64(f.m.hits.WithLabelValues("denial")); got != 1 {
		t.Errorf("denial hits %v, want 1", got)
	}
	if n, err := testutil.GatherAndCount(reg, "svcnet_dns_forward_requests_total", "svcnet_dns_cache_misses_total"); err != nil || n != 2 {
		t.Errorf("metrics: %d series, %v", n, err)
	}
}

func TestCacheAgesTTLsAndExpires(t *testing.T) {
	c := newCache(10)
	m := new(dns.Msg).SetQuestion("www.example.com.", dns.TypeA)
	rr, _ := dns.NewRR("www.example.com. 60 IN A 192.0.2.53")
	m.Answer = []dns.RR{rr}
	k := keyOf(m)
	now := time.Now()
	c.put(k, m, now)
	got, _, ok := c.get(k, now.Add(25*time.Second))
	if !ok || got.Answer[0].Header().Ttl != 35 {
		t.Fatalf("after 25s: %v %v, want TTL 35", ok, got)
	}
	if m.Answer[0].Header().Ttl != 60 {
		t.Error("get changed the stored answer")
	}
	if _, _, ok := c.get(k, now.Add(60*time.Second)); ok {
		t.Error("an answer outlived its TTL")
	}
	// A full cache makes room.
	for i := range 20 {
		q := new(dns.Msg).SetQuestion(fmt.Sprintf("n%d.example.com.", i), dns.TypeA)
		q.Answer = m.Answer
		c.put(keyOf(q), q, now)
	}
	if n := c.len(); n != 10 {
		t.Errorf("cache of size 10 holds %d", n)
	}
}

func TestForwardRetriesTruncatedOverTCP(t *testing.T) {
	u := &upstream{}
	f, _ := newForwarder(t, dnstest.Serve(t, u))
	resp := ask(t, f, "big.example.com.", dns.TypeTXT)
	if resp.Truncated || len(resp.Answer) != 20 {
		t.Fatalf("truncated %v, %d records", resp.Truncated, len(resp.Answer))
	}
	if u.udp.Load() != 1 || u.tcp.Load() != 1 {
		t.Errorf("udp %d tcp %d queries, want one each", u.udp.Load(), u.tcp.Load())
	}
}

func TestForwardFailsOverToTheNextUpstream(t *testing.T) {
	// A UDP port with nobody behind it: the query is refused or times out.
	dead := dnstest.Serve(t, dns.HandlerFunc(func(dns.ResponseWriter, *dns.Msg) {}))
	u := &upstream{}
	live := dnstest.Serve(t, u)
	f, _ := newForwarder(t, dead, live)
	for range 4 { // whichever upstream is asked first
		f.cache = newCache(10)
		if resp := ask(t, f, "www.example.com.", dns.TypeA); len(resp.Answer) != 1 {
			t.Fatalf("answer %v", resp.Answer)
		}
	}
	f, _ = newForwarder(t, dead)
	if _, err := f.Exchange(context.Background(), new(dns.Msg).SetQuestion("www.example.com.", dns.TypeA)); err == nil {
		t.Error("no error when every upstream failed")
	}
}
