// Package forward resolves the names cluster DNS does not hold through
// upstream resolvers, as CoreDNS's forward and cache plugins do for
// a cluster: it asks the upstreams in turn over UDP (again over TCP when
// the answer is truncated) and keeps answers for their TTL, negative ones
// for their SOA's minimum, so that a busy name costs one upstream query per
// TTL.
//
// Like CoreDNS's forward plugin it also tracks each upstream's health, so
// that an unreachable resolver (a pod network with no route out, a
// resolver that is down) does not stall every query for its timeout: an
// upstream that fails is probed in the background with ". IN NS" queries,
// at once and then every half second until it answers, and is skipped while
// it is down. When every upstream is down, a query fails at once (the
// server's SERVFAIL) where CoreDNS would try a random one anyway.
package forward

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net"
	"sync"
	"time"

	"github.com/miekg/dns"
	"github.com/prometheus/client_golang/prometheus"
)

// Health checking. An upstream is down after maxFails consecutive failures
// (of queries or probes), CoreDNS's default max_fails: a single lost UDP
// datagram then costs one slow query rather than a SERVFAIL for every
// query until the next probe, while a dead upstream is down one probe
// timeout after its first failure, since that failure starts the probing.
const (
	maxFails      = 2
	probeInterval = 500 * time.Millisecond // CoreDNS's health_check default
	probeTimeout  = time.Second            // CoreDNS's health check timeout
)

// errAllDown is the error of a query that finds every upstream down.
var errAllDown = errors.New("no upstream resolver answers")

// Config configures a Forwarder.
type Config struct {
	// Upstreams are host:port addresses of recursive resolvers.
	Upstreams []string
	// Dial opens connections to the upstreams; nil dials from the
	// process's network namespace.
	Dial func(ctx context.Context, network, address string) (net.Conn, error)
	// Timeout bounds one try of one upstream (default 2s); a probe gets
	// at most a second of it.
	Timeout time.Duration
	// CacheSize is the most answers kept (default 10000); MaxTTL caps
	// how long one is kept (CoreDNS's `cache SECONDS`; 0: its TTL).
	CacheSize int
	MaxTTL    time.Duration
	// Registerer gets the forwarder's and the cache's metrics.
	Registerer prometheus.Registerer
	// Logger gets the lines saying that no upstream answers and that one
	// answers again (default slog.Default()).
	Logger *slog.Logger
}

// Forwarder sends queries upstream and caches the answers. Run must be
// running for an upstream that went down to come back.
type Forwarder struct {
	upstreams []*upstream
	dial      func(ctx context.Context, network, address string) (net.Conn, error)
	timeout   time.Duration
	cache     *cache
	m         metrics
	log       *slog.Logger

	mu sync.Mutex // guards the upstreams' fails and allDown
	// allDown is set while every upstream is down, so that the
	// transitions are logged once.
	allDown bool
}

// upstream is one resolver and its health.
type upstream struct {
	addr string
	// fails counts the consecutive failures; maxFails of them make the
	// upstream down.
	fails int
	// failed wakes the upstream's prober after a failure.
	failed chan struct{}
}

type metrics struct {
	requests      *prometheus.CounterVec
	responses     *prometheus.CounterVec
	hits          *prometheus.CounterVec
	misses        prometheus.Counter
	entries       prometheus.GaugeFunc
	probeFailures *prometheus.CounterVec
}

// New returns a Forwarder. Without upstreams it answers every query with
// an error (the server's SERVFAIL), so that cluster names still work.
func New(c Config) (*Forwarder, error) {
	f := &Forwarder{dial: c.Dial, timeout: c.Timeout, log: c.Logger}
	for _, addr := range c.Upstreams {
		f.upstreams = append(f.upstreams, &upstream{addr: addr, failed: make(chan struct{}, 1)})
	}
	if f.log == nil {
		f.log = slog.Default()
	}
	if f.dial == nil {
		f.dial = (&net.Dialer{}).DialContext
	}
	if f.timeout == 0 {
		f.timeout = 2 * time.Second
	}
	if c.CacheSize == 0 {
		c.CacheSize = 10000
	}
	f.cache = newCache(c.CacheSize, c.MaxTTL)
	f.m = metrics{
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "svcnet_dns_forward_requests_total", Help: "Queries sent to each upstream resolver.",
		}, []string{"to"}),
		responses: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "svcnet_dns_forward_responses_total", Help: "Answers from each upstream resolver, by rcode.",
		}, []string{"to", "rcode"}),
		hits: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "svcnet_dns_cache_hits_total", Help: "Forwarded queries answered from the cache, by type (success or denial).",
		}, []string{"type"}),
		misses: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "svcnet_dns_cache_misses_total", Help: "Forwarded queries the cache could not answer.",
		}),
		entries: prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "svcnet_dns_cache_entries", Help: "Answers in the cache.",
		}, func() float64 { return float64(f.cache.len()) }),
		probeFailures: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "svcnet_dns_forward_healthcheck_failures_total", Help: "Health probes of each upstream resolver that got no answer.",
		}, []string{"to"}),
	}
	if c.Registerer != nil {
		for _, col := range []prometheus.Collector{f.m.requests, f.m.responses, f.m.hits, f.m.misses, f.m.entries, f.m.probeFailures} {
			if err := c.Registerer.Register(col); err != nil {
				return nil, fmt.Errorf("register forward metrics: %w", err)
			}
		}
	}
	return f, nil
}

// Exchange answers req from the cache or from the first upstream that
// replies, skipping the upstreams that are down; when all are, it fails at
// once. The reply carries req's ID.
func (f *Forwarder) Exchange(ctx context.Context, req *dns.Msg) (*dns.Msg, error) {
	if len(req.Question) != 1 {
		return nil, errors.New("forward: a query needs exactly one question")
	}
	k := keyOf(req)
	if m, negative, ok := f.cache.get(k, time.Now()); ok {
		f.m.hits.WithLabelValues(map[bool]string{false: "success", true: "denial"}[negative]).Inc()
		m.Id = req.Id
		return m, nil
	}
	f.m.misses.Inc()
	if len(f.upstreams) == 0 {
		return nil, errors.New("forward: no upstream resolvers")
	}
	tries := f.up()
	if len(tries) == 0 {
		return nil, fmt.Errorf("forward %s: %w", req.Question[0].Name, errAllDown)
	}
	var errs []error
	for _, u := range tries {
		resp, err := f.exchange(ctx, u.addr, req)
		if err != nil {
			errs = append(errs, err)
			if ctx.Err() != nil {
				break
			}
			f.record(u, false)
			continue
		}
		f.record(u, true)
		f.m.responses.WithLabelValues(u.addr, dns.RcodeToString[resp.Rcode]).Inc()
		f.cache.put(k, resp, time.Now())
		return resp, nil
	}
	return nil, fmt.Errorf("forward %s: %w", req.Question[0].Name, errors.Join(errs...))
}

// up returns the upstreams that are not down, in turn from a random one.
func (f *Forwarder) up() []*upstream {
	f.mu.Lock()
	defer f.mu.Unlock()
	start := rand.IntN(len(f.upstreams))
	var out []*upstream
	for i := range f.upstreams {
		if u := f.upstreams[(start+i)%len(f.upstreams)]; u.fails < maxFails {
			out = append(out, u)
		}
	}
	return out
}

// record notes whether u answered a query or a probe. A failure wakes u's
// prober. Each upstream going down or coming back is logged at debug
// level; the last one going down is a warning, and the first one coming
// back after that is logged too.
func (f *Forwarder) record(u *upstream, answered bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if answered {
		if u.fails >= maxFails {
			f.log.Debug("upstream DNS resolver up", "upstream", u.addr)
		}
		u.fails = 0
		if f.allDown {
			f.allDown = false
			f.log.Info("upstream DNS resolver answers again", "upstream", u.addr)
		}
		return
	}
	u.fails++
	select {
	case u.failed <- struct{}{}:
	default:
	}
	if u.fails == maxFails {
		f.log.Debug("upstream DNS resolver down", "upstream", u.addr)
	}
	if f.allDown {
		return
	}
	addrs := make([]string, len(f.upstreams))
	for i, o := range f.upstreams {
		if o.fails < maxFails {
			return
		}
		addrs[i] = o.addr
	}
	f.allDown = true
	f.log.Warn("no upstream DNS resolver answers; forwarded queries get SERVFAIL until one does", "upstreams", addrs)
}

// Run probes each upstream at once, so that one that cannot be reached
// is known before the first query waits for it, and then each time it
// fails, until it answers again; it returns when ctx ends.
func (f *Forwarder) Run(ctx context.Context) {
	var wg sync.WaitGroup
	for _, u := range f.upstreams {
		wg.Go(func() { f.watch(ctx, u) })
	}
	wg.Wait()
}

// watch probes u at the start and after each failure: at once, then
// every probeInterval until it answers.
func (f *Forwarder) watch(ctx context.Context, u *upstream) {
	for first := true; ; first = false {
		if !first {
			select {
			case <-ctx.Done():
				return
			case <-u.failed:
			}
		}
		for !f.probe(ctx, u) {
			select {
			case <-ctx.Done():
				return
			case <-time.After(probeInterval):
			}
		}
	}
}

// probe asks u for the root's NS records, as CoreDNS's health check does,
// and records whether it answered (whatever the rcode).
func (f *Forwarder) probe(ctx context.Context, u *upstream) bool {
	ping := new(dns.Msg).SetQuestion(".", dns.TypeNS)
	_, err := f.exchangeOver(ctx, "udp", u.addr, ping, min(f.timeout, probeTimeout))
	if ctx.Err() != nil {
		return false
	}
	if err != nil {
		f.m.probeFailures.WithLabelValues(u.addr).Inc()
	}
	f.record(u, err == nil)
	return err == nil
}

// exchange asks one upstream over UDP, then over TCP when the answer was
// truncated.
func (f *Forwarder) exchange(ctx context.Context, to string, req *dns.Msg) (*dns.Msg, error) {
	f.m.requests.WithLabelValues(to).Inc()
	resp, err := f.exchangeOver(ctx, "udp", to, req, f.timeout)
	if err == nil && resp.Truncated {
		resp, err = f.exchangeOver(ctx, "tcp", to, req, f.timeout)
	}
	return resp, err
}

// exchangeOver asks one upstream over network, within timeout.
func (f *Forwarder) exchangeOver(ctx context.Context, network, to string, req *dns.Msg, timeout time.Duration) (*dns.Msg, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	conn, err := f.dial(ctx, network, to)
	if err != nil {
		return nil, fmt.Errorf("dial %s %s: %w", network, to, err)
	}
	defer conn.Close()
	client := &dns.Client{Net: network}
	resp, _, err := client.ExchangeWithConnContext(ctx, req, &dns.Conn{Conn: conn})
	if err != nil {
		return nil, fmt.Errorf("ask %s over %s: %w", to, network, err)
	}
	return resp, nil
}
