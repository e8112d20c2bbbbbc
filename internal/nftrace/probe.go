package nftrace

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"syscall"
	"time"

	"github.com/miekg/dns"
	"golang.org/x/sys/unix"

	"github.com/svcnet/svcnet/internal/netns"
)

// probe is one real connection from the pod's namespace.
type probe struct {
	netns    string
	src      netip.Addr
	dst      netip.AddrPort
	protocol string
	timeout  time.Duration
	// query is the name a UDP probe to port 53 asks for (type A); other
	// UDP probes send probePayload.
	query string
	// bound is called with the probe's source port once its socket has
	// one, before anything is sent; an error stops the probe.
	bound func(port uint16) error
}

// probePayload is what a UDP probe to a port other than DNS's sends.
const probePayload = "svcnet trace probe\n"

// run connects (TCP), or sends a datagram and waits for one (UDP), and
// says what came back.
func (p probe) run(ctx context.Context) Answer {
	ctx, cancel := context.WithTimeout(ctx, p.timeout)
	defer cancel()
	network := "tcp"
	if p.protocol == "UDP" {
		network = "udp"
	}
	if p.src.Is4() {
		network += "4"
	} else {
		network += "6"
	}
	d := net.Dialer{ControlContext: p.control}
	var conn net.Conn
	err := netns.Do(p.netns, func() error {
		var err error
		conn, err = d.DialContext(ctx, network, p.dst.String())
		return err
	})
	if err != nil {
		return p.failed(err)
	}
	defer conn.Close()
	if p.protocol == "TCP" {
		return Answer{Outcome: Connected, Detail: "TCP handshake with " + p.dst.String()}
	}
	payload := []byte(probePayload)
	if p.dst.Port() == 53 {
		m := new(dns.Msg)
		m.SetQuestion(dns.Fqdn(p.query), dns.TypeA)
		if payload, err = m.Pack(); err != nil {
			return Answer{Outcome: "error", Detail: fmt.Sprintf("pack a DNS query: %v", err)}
		}
	}
	deadline, _ := ctx.Deadline()
	if err := conn.SetDeadline(deadline); err != nil {
		return Answer{Outcome: "error", Detail: fmt.Sprintf("set the probe's deadline: %v", err)}
	}
	if _, err := conn.Write(payload); err != nil {
		return p.failed(err)
	}
	buf := make([]byte, 64<<10)
	n, err := conn.Read(buf)
	if err != nil {
		return p.failed(err)
	}
	detail := fmt.Sprintf("%d bytes back", n)
	if m := new(dns.Msg); p.dst.Port() == 53 && m.Unpack(buf[:n]) == nil {
		detail = fmt.Sprintf("DNS answer to %s: %s, %d records", p.query, dns.RcodeToString[m.Rcode], len(m.Answer))
	}
	return Answer{Outcome: Answered, Detail: detail}
}

// control binds the probe's socket to the pod's address and a port of
// the kernel's choice, and tells bound the port, before the dial.
func (p probe) control(_ context.Context, _, _ string, c syscall.RawConn) error {
	var port uint16
	var err error
	cerr := c.Control(func(fd uintptr) {
		var sa unix.Sockaddr = &unix.SockaddrInet4{Addr: p.src.As4()}
		if p.src.Is6() {
			sa = &unix.SockaddrInet6{Addr: p.src.As16()}
		}
		if err = unix.Bind(int(fd), sa); err != nil {
			err = fmt.Errorf("bind the probe to %s: %w", p.src, err)
			return
		}
		var got unix.Sockaddr
		if got, err = unix.Getsockname(int(fd)); err != nil {
			err = fmt.Errorf("read the probe's port: %w", err)
			return
		}
		switch a := got.(type) {
		case *unix.SockaddrInet4:
			port = uint16(a.Port)
		case *unix.SockaddrInet6:
			port = uint16(a.Port)
		}
	})
	if err = errors.Join(cerr, err); err != nil {
		return err
	}
	return p.bound(port)
}

// failed says what a probe's error means.
func (p probe) failed(err error) Answer {
	switch {
	case errors.Is(err, syscall.ECONNREFUSED) && p.protocol == "TCP":
		return Answer{Outcome: Refused, Detail: "a TCP reset came back"}
	case errors.Is(err, syscall.ECONNREFUSED):
		return Answer{Outcome: Refused, Detail: "an ICMP port unreachable came back"}
	case errors.Is(err, syscall.EHOSTUNREACH), errors.Is(err, syscall.ENETUNREACH):
		return Answer{Outcome: Unreachable, Detail: errText(err)}
	case errors.Is(err, context.DeadlineExceeded), errors.Is(err, os.ErrDeadlineExceeded):
		return Answer{Outcome: Timeout, Detail: "no answer in time"}
	}
	return Answer{Outcome: "error", Detail: errText(err)}
}
