package cni

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/nftables"
	vnetns "github.com/vishvananda/netns"

	"github.com/svcnet/svcnet/internal/netns"
)

func prefixes(ss ...string) []netip.Prefix {
	var ps []netip.Prefix
	for _, s := range ss {
		ps = append(ps, netip.MustParsePrefix(s))
	}
	return ps
}

func TestNoMasqueradeRanges(t *testing.T) {
	for _, tc := range []struct {
		name string
		in   []netip.Prefix
		want string
	}{
		{"none", nil, ""},
		{"one", prefixes("10.244.1.0/24"), "10.244.1.0-10.244.1.255"},
		{"unmasked prefix", prefixes("10.244.1.7/24"), "10.244.1.0-10.244.1.255"},
		{"sorted, adjacent joined", prefixes("10.244.3.0/24", "10.96.0.0/12", "10.244.1.0/24", "10.244.2.0/24"),
			"10.96.0.0-10.111.255.255 10.244.1.0-10.244.3.255"},
		{"duplicates and overlaps", prefixes("10.244.0.0/16", "10.244.5.0/24", "10.244.5.0/24", "10.245.0.0/24", "10.246.0.0/24"),
			"10.244.0.0-10.245.0.255 10.246.0.0-10.246.0.255"},
		{"up to the last address", prefixes("255.255.255.0/24", "255.255.255.255/32"), "255.255.255.0-255.255.255.255"},
		{"everything", prefixes("10.0.0.0/8", "0.0.0.0/0"), "0.0.0.0-255.255.255.255"},
		{"IPv6", prefixes("fd00:10:96::/112", "fd00:10:244:1::/64"),
			"fd00:10:96::-fd00:10:96::ffff fd00:10:244:1::-fd00:10:244:1:ffff:ffff:ffff:ffff"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var got []string
			for _, r := range noMasqueradeRanges(tc.in) {
				got = append(got, r.first.String()+"-"+r.last.String())
			}
			if s := strings.Join(got, " "); s != tc.want {
				t.Errorf("ranges of %v = %q, want %q", tc.in, s, tc.want)
			}
		})
	}
	// The kernel's interval elements: a start, and an end one past the last
	// address, except at the end of the address space.
	els := intervalElements(noMasqueradeRanges(prefixes("10.244.1.0/24", "255.255.255.0/24")))
	if got := elementsText(els); got != "10.244.1.0 255.255.255.0 end:10.244.2.0" {
		t.Errorf("interval elements = %q", got)
	}
}

func TestMasqueradeSpecs(t *testing.T) {
	specs := masqueradeSpecs(prefixes("10.244.1.0/24"), prefixes("10.96.0.0/12", "fd00:10:96::/112", "10.244.2.0/24"))
	if len(specs) != 1 || specs[0].family.table != nftables.TableFamilyIPv4 {
		t.Fatalf("specs for an IPv4 node = %v, want the ip table alone", specs)
	}
	if got, want := specs[0].String(), "2 [10.244.1.0/24] 10.96.0.0-10.111.255.255 10.244.1.0-10.244.2.255"; got != want {
		t.Errorf("spec = %q, want %q", got, want)
	}
	// A dual-stack node gets a table per family, each with its own family's
	// prefixes.
	specs = masqueradeSpecs(prefixes("10.244.1.0/24", "fd00:10:244:1::/64"), prefixes("10.96.0.0/12", "fd00:10:96::/112"))
	if len(specs) != 2 || specs[1].family.table != nftables.TableFamilyIPv6 ||
		specs[1].String() != "10 [fd00:10:244:1::/64] fd00:10:96::-fd00:10:96::ffff fd00:10:244:1::-fd00:10:244:1:ffff:ffff:ffff:ffff" {
		t.Errorf("dual-stack specs = %v", specs)
	}
}

func elementsText(els []nftables.SetElement) string {
	var out []string
	for _, e := range els {
		a, _ := netip.AddrFromSlice(e.Key)
		if e.IntervalEnd {
			out = append(out, "end:"+a.String())
		} else {
			out = append(out, a.String())
		}
	}
	slices.Sort(out)
	return strings.Join(out, " ")
}

func ipCmd(t *testing.T, args ...string) {
	t.Helper()
	if out, err := exec.Command("ip", args...).CombinedOutput(); err != nil {
		t.Fatalf("ip %s: %v: %s", strings.Join(args, " "), err, out)
	}
}

// peerServer listens on addr in the namespace at path and tells each
// client the source address it sees.
func peerServer(t *testing.T, path, addr string) {
	t.Helper()
	answerServer(t, path, addr, func(c net.Conn) string { return c.RemoteAddr().(*net.TCPAddr).IP.String() })
}

// answerServer listens on addr in the namespace at path and writes each
// client answer's text about its connection.
func answerServer(t *testing.T, path, addr string, answer func(net.Conn) string) {
	t.Helper()
	ln, err := netns.ListenAt(path)("tcp", addr)
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
			_, _ = io.WriteString(c, answer(c))
			c.Close()
		}
	}()
}

// sourceSeen is the source address the peerServer at addr saw d come from.
func sourceSeen(d netns.Dialer, addr string, timeout time.Duration) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	c, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return "", err
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(timeout))
	b, err := io.ReadAll(c)
	return string(b), err
}

// masqueradeState is the ip table as the kernel has it: its chains with
// their rule counts and the no-masquerade set's elements.
func masqueradeState(t *testing.T, n *Network) string {
	t.Helper()
	conn, err := nftables.New(nftables.WithNetNSFd(int(n.node)))
	if err != nil {
		t.Fatal(err)
	}
	table := &nftables.Table{Name: MasqueradeTable, Family: nftables.TableFamilyIPv4}
	chains, err := conn.ListChainsOfTableFamily(nftables.TableFamilyIPv4)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, c := range chains {
		if c.Table.Name != MasqueradeTable {
			continue
		}
		rules, err := conn.GetRules(table, c)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, fmt.Sprintf("chain %s: %d rules", c.Name, len(rules)))
	}
	if len(out) == 0 {
		return "" // no table
	}
	sets, err := conn.GetSets(table)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range sets {
		els, err := conn.GetSetElements(s)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, fmt.Sprintf("set %s: %s", s.Name, elementsText(els)))
	}
	slices.Sort(out)
	return strings.Join(out, "; ")
}

// TestMasqueradePodEgress sends real packets from a pod: to a server on
// the node's LAN (behind the node's default route), to a pod on the same
// bridge, and to a pod of another node (reached through a route to its
// pod CIDR), and checks the source address each one sees.
func TestMasqueradePodEgress(t *testing.T) {
	n, name := testNetworkNamed(t)
	if err := n.Ensure("10.244.7.0/24"); err != nil {
		t.Fatal(err)
	}
	// As on a node, where the proxy turns br_netfilter on: bridged pod
	// traffic passes the postrouting hook too.
	if err := netns.DoIn(n.node, func() error {
		err := os.WriteFile("/proc/sys/net/bridge/bridge-nf-call-iptables", []byte("1"), 0o644)
		if errors.Is(err, os.ErrNotExist) {
			t.Log("no br_netfilter: bridged traffic does not pass postrouting")
			return nil
		}
		return err
	}); err != nil {
		t.Fatal(err)
	}

	// The LAN: a namespace on a veth, the node's default route through it.
	// It holds an outside server, and plays another node whose pod CIDR
	// is 10.244.8.0/24 with a pod 10.244.8.10.
	lan := name + "-lan"
	ipCmd(t, "netns", "add", lan)
	t.Cleanup(func() {
		if out, err := exec.Command("ip", "netns", "del", lan).CombinedOutput(); err != nil {
			t.Errorf("ip netns del %s: %v: %s", lan, err, out)
		}
	})
	ipCmd(t, "-n", name, "link", "add", "lan0", "type", "veth", "peer", "name", "eth0", "netns", lan)
	ipCmd(t, "-n", name, "addr", "add", "198.18.0.1/24", "dev", "lan0")
	ipCmd(t, "-n", name, "link", "set", "lan0", "up")
	ipCmd(t, "-n", name, "route", "add", "default", "via", "198.18.0.2")
	ipCmd(t, "-n", lan, "addr", "add", "198.18.0.2/24", "dev", "eth0")
	ipCmd(t, "-n", lan, "link", "set", "eth0", "up")
	ipCmd(t, "-n", lan, "link", "set", "lo", "up")
	ipCmd(t, "-n", lan, "addr", "add", "198.19.0.80/32", "dev", "lo")
	ipCmd(t, "-n", lan, "addr", "add", "10.244.8.10/32", "dev", "lo")
	lanPath := netns.Path(lan)
	const outside, otherPod = "198.19.0.80:8080", "10.244.8.10:8080"
	peerServer(t, lanPath, outside)
	peerServer(t, lanPath, otherPod)

	a, err := n.Setup("pod-a")
	if err != nil {
		t.Fatal(err)
	}
	b, err := n.Setup("pod-b")
	if err != nil {
		t.Fatal(err)
	}
	peerServer(t, b.NetNS, net.JoinHostPort(b.IP.String(), "8080"))
	nsA, err := vnetns.GetFromPath(a.NetNS)
	if err != nil {
		t.Fatal(err)
	}
	defer nsA.Close()
	fromA := netns.NewDialer(nsA)
	expect := func(what, addr, want string) {
		t.Helper()
		got, err := sourceSeen(fromA, addr, 5*time.Second)
		if err != nil || got != want {
			t.Errorf("%s (%s) saw pod a come from %q (%v), want %q", what, addr, got, err, want)
		}
	}

	// Without masquerade the LAN cannot answer the pod's address.
	if got, err := sourceSeen(fromA, outside, 500*time.Millisecond); err == nil {
		t.Fatalf("the LAN server answered pod a (from %q) before any masquerade: the LAN routes the pod CIDR, the test needs it not to", got)
	}

	services := prefixes("10.96.0.0/12")
	for range 2 { // idempotent
		if err := n.SyncMasquerade(services); err != nil {
			t.Fatal(err)
		}
	}
	expect("the LAN server", outside, "198.18.0.1")
	expect("pod b on the bridge", net.JoinHostPort(b.IP.String(), "8080"), a.IP.String())

	// Another node comes: a route to its pod CIDR (and its route back to
	// ours). Until its pod CIDR is in the set, its pods see the node...
	if err := n.SyncRoutes(map[string]net.IP{"10.244.8.0/24": net.ParseIP("198.18.0.2")}); err != nil {
		t.Fatal(err)
	}
	ipCmd(t, "-n", lan, "route", "add", "10.244.7.0/24", "via", "198.18.0.1")
	expect("another node's pod, its pod CIDR not yet known", otherPod, "198.18.0.1")
	// ...then the pod itself, while the LAN still sees the node.
	if err := n.SyncMasquerade(append(services, prefixes("10.244.8.0/24")...)); err != nil {
		t.Fatal(err)
	}
	expect("another node's pod", otherPod, a.IP.String())
	expect("the LAN server, which now routes the pod CIDR", outside, "198.18.0.1")

	want := "chain postrouting: 1 rules; set no-masquerade: 10.244.7.0 10.96.0.0 end:10.112.0.0 end:10.244.9.0"
	if got := masqueradeState(t, n); got != want {
		t.Errorf("table %s is\n%s\nwant\n%s", MasqueradeTable, got, want)
	}
}

// TestMasqueradeRestart: a new agent finds the table of an older one (with
// leftovers of its own) and rewrites it whole.
func TestMasqueradeRestart(t *testing.T) {
	n, name := testNetworkNamed(t)
	if err := n.Ensure("10.244.7.0/24"); err != nil {
		t.Fatal(err)
	}
	if err := n.SyncMasquerade(prefixes("10.96.0.0/12", "10.244.8.0/24")); err != nil {
		t.Fatal(err)
	}
	// What else an older agent (or a hand) left in the table.
	conn, err := nftables.New(nftables.WithNetNSFd(int(n.node)))
	if err != nil {
		t.Fatal(err)
	}
	table := &nftables.Table{Name: MasqueradeTable, Family: nftables.TableFamilyIPv4}
	conn.AddChain(&nftables.Chain{Table: table, Name: "stale"})
	if err := conn.Flush(); err != nil {
		t.Fatal(err)
	}

	again, err := Open(Config{NodeNetNS: netns.Path(name), Dir: n.dir})
	if err != nil {
		t.Fatal(err)
	}
	defer again.Close()
	if err := again.Ensure("10.244.7.0/24"); err != nil {
		t.Fatal(err)
	}
	if err := again.SyncMasquerade(prefixes("10.96.0.0/12")); err != nil {
		t.Fatal(err)
	}
	want := "chain postrouting: 1 rules; set no-masquerade: 10.244.7.0 10.96.0.0 end:10.112.0.0 end:10.244.8.0"
	if got := masqueradeState(t, again); got != want {
		t.Errorf("after a restart table %s is\n%s\nwant\n%s", MasqueradeTable, got, want)
	}
	// The proxy's table is none of the pod network's business.
	conn.AddTable(&nftables.Table{Name: "svcnet", Family: nftables.TableFamilyIPv4})
	if err := conn.Flush(); err != nil {
		t.Fatal(err)
	}
	if err := again.Remove(); err != nil {
		t.Fatal(err)
	}
	if got := masqueradeState(t, again); got != "" {
		t.Errorf("after Remove table %s is still there: %s", MasqueradeTable, got)
	}
	tables, err := conn.ListTablesOfFamily(nftables.TableFamilyIPv4)
	if err != nil || len(tables) != 1 || tables[0].Name != "svcnet" {
		t.Errorf("tables after Remove: %v, %v; want the proxy's alone", tables, err)
	}
}
