package nftables

import (
	"encoding/binary"
	"fmt"
	"net/netip"
	"strings"

	"github.com/google/nftables"
	"github.com/google/nftables/binaryutil"
	"github.com/google/nftables/expr"
	"golang.org/x/sys/unix"
	corev1 "k8s.io/api/core/v1"

	"github.com/svcnet/svcnet/internal/netaddr"
)

// family is what differs between the ip and ip6 tables.
type family struct {
	name     string // "ip" or "ip6"
	table    nftables.TableFamily
	nfproto  uint32
	addrType nftables.SetDatatype
	addrLen  uint32
	saddrOff uint32
	daddrOff uint32
	// loopback is never a NodePort address.
	loopback netip.Prefix
	// unreachCode is ICMP(v6) port unreachable.
	unreachCode uint8
}

var (
	ipv4 = family{name: "ip", table: nftables.TableFamilyIPv4, nfproto: unix.NFPROTO_IPV4, addrType: nftables.TypeIPAddr,
		addrLen: 4, saddrOff: 12, daddrOff: 16, loopback: netip.MustParsePrefix("127.0.0.0/8"), unreachCode: 3}
	ipv6 = family{name: "ip6", table: nftables.TableFamilyIPv6, nfproto: unix.NFPROTO_IPV6, addrType: nftables.TypeIP6Addr,
		addrLen: 16, saddrOff: 8, daddrOff: 24, loopback: netip.MustParsePrefix("::1/128"), unreachCode: 4}
	families = []family{ipv4, ipv6}
)

// has reports whether a belongs to the family.
func (f family) has(a netip.Addr) bool { return a.Is4() == (f.name == "ip") }

// The masquerade mark, kube-proxy's default bit 14.
const masqMark = 0x4000

// rule is one nftables rule, kept both as the expressions sent to the
// kernel and as nft-like text: the text is what syncs compare and what
// tests read.
type rule struct {
	text  []string
	exprs []expr.Any
}

func (r *rule) String() string { return strings.Join(r.text, " ") }

func (r *rule) add(text string, e ...expr.Any) *rule {
	r.text = append(r.text, text)
	r.exprs = append(r.exprs, e...)
	return r
}

// Registers: reg 1 holds a whole address (it overlaps the 32-bit
// registers 8 to 11), concatenations continue in the 32-bit ones.
const (
	reg1    = 1
	reg2    = 2
	reg32_0 = 8
)

func cmp(op expr.CmpOp, reg uint32, data []byte) *expr.Cmp {
	return &expr.Cmp{Op: op, Register: reg, Data: data}
}

func opText(op expr.CmpOp) string {
	if op == expr.CmpOpNeq {
		return "!= "
	}
	return ""
}

// addr matches the source (src) or destination address against a.
func (r *rule) addr(f family, src bool, op expr.CmpOp, a netip.Addr) *rule {
	off, dir := f.daddrOff, "daddr"
	if src {
		off, dir = f.saddrOff, "saddr"
	}
	return r.add(fmt.Sprintf("%s %s %s%s", f.name, dir, opText(op), a),
		&expr.Payload{DestRegister: reg1, Base: expr.PayloadBaseNetworkHeader, Offset: off, Len: f.addrLen},
		cmp(op, reg1, a.AsSlice()))
}

// prefix matches the source or destination address against p.
func (r *rule) prefix(f family, src bool, op expr.CmpOp, p netip.Prefix) *rule {
	if p.Bits() == p.Addr().BitLen() {
		return r.addr(f, src, op, p.Addr())
	}
	off, dir := f.daddrOff, "daddr"
	if src {
		off, dir = f.saddrOff, "saddr"
	}
	mask := netaddr.Mask(p)
	return r.add(fmt.Sprintf("%s %s %s%s", f.name, dir, opText(op), p),
		&expr.Payload{DestRegister: reg1, Base: expr.PayloadBaseNetworkHeader, Offset: off, Len: f.addrLen},
		&expr.Bitwise{SourceRegister: reg1, DestRegister: reg1, Len: f.addrLen, Mask: mask, Xor: make([]byte, f.addrLen)},
		cmp(op, reg1, p.Addr().AsSlice()))
}

func protoNumber(p corev1.Protocol) byte {
	switch p {
	case corev1.ProtocolUDP:
		return unix.IPPROTO_UDP
	case corev1.ProtocolSCTP:
		return unix.IPPROTO_SCTP
	}
	return unix.IPPROTO_TCP
}

func protoName(p corev1.Protocol) string { return strings.ToLower(string(p)) }

// l4proto matches the transport protocol.
func (r *rule) l4proto(p corev1.Protocol) *rule {
	return r.add("meta l4proto "+protoName(p),
		&expr.Meta{Key: expr.MetaKeyL4PROTO, Register: reg1},
		cmp(expr.CmpOpEq, reg1, []byte{protoNumber(p)}))
}

// dport matches protocol and destination port.
func (r *rule) dport(p corev1.Protocol, port int32) *rule {
	r.exprs = append(r.exprs, &expr.Meta{Key: expr.MetaKeyL4PROTO, Register: reg1},
		cmp(expr.CmpOpEq, reg1, []byte{protoNumber(p)}))
	return r.add(fmt.Sprintf("%s dport %d", protoName(p), port),
		&expr.Payload{DestRegister: reg1, Base: expr.PayloadBaseTransportHeader, Offset: 2, Len: 2},
		cmp(expr.CmpOpEq, reg1, binaryutil.BigEndian.PutUint16(uint16(port))))
}

// ctNew matches the first packet of a connection.
func (r *rule) ctNew() *rule {
	return r.add("ct state new",
		&expr.Ct{Register: reg1, Key: expr.CtKeySTATE},
		&expr.Bitwise{SourceRegister: reg1, DestRegister: reg1, Len: 4,
			Mask: binaryutil.NativeEndian.PutUint32(expr.CtStateBitNEW), Xor: make([]byte, 4)},
		cmp(expr.CmpOpNeq, reg1, make([]byte, 4)))
}

// fibLocal matches a local source (src) or destination address.
func (r *rule) fibLocal(src bool) *rule {
	dir := "daddr"
	if src {
		dir = "saddr"
	}
	return r.add(fmt.Sprintf("fib %s type local", dir),
		&expr.Fib{Register: reg1, ResultADDRTYPE: true, FlagSADDR: src, FlagDADDR: !src},
		cmp(expr.CmpOpEq, reg1, binaryutil.NativeEndian.PutUint32(unix.RTN_LOCAL)))
}

func (r *rule) verdict(kind expr.VerdictKind, chain string) *rule {
	text := map[expr.VerdictKind]string{expr.VerdictJump: "jump ", expr.VerdictGoto: "goto ",
		expr.VerdictReturn: "return", expr.VerdictDrop: "drop", expr.VerdictAccept: "accept"}[kind]
	return r.add(text+chain, &expr.Verdict{Kind: kind, Chain: chain})
}

func (r *rule) jump(chain string) *rule { return r.verdict(expr.VerdictJump, chain) }
func (r *rule) goTo(chain string) *rule { return r.verdict(expr.VerdictGoto, chain) }

// markOr sets the masquerade bit: mark set mark or 0x4000.
func (r *rule) markOr() *rule {
	return r.add(fmt.Sprintf("mark set mark or %#04x", masqMark),
		&expr.Meta{Key: expr.MetaKeyMARK, Register: reg1},
		&expr.Bitwise{SourceRegister: reg1, DestRegister: reg1, Len: 4,
			Mask: binaryutil.NativeEndian.PutUint32(^uint32(masqMark)), Xor: binaryutil.NativeEndian.PutUint32(masqMark)},
		&expr.Meta{Key: expr.MetaKeyMARK, SourceRegister: true, Register: reg1})
}

// markXor clears the masquerade bit once it is known to be set.
func (r *rule) markXor() *rule {
	return r.add(fmt.Sprintf("mark set mark xor %#04x", masqMark),
		&expr.Meta{Key: expr.MetaKeyMARK, Register: reg1},
		&expr.Bitwise{SourceRegister: reg1, DestRegister: reg1, Len: 4,
			Mask: binaryutil.NativeEndian.PutUint32(^uint32(0)), Xor: binaryutil.NativeEndian.PutUint32(masqMark)},
		&expr.Meta{Key: expr.MetaKeyMARK, SourceRegister: true, Register: reg1})
}

// markUnset matches packets without the masquerade bit.
func (r *rule) markUnset() *rule {
	return r.add(fmt.Sprintf("mark and %#04x == 0", masqMark),
		&expr.Meta{Key: expr.MetaKeyMARK, Register: reg1},
		&expr.Bitwise{SourceRegister: reg1, DestRegister: reg1, Len: 4,
			Mask: binaryutil.NativeEndian.PutUint32(masqMark), Xor: make([]byte, 4)},
		cmp(expr.CmpOpEq, reg1, make([]byte, 4)))
}

func (r *rule) masquerade() *rule {
	return r.add("masquerade fully-random", &expr.Masq{FullyRandom: true})
}

// reject answers TCP with a reset and anything else with ICMP port
// unreachable.
func (r *rule) rejectTCP() *rule {
	return r.add("reject with tcp reset", &expr.Reject{Type: unix.NFT_REJECT_TCP_RST})
}

func (r *rule) reject(f family) *rule {
	return r.add("reject", &expr.Reject{Type: unix.NFT_REJECT_ICMP_UNREACH, Code: f.unreachCode})
}

// dnat rewrites the destination to ep.
func (r *rule) dnat(f family, a netip.Addr, port int32) *rule {
	return r.add("dnat to "+netip.AddrPortFrom(a, uint16(port)).String(),
		&expr.Immediate{Register: reg1, Data: a.AsSlice()},
		&expr.Immediate{Register: reg2, Data: binaryutil.BigEndian.PutUint16(uint16(port))},
		&expr.NAT{Type: expr.NATTypeDestNAT, Family: f.nfproto, RegAddrMin: reg1, RegProtoMin: reg2, Specified: true})
}

// vmapLookup dispatches through a named verdict map keyed by [daddr .]
// l4proto . dport.
func (r *rule) vmapLookup(f family, withAddr bool, set string) *rule {
	reg := uint32(reg32_0)
	var text string
	if withAddr {
		r.exprs = append(r.exprs, &expr.Payload{DestRegister: reg1, Base: expr.PayloadBaseNetworkHeader, Offset: f.daddrOff, Len: f.addrLen})
		reg += f.addrLen / 4
		text = f.name + " daddr . "
	}
	r.exprs = append(r.exprs,
		&expr.Meta{Key: expr.MetaKeyL4PROTO, Register: reg},
		&expr.Payload{DestRegister: reg + 1, Base: expr.PayloadBaseTransportHeader, Offset: 2, Len: 2})
	first := uint32(reg32_0)
	if !withAddr {
		first = reg
	}
	return r.add(text+"meta l4proto . th dport vmap @"+set,
		&expr.Lookup{SourceRegister: first, DestRegister: 0, IsDestRegSet: true, SetName: set})
}

// numgenZero matches with probability 1/mod.
func (r *rule) numgenZero(mod int) *rule {
	return r.add(fmt.Sprintf("numgen random mod %d == 0", mod),
		&expr.Numgen{Register: reg1, Modulus: uint32(mod), Type: unix.NFT_NG_RANDOM},
		cmp(expr.CmpOpEq, reg1, binaryutil.NativeEndian.PutUint32(0)))
}

// addrInSet matches the source (src) or destination address against a
// named set.
func (r *rule) addrInSet(f family, src bool, set string) *rule {
	dir, off := "daddr", f.daddrOff
	if src {
		dir, off = "saddr", f.saddrOff
	}
	return r.add(fmt.Sprintf("%s %s @%s", f.name, dir, set),
		&expr.Payload{DestRegister: reg1, Base: expr.PayloadBaseNetworkHeader, Offset: off, Len: f.addrLen},
		&expr.Lookup{SourceRegister: reg1, SetName: set})
}

// updateSaddr adds or refreshes the source address in a dynamic set.
func (r *rule) updateSaddr(f family, set string) *rule {
	return r.add(fmt.Sprintf("update @%s { %s saddr }", set, f.name),
		&expr.Payload{DestRegister: reg1, Base: expr.PayloadBaseNetworkHeader, Offset: f.saddrOff, Len: f.addrLen},
		&expr.Dynset{SrcRegKey: reg1, SetName: set, Operation: unix.NFT_DYNSET_OP_UPDATE})
}

// Set element keys: every part of a concatenation takes whole 32-bit
// registers.
func elemKey(parts ...[]byte) []byte {
	var out []byte
	for _, p := range parts {
		padded := make([]byte, (len(p)+3)/4*4)
		copy(padded, p)
		out = append(out, padded...)
	}
	return out
}

func portBytes(port int32) []byte {
	b := make([]byte, 2)
	binary.BigEndian.PutUint16(b, uint16(port))
	return b
}
