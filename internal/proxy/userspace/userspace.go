// Package userspace is the proxy's fallback backend for nodes where
// nftables cannot be used (no CAP_NET_ADMIN, or a kernel without
// nf_tables): instead of rules it opens sockets in the node's network
// namespace and copies bytes. A Service port gets a listener on its
// NodePort, if it has one (on every node address), and on its cluster, external and load
// balancer IPs where the node can bind them (an address the node has,
// such as an external IP that is the node's own, or cluster IPs the
// administrator routed locally); without redirect rules nothing else
// reaches a socket. TCP is copied with io.Copy, which splices between TCP
// sockets on Linux; UDP is relayed per client with an idle timeout. The
// endpoint is random per connection, or sticky per client address with
// sessionAffinity ClientIP; endpoints change under open listeners, and a
// Service without endpoints has its connections reset at once.
package userspace

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/netip"
	"sync"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/svcnet/svcnet/internal/netns"
	"github.com/svcnet/svcnet/internal/proxy"
)

// DefaultUDPIdleTimeout is kube-proxy's --udp-timeout default for its
// userspace mode.
const DefaultUDPIdleTimeout = 250 * time.Millisecond

// dialTimeouts bound the attempts to connect to successive endpoints, as
// kube-proxy's userspace proxier did: a dead endpoint costs little, and a
// connection tries at most this many.
var dialTimeouts = []time.Duration{250 * time.Millisecond, 500 * time.Millisecond, time.Second, 2 * time.Second}

// Config places the backend.
type Config struct {
	// NetNS is the path of the node's network namespace, where the proxy
	// listens and dials; empty means the process's own.
	NetNS string
	// NodePortAddress is the address NodePorts listen on; the zero Addr
	// means every address of the node.
	NodePortAddress netip.Addr
	// UDPIdleTimeout ends a UDP session that saw no datagram for that
	// long (default DefaultUDPIdleTimeout).
	UDPIdleTimeout time.Duration
	// Logger logs for the backend (default: slog's).
	Logger *slog.Logger
}

// Backend is the userspace proxy. Sync and Cleanup are called from one
// goroutine (the proxy's sync loop), Frontends from any; the connections
// it proxies run on goroutines of their own, all of which Cleanup stops.
type Backend struct {
	cfg Config
	log *slog.Logger

	// Owned by the sync goroutine.
	ctx    context.Context
	cancel context.CancelFunc
	// live guards frontends and balancers, which the sync goroutine
	// changes and Frontends reads.
	live      sync.RWMutex
	frontends map[frontendKey]*frontend
	balancers map[target]*balancer
	// unbound are the addresses that could not be bound; they are tried
	// again on full syncs and when their Service changes.
	unbound map[frontendKey]target

	wg    sync.WaitGroup // every goroutine the backend starts
	mu    sync.Mutex
	conns map[io.Closer]struct{} // open proxied connections
}

// frontendKey is one socket: a protocol on an address and port (the zero
// Addr is every address).
type frontendKey struct {
	protocol corev1.Protocol
	addr     netip.AddrPort
}

// address is the host:port to listen on.
func (k frontendKey) address() string {
	if !k.addr.Addr().IsValid() {
		return fmt.Sprintf(":%d", k.addr.Port())
	}
	return k.addr.String()
}

func (k frontendKey) String() string {
	return k.address() + "/" + string(k.protocol)
}

// target is where a frontend's traffic goes: one Service port's internal
// (cluster IP) or external (NodePort, external and load balancer IPs)
// endpoints.
type target struct {
	service  types.NamespacedName
	port     string
	external bool
}

// frontend is an open socket serving a target, for one kind of address.
type frontend struct {
	target target
	kind   proxy.FrontendKind
	sock   io.Closer
}

// New makes a backend; it opens nothing until the first Sync.
func New(c Config) *Backend {
	if c.UDPIdleTimeout == 0 {
		c.UDPIdleTimeout = DefaultUDPIdleTimeout
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	b := &Backend{
		cfg:       c,
		log:       c.Logger,
		frontends: map[frontendKey]*frontend{},
		balancers: map[target]*balancer{},
		unbound:   map[frontendKey]target{},
		conns:     map[io.Closer]struct{}{},
	}
	b.ctx, b.cancel = context.WithCancel(context.Background())
	return b
}

// want is what one sync asks for: the sockets with their targets and
// kinds, and each target's endpoints.
type want struct {
	frontends map[frontendKey]target
	kinds     map[frontendKey]proxy.FrontendKind
	endpoints map[target][]proxy.Endpoint
	affinity  map[target]int32
}

// Sync opens the sockets of new Service ports, closes those of removed
// ones and hands the balancers their current endpoints. The socket table
// is recomputed from every Service (it is small); only sockets that change
// are opened or closed, and open connections keep going.
func (b *Backend) Sync(_ context.Context, u proxy.Update) (proxy.Stats, error) {
	b.live.Lock()
	defer b.live.Unlock()
	st := proxy.Stats{Objects: map[string]int{}, NoLocalEndpoints: map[string]int{}}
	w := want{frontends: map[frontendKey]target{}, kinds: map[frontendKey]proxy.FrontendKind{},
		endpoints: map[target][]proxy.Endpoint{}, affinity: map[target]int32{}}
	for name, svc := range u.Services {
		_, changed := u.Changed[name]
		for _, p := range svc.Ports {
			if p.Protocol != corev1.ProtocolTCP && p.Protocol != corev1.ProtocolUDP {
				if changed {
					b.log.Warn("the userspace proxy serves TCP and UDP only; port not proxied", "service", p.String(name), "protocol", p.Protocol)
				}
				continue
			}
			b.plan(&w, &st, name, p)
		}
	}
	for t, eps := range w.endpoints {
		bal := b.balancers[t]
		if bal == nil {
			bal = newBalancer()
			b.balancers[t] = bal
		}
		bal.update(eps, w.affinity[t])
	}
	for k, f := range b.frontends {
		if t, ok := w.frontends[k]; !ok || t != f.target || w.kinds[k] != f.kind {
			f.sock.Close()
			delete(b.frontends, k)
		}
	}
	for k := range b.unbound {
		if _, ok := w.frontends[k]; !ok {
			delete(b.unbound, k)
		}
	}
	for k, t := range w.frontends {
		if b.frontends[k] != nil {
			continue
		}
		_, changed := u.Changed[t.service]
		prev, failed := b.unbound[k]
		if failed && !u.Full && !changed && prev == t {
			continue
		}
		if err := b.open(k, t, w.kinds[k]); err != nil {
			if !failed || prev != t {
				b.logUnbound(k, t, err)
			}
			b.unbound[k] = t
			continue
		}
		delete(b.unbound, k)
	}
	for t := range b.balancers {
		if _, ok := w.endpoints[t]; !ok {
			delete(b.balancers, t)
		}
	}
	st.Objects["listeners"] = len(b.frontends)
	return st, nil
}

// plan adds one Service port's sockets and endpoints to w.
func (b *Backend) plan(w *want, st *proxy.Stats, name types.NamespacedName, p *proxy.ServicePort) {
	// serve sends traffic to t to the node's own endpoints when the
	// traffic policy is Local, else to any.
	serve := func(t target, local bool, policy string) {
		w.endpoints[t] = p.ClusterEndpoints()
		if local {
			w.endpoints[t] = p.LocalEndpoints()
			if len(w.endpoints[t]) == 0 {
				st.NoLocalEndpoints[policy]++
			}
		}
		w.affinity[t] = p.AffinitySeconds
	}
	// listen sends ports on addresses of a kind to t.
	listen := func(t target, kind proxy.FrontendKind, port int32, addrs ...netip.Addr) {
		for _, a := range addrs {
			k := frontendKey{p.Protocol, netip.AddrPortFrom(a, uint16(port))}
			w.frontends[k], w.kinds[k] = t, kind
		}
	}
	internal := target{service: name, port: p.Name}
	serve(internal, p.InternalLocal, "internal")
	listen(internal, proxy.KindClusterIP, p.Port, p.ClusterIPs...)
	if !p.ExternallyAccessible() {
		return
	}
	external := target{service: name, port: p.Name, external: true}
	serve(external, p.ExternalLocal, "external")
	listen(external, proxy.KindExternalIP, p.Port, p.ExternalIPs...)
	listen(external, proxy.KindLoadBalancer, p.Port, p.LoadBalancerIPs...)
	if p.NodePort != 0 {
		listen(external, proxy.KindNodePort, p.NodePort, b.cfg.NodePortAddress)
	}
}

// logUnbound says why a socket could not be opened: for an address the
// node does not have (a cluster IP, as a rule) that is the userspace
// proxy's limit, not a fault.
func (b *Backend) logUnbound(k frontendKey, t target, err error) {
	svc := fmt.Sprintf("%s:%s", t.service, t.port)
	if errors.Is(err, syscall.EADDRNOTAVAIL) {
		b.log.Debug("userspace proxy: the node has no such address, so it is not served", "service", svc, "address", k.String())
		return
	}
	b.log.Warn("userspace proxy: cannot listen", "service", svc, "address", k.String(), "err", err)
}

// open opens k's socket in the node's namespace and starts serving t.
func (b *Backend) open(k frontendKey, t target, kind proxy.FrontendKind) error {
	addr, bal, ctx := k.address(), b.balancers[t], b.ctx
	var f *frontend
	err := netns.Do(b.cfg.NetNS, func() error {
		switch k.protocol {
		case corev1.ProtocolTCP:
			ln, err := net.Listen("tcp", addr)
			if err != nil {
				return err
			}
			f = &frontend{target: t, kind: kind, sock: ln}
			b.wg.Go(func() { b.serveTCP(ctx, ln.(*net.TCPListener), bal) })
		default:
			pc, err := net.ListenPacket("udp", addr)
			if err != nil {
				return err
			}
			f = &frontend{target: t, kind: kind, sock: pc}
			u := &udpFrontend{b: b, ctx: ctx, pc: pc.(*net.UDPConn), bal: bal, sessions: map[netip.AddrPort]*udpSession{}}
			b.wg.Go(u.serve)
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("listen on %s: %w", k, err)
	}
	b.frontends[k] = f
	return nil
}

// Frontends are the sockets the backend listens on, each with the
// endpoints its balancer holds now (none: connections are reset, Reject).
// A NodePort on every address of the node has the unspecified IPv4
// address. Addresses that could not be bound are not frontends. With
// service set (namespace/name), only that Service's.
func (b *Backend) Frontends(_ context.Context, service string) ([]proxy.Frontend, error) {
	b.live.RLock()
	defer b.live.RUnlock()
	out := make([]proxy.Frontend, 0, len(b.frontends))
	for k, f := range b.frontends {
		if service != "" && f.target.service.String() != service {
			continue
		}
		addr := k.addr
		if !addr.Addr().IsValid() {
			addr = netip.AddrPortFrom(netip.IPv4Unspecified(), addr.Port())
		}
		fr := proxy.Frontend{Namespace: f.target.service.Namespace, Name: f.target.service.Name, PortName: f.target.port,
			Kind: f.kind, Address: addr, Protocol: k.protocol}
		if bal := b.balancers[f.target]; bal != nil {
			fr.Backends = bal.snapshot()
		}
		fr.Reject = len(fr.Backends) == 0
		out = append(out, fr)
	}
	proxy.SortFrontends(out)
	return out, nil
}

// dial connects to an endpoint from the node's namespace.
func (b *Backend) dial(ctx context.Context, network string, ep netip.AddrPort, timeout time.Duration) (net.Conn, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	var c net.Conn
	err := netns.Do(b.cfg.NetNS, func() error {
		var err error
		c, err = (&net.Dialer{}).DialContext(ctx, network, ep.String())
		return err
	})
	return c, err
}

// track registers a proxied connection for Cleanup; false means the
// backend is being cleaned up and c must not be used.
func (b *Backend) track(ctx context.Context, c io.Closer) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	if ctx.Err() != nil {
		return false
	}
	b.conns[c] = struct{}{}
	return true
}

func (b *Backend) untrack(c io.Closer) {
	b.mu.Lock()
	defer b.mu.Unlock()
	delete(b.conns, c)
}

// Cleanup closes every socket and connection and waits for the
// goroutines serving them. The backend can be synced again afterwards.
func (b *Backend) Cleanup() error {
	b.live.Lock()
	defer b.live.Unlock()
	for k, f := range b.frontends {
		f.sock.Close()
		delete(b.frontends, k)
	}
	b.cancel()
	b.mu.Lock()
	for c := range b.conns {
		c.Close()
	}
	b.mu.Unlock()
	b.wg.Wait()
	clear(b.balancers)
	clear(b.unbound)
	b.ctx, b.cancel = context.WithCancel(context.Background())
	return nil
}
