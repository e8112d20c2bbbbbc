package nftables

import (
	"crypto/sha256"
	"encoding/base32"
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"time"

	"github.com/google/nftables"
	"github.com/google/nftables/expr"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/svcnet/svcnet/internal/proxy"
)

// Chains, maps and sets of the table, kube-proxy's names.
const (
	servicesChain      = "services"
	serviceIPsMap      = "service-ips"
	serviceNodePorts   = "service-nodeports"
	endpointsCheck     = "endpoints-check"
	noEndpointServices = "no-endpoint-services"
	noEndpointNodePort = "no-endpoint-nodeports"
	rejectChain        = "reject-chain"
	firewallIPsMap     = "firewall-ips"
	firewallCheck      = "firewall-check"
	clusterIPsSet      = "cluster-ips"
	clusterIPsCheck    = "cluster-ips-check"
	markMasqChain      = "mark-for-masquerade"
	masqueradingChain  = "masquerading"
)

// chain is a chain with its rules; base chains hook into netfilter.
type chain struct {
	name  string
	base  *baseChain
	rules []*rule
}

type baseChain struct {
	typ      nftables.ChainType
	hook     *nftables.ChainHook
	priority int32
}

// set is a named set or verdict map.
type set struct {
	name string
	// key are the key's parts; a map's values are verdicts.
	key   []nftables.SetDatatype
	isMap bool
	// timeout makes a dynamic set whose entries expire (affinity).
	timeout time.Duration
}

// element is one entry of a named verdict map.
type element struct {
	set     string
	key     []byte
	keyText string
	verdict expr.Verdict
	// comment names the Service port and the kind of frontend
	// (elementComment), which the kernel keeps with the element.
	comment string
}

func (e element) id() string { return e.set + " " + e.keyText }

func (e element) String() string {
	if e.set == clusterIPsSet { // a set, not a verdict map
		return fmt.Sprintf("%s { %s }", e.set, e.keyText)
	}
	v := "goto " + e.verdict.Chain
	switch e.verdict.Kind {
	case expr.VerdictDrop:
		v = "drop"
	case expr.VerdictJump:
		v = "jump " + e.verdict.Chain
	}
	comment := ""
	if e.comment != "" {
		comment = fmt.Sprintf(" comment %q", e.comment)
	}
	return fmt.Sprintf("%s { %s%s : %s }", e.set, e.keyText, comment, v)
}

// elementComment is the comment of a verdict map's element: upstream's
// ServicePortName (namespace/name, and :port for a named port), as
// kube-proxy's, then the kind of frontend, which the rules do not tell
// apart (an external IP and a load balancer IP go the same way).
func elementComment(svc types.NamespacedName, p *proxy.ServicePort, kind proxy.FrontendKind) string {
	name := svc.String()
	if p.Name != "" {
		name += ":" + p.Name
	}
	return name + " " + string(kind)
}

// fragment is what one Service (or the table's skeleton) puts into one
// family's table.
type fragment struct {
	chains []*chain
	sets   []*set
	elems  []element
}

func (fr *fragment) chain(name string, base *baseChain) *chain {
	c := &chain{name: name, base: base}
	fr.chains = append(fr.chains, c)
	return c
}

func (c *chain) rule() *rule {
	r := &rule{}
	c.rules = append(c.rules, r)
	return r
}

// node is what rendering needs to know about the node.
type node struct {
	// podCIDR holds the node's pods: traffic from elsewhere to a cluster
	// IP is masqueraded (kube-proxy's detect-local-mode NodeCIDR).
	podCIDRs []netip.Prefix
	// masqueradeAll masquerades every cluster IP connection, for bridges
	// whose traffic does not pass conntrack.
	masqueradeAll bool
	// ips are the node's addresses: a loadBalancerSourceRanges entry that
	// holds one lets the node itself reach the load balancer IP.
	ips []netip.Addr
}

func (n node) podCIDR(f family) (netip.Prefix, bool) {
	for _, p := range n.podCIDRs {
		if f.has(p.Addr()) {
			return p, true
		}
	}
	return netip.Prefix{}, false
}

// skeleton is the fixed part of the table: base chains, dispatch chains
// and the maps that Services fill; serviceCIDRs are the Service ranges.
func skeleton(f family, serviceCIDRs []netip.Prefix) *fragment {
	fr := &fragment{}
	const dstnat, srcnat = -100, 100
	filter := func(name string, h *nftables.ChainHook) *chain {
		return fr.chain(name, &baseChain{typ: nftables.ChainTypeFilter, hook: h, priority: dstnat - 10})
	}
	nat := func(name string, h *nftables.ChainHook, prio int32) *chain {
		return fr.chain(name, &baseChain{typ: nftables.ChainTypeNAT, hook: h, priority: prio})
	}
	// kube-proxy rejects from input and forward, after routing, for kernels
	// before 5.9; we reject in prerouting, so that a node without a route
	// to the Service range (a namespace without a default route) refuses at
	// once instead of dropping the packet as unroutable.
	pre := filter("filter-prerouting", nftables.ChainHookPrerouting)
	pre.rule().ctNew().jump(firewallCheck)
	pre.rule().ctNew().jump(endpointsCheck)
	out := filter("filter-output", nftables.ChainHookOutput)
	out.rule().ctNew().jump(endpointsCheck)
	out.rule().ctNew().jump(firewallCheck)
	// After DNAT, as kube-proxy's cluster-ips-check: a new connection
	// still addressed to a cluster IP is for a port its Service does not
	// have, and is rejected; one to any other address of the Service
	// ranges is for a cluster IP no Service holds (yet), and is dropped,
	// so that conntrack does not keep it: its retransmissions meet the
	// rules a new Service brings, instead of leaving un-NATed for minutes.
	for _, c := range []*chain{
		fr.chain("filter-forward", &baseChain{typ: nftables.ChainTypeFilter, hook: nftables.ChainHookForward, priority: 0}),
		fr.chain("filter-output-post-dnat", &baseChain{typ: nftables.ChainTypeFilter, hook: nftables.ChainHookOutput, priority: 0}),
	} {
		c.rule().ctNew().jump(clusterIPsCheck)
	}
	cips := fr.chain(clusterIPsCheck, nil)
	cips.rule().addrInSet(f, false, clusterIPsSet).goTo(rejectChain)
	for _, r := range serviceCIDRs {
		if f.has(r.Addr()) {
			cips.rule().prefix(f, false, expr.CmpOpEq, r).verdict(expr.VerdictDrop, "")
		}
	}
	nat("nat-prerouting", nftables.ChainHookPrerouting, dstnat).rule().jump(servicesChain)
	nat("nat-output", nftables.ChainHookOutput, dstnat).rule().jump(servicesChain)
	nat("nat-postrouting", nftables.ChainHookPostrouting, srcnat).rule().jump(masqueradingChain)

	fr.chain(markMasqChain, nil).rule().markOr()
	masq := fr.chain(masqueradingChain, nil)
	masq.rule().markUnset().verdict(expr.VerdictReturn, "")
	masq.rule().markXor()
	masq.rule().masquerade()

	addrKey := []nftables.SetDatatype{f.addrType, nftables.TypeInetProto, nftables.TypeInetService}
	portKey := []nftables.SetDatatype{nftables.TypeInetProto, nftables.TypeInetService}
	fr.sets = []*set{
		{name: clusterIPsSet, key: []nftables.SetDatatype{f.addrType}},
		{name: serviceIPsMap, key: addrKey, isMap: true},
		{name: serviceNodePorts, key: portKey, isMap: true},
		{name: noEndpointServices, key: addrKey, isMap: true},
		{name: noEndpointNodePort, key: portKey, isMap: true},
		{name: firewallIPsMap, key: addrKey, isMap: true},
	}
	rej := fr.chain(rejectChain, nil)
	rej.rule().l4proto(corev1.ProtocolTCP).rejectTCP()
	rej.rule().reject(f)
	check := fr.chain(endpointsCheck, nil)
	check.rule().vmapLookup(f, true, noEndpointServices)
	check.rule().fibLocal(false).prefix(f, false, expr.CmpOpNeq, f.loopback).vmapLookup(f, false, noEndpointNodePort)
	fr.chain(firewallCheck, nil).rule().vmapLookup(f, true, firewallIPsMap)
	svc := fr.chain(servicesChain, nil)
	svc.rule().vmapLookup(f, true, serviceIPsMap)
	svc.rule().fibLocal(false).prefix(f, false, expr.CmpOpNeq, f.loopback).vmapLookup(f, false, serviceNodePorts)
	return fr
}

// Chain name prefixes, kube-proxy's.
const (
	clusterPrefix  = "service-"
	localPrefix    = "local-"
	externalPrefix = "external-"
	endpointPrefix = "endpoint-"
	affinityPrefix = "affinity-"
	firewallPrefix = "firewall-"
)

// maxName is the kernel's limit on chain and set names.
const maxName = 256

// hashed prefixes name with a hash of itself, kube-proxy's scheme, so that
// names that differ in one digit still look different.
func hashed(name string) string {
	sum := sha256.Sum256([]byte(name))
	name = base32.StdEncoding.EncodeToString(sum[:])[:8] + "-" + name
	if limit := maxName - 16; len(name) > limit {
		name = name[:limit-3] + "..."
	}
	return name
}

func portChainBase(svc types.NamespacedName, p *proxy.ServicePort) string {
	return hashed(fmt.Sprintf("%s/%s/%s/%s", svc.Namespace, svc.Name, protoName(p.Protocol), p.Name))
}

func endpointChainBase(svc types.NamespacedName, p *proxy.ServicePort, e proxy.Endpoint) string {
	ip := strings.ReplaceAll(e.Addr.String(), ":", ".")
	return hashed(fmt.Sprintf("%s/%s/%s/%s__%s/%d", svc.Namespace, svc.Name, protoName(p.Protocol), p.Name, ip, e.Port))
}

func addrPortKey(f family, a netip.Addr, p corev1.Protocol, port int32) ([]byte, string) {
	return elemKey(a.AsSlice(), []byte{protoNumber(p)}, portBytes(port)),
		fmt.Sprintf("%s . %s . %d", a, protoName(p), port)
}

func portKey(p corev1.Protocol, port int32) ([]byte, string) {
	return elemKey([]byte{protoNumber(p)}, portBytes(port)), fmt.Sprintf("%s . %d", protoName(p), port)
}

func inFamily(f family, list []netip.Addr) []netip.Addr {
	var out []netip.Addr
	for _, a := range list {
		if f.has(a) {
			out = append(out, a)
		}
	}
	return out
}

func epsInFamily(f family, list []proxy.Endpoint) []proxy.Endpoint {
	var out []proxy.Endpoint
	for _, e := range list {
		if f.has(e.Addr) {
			out = append(out, e)
		}
	}
	return out
}

// counts are the Service ports with a Local policy and no local endpoint.
type counts struct{ noLocalInternal, noLocalExternal int }

// renderService is what svc puts into family f's table, following
// kube-proxy's nftables proxier.
func renderService(f family, n node, svc *proxy.Service, c *counts) *fragment {
	fr := &fragment{}
	if len(svc.Ports) > 0 {
		for _, a := range inFamily(f, svc.Ports[0].ClusterIPs) {
			fr.elems = append(fr.elems, element{set: clusterIPsSet, key: elemKey(a.AsSlice()), keyText: a.String()})
		}
	}
	for _, p := range svc.Ports {
		renderPort(f, n, svc.Name, p, fr, c)
	}
	return fr
}

func renderPort(f family, n node, name types.NamespacedName, p *proxy.ServicePort, fr *fragment, c *counts) {
	clusterIPs := inFamily(f, p.ClusterIPs)
	if len(clusterIPs) == 0 {
		return
	}
	clusterIP := clusterIPs[0]
	base := portChainBase(name, p)
	clusterChain, localChain := clusterPrefix+base, localPrefix+base
	externalChain, fwChain := externalPrefix+base, firewallPrefix+base

	clusterEps := epsInFamily(f, p.ClusterEndpoints())
	localEps := epsInFamily(f, p.LocalEndpoints())
	hasEndpoints := len(clusterEps) > 0
	hasInternal, hasExternal := hasEndpoints, hasEndpoints
	internalChain, externalPolicyChain := clusterChain, clusterChain
	if p.InternalLocal {
		internalChain = localChain
		if len(localEps) == 0 {
			hasInternal = false
		}
	}
	if p.ExternalLocal {
		externalPolicyChain = localChain
		if len(localEps) == 0 {
			hasExternal = false
		}
	}
	// The cluster chain serves the cluster IP unless its policy is Local,
	// and external traffic: with policy Cluster, and with policy Local
	// for the node's own and its pods' connections.
	usesCluster := hasEndpoints && (!p.InternalLocal || p.ExternallyAccessible())
	usesLocal := len(localEps) > 0 && (p.InternalLocal || p.ExternalLocal)
	usesExternal := hasEndpoints && p.ExternallyAccessible()

	// Without endpoints traffic is rejected; with endpoints elsewhere only
	// (a Local policy), dropped.
	internalVerdict, externalVerdict := expr.Verdict{Kind: expr.VerdictGoto, Chain: rejectChain}, expr.Verdict{Kind: expr.VerdictGoto, Chain: rejectChain}
	if hasEndpoints {
		internalVerdict, externalVerdict = expr.Verdict{Kind: expr.VerdictDrop}, expr.Verdict{Kind: expr.VerdictDrop}
		if !hasInternal {
			c.noLocalInternal++
		}
		if !hasExternal {
			c.noLocalExternal++
		}
	}
	addElem := func(set string, key []byte, keyText string, v expr.Verdict, kind proxy.FrontendKind) {
		fr.elems = append(fr.elems, element{set: set, key: key, keyText: keyText, verdict: v, comment: elementComment(name, p, kind)})
	}
	addrElem := func(set string, a netip.Addr, v expr.Verdict, kind proxy.FrontendKind) {
		k, t := addrPortKey(f, a, p.Protocol, p.Port)
		addElem(set, k, t, v, kind)
	}
	goTo := func(chain string) expr.Verdict { return expr.Verdict{Kind: expr.VerdictGoto, Chain: chain} }

	if hasInternal {
		addrElem(serviceIPsMap, clusterIP, goTo(internalChain), proxy.KindClusterIP)
	} else {
		addrElem(noEndpointServices, clusterIP, internalVerdict, proxy.KindClusterIP)
	}
	for _, a := range inFamily(f, p.ExternalIPs) {
		if hasEndpoints {
			addrElem(serviceIPsMap, a, goTo(externalChain), proxy.KindExternalIP)
		}
		if !hasExternal {
			addrElem(noEndpointServices, a, externalVerdict, proxy.KindExternalIP)
		}
	}
	lbIPs := inFamily(f, p.LoadBalancerIPs)
	var ranges []netip.Prefix
	for _, r := range p.SourceRanges {
		if f.has(r.Addr()) {
			ranges = append(ranges, r)
		}
	}
	usesFirewall := len(lbIPs) > 0 && len(p.SourceRanges) > 0
	if usesFirewall {
		fw := fr.chain(fwChain, nil)
		allowFromNode := false
		for _, r := range ranges {
			fw.rule().prefix(f, true, expr.CmpOpEq, r).verdict(expr.VerdictReturn, "")
			allowFromNode = allowFromNode || slices.ContainsFunc(n.ips, r.Contains)
		}
		// A node that has the load balancer IP as a local address (as
		// VIP-style load balancers arrange) reaches it from that very
		// address: when the ranges admit the node, they admit that too,
		// as kube-proxy's allowFromNode does.
		if allowFromNode {
			for _, a := range lbIPs {
				fw.rule().addr(f, true, expr.CmpOpEq, a).verdict(expr.VerdictReturn, "")
			}
		}
		fw.rule().verdict(expr.VerdictDrop, "")
	}
	for _, a := range lbIPs {
		if hasEndpoints {
			addrElem(serviceIPsMap, a, goTo(externalChain), proxy.KindLoadBalancer)
		}
		if usesFirewall {
			addrElem(firewallIPsMap, a, goTo(fwChain), proxy.KindLoadBalancer)
		}
		if !hasExternal {
			addrElem(noEndpointServices, a, externalVerdict, proxy.KindLoadBalancer)
		}
	}
	if p.NodePort != 0 {
		k, t := portKey(p.Protocol, p.NodePort)
		if hasEndpoints {
			addElem(serviceNodePorts, k, t, goTo(externalChain), proxy.KindNodePort)
		}
		if !hasExternal {
			addElem(noEndpointNodePort, k, t, externalVerdict, proxy.KindNodePort)
		}
	}

	writeEndpoints := func(ch string, eps []proxy.Endpoint, masq bool) {
		c := fr.chain(ch, nil)
		if masq {
			r := c.rule().addr(f, false, expr.CmpOpEq, clusterIP).dport(p.Protocol, p.Port)
			if pod, ok := n.podCIDR(f); ok && !n.masqueradeAll {
				r.prefix(f, true, expr.CmpOpNeq, pod)
			}
			r.jump(markMasqChain)
		}
		names := make([]string, len(eps))
		for i, e := range eps {
			names[i] = endpointPrefix + endpointChainBase(name, p, e)
			if p.AffinitySeconds > 0 {
				c.rule().addrInSet(f, true, affinityPrefix+endpointChainBase(name, p, e)).goTo(names[i])
			}
		}
		// Endpoint i of N is taken with probability 1/(N-i) when the
		// ones before it were not: each one 1/N. (kube-proxy uses one
		// rule with an anonymous verdict map; the kernel looks such
		// maps up by a linear search through the batch, which makes a
		// full sync of thousands of Services quadratic.)
		for i, name := range names {
			r := c.rule()
			if rest := len(names) - i; rest > 1 {
				r.numgenZero(rest)
			}
			r.goTo(name)
		}
	}
	if usesCluster {
		writeEndpoints(clusterChain, clusterEps, hasInternal && !p.InternalLocal)
	}
	if usesLocal {
		writeEndpoints(localChain, localEps, hasInternal && p.InternalLocal)
	}
	if usesExternal {
		ext := fr.chain(externalChain, nil)
		if !p.ExternalLocal {
			ext.rule().jump(markMasqChain)
		} else {
			if pod, ok := n.podCIDR(f); ok && usesCluster {
				ext.rule().prefix(f, true, expr.CmpOpEq, pod).goTo(clusterChain)
			}
			ext.rule().fibLocal(true).jump(markMasqChain)
			if usesCluster {
				ext.rule().fibLocal(true).goTo(clusterChain)
			}
		}
		if hasExternal {
			ext.rule().goTo(externalPolicyChain)
		}
	}

	// One chain per endpoint reachable from this node.
	seen := map[string]bool{}
	var reachable []proxy.Endpoint
	if usesCluster {
		reachable = append(reachable, clusterEps...)
	}
	if usesLocal {
		reachable = append(reachable, localEps...)
	}
	for _, e := range reachable {
		b := endpointChainBase(name, p, e)
		if seen[b] {
			continue
		}
		seen[b] = true
		c := fr.chain(endpointPrefix+b, nil)
		c.rule().addr(f, true, expr.CmpOpEq, e.Addr).jump(markMasqChain)
		if p.AffinitySeconds > 0 {
			fr.sets = append(fr.sets, &set{name: affinityPrefix + b, key: []nftables.SetDatatype{f.addrType},
				timeout: time.Duration(p.AffinitySeconds) * time.Second})
			c.rule().updateSaddr(f, affinityPrefix+b)
		}
		c.rule().l4proto(p.Protocol).dnat(f, e.Addr, e.Port)
	}
}

// text renders fragments as nft-like text, chains and sets sorted by
// name, for tests and logs.
func text(frs ...*fragment) string {
	var chains []*chain
	var sets []*set
	elems := map[string][]string{}
	for _, fr := range frs {
		chains = append(chains, fr.chains...)
		sets = append(sets, fr.sets...)
		for _, e := range fr.elems {
			elems[e.set] = append(elems[e.set], e.String())
		}
	}
	slices.SortFunc(chains, func(a, b *chain) int { return strings.Compare(a.name, b.name) })
	slices.SortFunc(sets, func(a, b *set) int { return strings.Compare(a.name, b.name) })
	var b strings.Builder
	for _, c := range chains {
		fmt.Fprintf(&b, "chain %s\n", c.name)
		for _, r := range c.rules {
			fmt.Fprintf(&b, "\t%s\n", r)
		}
	}
	for _, s := range sets {
		if s.timeout > 0 {
			fmt.Fprintf(&b, "set %s timeout %s\n", s.name, s.timeout)
		}
	}
	var maps []string
	for m := range elems {
		maps = append(maps, m)
	}
	slices.Sort(maps)
	for _, m := range maps {
		list := elems[m]
		slices.Sort(list)
		for _, e := range list {
			fmt.Fprintf(&b, "element %s\n", e)
		}
	}
	return b.String()
}
