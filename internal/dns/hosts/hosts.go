// Package hosts is CoreDNS's hosts plugin: names and addresses in the
// hosts file format (a Corefile's inline entries, or a file), answered as
// A and AAAA records and, for the addresses, PTR records.
package hosts

import (
	"bufio"
	"net/netip"
	"slices"
	"strings"

	"github.com/miekg/dns"
)

// DefaultTTL is the hosts plugin's TTL.
const DefaultTTL = 3600

// Table holds the names and addresses of hosts entries.
type Table struct {
	ttl   uint32
	addrs map[string][]netip.Addr // by FQDN, lower case
	names map[string][]string     // by reverse (in-addr.arpa) name
	// Zones are the names it answers for (all, when empty); PTR
	// questions are answered whatever their zone.
	Zones []string
	// Fallthrough sends questions for names it does not hold on to the
	// next plugin; without it they fail (SERVFAIL: a hosts file has no
	// SOA to deny them with).
	Fallthrough bool
}

// New is an empty table whose answers have ttl (DefaultTTL when 0).
func New(ttl uint32) *Table {
	if ttl == 0 {
		ttl = DefaultTTL
	}
	return &Table{ttl: ttl, addrs: map[string][]netip.Addr{}, names: map[string][]string{}}
}

// Parse adds the entries of text in the hosts file format: an address
// then its names, `#` starting a comment; malformed lines are skipped, as
// CoreDNS skips them.
func (t *Table) Parse(text string) {
	sc := bufio.NewScanner(strings.NewReader(text))
	for sc.Scan() {
		line, _, _ := strings.Cut(sc.Text(), "#")
		f := strings.Fields(line)
		if len(f) < 2 {
			continue
		}
		t.Add(f[0], f[1:]...)
	}
}

// Add maps names to the address addr (ignored when it is not one).
func (t *Table) Add(addr string, names ...string) {
	a, err := netip.ParseAddr(addr)
	if err != nil {
		return
	}
	a = a.Unmap()
	rev, _ := dns.ReverseAddr(a.String())
	for _, n := range names {
		n = dns.CanonicalName(n)
		t.addrs[n] = append(t.addrs[n], a)
		t.names[rev] = append(t.names[rev], n)
	}
}

// Serve answers q as CoreDNS's hosts plugin does: next is set when the
// question goes on to the next plugin (a name outside its zones, a PTR
// of an address it does not hold, a name it does not hold with
// fallthrough); otherwise rcode and answer are the reply: the records of
// q's type (none for a name that has only others), or SERVFAIL for a
// name it does not hold.
func (t *Table) Serve(q dns.Question) (answer []dns.RR, rcode int, next bool) {
	name := dns.CanonicalName(q.Name)
	if q.Qtype == dns.TypePTR {
		targets := t.names[name]
		if len(targets) == 0 {
			return nil, 0, true
		}
		for _, n := range targets {
			answer = append(answer, &dns.PTR{Hdr: t.header(q, dns.TypePTR), Ptr: n})
		}
		return answer, dns.RcodeSuccess, false
	}
	if len(t.Zones) > 0 && !slices.ContainsFunc(t.Zones, func(z string) bool { return dns.IsSubDomain(z, name) }) {
		return nil, 0, true
	}
	addrs, known := t.addrs[name]
	if !known {
		if t.Fallthrough {
			return nil, 0, true
		}
		return nil, dns.RcodeServerFailure, false
	}
	for _, a := range addrs {
		switch {
		case q.Qtype == dns.TypeA && a.Is4():
			answer = append(answer, &dns.A{Hdr: t.header(q, dns.TypeA), A: a.AsSlice()})
		case q.Qtype == dns.TypeAAAA && a.Is6():
			answer = append(answer, &dns.AAAA{Hdr: t.header(q, dns.TypeAAAA), AAAA: a.AsSlice()})
		}
	}
	return answer, dns.RcodeSuccess, false
}

func (t *Table) header(q dns.Question, rrtype uint16) dns.RR_Header {
	return dns.RR_Header{Name: q.Name, Rrtype: rrtype, Class: dns.ClassINET, Ttl: t.ttl}
}
