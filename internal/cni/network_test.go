package cni

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/vishvananda/netlink"
	vnetns "github.com/vishvananda/netns"

	"github.com/svcnet/svcnet/internal/netns"
)

// testNetwork opens a pod network in a network namespace made for the test
// alone, removed with everything in it when the test ends.
func testNetwork(t *testing.T) *Network {
	t.Helper()
	n, _ := testNetworkNamed(t)
	return n
}

// testNetworkNamed is testNetwork that also names the node's namespace
// (for `ip netns`).
func testNetworkNamed(t *testing.T) (*Network, string) {
	t.Helper()
	if os.Geteuid() != 0 {
		if os.Getenv("CI") == "true" {
			t.Fatal("network namespaces need root, and CI runs as root")
		}
		t.Skip("network namespaces need root; CI runs this as root")
	}
	name := fmt.Sprintf("svcnet-cni-%d-%d", os.Getpid(), time.Now().UnixNano()%1e6)
	if out, err := exec.Command("ip", "netns", "add", name).CombinedOutput(); err != nil {
		t.Fatalf("ip netns add %s: %v: %s", name, err, out)
	}
	dir := t.TempDir()
	n, err := Open(Config{NodeNetNS: "/var/run/netns/" + name, Dir: dir})
	if err != nil {
		_ = exec.Command("ip", "netns", "del", name).Run()
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ids, _ := n.Sandboxes()
		for _, id := range ids {
			if err := n.Teardown(id); err != nil {
				t.Errorf("teardown %s: %v", id, err)
			}
		}
		n.Close()
		if out, err := exec.Command("ip", "netns", "del", name).CombinedOutput(); err != nil {
			t.Errorf("ip netns del %s: %v: %s", name, err, out)
		}
	})
	return n, name
}

func TestPodsReachEachOtherOverTheBridge(t *testing.T) {
	n := testNetwork(t)
	if err := n.Ensure("10.244.7.0/24"); err != nil {
		t.Fatal(err)
	}
	if err := n.Ensure("10.244.7.0/24"); err != nil {
		t.Fatalf("Ensure is not idempotent: %v", err)
	}
	a, err := n.Setup("pod-a")
	if err != nil {
		t.Fatal(err)
	}
	b, err := n.Setup("pod-b")
	if err != nil {
		t.Fatal(err)
	}
	if a.IP.Equal(b.IP) || a.IP.String() != "10.244.7.2" || !a.Gateway.Equal(net.ParseIP("10.244.7.1")) {
		t.Fatalf("addresses a=%s b=%s gw=%s", a.IP, b.IP, a.Gateway)
	}
	again, err := n.Setup("pod-a")
	if err != nil || !again.IP.Equal(a.IP) {
		t.Fatalf("Setup again gave %v, %v; want %s", again, err, a.IP)
	}

	// b listens in its namespace; a dials it, and so does the node.
	peerServer(t, b.NetNS, net.JoinHostPort(b.IP.String(), "8080"))
	nsA, err := vnetns.GetFromPath(a.NetNS)
	if err != nil {
		t.Fatal(err)
	}
	defer nsA.Close()
	for _, d := range []struct {
		name   string
		dialer netns.Dialer
		from   string
	}{{"pod a", netns.NewDialer(nsA), a.IP.String()}, {"node", n.Dialer(), a.Gateway.String()}} {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		c, err := d.dialer.DialContext(ctx, "tcp", net.JoinHostPort(b.IP.String(), "8080"))
		cancel()
		if err != nil {
			t.Fatalf("%s dials pod b: %v", d.name, err)
		}
		seen, _ := io.ReadAll(c)
		c.Close()
		if string(seen) != d.from {
			t.Errorf("%s reached pod b from %q, want %q (no NAT)", d.name, seen, d.from)
		}
	}

	// A released address is not handed out again at once.
	if err := n.Teardown("pod-a"); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(a.NetNS); !os.IsNotExist(err) {
		t.Errorf("namespace file survives teardown: %v", err)
	}
	c, err := n.Setup("pod-c")
	if err != nil {
		t.Fatal(err)
	}
	if c.IP.Equal(a.IP) || c.IP.Equal(b.IP) {
		t.Errorf("pod c got %s, in use or just released", c.IP)
	}
}

func TestGCReleasesUnknownSandboxes(t *testing.T) {
	n := testNetwork(t)
	if err := n.Ensure("10.244.9.0/24"); err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{"keep", "leak"} {
		if _, err := n.Setup(id); err != nil {
			t.Fatal(err)
		}
	}
	// A crash after the address was recorded, before the namespace.
	if _, err := n.ipam.allocate("half"); err != nil {
		t.Fatal(err)
	}
	if err := n.GC(map[string]bool{"keep": true}); err != nil {
		t.Fatal(err)
	}
	ids, err := n.Sandboxes()
	if err != nil {
		t.Fatal(err)
	}
	if len(ids) != 1 || ids[0] != "keep" {
		t.Fatalf("sandboxes after GC: %v", ids)
	}
	if _, err := n.nl.LinkByName(hostVeth("leak")); err == nil {
		t.Error("the veth of a collected sandbox survives")
	}
	if entries, _ := os.ReadDir(filepath.Join(n.dir, "ipam")); len(entries) != 2 { // keep + last_reserved
		t.Errorf("address records after GC: %d", len(entries))
	}
}

func TestSyncRoutes(t *testing.T) {
	n := testNetwork(t)
	if err := n.Ensure("10.244.1.0/24"); err != nil {
		t.Fatal(err)
	}
	routes := map[string]net.IP{"10.244.2.0/24": net.ParseIP("10.244.1.50"), "10.244.3.0/24": net.ParseIP("10.244.1.51")}
	if err := n.SyncRoutes(routes); err != nil {
		t.Fatal(err)
	}
	delete(routes, "10.244.3.0/24")
	if err := n.SyncRoutes(routes); err != nil {
		t.Fatal(err)
	}
	rs, err := n.nl.RouteList(nil, netlink.FAMILY_V4)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, r := range rs {
		if r.Protocol == routeProtocol {
			got[r.Dst.String()] = r.Gw.String()
		}
	}
	if len(got) != 1 || got["10.244.2.0/24"] != "10.244.1.50" {
		t.Errorf("owned routes: %v", got)
	}
}

func TestRouteServiceRanges(t *testing.T) {
	n := testNetwork(t)
	if err := n.Ensure("10.244.1.0/24"); err != nil {
		t.Fatal(err)
	}
	_, services, _ := net.ParseCIDR("10.96.0.0/12")
	_, routed, _ := net.ParseCIDR("10.200.0.0/16")
	_, v6, _ := net.ParseCIDR("fd00:96::/112")
	// A range the namespace already routes (through a pod's address on the
	// bridge here) keeps its route.
	if err := n.nl.RouteAdd(&netlink.Route{Dst: routed, Gw: net.ParseIP("10.244.1.9")}); err != nil {
		t.Fatal(err)
	}
	if _, err := n.nl.RouteGet(net.ParseIP("10.96.0.1")); err == nil {
		t.Fatal("the bare namespace already routes 10.96.0.1; the test needs it unrouted")
	}
	for range 2 { // idempotent
		if err := n.RouteServiceRanges([]netip.Prefix{netip.MustParsePrefix(services.String()),
			netip.MustParsePrefix(routed.String()), netip.MustParsePrefix(v6.String())}); err != nil {
			t.Fatal(err)
		}
	}
	// SyncRoutes owns other routes and must not take this one away.
	if err := n.SyncRoutes(nil); err != nil {
		t.Fatal(err)
	}
	br, err := n.nl.LinkByName(BridgeName)
	if err != nil {
		t.Fatal(err)
	}
	got, err := n.nl.RouteGet(net.ParseIP("10.96.0.10"))
	if err != nil || len(got) != 1 || got[0].LinkIndex != br.Attrs().Index || !got[0].Src.Equal(net.ParseIP("10.244.1.1")) {
		t.Errorf("route to 10.96.0.10 = %+v, %v; want through %s from the gateway 10.244.1.1", got, err, BridgeName)
	}
	got, err = n.nl.RouteGet(net.ParseIP("10.200.0.1"))
	if err != nil || len(got) != 1 || !got[0].Gw.Equal(net.ParseIP("10.244.1.9")) {
		t.Errorf("route to the routed range = %+v, %v; want the existing one via 10.244.1.9", got, err)
	}
}

func TestRemove(t *testing.T) {
	n := testNetwork(t)
	if err := n.Ensure("10.244.1.0/24"); err != nil {
		t.Fatal(err)
	}
	if err := n.SyncRoutes(map[string]net.IP{"10.244.2.0/24": net.ParseIP("10.244.1.50")}); err != nil {
		t.Fatal(err)
	}
	for range 2 { // a second Remove finds nothing to do
		if err := n.Remove(); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := n.nl.LinkByName(BridgeName); err == nil {
		t.Errorf("%s is still there", BridgeName)
	}
	rs, err := n.nl.RouteList(nil, netlink.FAMILY_V4)
	if err != nil {
		t.Fatal(err)
	}
	if len(rs) != 0 {
		t.Errorf("routes left: %v", rs)
	}
}
