package forward

import (
	"strings"
	"sync"
	"time"

	"github.com/miekg/dns"
)

// Bounds of the time an answer is kept, CoreDNS's cache defaults.
const (
	maxSuccessTTL = 3600 * time.Second
	maxDenialTTL  = 1800 * time.Second
)

type key struct {
	name          string
	qtype, qclass uint16
	do            bool
}

func keyOf(m *dns.Msg) key {
	q := m.Question[0]
	k := key{name: strings.ToLower(q.Name), qtype: q.Qtype, qclass: q.Qclass}
	if opt := m.IsEdns0(); opt != nil {
		k.do = opt.Do()
	}
	return k
}

type entry struct {
	msg      *dns.Msg
	stored   time.Time
	expires  time.Time
	negative bool
}

// cache keeps answers until their TTL ends; when full, a random entry
// makes room (as CoreDNS's cache does).
type cache struct {
	size int
	// maxTTL caps how long an answer is kept, and the TTLs it shows
	// (CoreDNS's `cache SECONDS`); 0: no cap.
	maxTTL time.Duration

	mu      sync.Mutex
	entries map[key]entry
}

func newCache(size int, maxTTL time.Duration) *cache {
	return &cache{size: size, maxTTL: maxTTL, entries: map[key]entry{}}
}

func (c *cache) len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.entries)
}

// get returns a copy of a live answer with its TTLs aged, and whether it
// is a denial (NXDOMAIN or NODATA).
func (c *cache) get(k key, now time.Time) (*dns.Msg, bool, bool) {
	c.mu.Lock()
	e, ok := c.entries[k]
	if ok && !now.Before(e.expires) {
		delete(c.entries, k)
		ok = false
	}
	c.mu.Unlock()
	if !ok {
		return nil, false, false
	}
	m := e.msg.Copy()
	age := uint32(now.Sub(e.stored) / time.Second)
	for _, section := range [][]dns.RR{m.Answer, m.Ns, m.Extra} {
		for _, rr := range section {
			if h := rr.Header(); h.Rrtype != dns.TypeOPT {
				h.Ttl -= min(age, h.Ttl)
			}
		}
	}
	return m, e.negative, true
}

// put keeps an answer for the smallest TTL in it (a denial: its SOA's),
// if it is a success or a denial and not truncated.
func (c *cache) put(k key, m *dns.Msg, now time.Time) {
	if m.Truncated || (m.Rcode != dns.RcodeSuccess && m.Rcode != dns.RcodeNameError) {
		return
	}
	negative := m.Rcode == dns.RcodeNameError || len(m.Answer) == 0
	ttl, ok := ttlOf(m, negative)
	if !ok || ttl == 0 {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, present := c.entries[k]; !present && len(c.entries) >= c.size {
		for victim := range c.entries {
			delete(c.entries, victim)
			break
		}
	}
	kept := m.Copy()
	if c.maxTTL > 0 && ttl > c.maxTTL {
		ttl = c.maxTTL
		capTTLs(kept, uint32(c.maxTTL/time.Second))
	}
	c.entries[k] = entry{msg: kept, stored: now, expires: now.Add(ttl), negative: negative}
}

// capTTLs lowers every record's TTL in m to at most ttl.
func capTTLs(m *dns.Msg, ttl uint32) {
	for _, section := range [][]dns.RR{m.Answer, m.Ns, m.Extra} {
		for _, rr := range section {
			if h := rr.Header(); h.Rrtype != dns.TypeOPT {
				h.Ttl = min(h.Ttl, ttl)
			}
		}
	}
}

// ttlOf is how long an answer may be kept.
func ttlOf(m *dns.Msg, negative bool) (time.Duration, bool) {
	if negative {
		for _, rr := range m.Ns {
			if soa, ok := rr.(*dns.SOA); ok {
				return min(time.Duration(min(soa.Hdr.Ttl, soa.Minttl))*time.Second, maxDenialTTL), true
			}
		}
		return 0, false
	}
	lowest := ^uint32(0)
	for _, section := range [][]dns.RR{m.Answer, m.Ns} {
		for _, rr := range section {
			lowest = min(lowest, rr.Header().Ttl)
		}
	}
	return min(time.Duration(lowest)*time.Second, maxSuccessTTL), true
}
