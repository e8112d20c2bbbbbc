package nftrace

import (
	"encoding/binary"
	"net/netip"
	"testing"

	"github.com/mdlayher/netlink"
	"golang.org/x/sys/unix"
)

// traceMessage builds an NFT_MSG_TRACE message as the kernel sends it.
func traceMessage(t *testing.T, family uint8, attrs func(ae *netlink.AttributeEncoder)) netlink.Message {
	t.Helper()
	ae := netlink.NewAttributeEncoder()
	ae.ByteOrder = binary.BigEndian
	attrs(ae)
	b, err := ae.Encode()
	if err != nil {
		t.Fatal(err)
	}
	return netlink.Message{Header: netlink.Header{Type: traceType}, Data: append([]byte{family, unix.NFNETLINK_V0, 0, 0}, b...)}
}

// ipv4TCP is an IPv4 header and a TCP header with the SYN flag.
func ipv4TCP(src, dst netip.AddrPort) (network, transport []byte) {
	network = make([]byte, 20)
	network[0], network[9] = 0x45, unix.IPPROTO_TCP
	copy(network[12:], src.Addr().AsSlice())
	copy(network[16:], dst.Addr().AsSlice())
	transport = make([]byte, 20)
	binary.BigEndian.PutUint16(transport[0:], src.Port())
	binary.BigEndian.PutUint16(transport[2:], dst.Port())
	transport[13] = 0x02
	return network, transport
}

func TestDecodeEvent(t *testing.T) {
	src, dst := netip.MustParseAddrPort("10.244.0.6:43551"), netip.MustParseAddrPort("10.96.100.10:80")
	network, transport := ipv4TCP(src, dst)
	m := traceMessage(t, unix.NFPROTO_IPV4, func(ae *netlink.AttributeEncoder) {
		ae.String(unix.NFTA_TRACE_TABLE, "svcnet")
		ae.String(unix.NFTA_TRACE_CHAIN, "services")
		ae.Uint32(unix.NFTA_TRACE_ID, 0xabcd)
		ae.Uint32(unix.NFTA_TRACE_TYPE, unix.NFT_TRACETYPE_RULE)
		ae.Uint64(unix.NFTA_TRACE_RULE_HANDLE, 43)
		ae.Nested(unix.NFTA_TRACE_VERDICT, func(nae *netlink.AttributeEncoder) error {
			nae.Int32(verdictCode, unix.NFT_GOTO)
			nae.String(verdictChain, "service-SUSTUHLJ-default/web/tcp/http")
			return nil
		})
		ae.Bytes(unix.NFTA_TRACE_NETWORK_HEADER, network)
		ae.Bytes(unix.NFTA_TRACE_TRANSPORT_HEADER, transport)
		ae.Uint32(unix.NFTA_TRACE_IIF, 3)
	})
	ev, ok, err := decodeEvent(m)
	if err != nil || !ok {
		t.Fatalf("decodeEvent: %v, %v", ok, err)
	}
	if ev.id != 0xabcd || ev.family != "ip" || ev.table != "svcnet" || ev.chain != "services" || ev.typ != TypeRule ||
		ev.handle != 43 || ev.verdict != "goto service-SUSTUHLJ-default/web/tcp/http" || ev.iif != 3 || ev.oif != 0 {
		t.Errorf("decodeEvent = %+v", ev)
	}
	if ev.packet == nil || ev.packet.String() != "10.244.0.6:43551 → 10.96.100.10:80 tcp syn" {
		t.Errorf("packet = %v", ev.packet)
	}

	// The end of a chain: a rule without handle on kernels since 6.4.
	end := traceMessage(t, unix.NFPROTO_IPV4, func(ae *netlink.AttributeEncoder) {
		ae.String(unix.NFTA_TRACE_TABLE, "svcnet")
		ae.String(unix.NFTA_TRACE_CHAIN, "firewall-check")
		ae.Uint32(unix.NFTA_TRACE_TYPE, unix.NFT_TRACETYPE_RULE)
		ae.Nested(unix.NFTA_TRACE_VERDICT, func(nae *netlink.AttributeEncoder) error {
			nae.Int32(verdictCode, unix.NFT_CONTINUE)
			return nil
		})
	})
	if ev, _, err := decodeEvent(end); err != nil || ev.typ != TypeReturn || ev.verdict != "continue" || ev.packet != nil {
		t.Errorf("end of chain = %+v, %v", ev, err)
	}

	policy := traceMessage(t, unix.NFPROTO_INET, func(ae *netlink.AttributeEncoder) {
		ae.Uint32(unix.NFTA_TRACE_TYPE, unix.NFT_TRACETYPE_POLICY)
		ae.Uint32(unix.NFTA_TRACE_POLICY, 1)
	})
	if ev, _, err := decodeEvent(policy); err != nil || ev.typ != TypePolicy || ev.verdict != "accept" || ev.family != "inet" {
		t.Errorf("policy = %+v, %v", ev, err)
	}

	other := netlink.Message{Header: netlink.Header{Type: netlink.HeaderType(unix.NFNL_SUBSYS_NFTABLES<<8 | unix.NFT_MSG_NEWGEN)}, Data: []byte{0, 0, 0, 0}}
	if _, ok, err := decodeEvent(other); ok || err != nil {
		t.Errorf("a generation message decodes as a trace: %v, %v", ok, err)
	}
}

func TestVerdictText(t *testing.T) {
	for code, want := range map[int32]string{
		unix.NFT_CONTINUE: "continue", unix.NFT_RETURN: "return", unix.NFT_JUMP: "jump c", unix.NFT_GOTO: "goto c",
		0: "drop", 1: "accept", 0x10000: "drop", 5: "stop", 9: "verdict 9", -9: "verdict -9",
	} {
		if got := verdictText(code, "c"); got != want {
			t.Errorf("verdictText(%d) = %q, want %q", code, got, want)
		}
	}
}

func TestParsePacket(t *testing.T) {
	v6 := make([]byte, 40)
	v6[0], v6[6] = 0x60, unix.IPPROTO_UDP
	copy(v6[8:], netip.MustParseAddr("fd00::1").AsSlice())
	copy(v6[24:], netip.MustParseAddr("fd00::a").AsSlice())
	if p := parsePacket(v6, []byte{0x30, 0x39, 0, 53}); p == nil || p.String() != "[fd00::1]:12345 → [fd00::a]:53 udp" {
		t.Errorf("IPv6 UDP = %v", p)
	}
	if p := parsePacket([]byte{0x45}, nil); p != nil {
		t.Errorf("a short header = %v", p)
	}
}

func TestProbeEvents(t *testing.T) {
	probe := tuple{src: netip.MustParseAddrPort("10.244.0.6:40000"), dst: netip.MustParseAddrPort("10.96.0.10:53"), proto: unix.IPPROTO_UDP}
	other := &packet{proto: unix.IPPROTO_UDP, src: netip.MustParseAddrPort("10.244.0.9:40000"), dst: probe.dst}
	ours := &packet{proto: unix.IPPROTO_UDP, src: probe.src, dst: probe.dst}
	events := []event{
		{id: 1, family: "ip", table: "svcnet", chain: "a", packet: other},
		{id: 2, family: "ip", table: TraceTable, chain: "prerouting", packet: ours},
		{id: 2, family: "ip", table: "svcnet", chain: "b", packet: ours},
		{id: 1, family: "ip", table: "svcnet", chain: "c"},
		{id: 2, family: "ip", table: "svcnet", chain: "d"},
	}
	got := probeEvents(events, probe)
	if len(got) != 2 || got[0].chain != "b" || got[1].chain != "d" {
		t.Errorf("probeEvents = %+v", got)
	}
	if got := probeEvents(events[:1], probe); got != nil {
		t.Errorf("probeEvents without the probe's = %+v", got)
	}
}
