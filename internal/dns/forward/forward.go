// Package forward resolves the names cluster DNS does not hold through the
// node's upstream resolvers, as CoreDNS's forward and cache plugins do for
// a cluster: it asks the upstreams in turn over UDP (again over TCP when
// the answer is truncated) and keeps answers for their TTL, negative ones
// for their SOA's minimum, so that a busy name costs one upstream query per
// TTL.
package forward

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"time"

	"github.com/miekg/dns"
	"github.com/prometheus/client_golang/prometheus"
)

// Config configures a Forwarder.
type Config struct {
	// Upstreams are host:port addresses of recursive resolvers.
	Upstreams []string
	// Dial opens connections to the upstreams; nil dials from the
	// process's network namespace.
	Dial func(ctx context.Context, network, address string) (net.Conn, error)
	// Timeout bounds one try of one upstream (default 2s).
	Timeout time.Duration
	// CacheSize is the most answers kept (default 10000).
	CacheSize int
	// Registerer gets the forwarder's and the cache's metrics.
	Registerer prometheus.Registerer
}

// Forwarder sends queries upstream and caches the answers.
type Forwarder struct {
	upstreams []string
	dial      func(ctx context.Context, network, address string) (net.Conn, error)
	timeout   time.Duration
	cache     *cache
	m         metrics
}

type metrics struct {
	requests  *prometheus.CounterVec
	responses *prometheus.CounterVec
	hits      *prometheus.CounterVec
	misses    prometheus.Counter
	entries   prometheus.GaugeFunc
}

// New returns a Forwarder. Without upstreams it answers every query with
// an error (the server's SERVFAIL), so that cluster names still work.
func New(c Config) (*Forwarder, error) {
	f := &Forwarder{upstreams: c.Upstreams, dial: c.Dial, timeout: c.Timeout}
	if f.dial == nil {
		f.dial = (&net.Dialer{}).DialContext
	}
	if f.timeout == 0 {
		f.timeout = 2 * time.Second
	}
	if c.CacheSize == 0 {
		c.CacheSize = 10000
	}
	f.cache = newCache(c.CacheSize)
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
	}
	if c.Registerer != nil {
		for _, col := range []prometheus.Collector{f.m.requests, f.m.responses, f.m.hits, f.m.misses, f.m.entries} {
			if err := c.Registerer.Register(col); err != nil {
				return nil, fmt.Errorf("register forward metrics: %w", err)
			}
		}
	}
	return f, nil
}

// Exchange answers req from the cache or from the first upstream that
// replies. The reply carries req's ID.
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
	start := rand.IntN(len(f.upstreams))
	var errs []error
	for i := range f.upstreams {
		to := f.upstreams[(start+i)%len(f.upstreams)]
		resp, err := f.exchange(ctx, to, req)
		if err != nil {
			errs = append(errs, err)
			if ctx.Err() != nil {
				break
			}
			continue
		}
		f.m.responses.WithLabelValues(to, dns.RcodeToString[resp.Rcode]).Inc()
		f.cache.put(k, resp, time.Now())
		return resp, nil
	}
	return nil, fmt.Errorf("forward %s: %w", req.Question[0].Name, errors.Join(errs...))
}

// exchange asks one upstream over UDP, then over TCP when the answer was
// truncated.
func (f *Forwarder) exchange(ctx context.Context, to string, req *dns.Msg) (*dns.Msg, error) {
	f.m.requests.WithLabelValues(to).Inc()
	resp, err := f.exchangeOver(ctx, "udp", to, req)
	if err == nil && resp.Truncated {
		resp, err = f.exchangeOver(ctx, "tcp", to, req)
	}
	return resp, err
}

func (f *Forwarder) exchangeOver(ctx context.Context, network, to string, req *dns.Msg) (*dns.Msg, error) {
	ctx, cancel := context.WithTimeout(ctx, f.timeout)
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
