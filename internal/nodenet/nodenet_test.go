package nodenet

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/nftables"
	"github.com/vishvananda/netlink"

	"github.com/svcnet/svcnet/internal/netns"
)

// upNamespace is a network namespace made for the test, which plays up's;
// it and everything left in it go when the test ends.
func upNamespace(t *testing.T) string {
	t.Helper()
	if os.Geteuid() != 0 {
		if os.Getenv("CI") == "true" {
			t.Fatal("network namespaces need root, and CI runs as root")
		}
		t.Skip("network namespaces need root; CI runs this as root")
	}
	name := fmt.Sprintf("svcnet-nodenet-%d", os.Getpid())
	if out, err := exec.Command("ip", "netns", "add", name).CombinedOutput(); err != nil {
		t.Fatalf("ip netns add %s: %v: %s", name, err, out)
	}
	t.Cleanup(func() {
		if out, err := exec.Command("ip", "netns", "del", name).CombinedOutput(); err != nil {
			t.Errorf("ip netns del %s: %v: %s", name, err, out)
		}
	})
	return netns.Path(name)
}

// serve accepts connections on addr in the namespace at path until the
// test ends, closing each, and returns the address it listens on and the
// source addresses of the connections, in order.
func serve(t *testing.T, path, addr string) (string, <-chan string) {
	t.Helper()
	var ln net.Listener
	if err := netns.Do(path, func() (err error) {
		ln, err = net.Listen("tcp", addr)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	sources := make(chan string, 16)
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			host, _, _ := net.SplitHostPort(c.RemoteAddr().String())
			c.Close()
			sources <- host
		}
	}()
	return ln.Addr().String(), sources
}

func dialFrom(path, addr string) error {
	return netns.Do(path, func() error {
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
		defer cancel()
		c, err := (&net.Dialer{}).DialContext(ctx, "tcp", addr)
		if err == nil {
			c.Close()
		}
		return err
	})
}

func TestPlan(t *testing.T) {
	n, err := Plan("10.250.0.0/24", []string{"a", "b"}, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	if n.Gateway.String() != "10.250.0.1" || n.Nodes[0].IP.String() != "10.250.0.2" || n.Nodes[1].IP.String() != "10.250.0.3" ||
		n.Nodes[1].NetNS != "/var/run/netns/b" {
		t.Errorf("plan: gateway %s, nodes %+v", n.Gateway, n.Nodes)
	}
	if _, err := Plan("10.250.0.0/30", []string{"a", "b"}, t.TempDir()); err == nil {
		t.Error("a /30 holds the gateway and one node, yet two were planned")
	}
	if _, err := Plan("fd00::/64", []string{"a"}, t.TempDir()); err == nil {
		t.Error("an IPv6 node network was accepted")
	}
}

func TestNodesReachEachOtherAndUp(t *testing.T) {
	up := upNamespace(t)
	names := []string{fmt.Sprintf("nodenet-%d-a", os.Getpid()), fmt.Sprintf("nodenet-%d-b", os.Getpid())}
	n, err := Plan("10.250.0.0/24", names, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		for _, node := range n.Nodes {
			_ = netns.Remove(node.NetNS) // left only by a failure
		}
	})
	if err := netns.Do(up, n.Create); err != nil {
		t.Fatal(err)
	}
	if err := netns.Do(up, n.Create); err != nil {
		t.Fatalf("Create again (an up adopting what it left): %v", err)
	}
	toUp, _ := serve(t, up, "10.250.0.1:0")
	toB, _ := serve(t, n.Nodes[1].NetNS, "10.250.0.3:0")
	for _, to := range []string{toUp, toB} {
		if err := dialFrom(n.Nodes[0].NetNS, to); err != nil {
			t.Errorf("node a to %s: %v", to, err)
		}
	}
	// A machine beyond up's namespace, with no route to the nodes' network,
	// answers a node: up forwards and masquerades.
	outside := fmt.Sprintf("svcnet-nodenet-%d-out", os.Getpid())
	for _, cmd := range [][]string{
		{"ip", "netns", "add", outside},
		{"ip", "-n", outside, "link", "add", "eth0", "type", "veth", "peer", "name", "out0", "netns", filepath.Base(up)},
		{"ip", "-n", outside, "addr", "add", "198.19.0.2/24", "dev", "eth0"},
		{"ip", "-n", outside, "link", "set", "eth0", "up"},
		{"ip", "-n", filepath.Base(up), "addr", "add", "198.19.0.1/24", "dev", "out0"},
		{"ip", "-n", filepath.Base(up), "link", "set", "out0", "up"},
	} {
		if out, err := exec.Command(cmd[0], cmd[1:]...).CombinedOutput(); err != nil {
			t.Fatalf("%v: %v: %s", cmd, err, out)
		}
		if cmd[2] == "add" && cmd[1] == "netns" {
			t.Cleanup(func() { _ = exec.Command("ip", "netns", "del", outside).Run() })
		}
	}
	far, sources := serve(t, netns.Path(outside), "198.19.0.2:0")
	if err := dialFrom(n.Nodes[0].NetNS, far); err != nil {
		t.Errorf("node a to a machine outside: %v", err)
	} else if seen := <-sources; seen != "198.19.0.1" {
		t.Errorf("node a to a machine outside: seen from %s, want up's address 198.19.0.1", seen)
	}

	if err := netns.Do(up, n.Remove); err != nil {
		t.Fatalf("Remove: %v", err)
	}
	for _, node := range n.Nodes {
		if _, err := os.Stat(node.NetNS); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("%s is still there after Remove (%v)", node.NetNS, err)
		}
	}
	if err := netns.Do(up, func() error {
		links, err := netlink.LinkList()
		if err != nil {
			return err
		}
		for _, l := range links {
			if name := l.Attrs().Name; name != "lo" && name != "out0" {
				t.Errorf("link %s is left in up's namespace", name)
			}
		}
		conn, err := nftables.New()
		if err != nil {
			return err
		}
		if tables, err := conn.ListTables(); err != nil || len(tables) != 0 {
			t.Errorf("nftables tables left in up's namespace: %v %v", tables, err)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
}

// A namespace of a node's name that the network did not make (another
// cluster's, a user's) is neither taken over nor removed.
func TestForeignNamespaceLeftAlone(t *testing.T) {
	up := upNamespace(t)
	name := fmt.Sprintf("nodenet-%d-foreign", os.Getpid())
	if out, err := exec.Command("ip", "netns", "add", name).CombinedOutput(); err != nil {
		t.Fatalf("ip netns add %s: %v: %s", name, err, out)
	}
	t.Cleanup(func() { _ = exec.Command("ip", "netns", "del", name).Run() })
	n, err := Plan("10.250.0.0/24", []string{name}, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	if err := netns.Do(up, n.Create); err == nil || !strings.Contains(err.Error(), "was not made by this cluster") {
		t.Fatalf("Create over a foreign namespace: %v", err)
	}
	if err := netns.Do(up, n.Remove); err != nil {
		t.Fatalf("Remove: %v", err)
	}
	if !netns.Pinned(netns.Path(name)) {
		t.Error("Remove took a namespace the network did not make")
	}
	if err := netns.Do(up, func() error {
		if _, err := netlink.LinkByName(BridgeName); err == nil {
			t.Errorf("Create that refused made the bridge")
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
}
