package hosts

import (
	"strings"
	"testing"

	"github.com/miekg/dns"
)

// Serve answers as CoreDNS's hosts plugin: its names' records, nothing
// for a name that has only records of other types, SERVFAIL for names
// it does not hold (or the next plugin, with fallthrough), and the next
// plugin for names outside its zones and PTRs of addresses it does not
// hold.
func TestServe(t *testing.T) {
	tb := New(0)
	tb.Parse("1.1.1.1 notexistname.resolv.conf.local # a comment\n\n# only a comment\nbogus\n2001:db8::1 Six.example\nnot-an-ip name.example\n")
	tb.Zones = []string{"resolv.conf.local.", "example."}
	for _, tc := range []struct {
		fall  bool
		name  string
		qtype uint16
		want  string
	}{
		{false, "notexistname.resolv.conf.local.", dns.TypeA, "NOERROR notexistname.resolv.conf.local.\t3600\tIN\tA\t1.1.1.1"},
		{false, "NotExistName.resolv.conf.local", dns.TypeA, "NOERROR NotExistName.resolv.conf.local\t3600\tIN\tA\t1.1.1.1"},
		{false, "notexistname.resolv.conf.local.", dns.TypeAAAA, "NOERROR"},
		{false, "six.example.", dns.TypeAAAA, "NOERROR six.example.\t3600\tIN\tAAAA\t2001:db8::1"},
		{false, "1.1.1.1.in-addr.arpa.", dns.TypePTR, "NOERROR 1.1.1.1.in-addr.arpa.\t3600\tIN\tPTR\tnotexistname.resolv.conf.local."},
		{false, "2.2.2.2.in-addr.arpa.", dns.TypePTR, "next"},
		{false, "name.example.", dns.TypeA, "SERVFAIL"},
		{true, "name.example.", dns.TypeA, "next"},
		{false, "other.org.", dns.TypeA, "next"},
	} {
		tb.Fallthrough = tc.fall
		rrs, rcode, next := tb.Serve(dns.Question{Name: tc.name, Qtype: tc.qtype, Qclass: dns.ClassINET})
		got := "next"
		if !next {
			parts := []string{dns.RcodeToString[rcode]}
			for _, rr := range rrs {
				parts = append(parts, rr.String())
			}
			got = strings.Join(parts, " ")
		}
		if got != tc.want {
			t.Errorf("%s %s (fallthrough %v): %q, want %q", tc.name, dns.TypeToString[tc.qtype], tc.fall, got, tc.want)
		}
	}
}
