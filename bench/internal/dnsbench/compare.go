package dnsbench

import (
	"context"
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"time"

	"github.com/miekg/dns"
)

// Mismatch is a question two servers answered differently, with each
// answer as normalize writes it.
type Mismatch struct {
	Question        string
	Svcnet, CoreDNS string
}

// sample returns the questions asked of both servers: for n Services
// spread over all of them, every name and type the specification gives
// them (and some it does not), and names of the zone itself. The zone's
// NS and ns.dns.<zone> are left out: CoreDNS answers them with the
// addresses it is bound to, and here that is loopback, which it skips.
func (f *fixture) sample(n int) []dns.Question {
	q := func(name string, t uint16) dns.Question {
		return dns.Question{Name: name, Qtype: t, Qclass: dns.ClassINET}
	}
	ns0 := f.namespace(0)
	qs := []dns.Question{
		q(zone+".", dns.TypeSOA),
		q("dns-version."+zone+".", dns.TypeTXT),
		q("svc."+zone+".", dns.TypeA),
		q(ns0+".svc."+zone+".", dns.TypeA),
		q("*."+ns0+".svc."+zone+".", dns.TypeA),
		q("nosuch."+ns0+".svc."+zone+".", dns.TypeA),
		q(serviceName(1)+".nosuch-ns.svc."+zone+".", dns.TypeA),
		q("10-244-0-5."+ns0+".pod."+zone+".", dns.TypeA),
		q("10-244-0-5."+ns0+".pod."+zone+".", dns.TypeAAAA),
		q("10-244-0-5.nosuch-ns.pod."+zone+".", dns.TypeA),
		q("not-an-ip."+ns0+".pod."+zone+".", dns.TypeA),
		q(strings.ToUpper(f.fqdn(1)), dns.TypeA),
	}
	reverse := func(ip netip.Addr) string {
		name, _ := dns.ReverseAddr(ip.String())
		return name
	}
	for k := range min(n, f.o.Services) {
		// The offset k walks the spread over every sort of Service.
		i := (k*f.o.Services/min(n, f.o.Services) + k) % f.o.Services
		// Every sort of Service gets into the sample, however small.
		if k < 3 {
			i = []int{1, 10, 5}[k] % f.o.Services
		}
		name := f.fqdn(i)
		for _, t := range []uint16{dns.TypeA, dns.TypeAAAA, dns.TypeSRV, dns.TypeCNAME, dns.TypeTXT} {
			qs = append(qs, q(name, t))
		}
		qs = append(qs, q("_http._tcp."+name, dns.TypeSRV), q("_dns._udp."+name, dns.TypeSRV),
			q("_http._udp."+name, dns.TypeSRV), q("_nosuch._tcp."+name, dns.TypeSRV))
		if ip := f.clusterIPs[i]; ip.IsValid() {
			qs = append(qs, q(reverse(ip), dns.TypePTR))
		}
		_, total := endpointsOf(i)
		for j := range total {
			ip := endpointIP(i, j)
			qs = append(qs, q(strings.ReplaceAll(ip.String(), ".", "-")+"."+name, dns.TypeA), q(reverse(ip), dns.TypePTR))
			if kindOf(i) == headless && j != 2 {
				host := fmt.Sprintf("host-%d.%s", j, name)
				qs = append(qs, q(host, dns.TypeA), q(host, dns.TypeAAAA), q("_http._tcp."+host, dns.TypeSRV))
			}
		}
	}
	return qs
}

// compare asks both servers every question over UDP with EDNS0 and
// returns the questions whose answers differ in rcode or answer records.
func compare(ctx context.Context, questions []dns.Question, ours, theirs string) (int, []Mismatch, error) {
	c := &dns.Client{Timeout: 2 * time.Second}
	var diffs []Mismatch
	for _, q := range questions {
		var answers [2]string
		for k, addr := range []string{ours, theirs} {
			m := new(dns.Msg)
			m.Question = []dns.Question{q}
			m.RecursionDesired = true
			m.Id = dns.Id()
			m.SetEdns0(4096, false)
			resp, _, err := c.ExchangeContext(ctx, m, addr)
			if err != nil {
				return 0, nil, fmt.Errorf("ask %s %s: %w", addr, questionString(q), err)
			}
			answers[k] = normalize(resp)
		}
		if answers[0] != answers[1] {
			diffs = append(diffs, Mismatch{Question: questionString(q), Svcnet: answers[0], CoreDNS: answers[1]})
		}
	}
	return len(questions), diffs, nil
}

func questionString(q dns.Question) string { return q.Name + " " + dns.TypeToString[q.Qtype] }

// normalize writes an answer's rcode and answer records, sorted, with
// TTLs and SOA serials (which only say when each server last changed)
// left out.
func normalize(m *dns.Msg) string {
	rrs := make([]string, 0, len(m.Answer))
	for _, rr := range m.Answer {
		rr = dns.Copy(rr)
		rr.Header().Ttl = 0
		if soa, ok := rr.(*dns.SOA); ok {
			soa.Serial = 0
		}
		rrs = append(rrs, strings.ReplaceAll(rr.String(), "\t", " "))
	}
	slices.Sort(rrs)
	return dns.RcodeToString[m.Rcode] + " [" + strings.Join(rrs, "; ") + "]"
}
