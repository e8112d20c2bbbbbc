package nftrace

import (
	"net/netip"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// listing is `nft -a list chain ip svcnet masquerading` output.
const listing = `table ip svcnet {
	chain masquerading { # handle 14
		meta mark & 0x00004000 == 0x00000000 return # handle 35
		meta mark set meta mark ^ 0x00004000 # handle 36
		masquerade fully-random # handle 37
	}
}
`

func TestParseListing(t *testing.T) {
	got := parseListing(listing)
	want := map[uint64]string{
		35: "meta mark & 0x00004000 == 0x00000000 return",
		36: "meta mark set meta mark ^ 0x00004000",
		37: "masquerade fully-random",
	}
	if len(got) != len(want) {
		t.Fatalf("parseListing = %v", got)
	}
	for h, text := range want {
		if got[h] != text {
			t.Errorf("handle %d = %q, want %q", h, got[h], text)
		}
	}
}

func tcp(src, dst string) *packet {
	return &packet{proto: unix.IPPROTO_TCP, src: netip.MustParseAddrPort(src), dst: netip.MustParseAddrPort(dst), tcpFlags: 0x02}
}

// A connection to a cluster IP from the node (a host-network pod):
// DNAT to the endpoint, then masquerade.
func TestStepsAndAnalyze(t *testing.T) {
	dst := netip.MustParseAddrPort("10.96.100.10:80")
	before, after := tcp("172.31.252.2:40000", dst.String()), tcp("172.31.252.2:40000", "10.244.0.5:80")
	events := []event{
		{family: "ip", table: "svcnet", chain: "nat-output", typ: TypeRule, handle: 32, verdict: "jump services", packet: before, oif: 7},
		{family: "ip", table: "svcnet", chain: "services", typ: TypeRule, handle: 43, verdict: "goto service-X"},
		{family: "ip", table: "svcnet", chain: "service-X", typ: TypeRule, handle: 50, verdict: "jump mark-for-masquerade"},
		{family: "ip", table: "svcnet", chain: "endpoint-Y", typ: TypeRule, handle: 53, verdict: "accept"},
		// The end of a base chain, then its policy: one step.
		{family: "ip", table: "svcnet-cni", chain: "postrouting", typ: TypeReturn, verdict: "continue", packet: after, oif: 7},
		{family: "ip", table: "svcnet-cni", chain: "postrouting", typ: TypePolicy, verdict: "accept"},
		{family: "ip", table: "svcnet", chain: "masquerading", typ: TypeRule, handle: 37, verdict: "accept"},
	}
	texts := map[chainKey]map[uint64]string{
		{"ip", "svcnet", "nat-output"}:   {32: "jump services"},
		{"ip", "svcnet", "services"}:     {43: "ip daddr . meta l4proto . th dport vmap @service-ips"},
		{"ip", "svcnet", "endpoint-Y"}:   {53: "meta l4proto tcp dnat to 10.244.0.5:80"},
		{"ip", "svcnet", "masquerading"}: {37: "masquerade fully-random"},
	}
	got := steps(events, texts, map[uint32]string{7: "svcnet0"})
	var lines []string
	for _, s := range got {
		line := s.String()
		if s.Packet != "" {
			line += " | " + s.Packet + " in " + s.In + " out " + s.Out
		}
		lines = append(lines, line)
	}
	want := []string{
		"ip svcnet nat-output: jump services | 172.31.252.2:40000 → 10.96.100.10:80 tcp syn in  out svcnet0",
		"ip svcnet services: ip daddr . meta l4proto . th dport vmap @service-ips (verdict goto service-X)",
		"ip svcnet service-X: rule handle 50 (verdict jump mark-for-masquerade)",
		"ip svcnet endpoint-Y: meta l4proto tcp dnat to 10.244.0.5:80 (verdict accept)",
		"ip svcnet-cni postrouting: policy accept | 172.31.252.2:40000 → 10.244.0.5:80 tcp syn in  out svcnet0",
		"ip svcnet masquerading: masquerade fully-random (verdict accept)",
	}
	if strings.Join(lines, "\n") != strings.Join(want, "\n") {
		t.Errorf("steps:\n%s\nwant:\n%s", strings.Join(lines, "\n"), strings.Join(want, "\n"))
	}
	dnat, masq, dropped := analyze(dst, events, got)
	if dnat != "10.244.0.5:80" || !masq || dropped != 0 {
		t.Errorf("analyze = %q, %v, %d", dnat, masq, dropped)
	}

	// Without a later header, the dnat rule tells; a reject drops.
	rejected := []Step{
		{Type: TypeRule, Rule: "dnat to 10.244.0.9", Verdict: "accept"},
		{Type: TypeRule, Rule: "reject with tcp reset", Verdict: "drop"},
	}
	if dnat, masq, dropped := analyze(dst, nil, rejected); dnat != "10.244.0.9:80" || masq || dropped != 2 {
		t.Errorf("analyze = %q, %v, %d", dnat, masq, dropped)
	}
}

func TestRouteString(t *testing.T) {
	for r, want := range map[Route]string{
		{To: "10.244.0.5", Dev: "svcnet0", Src: "10.244.0.1"}:    "10.244.0.5 dev svcnet0 src 10.244.0.1",
		{To: "10.244.1.5", Gateway: "172.31.252.3", Dev: "eth0"}: "10.244.1.5 via 172.31.252.3 dev eth0",
		{To: "172.31.252.2", Local: true, Dev: "lo"}:             "local 172.31.252.2 dev lo",
		{To: "10.1.2.3", Error: "network is unreachable"}:        "10.1.2.3: network is unreachable",
	} {
		if got := r.String(); got != want {
			t.Errorf("%+v = %q, want %q", r, got, want)
		}
	}
}
