package forward

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/miekg/dns"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/svcnet/svcnet/internal/dns/dnstest"
)

// resolver answers www.example.com. A with 192.0.2.53 (TTL 60), big.example.com.
// TXT with more than 512 bytes, and NXDOMAIN with an SOA (minimum 30)
// otherwise; it counts the queries it gets by network, but for the
// forwarder's health probes.
type resolver struct{ udp, tcp atomic.Int32 }

// isProbe tells the forwarder's health probe (. NS) from queries.
func isProbe(r *dns.Msg) bool { return r.Question[0].Name == "." && r.Question[0].Qtype == dns.TypeNS }

func (u *resolver) ServeDNS(w dns.ResponseWriter, r *dns.Msg) {
	switch {
	case isProbe(r):
	case w.RemoteAddr().Network() == "tcp":
		u.tcp.Add(1)
	default:
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

// newForwarder returns a Forwarder that tries each upstream for 500ms and
// probes them until the test ends, with its metrics and its log.
func newForwarder(t *testing.T, upstreams ...string) (*Forwarder, *prometheus.Registry, *dnstest.Logs) {
	t.Helper()
	reg := prometheus.NewRegistry()
	logs, logger := dnstest.NewLogs()
	f, err := New(Config{Upstreams: upstreams, Registerer: reg, Timeout: 500 * time.Millisecond, Logger: logger})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	var probing sync.WaitGroup
	probing.Go(func() { f.Run(ctx) })
	t.Cleanup(func() {
		cancel()
		probing.Wait()
	})
	return f, reg, logs
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
	u := &resolver{}
	f, reg, _ := newForwarder(t, dnstest.Serve(t, u))
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

// TestCacheMaxTTL: `cache 30` keeps a 60 s answer 30 s, showing TTL 30.
func TestCacheMaxTTL(t *testing.T) {
	c := newCache(10, 30*time.Second)
	m := new(dns.Msg).SetQuestion("www.example.com.", dns.TypeA)
	rr, _ := dns.NewRR("www.example.com. 60 IN A 192.0.2.53")
	m.Answer = []dns.RR{rr}
	k := keyOf(m)
	now := time.Now()
	c.put(k, m, now)
	if got, _, ok := c.get(k, now); !ok || got.Answer[0].Header().Ttl != 30 {
		t.Fatalf("at once: %v %v, want TTL 30", ok, got)
	}
	if _, _, ok := c.get(k, now.Add(30*time.Second)); ok {
		t.Error("an answer outlived the cache's maximum TTL")
	}
}

func TestCacheAgesTTLsAndExpires(t *testing.T) {
	c := newCache(10, 0)
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
	u := &resolver{}
	f, _, _ := newForwarder(t, dnstest.Serve(t, u))
	resp := ask(t, f, "big.example.com.", dns.TypeTXT)
	if resp.Truncated || len(resp.Answer) != 20 {
		t.Fatalf("truncated %v, %d records", resp.Truncated, len(resp.Answer))
	}
	if u.udp.Load() != 1 || u.tcp.Load() != 1 {
		t.Errorf("udp %d tcp %d queries, want one each", u.udp.Load(), u.tcp.Load())
	}
}

// Log lines of the forwarder's health checking.
const (
	logAllDown = "no upstream DNS resolver answers; forwarded queries get SERVFAIL until one does"
	logAnswers = "upstream DNS resolver answers again"
	logDown    = "upstream DNS resolver down"
)

// dropping is an upstream that reads queries and drops them until it is
// told to answer as a resolver; it counts the queries it drops, probes
// (". IN NS") aside.
type dropping struct {
	resolver
	answer  atomic.Bool
	dropped atomic.Int32
}

func (d *dropping) ServeDNS(w dns.ResponseWriter, r *dns.Msg) {
	if d.answer.Load() {
		d.resolver.ServeDNS(w, r)
		return
	}
	if r.Question[0].Name != "." {
		d.dropped.Add(1)
	}
}

// refusing returns a loopback UDP address nobody listens on: a query is
// refused at once.
func refusing(t *testing.T) string {
	t.Helper()
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := pc.LocalAddr().String()
	pc.Close()
	return addr
}

// An upstream that is down is skipped: queries go to the one that answers
// without waiting for the dead one's timeout.
func TestForwardSkipsAnUpstreamThatIsDown(t *testing.T) {
	dead := &dropping{}
	deadAddr := dnstest.Serve(t, dead)
	u := &resolver{}
	f, _, logs := newForwarder(t, deadAddr, dnstest.Serve(t, u))
	// The probes at the start find it down, if queries (to a random
	// upstream first) do not.
	logs.Wait(t, logDown, 1, 5*time.Second)
	asked := dead.dropped.Load()
	began := time.Now()
	for i := range 10 {
		ask(t, f, fmt.Sprintf("m%d.example.com.", i), dns.TypeA)
	}
	if took := time.Since(began); took > 200*time.Millisecond || dead.dropped.Load() != asked {
		t.Errorf("10 queries took %s and asked the down upstream %d times", took, dead.dropped.Load()-asked)
	}
	if n := len(logs.With(logAllDown)); n != 0 {
		t.Errorf("%q logged while an upstream answers", logAllDown)
	}
}

// An upstream that cannot be reached at the start is found down by the
// probes before any query waits for it.
func TestForwardProbesAtStart(t *testing.T) {
	silent := &dropping{}
	f, _, logs := newForwarder(t, dnstest.Serve(t, silent))
	logs.Wait(t, logAllDown, 1, 5*time.Second)
	began := time.Now()
	if _, err := f.Exchange(context.Background(), new(dns.Msg).SetQuestion("www.example.com.", dns.TypeA)); err == nil {
		t.Fatal("an answer from an upstream that does not answer")
	}
	if took := time.Since(began); took > 200*time.Millisecond || silent.dropped.Load() != 0 {
		t.Errorf("the first query took %s and reached the upstream %d times; the probes had found it down", took, silent.dropped.Load())
	}
}

// When no upstream answers, queries fail at once, and that is logged once;
// the probe notices an upstream answering again, and that is logged once.
func TestForwardFailsFastWhileNoUpstreamAnswers(t *testing.T) {
	silent := &dropping{}
	silentAddr, refusedAddr := dnstest.Serve(t, silent), refusing(t)
	f, reg, logs := newForwarder(t, silentAddr, refusedAddr)
	q := new(dns.Msg).SetQuestion("www.example.com.", dns.TypeA)
	if _, err := f.Exchange(context.Background(), q); err == nil {
		t.Fatal("an answer from upstreams that do not answer")
	}
	logs.Wait(t, logAllDown, 1, 5*time.Second)
	for range 5 {
		began := time.Now()
		_, err := f.Exchange(context.Background(), q)
		if took := time.Since(began); !errors.Is(err, errAllDown) || took > 200*time.Millisecond {
			t.Fatalf("with every upstream down: %v after %s, want %v at once", err, took, errAllDown)
		}
	}
	warned := logs.With(logAllDown)
	if len(warned) != 1 || warned[0].Level != slog.LevelWarn || attr(warned[0], "upstreams") != fmt.Sprint([]string{silentAddr, refusedAddr}) {
		t.Errorf("warnings: %v, want one naming both upstreams", warned)
	}
	if n, err := testutil.GatherAndCount(reg, "svcnet_dns_forward_healthcheck_failures_total"); err != nil || n != 2 {
		t.Errorf("health check failures: %d series, %v", n, err)
	}

	silent.answer.Store(true)
	logs.Wait(t, logAnswers, 1, 5*time.Second)
	if resp := ask(t, f, "www.example.com.", dns.TypeA); len(resp.Answer) != 1 {
		t.Fatalf("answer after recovery: %v", resp.Answer)
	}
	back := logs.With(logAnswers)
	if len(back) != 1 || back[0].Level != slog.LevelInfo || attr(back[0], "upstream") != silentAddr {
		t.Errorf("recoveries logged: %v, want one naming %s", back, silentAddr)
	}
	if n := len(logs.With(logAllDown)); n != 1 {
		t.Errorf("%q logged %d times, want once", logAllDown, n)
	}
}

// A single lost query does not make an upstream down: the probe that the
// failure starts gets an answer.
func TestForwardToleratesOneLostQuery(t *testing.T) {
	u := &resolver{}
	var seen atomic.Int32
	addr := dnstest.Serve(t, dns.HandlerFunc(func(w dns.ResponseWriter, r *dns.Msg) {
		if isProbe(r) || seen.Add(1) > 1 {
			u.ServeDNS(w, r)
		}
	}))
	f, _, logs := newForwarder(t, addr)
	if _, err := f.Exchange(context.Background(), new(dns.Msg).SetQuestion("www.example.com.", dns.TypeA)); err == nil {
		t.Fatal("the dropped query was answered")
	}
	if resp := ask(t, f, "www.example.com.", dns.TypeA); len(resp.Answer) != 1 {
		t.Fatalf("answer: %v", resp.Answer)
	}
	if n := len(logs.With(logDown)); n != 0 {
		t.Errorf("one lost query made the upstream down")
	}
}

// attr is the value of a record's attribute key, formatted.
func attr(r slog.Record, key string) string {
	v := ""
	r.Attrs(func(a slog.Attr) bool {
		if a.Key == key {
			v = fmt.Sprint(a.Value.Any())
		}
		return true
	})
	return v
}

func TestForwardFailsOverToTheNextUpstream(t *testing.T) {
	// A UDP port with nobody behind it: the query is refused or times out.
	dead := dnstest.Serve(t, dns.HandlerFunc(func(dns.ResponseWriter, *dns.Msg) {}))
	u := &resolver{}
	live := dnstest.Serve(t, u)
	f, _, _ := newForwarder(t, dead, live)
	for range 4 { // whichever upstream is asked first
		f.cache = newCache(10, 0)
		if resp := ask(t, f, "www.example.com.", dns.TypeA); len(resp.Answer) != 1 {
			t.Fatalf("answer %v", resp.Answer)
		}
	}
	f, _, _ = newForwarder(t, dead)
	if _, err := f.Exchange(context.Background(), new(dns.Msg).SetQuestion("www.example.com.", dns.TypeA)); err == nil {
		t.Error("no error when every upstream failed")
	}
}
