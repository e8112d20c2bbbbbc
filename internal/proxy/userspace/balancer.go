package userspace

import (
	"math/rand/v2"
	"net/netip"
	"slices"
	"sync"
	"time"

	"github.com/svcnet/svcnet/internal/proxy"
)

// balancer picks endpoints for one Service port and one kind of traffic
// (cluster IP, or NodePort and external addresses, which differ under a
// Local traffic policy). Syncs replace its endpoints while connections
// use it.
type balancer struct {
	mu        sync.Mutex
	endpoints []netip.AddrPort
	member    map[netip.AddrPort]bool
	// affinity is the ClientIP session affinity timeout, 0 without.
	affinity time.Duration
	clients  map[netip.Addr]sticky
}

// sticky is the endpoint a client was last sent to, and when.
type sticky struct {
	endpoint netip.AddrPort
	last     time.Time
}

func newBalancer() *balancer {
	return &balancer{member: map[netip.AddrPort]bool{}, clients: map[netip.Addr]sticky{}}
}

// update replaces the endpoints and the affinity timeout, and forgets the
// affinity of clients whose endpoint went or whose time is up.
func (b *balancer) update(eps []proxy.Endpoint, affinitySeconds int32) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.endpoints = b.endpoints[:0]
	clear(b.member)
	for _, e := range eps {
		ap := netip.AddrPortFrom(e.Addr, uint16(e.Port))
		b.endpoints = append(b.endpoints, ap)
		b.member[ap] = true
	}
	b.affinity = time.Duration(affinitySeconds) * time.Second
	now := time.Now()
	for client, s := range b.clients {
		if !b.member[s.endpoint] || now.Sub(s.last) >= b.affinity {
			delete(b.clients, client)
		}
	}
}

// snapshot is a copy of the endpoints.
func (b *balancer) snapshot() []netip.AddrPort {
	b.mu.Lock()
	defer b.mu.Unlock()
	return slices.Clone(b.endpoints)
}

// has reports whether ep is still one of the endpoints.
func (b *balancer) has(ep netip.AddrPort) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.member[ep]
}

// candidates are the endpoints to try for a connection from client, in
// order: the client's affine endpoint if it has one, then the others in a
// random order (none when the Service has no endpoints).
func (b *balancer) candidates(client netip.Addr) []netip.AddrPort {
	b.mu.Lock()
	defer b.mu.Unlock()
	out := make([]netip.AddrPort, len(b.endpoints))
	for i, j := range rand.Perm(len(b.endpoints)) {
		out[i] = b.endpoints[j]
	}
	if s, ok := b.clients[client.Unmap()]; ok && b.member[s.endpoint] && time.Since(s.last) < b.affinity {
		for i, ep := range out {
			if ep == s.endpoint {
				out[0], out[i] = out[i], out[0]
				break
			}
		}
	}
	return out
}

// chosen records that client was sent to ep, which keeps it there for the
// affinity timeout.
func (b *balancer) chosen(client netip.Addr, ep netip.AddrPort) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.affinity > 0 {
		b.clients[client.Unmap()] = sticky{endpoint: ep, last: time.Now()}
	}
}
