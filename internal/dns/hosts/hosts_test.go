package hosts

import (
	"testing"

	"github.com/miekg/dns"
)

func TestLookup(t *testing.T) {
	tb := New(0)
	tb.Parse("1.1.1.1 notexistname.resolv.conf.local # a comment\n\n# only a comment\nbogus\n2001:db8::1 Six.example\nnot-an-ip name.example\n")
	for _, tc := range []struct {
		name  string
		qtype uint16
		want  []string
		known bool
	}{
		{"notexistname.resolv.conf.local.", dns.TypeA, []string{"notexistname.resolv.conf.local.\t3600\tIN\tA\t1.1.1.1"}, true},
		{"NotExistName.resolv.conf.local", dns.TypeA, []string{"NotExistName.resolv.conf.local\t3600\tIN\tA\t1.1.1.1"}, true},
		{"notexistname.resolv.conf.local.", dns.TypeAAAA, nil, true},
		{"six.example.", dns.TypeAAAA, []string{"six.example.\t3600\tIN\tAAAA\t2001:db8::1"}, true},
		{"1.1.1.1.in-addr.arpa.", dns.TypePTR, []string{"1.1.1.1.in-addr.arpa.\t3600\tIN\tPTR\tnotexistname.resolv.conf.local."}, true},
		{"name.example.", dns.TypeA, nil, false},
		{"other.example.", dns.TypeA, nil, false},
	} {
		rrs, known := tb.Lookup(dns.Question{Name: tc.name, Qtype: tc.qtype, Qclass: dns.ClassINET})
		var got []string
		for _, rr := range rrs {
			got = append(got, rr.String())
		}
		if known != tc.known || len(got) != len(tc.want) || (len(got) > 0 && got[0] != tc.want[0]) {
			t.Errorf("%s %s: %q known=%v, want %q known=%v", tc.name, dns.TypeToString[tc.qtype], got, known, tc.want, tc.known)
		}
	}
}
