package nftables

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"strings"

	"github.com/google/nftables"
	"github.com/google/nftables/expr"
	"github.com/mdlayher/netlink"
	"golang.org/x/sys/unix"
	corev1 "k8s.io/api/core/v1"

	"github.com/svcnet/svcnet/internal/proxy"
)

// Frontends reads the backend's frontends back from the kernel
// (ReadFrontends).
func (b *Backend) Frontends(ctx context.Context, service string) ([]proxy.Frontend, error) {
	return ReadFrontends(ctx, b.netns, service)
}

// ReadFrontends reads the proxy's tables in the network namespace at
// netnsPath (empty: the process's own) over netlink and says, for each
// frontend (an element of the verdict maps service-ips, service-nodeports,
// no-endpoint-services and no-endpoint-nodeports), which Service port it
// belongs to and where the rules send new connections: the DNAT targets
// of the endpoint chains that the Service chain picks among at random, or
// reject or drop. The Service comes from the chain names (namespace/name/
// protocol/port, kube-proxy's), or, for a frontend without a chain,
// from the element's comment, which also gives the kind. What it reads is
// the kernel's, not the backend's memory: a rule deleted by hand is
// missing from the answer. A read while a sync applies may see some
// chains before it and some after.
//
// With service set (namespace/name), only that Service's frontends are
// read: the maps' elements name their Service in their comment, so the
// chains of the others are not listed (a Service's own read stays quick
// among 10,000).
func ReadFrontends(ctx context.Context, netnsPath, service string) ([]proxy.Frontend, error) {
	b := &Backend{netns: netnsPath}
	conn, done, err := b.conn(nftables.AsLasting())
	if err != nil {
		return nil, err
	}
	defer done()
	defer conn.CloseLasting()
	var out []proxy.Frontend
	for _, f := range families {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		list, err := readFamily(ctx, conn, f, service)
		if err != nil {
			return nil, fmt.Errorf("read the %s table %s: %w", f.name, TableName, err)
		}
		out = append(out, list...)
	}
	proxy.SortFrontends(out)
	return out, nil
}

// reader reads one family's table, each chain once.
type reader struct {
	conn  *nftables.Conn
	table *nftables.Table
	rules map[string][]*nftables.Rule
}

func (r *reader) chainRules(name string) ([]*nftables.Rule, error) {
	if rules, ok := r.rules[name]; ok {
		return rules, nil
	}
	rules, err := r.conn.GetRules(r.table, &nftables.Chain{Table: r.table, Name: name})
	if err != nil {
		return nil, fmt.Errorf("list the rules of chain %s: %w", name, err)
	}
	r.rules[name] = rules
	return rules, nil
}

// frontendKey is a map element's key: a NodePort's address is the
// family's unspecified one.
type frontendKey struct {
	addr  netip.AddrPort
	proto corev1.Protocol
}

func readFamily(ctx context.Context, conn *nftables.Conn, f family, service string) ([]proxy.Frontend, error) {
	table, err := conn.ListTableOfFamily(TableName, f.table)
	if errors.Is(err, unix.ENOENT) {
		return nil, nil // no table: nothing captured
	}
	if err != nil {
		return nil, fmt.Errorf("look the table up: %w", err)
	}
	r := &reader{conn: conn, table: table, rules: map[string][]*nftables.Rule{}}
	fronts := map[frontendKey]*proxy.Frontend{}
	// The no-endpoint maps first: their verdicts are taken in the filter
	// chains, before the services chain's DNAT.
	for _, m := range []struct {
		set      string
		nodePort bool
	}{{noEndpointServices, false}, {noEndpointNodePort, true}, {serviceIPsMap, false}, {serviceNodePorts, true}} {
		elems, err := conn.GetSetElements(&nftables.Set{Table: table, Name: m.set})
		if err != nil {
			return nil, fmt.Errorf("list the elements of %s: %w", m.set, err)
		}
		for _, e := range elems {
			if err := ctx.Err(); err != nil {
				return nil, err
			}
			k, ok := f.elementKey(e.Key, m.nodePort)
			v, err := elementVerdict(e.Val)
			if !ok || err != nil {
				continue // not an element of ours
			}
			ns, name, port, kind, named := parseComment(e.Comment)
			if service != "" && (!named || ns+"/"+name != service) {
				continue
			}
			fr := fronts[k]
			if fr == nil {
				fr = &proxy.Frontend{Address: k.addr, Protocol: k.proto}
				fronts[k] = fr
			}
			if named {
				fr.Namespace, fr.Name, fr.PortName, fr.Kind = ns, name, port, kind
			}
			if m.nodePort {
				fr.Kind = proxy.KindNodePort
			}
			switch {
			case v.Kind == expr.VerdictDrop:
				fr.Drop = true
			case v.Kind == expr.VerdictGoto && v.Chain == rejectChain:
				fr.Reject = true
			case fr.Drop || fr.Reject:
				// Refused in the filter chains before the DNAT.
			case v.Kind == expr.VerdictGoto || v.Kind == expr.VerdictJump:
				if ns, name, port, ok := parsePortChain(v.Chain); ok {
					fr.Namespace, fr.Name, fr.PortName = ns, name, port
				}
				if fr.Kind == "" && (strings.HasPrefix(v.Chain, clusterPrefix) || strings.HasPrefix(v.Chain, localPrefix)) {
					fr.Kind = proxy.KindClusterIP
				}
				if fr.Backends, err = r.backends(v.Chain, 0); err != nil {
					return nil, err
				}
			}
		}
	}
	out := make([]proxy.Frontend, 0, len(fronts))
	for _, fr := range fronts {
		out = append(out, *fr)
	}
	return out, nil
}

// elementKey reads a map key: address . protocol . port, or protocol .
// port (nodePort), each part in whole 32-bit registers (elemKey).
func (f family) elementKey(key []byte, nodePort bool) (frontendKey, bool) {
	addr := netip.IPv4Unspecified()
	if f.name == ipv6.name {
		addr = netip.IPv6Unspecified()
	}
	if !nodePort {
		if len(key) < int(f.addrLen) {
			return frontendKey{}, false
		}
		addr, _ = netip.AddrFromSlice(key[:f.addrLen])
		key = key[f.addrLen:]
	}
	if len(key) != 8 {
		return frontendKey{}, false
	}
	var proto corev1.Protocol
	switch key[0] {
	case unix.IPPROTO_TCP:
		proto = corev1.ProtocolTCP
	case unix.IPPROTO_UDP:
		proto = corev1.ProtocolUDP
	case unix.IPPROTO_SCTP:
		proto = corev1.ProtocolSCTP
	default:
		return frontendKey{}, false
	}
	return frontendKey{addr: netip.AddrPortFrom(addr, binary.BigEndian.Uint16(key[4:6])), proto: proto}, true
}

// elementVerdict decodes a verdict map element's data, which the
// nftables package leaves as the attributes of the kernel's
// NFTA_DATA_VERDICT: the verdict code and, for a jump or goto, the chain.
func elementVerdict(data []byte) (expr.Verdict, error) {
	ad, err := netlink.NewAttributeDecoder(data)
	if err != nil {
		return expr.Verdict{}, fmt.Errorf("decode a verdict: %w", err)
	}
	ad.ByteOrder = binary.BigEndian
	var v expr.Verdict
	code := false
	for ad.Next() {
		switch ad.Type() {
		case unix.NFTA_VERDICT_CODE:
			v.Kind, code = expr.VerdictKind(int32(ad.Uint32())), true
		case unix.NFTA_VERDICT_CHAIN:
			v.Chain = ad.String()
		}
	}
	if err := ad.Err(); err != nil {
		return expr.Verdict{}, fmt.Errorf("decode a verdict: %w", err)
	}
	if !code {
		return expr.Verdict{}, errors.New("decode a verdict: no verdict code")
	}
	return v, nil
}

// parseComment reads elementComment's text.
func parseComment(comment string) (ns, name, port string, kind proxy.FrontendKind, ok bool) {
	svcPort, k, found := strings.Cut(comment, " ")
	svc, port, _ := strings.Cut(svcPort, ":")
	ns, name, named := strings.Cut(svc, "/")
	if !found || !named {
		return "", "", "", "", false
	}
	return ns, name, port, proxy.FrontendKind(k), true
}

// parsePortChain reads the Service port of a chain named by
// portChainBase (service-, local- or external-HASH-ns/name/proto/port).
func parsePortChain(chain string) (ns, name, port string, ok bool) {
	for _, prefix := range []string{clusterPrefix, localPrefix, externalPrefix} {
		if rest, found := strings.CutPrefix(chain, prefix); found {
			_, rest, _ = strings.Cut(rest, "-") // the hash
			parts := strings.Split(rest, "/")
			if len(parts) != 4 {
				return "", "", "", false
			}
			return parts[0], parts[1], parts[3], true
		}
	}
	return "", "", "", false
}

// maxDepth bounds how far backends follows chains: external → service or
// local → endpoint.
const maxDepth = 3

// backends are the endpoints a Service port's chain sends new connections
// to: the DNAT targets of the endpoint chains its rules go to, following
// the chains of the Service port it goes to (an external chain to the
// service or local chain). Only rules that match nothing but a random
// number count: the others (affinity, masquerade marks, the node's own
// and its pods' traffic under a Local policy) serve some clients only.
func (r *reader) backends(chain string, depth int) ([]netip.AddrPort, error) {
	if depth >= maxDepth {
		return nil, nil
	}
	rules, err := r.chainRules(chain)
	if err != nil {
		return nil, err
	}
	var out []netip.AddrPort
	for _, rule := range rules {
		v, ok := choice(rule)
		if !ok {
			continue
		}
		var more []netip.AddrPort
		if strings.HasPrefix(v.Chain, endpointPrefix) {
			more, err = r.dnat(v.Chain)
		} else {
			more, err = r.backends(v.Chain, depth+1)
		}
		if err != nil {
			return nil, err
		}
		for _, b := range more {
			if !slices.Contains(out, b) {
				out = append(out, b)
			}
		}
	}
	return out, nil
}

// choice is the chain a rule goes to when it matches nothing but a
// random number (numgen ... == N), or nothing at all.
func choice(rule *nftables.Rule) (*expr.Verdict, bool) {
	var v *expr.Verdict
	for _, e := range rule.Exprs {
		switch e := e.(type) {
		case *expr.Numgen, *expr.Cmp, *expr.Counter:
		case *expr.Verdict:
			v = e
		default:
			return nil, false
		}
	}
	if v == nil || (v.Kind != expr.VerdictGoto && v.Kind != expr.VerdictJump) || v.Chain == markMasqChain {
		return nil, false
	}
	return v, true
}

// dnat is where an endpoint chain's DNAT rules send the packet: the
// addresses and ports loaded into the registers its nat expression reads.
func (r *reader) dnat(chain string) ([]netip.AddrPort, error) {
	rules, err := r.chainRules(chain)
	if err != nil {
		return nil, err
	}
	var out []netip.AddrPort
	for _, rule := range rules {
		regs := map[uint32][]byte{}
		for _, e := range rule.Exprs {
			switch e := e.(type) {
			case *expr.Immediate:
				regs[e.Register] = e.Data
			case *expr.NAT:
				if e.Type != expr.NATTypeDestNAT {
					continue
				}
				addr, ok := netip.AddrFromSlice(regs[e.RegAddrMin])
				port := regs[e.RegProtoMin]
				if !ok || len(port) < 2 {
					continue
				}
				out = append(out, netip.AddrPortFrom(addr, binary.BigEndian.Uint16(port)))
			}
		}
	}
	return out, nil
}
