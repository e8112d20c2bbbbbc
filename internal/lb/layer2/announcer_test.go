package layer2

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mdlayher/arp"
	"github.com/mdlayher/ndp"

	"github.com/svcnet/svcnet/internal/netns"
)

// link is a node and a client namespace on the two ends of a veth pair:
// node0 in the node's (10.77.0.1, fd77::1), client0 in the client's
// (10.77.0.2, fd77::2).
type link struct {
	node, client string // namespace paths
	nodeMAC      net.HardwareAddr
	clientMAC    net.HardwareAddr
}

func run(t *testing.T, args ...string) string {
	t.Helper()
	out, err := exec.Command(args[0], args[1:]...).CombinedOutput()
	if err != nil {
		t.Fatalf("%s: %v: %s", strings.Join(args, " "), err, out)
	}
	return string(out)
}

func newLink(t *testing.T) *link {
	t.Helper()
	if os.Geteuid() != 0 {
		if os.Getenv("CI") == "true" {
			t.Fatal("network namespaces need root, and CI runs as root")
		}
		t.Skip("network namespaces need root; CI runs this as root")
	}
	prefix := fmt.Sprintf("svcnet-l2-%d", os.Getpid())
	node, client := prefix+"-node", prefix+"-client"
	for _, ns := range []string{node, client} {
		run(t, "ip", "netns", "add", ns)
		t.Cleanup(func() { _ = exec.Command("ip", "netns", "del", ns).Run() })
	}
	run(t, "ip", "-n", node, "link", "add", "node0", "type", "veth", "peer", "name", "client0", "netns", client)
	for _, end := range []struct{ ns, dev, v4, v6 string }{{node, "node0", "10.77.0.1/24", "fd77::1/64"}, {client, "client0", "10.77.0.2/24", "fd77::2/64"}} {
		// No duplicate address detection: the link-local addresses NDP
		// binds are usable at once.
		run(t, "ip", "netns", "exec", end.ns, "sysctl", "-qw", "net.ipv6.conf."+end.dev+".accept_dad=0")
		run(t, "ip", "-n", end.ns, "addr", "add", end.v4, "dev", end.dev)
		run(t, "ip", "-n", end.ns, "addr", "add", end.v6, "dev", end.dev, "nodad")
		run(t, "ip", "-n", end.ns, "link", "set", end.dev, "up")
		run(t, "ip", "-n", end.ns, "link", "set", "lo", "up")
	}
	for _, end := range []struct{ ns, dev string }{{node, "node0"}, {client, "client0"}} {
		deadline := time.Now().Add(5 * time.Second)
		for out := ""; !strings.Contains(out, "fe80") || strings.Contains(out, "tentative"); {
			if time.Now().After(deadline) {
				t.Fatalf("no link-local address on %s: %s", end.dev, out)
			}
			time.Sleep(20 * time.Millisecond)
			out = run(t, "ip", "-n", end.ns, "-6", "addr", "show", "dev", end.dev, "scope", "link")
		}
	}
	l := &link{node: netns.Path(node), client: netns.Path(client)}
	for _, end := range []struct {
		ns, dev string
		mac     *net.HardwareAddr
	}{{l.node, "node0", &l.nodeMAC}, {l.client, "client0", &l.clientMAC}} {
		err := netns.Do(end.ns, func() error {
			ifi, err := net.InterfaceByName(end.dev)
			if err == nil {
				*end.mac = ifi.HardwareAddr
			}
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	return l
}

// startAnnouncer runs an announcer in the node's namespace until the test
// ends.
func startAnnouncer(t *testing.T, l *link) *Announcer {
	t.Helper()
	a := New(Config{NetNS: l.node, ScanInterval: 100 * time.Millisecond})
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() { a.Run(ctx) })
	t.Cleanup(func() {
		cancel()
		wg.Wait()
	})
	deadline := time.Now().Add(5 * time.Second)
	for !strings.Contains(strings.Join(a.Interfaces(), ","), "node0") {
		if time.Now().After(deadline) {
			t.Fatalf("the announcer did not find node0: %v", a.Interfaces())
		}
		time.Sleep(20 * time.Millisecond)
	}
	return a
}

// clientARP is an ARP socket on the client's end.
func clientARP(t *testing.T, l *link) *arp.Client {
	t.Helper()
	var c *arp.Client
	err := netns.Do(l.client, func() error {
		ifi, err := net.InterfaceByName("client0")
		if err != nil {
			return err
		}
		c, err = arp.Dial(ifi)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// resolve asks for ip's MAC from a new socket of the client's (which has
// seen no earlier packet), waiting at most a second for the answer.
func resolve(t *testing.T, l *link, ip netip.Addr) (net.HardwareAddr, error) {
	c := clientARP(t, l)
	defer c.Close()
	if err := c.SetDeadline(time.Now().Add(time.Second)); err != nil {
		return nil, err
	}
	return c.Resolve(ip)
}

func TestARP(t *testing.T) {
	l := newLink(t)
	a := startAnnouncer(t, l)
	c := clientARP(t, l)
	ip := netip.MustParseAddr("10.77.0.200")

	if mac, err := resolve(t, l, ip); err == nil {
		t.Fatalf("%s answered (%s) before it was announced", ip, mac)
	}

	// Taking the IP over is announced: a gratuitous request and reply,
	// sender and target the IP, from the node's MAC.
	a.Set([]Advertisement{{IP: ip}})
	if err := c.SetReadDeadline(time.Now().Add(3 * time.Second)); err != nil {
		t.Fatal(err)
	}
	ops := map[arp.Operation]bool{}
	for len(ops) < 2 {
		pkt, eth, err := c.Read()
		if err != nil {
			t.Fatalf("no gratuitous ARP for %s (saw %v): %v", ip, ops, err)
		}
		if pkt.SenderIP == ip && pkt.TargetIP == ip && pkt.SenderHardwareAddr.String() == l.nodeMAC.String() &&
			eth.Destination.String() == "ff:ff:ff:ff:ff:ff" {
			ops[pkt.Operation] = true
		}
	}

	mac, err := resolve(t, l, ip)
	if err != nil || mac.String() != l.nodeMAC.String() {
		t.Fatalf("ARP for %s: %s, %v; want the node's %s", ip, mac, err, l.nodeMAC)
	}
	// Addresses not announced stay unanswered.
	if mac, err := resolve(t, l, netip.MustParseAddr("10.77.0.201")); err == nil {
		t.Errorf("10.77.0.201 answered (%s), not announced", mac)
	}

	// Limited to other interfaces: not answered here.
	a.Set([]Advertisement{{IP: ip, Interfaces: []string{"eth9"}}})
	if mac, err := resolve(t, l, ip); err == nil {
		t.Errorf("%s answered on node0 (%s) with interfaces [eth9]", ip, mac)
	}
	a.Set([]Advertisement{{IP: ip, Interfaces: []string{"node0"}}})
	if mac, err := resolve(t, l, ip); err != nil || mac.String() != l.nodeMAC.String() {
		t.Errorf("ARP for %s with interfaces [node0]: %s, %v", ip, mac, err)
	}

	// Withdrawn: no longer answered.
	a.Set(nil)
	if mac, err := resolve(t, l, ip); err == nil {
		t.Errorf("%s answered (%s) after it was withdrawn", ip, mac)
	}
}

// clientNDP is an NDP socket on the client's end.
func clientNDP(t *testing.T, l *link) *ndp.Conn {
	t.Helper()
	var c *ndp.Conn
	err := netns.Do(l.client, func() error {
		ifi, err := net.InterfaceByName("client0")
		if err != nil {
			return err
		}
		c, _, err = ndp.Listen(ifi, ndp.LinkLocal)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// readNA reads neighbor advertisements of target until one matches want
// or the deadline passes.
func readNA(c *ndp.Conn, target netip.Addr, d time.Duration, want func(*ndp.NeighborAdvertisement) bool) (*ndp.NeighborAdvertisement, error) {
	if err := c.SetReadDeadline(time.Now().Add(d)); err != nil {
		return nil, err
	}
	for {
		msg, _, _, err := c.ReadFrom()
		if err != nil {
			return nil, err
		}
		if na, ok := msg.(*ndp.NeighborAdvertisement); ok && na.TargetAddress == target && want(na) {
			return na, nil
		}
	}
}

func targetMAC(na *ndp.NeighborAdvertisement) string {
	for _, o := range na.Options {
		if lla, ok := o.(*ndp.LinkLayerAddress); ok && lla.Direction == ndp.Target {
			return lla.Addr.String()
		}
	}
	return ""
}

// solicit sends a neighbor solicitation for ip to its solicited-node
// group, as a host resolving it does.
func solicit(t *testing.T, c *ndp.Conn, mac net.HardwareAddr, ip netip.Addr) {
	t.Helper()
	group, err := ndp.SolicitedNodeMulticast(ip)
	if err != nil {
		t.Fatal(err)
	}
	ns := &ndp.NeighborSolicitation{TargetAddress: ip,
		Options: []ndp.Option{&ndp.LinkLayerAddress{Direction: ndp.Source, Addr: mac}}}
	if err := c.WriteTo(ns, nil, group); err != nil {
		t.Fatalf("solicit %s: %v", ip, err)
	}
}

func TestNDP(t *testing.T) {
	l := newLink(t)
	a := startAnnouncer(t, l)
	c := clientNDP(t, l)
	ip := netip.MustParseAddr("fd77::200")
	solicited := func(na *ndp.NeighborAdvertisement) bool { return na.Solicited }

	solicit(t, c, l.clientMAC, ip)
	if na, err := readNA(c, ip, time.Second, solicited); err == nil {
		t.Fatalf("%s answered (%s) before it was announced", ip, targetMAC(na))
	}

	// Taking the IP over: an unsolicited advertisement to all nodes that
	// overrides what they hold.
	a.Set([]Advertisement{{IP: ip}})
	na, err := readNA(c, ip, 3*time.Second, func(na *ndp.NeighborAdvertisement) bool { return !na.Solicited })
	if err != nil {
		t.Fatalf("no unsolicited neighbor advertisement for %s: %v", ip, err)
	}
	if !na.Override || targetMAC(na) != l.nodeMAC.String() {
		t.Errorf("unsolicited advertisement: override %v, MAC %s; want override, the node's %s", na.Override, targetMAC(na), l.nodeMAC)
	}

	// A solicitation is answered with the node's MAC.
	solicit(t, c, l.clientMAC, ip)
	na, err = readNA(c, ip, time.Second, solicited)
	if err != nil || targetMAC(na) != l.nodeMAC.String() {
		t.Fatalf("solicitation for %s: %v; want the node's %s", ip, err, l.nodeMAC)
	}

	// Withdrawn: no longer answered.
	a.Set(nil)
	solicit(t, c, l.clientMAC, ip)
	if na, err := readNA(c, ip, time.Second, solicited); err == nil {
		t.Errorf("%s answered (%s) after it was withdrawn", ip, targetMAC(na))
	} else if !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Errorf("read: %v", err)
	}
}
