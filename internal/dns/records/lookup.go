package records

import (
	"math"
	"net/netip"
	"slices"
	"strings"

	"github.com/miekg/dns"
)

// Result is the answer to one question. Rcode is dns.RcodeSuccess or
// dns.RcodeNameError; an empty Answer with success is NODATA. Both
// negative answers carry the zone's SOA in Ns.
type Result struct {
	Rcode  int
	Answer []dns.RR
	Ns     []dns.RR
	Extra  []dns.RR
}

// versionTTL is the TTL of dns-version.<zone>, as the specification's
// example and CoreDNS give it.
const versionTTL = 28800

// maxChain bounds the CNAMEs followed inside the zone.
const maxChain = 8

// Reverse zones the index answers PTR questions in.
const (
	reverseV4 = "in-addr.arpa."
	reverseV6 = "ip6.arpa."
)

// Lookup answers q. ok is false for names that are not the cluster's: out
// of the zone, or a reverse name of an address that is no Service's and no
// endpoint's; the caller forwards those (CoreDNS's fallthrough for the
// reverse zones).
func (ix *Index) Lookup(q dns.Question) (Result, bool) {
	name := dns.CanonicalName(q.Name)
	if dns.IsSubDomain(reverseV4, name) || dns.IsSubDomain(reverseV6, name) {
		if q.Qtype != dns.TypePTR {
			return Result{}, false
		}
		ip, ok := addrFromReverse(name)
		if !ok {
			return Result{}, false
		}
		ix.mu.RLock()
		targets := ix.ptrTargets(ip)
		ix.mu.RUnlock()
		if len(targets) == 0 {
			return Result{}, false
		}
		var res Result
		for _, t := range targets {
			res.Answer = append(res.Answer, &dns.PTR{Hdr: ix.hdr(q.Name, dns.TypePTR), Ptr: t})
		}
		return res, true
	}
	if !dns.IsSubDomain(ix.zone, name) {
		return Result{}, false
	}
	ix.mu.RLock()
	defer ix.mu.RUnlock()
	return ix.lookup(q, name, 0), true
}

// lookup answers a question in the zone; name is q.Name canonical.
func (ix *Index) lookup(q dns.Question, name string, depth int) Result {
	base := strings.TrimSuffix(strings.TrimSuffix(name, ix.zone), ".")
	switch base {
	case "":
		return ix.apex(q)
	case "dns-version":
		if q.Qtype != dns.TypeTXT {
			return ix.nodata()
		}
		h := ix.hdr(q.Name, dns.TypeTXT)
		h.Ttl = versionTTL
		return Result{Answer: []dns.RR{&dns.TXT{Hdr: h, Txt: []string{SchemaVersion}}}}
	case "dns", "svc", "pod":
		return ix.nodata()
	case "ns.dns":
		return ix.addresses(q, ix.ns)
	}
	labels := dns.SplitDomainName(base)
	last := len(labels) - 1
	switch labels[last] {
	case "svc":
		return ix.serviceName(q, labels[:last], depth)
	case "pod":
		return ix.podName(q, labels[:last])
	}
	return ix.nxdomain()
}

// apex answers for the zone's own name: its SOA and NS, NODATA otherwise.
func (ix *Index) apex(q dns.Question) Result {
	switch q.Qtype {
	case dns.TypeSOA:
		return Result{Answer: ix.soa()}
	case dns.TypeNS:
		ns := "ns.dns." + ix.zone
		res := Result{Answer: []dns.RR{&dns.NS{Hdr: ix.hdr(q.Name, dns.TypeNS), Ns: ns}}}
		for _, ip := range ix.ns {
			res.Extra = append(res.Extra, ix.address(ns, ip))
		}
		return res
	}
	return ix.nodata()
}

// podName answers <a-b-c-d>.<ns>.pod.<zone> without checking that a pod
// has the address (CoreDNS's `pods insecure`); the namespace must exist.
func (ix *Index) podName(q dns.Question, labels []string) Result {
	if len(labels) > 2 || !ix.namespaces[labels[len(labels)-1]] {
		return ix.nxdomain()
	}
	if len(labels) == 1 {
		return ix.nodata()
	}
	dashed := labels[0]
	text := strings.ReplaceAll(dashed, "-", ":")
	if strings.Count(dashed, "-") == 3 && !strings.Contains(dashed, "--") {
		text = strings.ReplaceAll(dashed, "-", ".")
	}
	ip, err := netip.ParseAddr(text)
	if err != nil {
		return ix.nxdomain()
	}
	return ix.addresses(q, []netip.Addr{ip.Unmap()})
}

// request is a parsed name under svc.<zone>: [_port._proto. |
// endpoint.]service.namespace.
type request struct {
	port, proto, endpoint, service, namespace string
}

// serviceName answers names under svc.<zone>; labels are the name's
// labels before "svc".
func (ix *Index) serviceName(q dns.Question, labels []string, depth int) Result {
	n := len(labels)
	if n > 4 || !ix.namespaces[labels[n-1]] {
		return ix.nxdomain()
	}
	if n == 1 {
		return ix.nodata()
	}
	r := request{namespace: labels[n-1], service: labels[n-2]}
	switch n {
	case 3:
		r.endpoint = labels[0]
	case 4:
		r.port, r.proto = strings.TrimPrefix(labels[0], "_"), strings.TrimPrefix(labels[1], "_")
	}
	s := ix.services[key(r.namespace, r.service)]
	if s == nil {
		return ix.nxdomain()
	}
	if s.externalName != "" {
		return ix.externalName(q, s, r, depth)
	}
	items := ix.items(s, r)
	if len(items) == 0 {
		return ix.nxdomain()
	}
	switch q.Qtype {
	case dns.TypeA, dns.TypeAAAA:
		var ips []netip.Addr
		for _, it := range items {
			if !slices.Contains(ips, it.addr) {
				ips = append(ips, it.addr)
			}
		}
		return ix.addresses(q, ips)
	case dns.TypeSRV:
		return ix.srv(q, items)
	}
	return ix.nodata()
}

// externalName answers an ExternalName Service's name with a CNAME, for
// every type; a target inside the zone is followed here, one outside is
// left to the caller.
func (ix *Index) externalName(q dns.Question, s *service, r request, depth int) Result {
	if r.endpoint != "" || r.port != "" {
		return ix.nxdomain()
	}
	if _, err := netip.ParseAddr(s.externalName); err == nil {
		return ix.nxdomain() // CoreDNS serves no record for an address
	}
	target := dns.Fqdn(s.externalName)
	cname := &dns.CNAME{Hdr: ix.hdr(q.Name, dns.TypeCNAME), Target: target}
	res := Result{Answer: []dns.RR{cname}}
	canonical := dns.CanonicalName(target)
	if q.Qtype == dns.TypeCNAME || !dns.IsSubDomain(ix.zone, canonical) || depth >= maxChain {
		return res
	}
	next := ix.lookup(dns.Question{Name: target, Qtype: q.Qtype, Qclass: q.Qclass}, canonical, depth+1)
	res.Rcode, res.Ns = next.Rcode, next.Ns
	res.Answer = append(res.Answer, next.Answer...)
	res.Extra = next.Extra
	return res
}

// item is one (address, port) a name stands for; target names it in SRV
// answers. A port of -1 stands for an endpoint without ports.
type item struct {
	addr   netip.Addr
	port   int32
	target string
}

// items lists what a service name means: the cluster IPs on each matching
// port, or for a headless Service or an endpoint's name, each ready
// endpoint address on each matching port of its slice.
func (ix *Index) items(s *service, r request) []item {
	svcName := s.name + "." + s.namespace + ".svc." + ix.zone
	var items []item
	if !s.headless && r.endpoint == "" {
		for _, p := range s.ports {
			if !matchPort(r, p.Name, string(p.Protocol)) {
				continue
			}
			for _, ip := range s.clusterIPs {
				items = append(items, item{addr: ip, port: p.Port, target: svcName})
			}
		}
		return items
	}
	return ix.endpointItems(s, r)
}

// endpointItems lists each ready endpoint address of a Service (the one
// named by r.endpoint, when set) on each matching port of its slice.
func (ix *Index) endpointItems(s *service, r request) []item {
	svcName := s.name + "." + s.namespace + ".svc." + ix.zone
	var items []item
	byName := ix.slices[key(s.namespace, s.name)]
	names := make([]string, 0, len(byName))
	for n := range byName {
		names = append(names, n)
	}
	slices.Sort(names)
	for _, n := range names {
		sl := byName[n]
		ports := sl.ports
		if len(ports) == 0 {
			ports = []port{{number: -1}}
		}
		for _, e := range sl.endpoints {
			if !e.ready && !s.allReady {
				continue
			}
			for _, ip := range e.addrs {
				host := endpointHostname(e, ip)
				if r.endpoint != "" && r.endpoint != host {
					continue
				}
				for _, p := range ports {
					if matchPort(r, p.name, p.protocol) {
						items = append(items, item{addr: ip, port: p.number, target: host + "." + svcName})
					}
				}
			}
		}
	}
	return items
}

// endpointHostname is an endpoint's name under its Service: its hostname,
// else its address with dashes for dots (or colons).
func endpointHostname(e endpoint, ip netip.Addr) string {
	if e.hostname != "" {
		return e.hostname
	}
	if ip.Is4() {
		return strings.ReplaceAll(ip.String(), ".", "-")
	}
	return strings.ReplaceAll(ip.String(), ":", "-")
}

// matchPort reports whether a port matches the request's _port._proto
// labels; absent labels match every port.
func matchPort(r request, name, proto string) bool {
	return (r.port == "" || strings.EqualFold(r.port, name)) && (r.proto == "" || strings.EqualFold(r.proto, proto))
}

// srv answers SRV from items as CoreDNS does: priority 0, the weight
// 100 split evenly over the items, the item's port and target, and the
// targets' addresses in the additional section. Endpoints without ports
// give no SRV record.
func (ix *Index) srv(q dns.Question, items []item) Result {
	weight := uint16(math.Floor(100 / float64(len(items))))
	weight = max(weight, 1)
	type seen struct {
		target string
		port   int32
		addr   netip.Addr
	}
	dup := map[seen]bool{}
	var res Result
	for _, it := range items {
		if it.port == -1 {
			continue
		}
		if k := (seen{target: it.target, port: it.port}); !dup[k] {
			dup[k] = true
			res.Answer = append(res.Answer, &dns.SRV{Hdr: ix.hdr(q.Name, dns.TypeSRV), Priority: 0, Weight: weight,
				Port: uint16(it.port), Target: it.target})
		}
		if k := (seen{target: it.target, addr: it.addr}); !dup[k] {
			dup[k] = true
			res.Extra = append(res.Extra, ix.address(it.target, it.addr))
		}
	}
	if len(res.Answer) == 0 {
		return ix.nodata()
	}
	return res
}

// addresses answers A or AAAA with the addresses of the asked family;
// NODATA for other types or when there is none.
func (ix *Index) addresses(q dns.Question, ips []netip.Addr) Result {
	var res Result
	for _, ip := range ips {
		if (q.Qtype == dns.TypeA && ip.Is4()) || (q.Qtype == dns.TypeAAAA && ip.Is6()) {
			res.Answer = append(res.Answer, ix.address(q.Name, ip))
		}
	}
	if len(res.Answer) == 0 {
		return ix.nodata()
	}
	return res
}

// ptrTargets are the names of an address: its Service's when it is a
// cluster IP, else one per ready endpoint that has it. The caller holds
// the read lock.
func (ix *Index) ptrTargets(ip netip.Addr) []string {
	if k, ok := ix.clusterIPs[ip]; ok {
		s := ix.services[k]
		return []string{s.name + "." + s.namespace + ".svc." + ix.zone}
	}
	keys := make([]string, 0, len(ix.endpointIP[ip]))
	for k := range ix.endpointIP[ip] {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	var targets []string
	for _, k := range keys {
		s := ix.services[k]
		if s == nil || !ix.namespaces[s.namespace] {
			continue
		}
		for _, it := range ix.endpointItems(s, request{}) {
			if it.addr == ip && !slices.Contains(targets, it.target) {
				targets = append(targets, it.target)
			}
		}
	}
	return targets
}

func (ix *Index) hdr(name string, t uint16) dns.RR_Header {
	return dns.RR_Header{Name: name, Rrtype: t, Class: dns.ClassINET, Ttl: ix.ttl}
}

func (ix *Index) address(name string, ip netip.Addr) dns.RR {
	if ip.Is4() {
		return &dns.A{Hdr: ix.hdr(name, dns.TypeA), A: ip.AsSlice()}
	}
	return &dns.AAAA{Hdr: ix.hdr(name, dns.TypeAAAA), AAAA: ip.AsSlice()}
}

// soa is the zone's SOA as CoreDNS writes it.
func (ix *Index) soa() []dns.RR {
	h := dns.RR_Header{Name: ix.zone, Rrtype: dns.TypeSOA, Class: dns.ClassINET, Ttl: min(ix.ttl, 300)}
	return []dns.RR{&dns.SOA{Hdr: h, Ns: "ns.dns." + ix.zone, Mbox: "hostmaster." + ix.zone,
		Serial: uint32(ix.modified.Load()), Refresh: 7200, Retry: 1800, Expire: 86400, Minttl: ix.ttl}}
}

func (ix *Index) nxdomain() Result { return Result{Rcode: dns.RcodeNameError, Ns: ix.soa()} }

func (ix *Index) nodata() Result { return Result{Ns: ix.soa()} }

// addrFromReverse reads the address of a full in-addr.arpa or ip6.arpa
// name.
func addrFromReverse(name string) (netip.Addr, bool) {
	labels := dns.SplitDomainName(name)
	slices.Reverse(labels)
	var text string
	switch {
	case len(labels) == 6 && labels[1] == "in-addr":
		text = strings.Join(labels[2:], ".")
	case len(labels) == 34 && labels[1] == "ip6":
		var b strings.Builder
		for i, nibble := range labels[2:] {
			if i > 0 && i%4 == 0 {
				b.WriteByte(':')
			}
			b.WriteString(nibble)
		}
		text = b.String()
	default:
		return netip.Addr{}, false
	}
	ip, err := netip.ParseAddr(text)
	return ip.Unmap(), err == nil
}
