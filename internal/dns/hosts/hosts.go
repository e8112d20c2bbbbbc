// Package hosts is CoreDNS's hosts plugin: names and addresses in the
// hosts file format (a Corefile's inline entries, or a file), answered as
// A and AAAA records and, for the addresses, PTR records.
package hosts

import (
	"bufio"
	"net/netip"
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
	// Fallthrough sends questions for names it does not hold on to the
	// next plugin; without it they are NXDOMAIN.
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

// Lookup answers q from the table: known says it holds the name (its
// records of q's type may be none).
func (t *Table) Lookup(q dns.Question) (answer []dns.RR, known bool) {
	name := dns.CanonicalName(q.Name)
	hdr := dns.RR_Header{Name: q.Name, Class: dns.ClassINET, Ttl: t.ttl}
	if targets, ok := t.names[name]; ok {
		if q.Qtype == dns.TypePTR {
			hdr.Rrtype = dns.TypePTR
			for _, n := range targets {
				answer = append(answer, &dns.PTR{Hdr: hdr, Ptr: n})
			}
		}
		return answer, true
	}
	addrs, ok := t.addrs[name]
	if !ok {
		return nil, false
	}
	for _, a := range addrs {
		switch {
		case q.Qtype == dns.TypeA && a.Is4():
			hdr.Rrtype = dns.TypeA
			answer = append(answer, &dns.A{Hdr: hdr, A: a.AsSlice()})
		case q.Qtype == dns.TypeAAAA && a.Is6():
			hdr.Rrtype = dns.TypeAAAA
			answer = append(answer, &dns.AAAA{Hdr: hdr, AAAA: a.AsSlice()})
		}
	}
	return answer, true
}
