package userspace

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"strings"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/svcnet/svcnet/internal/proxy"
)

var (
	clusterIP = netip.MustParseAddr("127.0.0.2")
	nodeAddr  = netip.MustParseAddr("127.0.0.1")
	podA      = netip.MustParseAddr("127.0.0.3")
	podB      = netip.MustParseAddr("127.0.0.4")
	svcName   = types.NamespacedName{Namespace: "default", Name: "web"}
)

// freePort is a port free on addr for protocol (tcp or udp) a moment ago.
func freePort(t *testing.T, network string, addr netip.Addr) uint16 {
	t.Helper()
	var a net.Addr
	if network == "udp" {
		pc, err := net.ListenPacket("udp", netip.AddrPortFrom(addr, 0).String())
		if err != nil {
			t.Fatal(err)
		}
		defer pc.Close()
		a = pc.LocalAddr()
	} else {
		ln, err := net.Listen("tcp", netip.AddrPortFrom(addr, 0).String())
		if err != nil {
			t.Fatal(err)
		}
		defer ln.Close()
		a = ln.Addr()
	}
	ap, err := netip.ParseAddrPort(a.String())
	if err != nil {
		t.Fatal(err)
	}
	return ap.Port()
}

// tcpPod is a server on addr that greets every connection with its name
// and a newline, then echoes what it reads until the client half-closes.
func tcpPod(t *testing.T, name string, addr netip.Addr) int32 {
	t.Helper()
	ln, err := net.Listen("tcp", netip.AddrPortFrom(addr, 0).String())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				fmt.Fprintln(c, name)
				_, _ = io.Copy(c, c)
			}()
		}
	}()
	return int32(ln.Addr().(*net.TCPAddr).Port)
}

// udpPod answers every datagram with its name and the sender's port.
func udpPod(t *testing.T, name string, addr netip.Addr, port int32) {
	t.Helper()
	pc, err := net.ListenPacket("udp", netip.AddrPortFrom(addr, uint16(port)).String())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { pc.Close() })
	go func() {
		buf := make([]byte, 512)
		for {
			_, from, err := pc.ReadFrom(buf)
			if err != nil {
				return
			}
			fmt.Fprintf(&udpReply{pc, from}, "%s %d", name, from.(*net.UDPAddr).Port)
		}
	}()
}

type udpReply struct {
	pc net.PacketConn
	to net.Addr
}

func (r *udpReply) Write(b []byte) (int, error) { return r.pc.WriteTo(b, r.to) }

// service is a one-port Service on clusterIP:port (and nodePort on
// nodeAddr unless 0) with the given endpoints.
func service(protocol corev1.Protocol, port, nodePort uint16, eps ...netip.AddrPort) *proxy.Service {
	p := &proxy.ServicePort{Name: "p", Protocol: protocol, Port: int32(port), NodePort: int32(nodePort), ClusterIPs: []netip.Addr{clusterIP}}
	for _, ep := range eps {
		p.Endpoints = append(p.Endpoints, proxy.Endpoint{Addr: ep.Addr(), Port: int32(ep.Port()), Ready: true, Serving: true})
	}
	return &proxy.Service{Name: svcName, Ports: []*proxy.ServicePort{p}}
}

// apply applies the Services as one update in which all changed.
func apply(t *testing.T, b *Backend, full bool, svcs ...*proxy.Service) proxy.Stats {
	t.Helper()
	u := proxy.Update{Full: full, Services: map[types.NamespacedName]*proxy.Service{}, Changed: map[types.NamespacedName]proxy.Change{}}
	for _, s := range svcs {
		u.Services[s.Name] = s
		u.Changed[s.Name] = proxy.Change{Current: s}
	}
	st, err := b.Sync(context.Background(), u)
	if err != nil {
		t.Fatalf("sync: %v", err)
	}
	return st
}

func newBackend(t *testing.T) *Backend {
	b := New(Config{NodePortAddress: nodeAddr, UDPIdleTimeout: 200 * time.Millisecond})
	t.Cleanup(func() { b.Cleanup() })
	return b
}

// get makes one request to addr from a fresh connection: it sends, half
// closes, reads the answer to its end and returns the pod's name, checking
// that the echo came back whole.
func get(addr netip.AddrPort) (string, error) {
	c, err := net.DialTimeout("tcp", addr.String(), time.Second)
	if err != nil {
		return "", err
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(2 * time.Second))
	if _, err := c.Write([]byte("GET")); err != nil {
		return "", err
	}
	if err := c.(*net.TCPConn).CloseWrite(); err != nil {
		return "", err
	}
	b, err := io.ReadAll(c)
	if err != nil {
		return "", err
	}
	name, echo, _ := strings.Cut(string(b), "\n")
	if echo != "GET" {
		return "", fmt.Errorf("echo %q, want GET", echo)
	}
	return name, nil
}

func TestTCPClusterIPAndNodePort(t *testing.T) {
	b := newBackend(t)
	a := netip.AddrPortFrom(podA, uint16(tcpPod(t, "a", podA)))
	bb := netip.AddrPortFrom(podB, uint16(tcpPod(t, "b", podB)))
	port, nodePort := freePort(t, "tcp", clusterIP), freePort(t, "tcp", nodeAddr)
	st := apply(t, b, true, service(corev1.ProtocolTCP, port, nodePort, a, bb))
	if st.Objects["listeners"] != 2 {
		t.Errorf("listeners = %d, want 2 (cluster IP and NodePort)", st.Objects["listeners"])
	}
	for _, addr := range []netip.AddrPort{netip.AddrPortFrom(clusterIP, port), netip.AddrPortFrom(nodeAddr, nodePort)} {
		seen := map[string]int{}
		for range 40 {
			got, err := get(addr)
			if err != nil {
				t.Fatalf("request to %s: %v", addr, err)
			}
			seen[got]++
		}
		if seen["a"] == 0 || seen["b"] == 0 || len(seen) != 2 {
			t.Errorf("40 requests to %s were answered by %v, want both a and b", addr, seen)
		}
	}
}

func TestTCPEndpointsLiveAndNoEndpoints(t *testing.T) {
	b := newBackend(t)
	a := netip.AddrPortFrom(podA, uint16(tcpPod(t, "a", podA)))
	bb := netip.AddrPortFrom(podB, uint16(tcpPod(t, "b", podB)))
	port := freePort(t, "tcp", clusterIP)
	addr := netip.AddrPortFrom(clusterIP, port)
	apply(t, b, true, service(corev1.ProtocolTCP, port, 0, a))
	// A connection open across the change keeps its endpoint.
	open, err := net.Dial("tcp", addr.String())
	if err != nil {
		t.Fatal(err)
	}
	defer open.Close()
	_ = open.SetDeadline(time.Now().Add(2 * time.Second))
	greeting := make([]byte, 2)
	if _, err := io.ReadFull(open, greeting); err != nil || string(greeting) != "a\n" {
		t.Fatalf("greeting %q, %v; want a", greeting, err)
	}

	apply(t, b, false, service(corev1.ProtocolTCP, port, 0, bb))
	for range 10 {
		if got, err := get(addr); err != nil || got != "b" {
			t.Fatalf("after the endpoint changed to b: %q, %v", got, err)
		}
	}
	if _, err := open.Write([]byte("still a")); err != nil {
		t.Fatal(err)
	}
	_ = open.(*net.TCPConn).CloseWrite()
	if got, err := io.ReadAll(open); err != nil || string(got) != "still a" {
		t.Errorf("the connection opened before the change echoed %q, %v", got, err)
	}

	// No endpoints: the connection is reset at once.
	apply(t, b, false, service(corev1.ProtocolTCP, port, 0))
	start := time.Now()
	got, err := get(addr)
	if !errors.Is(err, syscall.ECONNRESET) || time.Since(start) > time.Second {
		t.Errorf("without endpoints: %q, %v after %s; want a reset at once", got, err, time.Since(start))
	}

	// The Service goes: its port is closed.
	apply(t, b, false)
	if _, err := get(addr); !errors.Is(err, syscall.ECONNREFUSED) {
		t.Errorf("after the Service was removed: %v, want connection refused", err)
	}
}

func TestTCPSkipsDeadEndpoint(t *testing.T) {
	b := newBackend(t)
	a := netip.AddrPortFrom(podA, uint16(tcpPod(t, "a", podA)))
	dead := netip.AddrPortFrom(podB, freePort(t, "tcp", podB))
	port := freePort(t, "tcp", clusterIP)
	apply(t, b, true, service(corev1.ProtocolTCP, port, 0, a, dead))
	for range 20 {
		if got, err := get(netip.AddrPortFrom(clusterIP, port)); err != nil || got != "a" {
			t.Fatalf("with one endpoint refusing: %q, %v; want a", got, err)
		}
	}
}

func TestSessionAffinity(t *testing.T) {
	b := newBackend(t)
	a := netip.AddrPortFrom(podA, uint16(tcpPod(t, "a", podA)))
	bb := netip.AddrPortFrom(podB, uint16(tcpPod(t, "b", podB)))
	port := freePort(t, "tcp", clusterIP)
	svc := service(corev1.ProtocolTCP, port, 0, a, bb)
	svc.Ports[0].AffinitySeconds = 10800
	apply(t, b, true, svc)
	seen := map[string]int{}
	for range 30 {
		got, err := get(netip.AddrPortFrom(clusterIP, port))
		if err != nil {
			t.Fatal(err)
		}
		seen[got]++
	}
	if len(seen) != 1 {
		t.Errorf("with ClientIP affinity 30 requests were answered by %v, want one endpoint", seen)
	}
}

// udpRequest sends msg from the client socket to addr and reads the answer.
func udpRequest(t *testing.T, c *net.UDPConn, addr netip.AddrPort) string {
	t.Helper()
	if _, err := c.WriteToUDPAddrPort([]byte("x"), addr); err != nil {
		t.Fatal(err)
	}
	_ = c.SetReadDeadline(time.Now().Add(2 * time.Second))
	buf := make([]byte, 512)
	n, _, err := c.ReadFromUDPAddrPort(buf)
	if err != nil {
		t.Fatalf("UDP answer from %s: %v", addr, err)
	}
	return string(buf[:n])
}

func TestUDPSessions(t *testing.T) {
	b := newBackend(t)
	podPort := int32(freePort(t, "udp", podA))
	udpPod(t, "a", podA, podPort)
	udpPod(t, "b", podB, podPort)
	port, nodePort := freePort(t, "udp", clusterIP), freePort(t, "udp", nodeAddr)
	a, bb := netip.AddrPortFrom(podA, uint16(podPort)), netip.AddrPortFrom(podB, uint16(podPort))
	apply(t, b, true, service(corev1.ProtocolUDP, port, nodePort, a))
	client, err := net.ListenUDP("udp", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	addr := netip.AddrPortFrom(clusterIP, port)

	// One session: the pod sees the same proxy port for both datagrams.
	first := udpRequest(t, client, addr)
	if second := udpRequest(t, client, addr); !strings.HasPrefix(first, "a ") || first != second {
		t.Errorf("two datagrams in one session were answered %q and %q, want a from one port", first, second)
	}
	if got := udpRequest(t, client, netip.AddrPortFrom(nodeAddr, nodePort)); !strings.HasPrefix(got, "a ") {
		t.Errorf("the NodePort answered %q, want a", got)
	}

	// After the idle timeout the session is a new one (another port).
	time.Sleep(500 * time.Millisecond) // the idle time itself, over the 200ms timeout
	if after := udpRequest(t, client, addr); after == first {
		t.Errorf("the session outlived its idle timeout: still %q", after)
	}

	// The endpoint is replaced: the same client reaches the new one.
	apply(t, b, false, service(corev1.ProtocolUDP, port, nodePort, bb))
	if got := udpRequest(t, client, addr); !strings.HasPrefix(got, "b ") {
		t.Errorf("after the endpoint was replaced the client got %q, want b", got)
	}
}

func TestUnboundAddressAndCleanup(t *testing.T) {
	b := newBackend(t)
	a := netip.AddrPortFrom(podA, uint16(tcpPod(t, "a", podA)))
	nodePort := freePort(t, "tcp", nodeAddr)
	svc := service(corev1.ProtocolTCP, 80, nodePort, a)
	// A cluster IP the node does not have (TEST-NET-1): not served, not an
	// error; the NodePort is.
	svc.Ports[0].ClusterIPs = []netip.Addr{netip.MustParseAddr("192.0.2.1")}
	if st := apply(t, b, true, svc); st.Objects["listeners"] != 1 {
		t.Errorf("listeners = %d, want 1 (the NodePort)", st.Objects["listeners"])
	}
	node := netip.AddrPortFrom(nodeAddr, nodePort)
	open, err := net.Dial("tcp", node.String())
	if err != nil {
		t.Fatal(err)
	}
	defer open.Close()
	_ = open.SetDeadline(time.Now().Add(2 * time.Second))
	if _, err := io.ReadFull(open, make([]byte, 2)); err != nil {
		t.Fatalf("greeting through the NodePort: %v", err)
	}
	if got, err := get(node); err != nil || got != "a" {
		t.Fatalf("NodePort: %q, %v", got, err)
	}

	// Cleanup ends open connections and closes the ports.
	if err := b.Cleanup(); err != nil {
		t.Fatal(err)
	}
	if _, err := open.Read(make([]byte, 1)); err == nil {
		t.Error("a proxied connection is still open after Cleanup")
	}
	if _, err := get(node); !errors.Is(err, syscall.ECONNREFUSED) {
		t.Errorf("the NodePort after Cleanup: %v, want connection refused", err)
	}
	// The backend serves again after a sync.
	apply(t, b, true, svc)
	if got, err := get(node); err != nil || got != "a" {
		t.Errorf("NodePort after Cleanup and a new sync: %q, %v", got, err)
	}
}

func TestFrontendsAreTheLiveSockets(t *testing.T) {
	b := newBackend(t)
	a, bb := netip.AddrPortFrom(podA, 8080), netip.AddrPortFrom(podB, 8080)
	port, nodePort := freePort(t, "tcp", clusterIP), freePort(t, "tcp", nodeAddr)
	web := service(corev1.ProtocolTCP, port, nodePort, a, bb)
	external := netip.MustParseAddr("127.0.0.5")
	web.Ports[0].ExternalIPs = []netip.Addr{external}
	// The node has no such address: not served, so not a frontend.
	web.Ports[0].LoadBalancerIPs = []netip.Addr{netip.MustParseAddr("192.0.2.10")}
	dns := service(corev1.ProtocolUDP, freePort(t, "udp", clusterIP), 0)
	dns.Name.Name = "dns"
	apply(t, b, true, web, dns)
	got, err := b.Frontends(context.Background(), "")
	if err != nil {
		t.Fatal(err)
	}
	var lines []string
	for _, f := range got {
		lines = append(lines, fmt.Sprintf("%s:%s %s %s", f.Service(), f.PortName, f.Kind, f))
	}
	backends := fmt.Sprintf("%s/TCP, %s/TCP", a, bb)
	want := []string{
		fmt.Sprintf("default/dns:p ClusterIP %s/UDP → reject (no endpoints)", got[0].Address),
		fmt.Sprintf("default/web:p ClusterIP %s/TCP → %s", netip.AddrPortFrom(clusterIP, port), backends),
		fmt.Sprintf("default/web:p ExternalIP %s/TCP → %s", netip.AddrPortFrom(external, port), backends),
		fmt.Sprintf("default/web:p NodePort %s/TCP → %s", netip.AddrPortFrom(nodeAddr, nodePort), backends),
	}
	if strings.Join(lines, "\n") != strings.Join(want, "\n") {
		t.Errorf("frontends:\n%s\nwant:\n%s", strings.Join(lines, "\n"), strings.Join(want, "\n"))
	}
	if one, err := b.Frontends(context.Background(), "default/dns"); err != nil || len(one) != 1 || one[0].Name != "dns" {
		t.Errorf("frontends of default/dns: %v, %v", one, err)
	}
	// The endpoints change under the open sockets.
	apply(t, b, false, service(corev1.ProtocolTCP, port, nodePort, bb), dns)
	got, err = b.Frontends(context.Background(), "")
	if err != nil {
		t.Fatal(err)
	}
	if l := got[1].String(); l != fmt.Sprintf("%s/TCP → %s/TCP", netip.AddrPortFrom(clusterIP, port), bb) {
		t.Errorf("after web lost an endpoint: %s", l)
	}
}
