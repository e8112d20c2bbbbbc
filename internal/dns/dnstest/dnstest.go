// Package dnstest runs DNS servers for tests: a handler served over UDP
// and TCP on one port (of 127.0.0.1, or on sockets the test opened),
// stopped when the test ends. Logs keeps what a component logs, for tests
// that wait for a log line.
package dnstest

import (
	"net"
	"testing"

	"github.com/miekg/dns"
)

// Serve serves h over UDP and TCP on the same free port of 127.0.0.1 and
// returns the address.
func Serve(t testing.TB, h dns.Handler) string {
	t.Helper()
	pc, ln := Listen(t)
	ServeOn(t, pc, ln, h)
	return pc.LocalAddr().String()
}

// Listen opens UDP and TCP on the same free port of 127.0.0.1: a free UDP
// port whose TCP twin is free too.
func Listen(t testing.TB) (net.PacketConn, net.Listener) {
	t.Helper()
	var err error
	for range 20 {
		var pc net.PacketConn
		if pc, err = net.ListenPacket("udp", "127.0.0.1:0"); err != nil {
			t.Fatal(err)
		}
		var ln net.Listener
		if ln, err = net.Listen("tcp", pc.LocalAddr().String()); err == nil {
			return pc, ln
		}
		pc.Close()
	}
	t.Fatalf("no free port for UDP and TCP: %v", err)
	return nil, nil
}

// ServeOn serves h on pc (UDP) and ln (TCP) until the test ends.
func ServeOn(t testing.TB, pc net.PacketConn, ln net.Listener, h dns.Handler) {
	t.Helper()
	for _, s := range []*dns.Server{{PacketConn: pc, Handler: h}, {Listener: ln, Handler: h}} {
		started := make(chan struct{})
		s.NotifyStartedFunc = func() { close(started) }
		done := make(chan struct{})
		go func() {
			defer close(done)
			_ = s.ActivateAndServe()
		}()
		<-started
		t.Cleanup(func() {
			_ = s.Shutdown()
			<-done
		})
	}
}

// Query asks addr one question over network (udp or tcp) with EDNS0 when
// bufsize is not 0.
func Query(t testing.TB, network, addr, name string, qtype uint16, bufsize uint16) *dns.Msg {
	t.Helper()
	m := new(dns.Msg).SetQuestion(name, qtype)
	if bufsize != 0 {
		m.SetEdns0(bufsize, false)
	}
	c := &dns.Client{Net: network}
	resp, _, err := c.Exchange(m, addr)
	if err != nil {
		t.Fatalf("%s %s over %s: %v", name, dns.TypeToString[qtype], network, err)
	}
	return resp
}
