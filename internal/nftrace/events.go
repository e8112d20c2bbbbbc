package nftrace

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"net/netip"
	"strings"
	"time"

	"github.com/mdlayher/netlink"
	vnetns "github.com/vishvananda/netns"
	"golang.org/x/sys/unix"
)

// event is one NFT_MSG_TRACE message of the kernel.
type event struct {
	id     uint32
	family string // the table's: ip, ip6, inet, …
	table  string
	chain  string
	typ    string // TypeRule, TypeReturn, TypePolicy
	handle uint64
	// verdict is the rule's verdict, or the policy.
	verdict string
	// packet is set on the first message of each base chain's pass.
	packet   *packet
	iif, oif uint32
}

// The types of steps.
const (
	TypeRule   = "rule"
	TypeReturn = "return"
	TypePolicy = "policy"
)

// packet is what a trace message shows of the packet's headers.
type packet struct {
	proto    uint8
	src, dst netip.AddrPort
	// tcpFlags are the TCP header's flags (TCP only).
	tcpFlags uint8
}

func (p packet) String() string {
	s := fmt.Sprintf("%s → %s %s", p.src, p.dst, protoName(p.proto))
	if p.proto == unix.IPPROTO_TCP {
		var flags []string
		for i, name := range []string{"fin", "syn", "rst", "psh", "ack"} {
			if p.tcpFlags&(1<<i) != 0 {
				flags = append(flags, name)
			}
		}
		if len(flags) > 0 {
			s += " " + strings.Join(flags, ",")
		}
	}
	return s
}

func protoName(p uint8) string {
	switch p {
	case unix.IPPROTO_TCP:
		return "tcp"
	case unix.IPPROTO_UDP:
		return "udp"
	case unix.IPPROTO_ICMP:
		return "icmp"
	case unix.IPPROTO_ICMPV6:
		return "icmpv6"
	}
	return fmt.Sprintf("proto %d", p)
}

func protoNumber(protocol string) uint8 {
	if protocol == "UDP" {
		return unix.IPPROTO_UDP
	}
	return unix.IPPROTO_TCP
}

// traceType is the netlink message type of trace messages.
const traceType = netlink.HeaderType(unix.NFNL_SUBSYS_NFTABLES<<8 | unix.NFT_MSG_TRACE)

// The attributes of NFTA_TRACE_VERDICT (nf_tables.h's NFTA_VERDICT_*).
const (
	verdictCode  = 1
	verdictChain = 2
)

// familyNames are the nfproto numbers' names, as nft writes them.
var familyNames = map[uint8]string{unix.NFPROTO_INET: "inet", unix.NFPROTO_IPV4: "ip", unix.NFPROTO_ARP: "arp",
	unix.NFPROTO_NETDEV: "netdev", unix.NFPROTO_BRIDGE: "bridge", unix.NFPROTO_IPV6: "ip6"}

// decodeEvent reads a trace message; ok is false for other messages.
func decodeEvent(m netlink.Message) (ev event, ok bool, err error) {
	if m.Header.Type != traceType {
		return event{}, false, nil
	}
	if len(m.Data) < 4 { // nfgenmsg
		return event{}, false, errors.New("trace message without its nfgenmsg header")
	}
	ev.family = familyNames[m.Data[0]]
	if ev.family == "" {
		ev.family = fmt.Sprintf("family %d", m.Data[0])
	}
	ad, err := netlink.NewAttributeDecoder(m.Data[4:])
	if err != nil {
		return event{}, false, fmt.Errorf("decode trace message: %w", err)
	}
	ad.ByteOrder = binary.BigEndian
	var network, transport []byte
	for ad.Next() {
		switch ad.Type() {
		case unix.NFTA_TRACE_ID:
			ev.id = ad.Uint32()
		case unix.NFTA_TRACE_TABLE:
			ev.table = ad.String()
		case unix.NFTA_TRACE_CHAIN:
			ev.chain = ad.String()
		case unix.NFTA_TRACE_RULE_HANDLE:
			ev.handle = ad.Uint64()
		case unix.NFTA_TRACE_TYPE:
			ev.typ = map[uint32]string{unix.NFT_TRACETYPE_RULE: TypeRule, unix.NFT_TRACETYPE_RETURN: TypeReturn,
				unix.NFT_TRACETYPE_POLICY: TypePolicy}[ad.Uint32()]
		case unix.NFTA_TRACE_VERDICT:
			ad.Nested(func(nd *netlink.AttributeDecoder) error {
				var code int32
				var chain string
				for nd.Next() {
					switch nd.Type() {
					case verdictCode:
						code = int32(nd.Uint32())
					case verdictChain:
						chain = nd.String()
					}
				}
				ev.verdict = verdictText(code, chain)
				return nil
			})
		case unix.NFTA_TRACE_POLICY:
			ev.verdict = verdictText(int32(ad.Uint32()), "")
		case unix.NFTA_TRACE_NETWORK_HEADER:
			network = ad.Bytes()
		case unix.NFTA_TRACE_TRANSPORT_HEADER:
			transport = ad.Bytes()
		case unix.NFTA_TRACE_IIF:
			ev.iif = ad.Uint32()
		case unix.NFTA_TRACE_OIF:
			ev.oif = ad.Uint32()
		}
	}
	if err := ad.Err(); err != nil {
		return event{}, false, fmt.Errorf("decode trace message: %w", err)
	}
	switch {
	case ev.typ == TypeRule && ev.handle == 0:
		// Kernels since 6.4 report the end of a chain as a rule
		// without handle (before, as a return).
		ev.typ = TypeReturn
	case ev.typ == "":
		ev.typ = "unknown"
	}
	ev.packet = parsePacket(network, transport)
	return ev, true, nil
}

// netfilterVerdicts are linux/netfilter.h's NF_DROP to NF_STOP.
var netfilterVerdicts = []string{"drop", "accept", "stolen", "queue", "repeat", "stop"}

// verdictText is a verdict code (and chain) as nft writes it.
func verdictText(code int32, chain string) string {
	switch code {
	case unix.NFT_CONTINUE:
		return "continue"
	case unix.NFT_BREAK:
		return "break"
	case unix.NFT_JUMP:
		return "jump " + chain
	case unix.NFT_GOTO:
		return "goto " + chain
	case unix.NFT_RETURN:
		return "return"
	}
	// Netfilter's verdicts (NF_DROP 0 to NF_STOP 5), with an errno in
	// the upper bits for a drop.
	if v := code & 0xff; code >= 0 && int(v) < len(netfilterVerdicts) {
		return netfilterVerdicts[v]
	}
	return fmt.Sprintf("verdict %d", code)
}

// parsePacket reads the addresses, protocol and ports of an IPv4 or IPv6
// header (without extension headers) and the transport header after it;
// nil when there is no network header.
func parsePacket(network, transport []byte) *packet {
	var p packet
	var src, dst netip.Addr
	switch {
	case len(network) >= 20 && network[0]>>4 == 4:
		p.proto = network[9]
		src, dst = netip.AddrFrom4([4]byte(network[12:16])), netip.AddrFrom4([4]byte(network[16:20]))
	case len(network) >= 40 && network[0]>>4 == 6:
		p.proto = network[6]
		src, dst = netip.AddrFrom16([16]byte(network[8:24])), netip.AddrFrom16([16]byte(network[24:40]))
	default:
		return nil
	}
	var sport, dport uint16
	if p.proto == unix.IPPROTO_TCP || p.proto == unix.IPPROTO_UDP || p.proto == unix.IPPROTO_SCTP {
		if len(transport) >= 4 {
			sport, dport = binary.BigEndian.Uint16(transport[0:2]), binary.BigEndian.Uint16(transport[2:4])
		}
		if p.proto == unix.IPPROTO_TCP && len(transport) >= 14 {
			p.tcpFlags = transport[13]
		}
	}
	p.src, p.dst = netip.AddrPortFrom(src, sport), netip.AddrPortFrom(dst, dport)
	return &p
}

// tuple is the probe's first packet as it left the pod.
type tuple struct {
	src, dst netip.AddrPort
	proto    uint8
}

// probeEvents are the messages about the probe's packet: those with the
// trace id of the first message that shows the probe's headers. Other
// packets may be traced by others' rules at the same time.
func probeEvents(events []event, t tuple) []event {
	for _, ev := range events {
		if p := ev.packet; p != nil && p.src == t.src && p.dst == t.dst && p.proto == t.proto {
			var out []event
			for _, e := range events {
				if e.id == ev.id && !(e.family == traceFamily(t.dst.Addr()) && e.table == TraceTable) {
					out = append(out, e)
				}
			}
			return out
		}
	}
	return nil
}

// monitor is a netlink socket in the node's namespace subscribed to the
// trace messages.
type monitor struct {
	conn *netlink.Conn
}

// monitorBuffer is the socket's receive buffer: the messages wait there
// until the probe is over.
const monitorBuffer = 4 << 20

func openMonitor(nodeNetNS string) (*monitor, error) {
	cfg := &netlink.Config{}
	if nodeNetNS != "" {
		ns, err := vnetns.GetFromPath(nodeNetNS)
		if err != nil {
			return nil, fmt.Errorf("open network namespace %s: %w", nodeNetNS, err)
		}
		defer ns.Close()
		cfg.NetNS = int(ns)
	}
	conn, err := netlink.Dial(unix.NETLINK_NETFILTER, cfg)
	if err != nil {
		return nil, fmt.Errorf("netlink socket for nftables traces: %w", err)
	}
	if err := conn.JoinGroup(unix.NFNLGRP_NFTRACE); err != nil {
		conn.Close()
		return nil, fmt.Errorf("subscribe to nftables traces: %w", err)
	}
	if err := conn.SetReadBuffer(monitorBuffer); err != nil {
		conn.Close()
		return nil, fmt.Errorf("size the trace socket's buffer: %w", err)
	}
	return &monitor{conn: conn}, nil
}

func (m *monitor) close() { m.conn.Close() }

// collectTimeout bounds the wait for the echo that ends collect: the
// kernel answers at once.
const collectTimeout = 5 * time.Second

// collect reads the trace messages queued so far. The kernel queues a
// packet's trace messages as the packet passes the hooks, before the
// probe hears back; the answer to a request sent now (the ruleset's
// generation) comes after them, and ends the reading.
func (m *monitor) collect(ctx context.Context) ([]event, error) {
	deadline := time.Now().Add(collectTimeout)
	if d, ok := ctx.Deadline(); ok && d.Before(deadline) {
		deadline = d
	}
	if err := m.conn.SetReadDeadline(deadline); err != nil {
		return nil, fmt.Errorf("set the trace socket's deadline: %w", err)
	}
	req, err := m.conn.Send(netlink.Message{
		Header: netlink.Header{Type: netlink.HeaderType(unix.NFNL_SUBSYS_NFTABLES<<8 | unix.NFT_MSG_GETGEN), Flags: netlink.Request},
		Data:   []byte{unix.AF_UNSPEC, unix.NFNETLINK_V0, 0, 0},
	})
	if err != nil {
		return nil, fmt.Errorf("ask for the ruleset's generation: %w", err)
	}
	var events []event
	for {
		msgs, err := m.conn.Receive()
		if err != nil {
			return nil, fmt.Errorf("read nftables traces: %w", err)
		}
		for _, msg := range msgs {
			if msg.Header.Sequence == req.Header.Sequence && msg.Header.Type != traceType {
				return events, nil
			}
			ev, ok, err := decodeEvent(msg)
			if err != nil {
				return nil, err
			}
			if ok {
				events = append(events, ev)
			}
		}
	}
}
