package userspace

import (
	"context"
	"errors"
	"io"
	"net"
	"net/netip"
	"time"
)

// serveTCP accepts connections on ln until it is closed and proxies each
// to an endpoint of bal.
func (b *Backend) serveTCP(ctx context.Context, ln *net.TCPListener, bal *balancer) {
	backoff := 5 * time.Millisecond
	for {
		c, err := ln.AcceptTCP()
		if errors.Is(err, net.ErrClosed) {
			return
		}
		if err != nil {
			// Out of file descriptors, as a rule: wait a little, as
			// net/http's server does, rather than spin.
			b.log.Warn("userspace proxy: accept", "address", ln.Addr().String(), "err", err)
			select {
			case <-ctx.Done():
				return
			case <-time.After(backoff):
			}
			backoff = min(2*backoff, time.Second)
			continue
		}
		backoff = 5 * time.Millisecond
		b.wg.Go(func() { b.proxyTCP(ctx, c, bal) })
	}
}

// proxyTCP connects client to an endpoint and copies both ways until both
// sides are done. Without a reachable endpoint the client gets a reset at
// once.
func (b *Backend) proxyTCP(ctx context.Context, client *net.TCPConn, bal *balancer) {
	defer client.Close()
	if !b.track(ctx, client) {
		return
	}
	defer b.untrack(client)
	from := client.RemoteAddr().(*net.TCPAddr).AddrPort().Addr()
	server := b.connect(ctx, bal, from)
	if server == nil {
		_ = client.SetLinger(0) // close with a reset
		return
	}
	defer server.Close()
	if !b.track(ctx, server) {
		return
	}
	defer b.untrack(server)
	splice(client, server)
}

// connect dials the candidates of bal for client, a few at most, and
// returns the first connection made, or nil.
func (b *Backend) connect(ctx context.Context, bal *balancer, client netip.Addr) *net.TCPConn {
	eps := bal.candidates(client)
	for i, ep := range eps[:min(len(eps), len(dialTimeouts))] {
		c, err := b.dial(ctx, "tcp", ep, dialTimeouts[i])
		if err != nil {
			b.log.Debug("userspace proxy: dial endpoint", "endpoint", ep.String(), "err", err)
			continue
		}
		bal.chosen(client, ep)
		return c.(*net.TCPConn)
	}
	return nil
}

// splice copies a to b and b to a; io.Copy between TCP sockets splices in
// the kernel on Linux. A side that ends cleanly half-closes the other, so
// a request-then-shutdown client still gets its answer; an error ends
// both.
func splice(a, b *net.TCPConn) {
	half := func(dst, src *net.TCPConn) {
		if _, err := io.Copy(dst, src); err != nil {
			a.Close()
			b.Close()
			return
		}
		_ = dst.CloseWrite()
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		half(b, a)
	}()
	half(a, b)
	<-done
}
