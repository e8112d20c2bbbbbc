package cni

import (
	"net"
	"net/netip"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/google/nftables"
	vnetns "github.com/vishvananda/netns"

	"github.com/svcnet/svcnet/internal/netns"
)

// whoServer listens on addr in the namespace at path and tells each
// client "LOCAL from SOURCE": which pod answered, and whom it saw.
func whoServer(t *testing.T, path, addr string) {
	t.Helper()
	answerServer(t, path, addr, func(c net.Conn) string {
		return c.LocalAddr().(*net.TCPAddr).IP.String() + " from " + c.RemoteAddr().(*net.TCPAddr).IP.String()
	})
}

// A hostPort reaches its pod from the node, at the node's address or at
// loopback as mapped, and from the pod itself (hairpin, masqueraded);
// the table goes with the last mapping.
func TestHostPorts(t *testing.T) {
	n, name := testNetworkNamed(t)
	if err := n.Ensure("10.244.7.0/24"); err != nil {
		t.Fatal(err)
	}
	// The node's address, on an interface of its own (a veth pair whose
	// both ends stay in the node's namespace).
	ipCmd(t, "-n", name, "link", "add", "node0", "type", "veth", "peer", "name", "node1")
	ipCmd(t, "-n", name, "addr", "add", "198.18.0.1/24", "dev", "node0")
	ipCmd(t, "-n", name, "link", "set", "node0", "up")
	ipCmd(t, "-n", name, "link", "set", "node1", "up")
	a, err := n.Setup("pod-a")
	if err != nil {
		t.Fatal(err)
	}
	b, err := n.Setup("pod-b")
	if err != nil {
		t.Fatal(err)
	}
	whoServer(t, a.NetNS, net.JoinHostPort(a.IP.String(), "8080"))
	whoServer(t, b.NetNS, net.JoinHostPort(b.IP.String(), "8080"))
	ipA, ipB := netip.MustParseAddr(a.IP.String()), netip.MustParseAddr(b.IP.String())
	ports := []HostPort{
		{HostIP: netip.MustParseAddr("127.0.0.1"), HostPort: 54323, Protocol: "tcp", PodIP: ipA, PodPort: 8080},
		{HostIP: netip.MustParseAddr("198.18.0.1"), HostPort: 54323, Protocol: "tcp", PodIP: ipB, PodPort: 8080},
		{HostPort: 54324, Protocol: "tcp", PodIP: ipB, PodPort: 8080},
	}
	// On every address alone, loopback included.
	if err := n.SyncHostPorts(ports[2:]); err != nil {
		t.Fatal(err)
	}
	if got, err := sourceSeen(n.Dialer(), "127.0.0.1:54324", 5*time.Second); err != nil || got != b.IP.String()+" from 10.244.7.1" {
		t.Errorf("127.0.0.1:54324 mapped on every address: %q (%v)", got, err)
	}
	for range 2 { // idempotent
		if err := n.SyncHostPorts(ports); err != nil {
			t.Fatal(err)
		}
	}
	nsB, err := vnetns.GetFromPath(b.NetNS)
	if err != nil {
		t.Fatal(err)
	}
	defer nsB.Close()
	fromNode, fromB := n.Dialer(), netns.NewDialer(nsB)
	gw := "10.244.7.1"
	for _, tc := range []struct {
		what string
		from netns.Dialer
		addr string
		want string
	}{
		// Loopback sources leave masqueraded behind the bridge's address.
		{"the node to 127.0.0.1", fromNode, "127.0.0.1:54323", a.IP.String() + " from " + gw},
		{"the node to its address", fromNode, "198.18.0.1:54323", b.IP.String() + " from 198.18.0.1"},
		{"the node to any address", fromNode, "10.244.7.1:54324", b.IP.String() + " from 10.244.7.1"},
		{"the node to 127.0.0.1 of any address", fromNode, "127.0.0.1:54324", b.IP.String() + " from " + gw},
		{"pod b to its own host port", fromB, "198.18.0.1:54323", b.IP.String() + " from " + gw},
	} {
		if got, err := sourceSeen(tc.from, tc.addr, 5*time.Second); err != nil || got != tc.want {
			t.Errorf("%s (%s): %q (%v), want %q", tc.what, tc.addr, got, err, tc.want)
		}
	}
	var localnet []byte
	if err := netns.DoIn(n.node, func() (err error) {
		localnet, err = os.ReadFile("/proc/sys/net/ipv4/conf/" + BridgeName + "/route_localnet")
		return err
	}); err != nil || strings.TrimSpace(string(localnet)) != "1" {
		t.Errorf("route_localnet on %s: %q (%v), want 1", BridgeName, localnet, err)
	}
	// A port mapped on one address only is not on the others.
	if got, err := sourceSeen(fromNode, "10.244.7.1:54323", time.Second); err == nil {
		t.Errorf("54323 answered on the bridge's address (%q); it is mapped on 127.0.0.1 and 198.18.0.1 only", got)
	}
	if err := n.SyncHostPorts(nil); err != nil {
		t.Fatal(err)
	}
	if got, err := sourceSeen(fromNode, "198.18.0.1:54323", time.Second); err == nil {
		t.Errorf("the host port answered (%q) after its mapping went", got)
	}
	conn, err := nftables.New(nftables.WithNetNSFd(int(n.node)))
	if err != nil {
		t.Fatal(err)
	}
	tables, err := conn.ListTables()
	if err != nil {
		t.Fatal(err)
	}
	for _, tb := range tables {
		if tb.Name == HostPortTable {
			t.Errorf("table %s left without host ports", HostPortTable)
		}
	}
}
