package nftrace

import (
	"errors"
	"fmt"
	"log/slog"
	"net/netip"

	"github.com/google/nftables"
	"github.com/google/nftables/binaryutil"
	"github.com/google/nftables/expr"
	vnetns "github.com/vishvananda/netns"
	"golang.org/x/sys/unix"
)

// TraceTable is the table, in the family of the probe's addresses, that
// turns tracing on for the probe's first packet.
const TraceTable = "svcnet-trace"

// tracedSet holds the source port of the packet traced, so that only the
// first packet (not a retransmission) is.
const tracedSet = "traced"

// traceFamily is the family of the trace table for addresses like a.
func traceFamily(a netip.Addr) string {
	if a.Is4() {
		return "ip"
	}
	return "ip6"
}

// traceTable writes and removes the trace table over one netlink socket
// in the node's namespace, opened beforehand: install runs on a thread in
// the pod's namespace.
type traceTable struct {
	conn  *nftables.Conn
	ns    vnetns.NsHandle
	table *nftables.Table
}

func openTraceTable(nodeNetNS string) (*traceTable, error) {
	t := &traceTable{ns: -1}
	opts := []nftables.ConnOption{nftables.AsLasting()}
	if nodeNetNS != "" {
		ns, err := vnetns.GetFromPath(nodeNetNS)
		if err != nil {
			return nil, fmt.Errorf("open network namespace %s: %w", nodeNetNS, err)
		}
		t.ns = ns
		opts = append(opts, nftables.WithNetNSFd(int(ns)))
	}
	conn, err := nftables.New(opts...)
	if err != nil {
		t.close()
		return nil, fmt.Errorf("nftables socket: %w", err)
	}
	t.conn = conn
	return t, nil
}

// close removes the table if it is still there (after an error) and
// releases the socket.
func (t *traceTable) close() {
	if err := t.remove(); err != nil {
		slog.Warn("trace table left in the node's namespace", "table", TraceTable, "err", err)
	}
	if t.conn != nil {
		_ = t.conn.CloseLasting()
	}
	if t.ns >= 0 {
		t.ns.Close()
	}
}

// install writes the table: chains at prerouting and output before
// conntrack (raw priority - 1) with one rule that sets nftrace on the
// first packet from src port sport to dst (a TCP SYN, or a UDP datagram).
// A table left by an agent that died mid-trace is replaced.
func (t *traceTable) install(src netip.Addr, dst netip.AddrPort, protocol string, sport uint16) error {
	fam, addrLen, saddr, daddr := nftables.TableFamilyIPv4, uint32(4), uint32(12), uint32(16)
	if src.Is6() {
		fam, addrLen, saddr, daddr = nftables.TableFamilyIPv6, 16, 8, 24
	}
	t.table = &nftables.Table{Name: TraceTable, Family: fam}
	t.conn.AddTable(t.table)
	t.conn.DelTable(t.table)
	t.conn.AddTable(t.table)
	set := &nftables.Set{Table: t.table, Name: tracedSet, KeyType: nftables.TypeInetService, Dynamic: true}
	if err := t.conn.AddSet(set, nil); err != nil {
		return fmt.Errorf("trace table's set: %w", err)
	}
	prio := nftables.ChainPriority(*nftables.ChainPriorityRaw - 1)
	match := []expr.Any{
		&expr.Payload{DestRegister: 1, Base: expr.PayloadBaseNetworkHeader, Offset: saddr, Len: addrLen},
		&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: src.AsSlice()},
		&expr.Payload{DestRegister: 1, Base: expr.PayloadBaseNetworkHeader, Offset: daddr, Len: addrLen},
		&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: dst.Addr().AsSlice()},
		&expr.Meta{Key: expr.MetaKeyL4PROTO, Register: 1},
		&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: []byte{protoNumber(protocol)}},
		&expr.Payload{DestRegister: 1, Base: expr.PayloadBaseTransportHeader, Offset: 2, Len: 2},
		&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: binaryutil.BigEndian.PutUint16(dst.Port())},
	}
	if protocol == "TCP" { // tcp flags & (syn|ack) == syn
		match = append(match,
			&expr.Payload{DestRegister: 1, Base: expr.PayloadBaseTransportHeader, Offset: 13, Len: 1},
			&expr.Bitwise{SourceRegister: 1, DestRegister: 1, Len: 1, Mask: []byte{0x12}, Xor: []byte{0}},
			&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: []byte{0x02}})
	}
	match = append(match,
		&expr.Payload{DestRegister: 1, Base: expr.PayloadBaseTransportHeader, Offset: 0, Len: 2},
		&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: binaryutil.BigEndian.PutUint16(sport)},
		// Not yet traced: then it is, and its port goes into the set.
		&expr.Lookup{SourceRegister: 1, SetName: tracedSet, SetID: set.ID, Invert: true},
		&expr.Dynset{SrcRegKey: 1, SetName: tracedSet, SetID: set.ID, Operation: unix.NFT_DYNSET_OP_ADD},
		&expr.Immediate{Register: 1, Data: []byte{1}},
		&expr.Meta{Key: expr.MetaKeyNFTRACE, SourceRegister: true, Register: 1})
	// Output too: a host-network pod's packets leave from the node.
	for name, h := range map[string]*nftables.ChainHook{"prerouting": nftables.ChainHookPrerouting, "output": nftables.ChainHookOutput} {
		c := t.conn.AddChain(&nftables.Chain{Name: name, Table: t.table, Type: nftables.ChainTypeFilter, Hooknum: h, Priority: &prio})
		t.conn.AddRule(&nftables.Rule{Table: t.table, Chain: c, Exprs: match})
	}
	if err := t.conn.Flush(); err != nil {
		t.table = nil
		return fmt.Errorf("install the trace table: %w", err)
	}
	return nil
}

// remove deletes the table, if install wrote it.
func (t *traceTable) remove() error {
	if t.table == nil {
		return nil
	}
	t.conn.DelTable(t.table)
	err := t.conn.Flush()
	if err != nil && !errors.Is(err, unix.ENOENT) {
		return fmt.Errorf("remove the trace table: %w", err)
	}
	t.table = nil
	return nil
}
