package cni

import (
	"fmt"
	"net/netip"
	"os"
	"slices"
	"strings"

	"github.com/google/nftables"
	"github.com/google/nftables/binaryutil"
	"github.com/google/nftables/expr"
	"golang.org/x/sys/unix"

	"github.com/svcnet/svcnet/internal/netns"
)

// HostPortTable is the pod network's table of hostPorts, what the portmap
// CNI plugin does for the kubelet: a connection to a port of the node (of
// one of its addresses, or of any) reaches the pod's container port.
//
//	table ip svcnet-hostport {
//		chain hostports {
//			ip daddr 127.0.0.1 meta l4proto tcp th dport 54323 dnat to 10.244.0.5:8080
//			meta l4proto udp th dport 54323 dnat to 10.244.0.6:8080
//		}
//		chain prerouting { type nat hook prerouting priority dstnat; fib daddr type local jump hostports }
//		chain output { type nat hook output priority dstnat; fib daddr type local jump hostports }
//		chain postrouting {
//			type nat hook postrouting priority srcnat;
//			ip saddr 127.0.0.0/8 oifname "svcnet0" masquerade
//			ip saddr 10.244.0.5 ip daddr 10.244.0.5 meta l4proto tcp th dport 8080 masquerade
//		}
//	}
//
// A connection from the node's loopback leaves it masqueraded (the bridge
// routes loopback sources where route_localnet is on, as portmap turns it
// on), and a pod that reaches its own hostPort is masqueraded so that the
// answer comes back through the node (hairpin).
const HostPortTable = "svcnet-hostport"

// HostPort maps a port of the node to a pod's port.
type HostPort struct {
	// HostIP is the node's address the port is mapped on; zero for all.
	HostIP   netip.Addr
	HostPort uint16
	// Protocol is "tcp", "udp" or "sctp".
	Protocol string
	PodIP    netip.Addr
	PodPort  uint16
}

func (h HostPort) String() string {
	return fmt.Sprintf("%s %s:%d -> %s:%d", h.Protocol, h.HostIP, h.HostPort, h.PodIP, h.PodPort)
}

// protocols are the IP protocol numbers of HostPort.Protocol.
var protocols = map[string]byte{"tcp": unix.IPPROTO_TCP, "udp": unix.IPPROTO_UDP, "sctp": unix.IPPROTO_SCTP}

// SyncHostPorts writes the hostPort table for ports (IPv4), whole and in
// one netlink batch as SyncMasquerade writes its table; with no ports the
// table is removed. Calling it again with the same ports does nothing.
func (n *Network) SyncHostPorts(ports []HostPort) error {
	var keys []string
	loopback := false
	for _, p := range ports {
		if _, ok := protocols[p.Protocol]; !ok {
			return fmt.Errorf("host port %s: unknown protocol", p)
		}
		keys = append(keys, p.String())
		// A mapping on every address covers loopback too.
		loopback = loopback || !p.HostIP.IsValid() || p.HostIP.IsLoopback()
	}
	slices.Sort(keys)
	key := strings.Join(keys, ";")
	n.hostPortMu.Lock()
	defer n.hostPortMu.Unlock()
	if n.hostPortApplied != nil && *n.hostPortApplied == key {
		return nil
	}
	n.hostPortApplied = nil
	if loopback {
		if err := netns.DoIn(n.node, func() error {
			return os.WriteFile("/proc/sys/net/ipv4/conf/"+BridgeName+"/route_localnet", []byte("1"), 0o644)
		}); err != nil {
			return fmt.Errorf("route loopback sources to the pod bridge: %w", err)
		}
	}
	conn, err := nftables.New(nftables.WithNetNSFd(int(n.node)))
	if err != nil {
		return fmt.Errorf("nftables in the node namespace: %w", err)
	}
	t := &nftables.Table{Name: HostPortTable, Family: nftables.TableFamilyIPv4}
	conn.AddTable(t)
	conn.DelTable(t)
	if len(ports) > 0 {
		writeHostPortTable(conn, conn.AddTable(t), ports)
	}
	if err := conn.Flush(); err != nil {
		return fmt.Errorf("write the %s table: %w", HostPortTable, err)
	}
	n.hostPortApplied = &key
	return nil
}

// writeHostPortTable queues the chains and rules of the table t.
func writeHostPortTable(conn *nftables.Conn, t *nftables.Table, ports []HostPort) {
	accept := nftables.ChainPolicyAccept
	dstnat, srcnat := nftables.ChainPriorityNATDest, nftables.ChainPriority(srcnat)
	hostports := conn.AddChain(&nftables.Chain{Table: t, Name: "hostports"})
	for _, hook := range []struct {
		name string
		num  *nftables.ChainHook
	}{{"prerouting", nftables.ChainHookPrerouting}, {"output", nftables.ChainHookOutput}} {
		c := conn.AddChain(&nftables.Chain{Table: t, Name: hook.name, Type: nftables.ChainTypeNAT,
			Hooknum: hook.num, Priority: dstnat, Policy: &accept})
		// fib daddr type local jump hostports
		conn.AddRule(&nftables.Rule{Table: t, Chain: c, Exprs: []expr.Any{
			&expr.Fib{Register: 1, FlagDADDR: true, ResultADDRTYPE: true},
			&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: binaryutil.NativeEndian.PutUint32(unix.RTN_LOCAL)},
			&expr.Verdict{Kind: expr.VerdictJump, Chain: hostports.Name},
		}})
	}
	post := conn.AddChain(&nftables.Chain{Table: t, Name: "postrouting", Type: nftables.ChainTypeNAT,
		Hooknum: nftables.ChainHookPostrouting, Priority: &srcnat, Policy: &accept})
	// ip saddr 127.0.0.0/8 oifname "svcnet0" masquerade
	conn.AddRule(&nftables.Rule{Table: t, Chain: post, Exprs: []expr.Any{
		&expr.Payload{DestRegister: 1, Base: expr.PayloadBaseNetworkHeader, Offset: masqIPv4.saddrOff, Len: 4},
		&expr.Bitwise{SourceRegister: 1, DestRegister: 1, Len: 4, Mask: []byte{255, 0, 0, 0}, Xor: make([]byte, 4)},
		&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: []byte{127, 0, 0, 0}},
		&expr.Meta{Key: expr.MetaKeyOIFNAME, Register: 1},
		&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: ifnameData(BridgeName)},
		&expr.Masq{},
	}})
	for _, p := range ports {
		proto := []expr.Any{
			&expr.Meta{Key: expr.MetaKeyL4PROTO, Register: 1},
			&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: []byte{protocols[p.Protocol]}},
		}
		dport := func(port uint16) *expr.Cmp {
			return &expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: binaryutil.BigEndian.PutUint16(port)}
		}
		thDport := &expr.Payload{DestRegister: 1, Base: expr.PayloadBaseTransportHeader, Offset: 2, Len: 2}
		var dnat []expr.Any
		if p.HostIP.IsValid() {
			dnat = addrIs(masqIPv4.daddrOff, p.HostIP)
		}
		dnat = append(dnat, proto...)
		dnat = append(dnat, thDport, dport(p.HostPort),
			&expr.Immediate{Register: 1, Data: p.PodIP.AsSlice()},
			&expr.Immediate{Register: 2, Data: binaryutil.BigEndian.PutUint16(p.PodPort)},
			&expr.NAT{Type: expr.NATTypeDestNAT, Family: unix.NFPROTO_IPV4, RegAddrMin: 1, RegProtoMin: 2, Specified: true})
		conn.AddRule(&nftables.Rule{Table: t, Chain: hostports, Exprs: dnat})
		// The hairpin: ip saddr POD ip daddr POD meta l4proto P th dport PORT masquerade
		hairpin := append(addrIs(masqIPv4.saddrOff, p.PodIP), addrIs(masqIPv4.daddrOff, p.PodIP)...)
		hairpin = append(hairpin, proto...)
		hairpin = append(hairpin, thDport, dport(p.PodPort), &expr.Masq{})
		conn.AddRule(&nftables.Rule{Table: t, Chain: post, Exprs: hairpin})
	}
}

// addrIs matches packets whose IPv4 address at the network header's
// offset (source or destination) is a.
func addrIs(offset uint32, a netip.Addr) []expr.Any {
	return []expr.Any{
		&expr.Payload{DestRegister: 1, Base: expr.PayloadBaseNetworkHeader, Offset: offset, Len: 4},
		&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: a.AsSlice()},
	}
}
