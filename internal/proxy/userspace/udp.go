package userspace

import (
	"context"
	"errors"
	"net"
	"net/netip"
	"sync"
	"time"
)

// udpFrontend relays datagrams between clients and endpoints: each client
// address has a session, a socket connected to one endpoint, whose
// replies go back to the client from the frontend's socket. A session
// ends after the idle timeout, or when its endpoint leaves the Service
// (the client's next datagram starts a session with a current endpoint).
type udpFrontend struct {
	b   *Backend
	ctx context.Context
	pc  *net.UDPConn
	bal *balancer

	mu       sync.Mutex
	sessions map[netip.AddrPort]*udpSession
}

type udpSession struct {
	conn     *net.UDPConn
	endpoint netip.AddrPort
}

// serve reads client datagrams until the socket is closed, then ends
// every session.
func (f *udpFrontend) serve() {
	defer func() {
		f.mu.Lock()
		defer f.mu.Unlock()
		for _, s := range f.sessions {
			s.conn.Close()
		}
	}()
	buf := make([]byte, 64<<10)
	for {
		n, client, err := f.pc.ReadFromUDPAddrPort(buf)
		if errors.Is(err, net.ErrClosed) {
			return
		}
		if err != nil {
			f.b.log.Debug("userspace proxy: read UDP", "address", f.pc.LocalAddr().String(), "err", err)
			continue
		}
		f.forward(client, buf[:n])
	}
}

// forward sends a client's datagram to its session's endpoint; a session
// that ended on its idle timeout just now is replaced.
func (f *udpFrontend) forward(client netip.AddrPort, msg []byte) {
	for range 2 {
		s := f.session(client)
		if s == nil {
			return // no endpoints: dropped
		}
		_ = s.conn.SetReadDeadline(time.Now().Add(f.b.cfg.UDPIdleTimeout))
		_, err := s.conn.Write(msg)
		if !errors.Is(err, net.ErrClosed) {
			if err != nil {
				f.b.log.Debug("userspace proxy: write UDP", "endpoint", s.endpoint.String(), "err", err)
			}
			return
		}
		f.mu.Lock()
		if f.sessions[client] == s {
			delete(f.sessions, client)
		}
		f.mu.Unlock()
	}
}

// session is client's session, new if it has none or its endpoint went;
// nil when no endpoint can be had.
func (f *udpFrontend) session(client netip.AddrPort) *udpSession {
	f.mu.Lock()
	s := f.sessions[client]
	f.mu.Unlock()
	if s != nil {
		if f.bal.has(s.endpoint) {
			return s
		}
		s.conn.Close() // its relay removes it
	}
	for _, ep := range f.bal.candidates(client.Addr()) {
		c, err := f.b.dial(f.ctx, "udp", ep, dialTimeouts[0])
		if err != nil {
			f.b.log.Debug("userspace proxy: dial endpoint", "endpoint", ep.String(), "err", err)
			continue
		}
		f.bal.chosen(client.Addr(), ep)
		s = &udpSession{conn: c.(*net.UDPConn), endpoint: ep}
		_ = s.conn.SetReadDeadline(time.Now().Add(f.b.cfg.UDPIdleTimeout))
		f.mu.Lock()
		f.sessions[client] = s
		f.mu.Unlock()
		f.b.wg.Go(func() { f.relay(client, s) })
		return s
	}
	return nil
}

// relay sends the endpoint's replies to client until the session is
// idle for the timeout or closed.
func (f *udpFrontend) relay(client netip.AddrPort, s *udpSession) {
	defer func() {
		f.mu.Lock()
		if f.sessions[client] == s {
			delete(f.sessions, client)
		}
		f.mu.Unlock()
		s.conn.Close()
	}()
	buf := make([]byte, 64<<10)
	for {
		n, err := s.conn.Read(buf)
		if err != nil {
			return // idle, closed, or the endpoint refused (ICMP)
		}
		_ = s.conn.SetReadDeadline(time.Now().Add(f.b.cfg.UDPIdleTimeout))
		if _, err := f.pc.WriteToUDPAddrPort(buf[:n], client); err != nil {
			f.b.log.Debug("userspace proxy: write UDP", "client", client.String(), "err", err)
		}
	}
}
