package dnsbench

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/miekg/dns"

	"github.com/svcnet/svcnet/bench/internal/benchmain"
)

// TestRunSmall runs the benchmark at a small size, svcnet alone (building
// CoreDNS takes minutes), to keep it working; the figures come from
// `go run ./bench/dns -coredns bench/dns/coredns`.
func TestRunSmall(t *testing.T) {
	res, printed := benchmain.Small(t, func(ctx context.Context) (*Result, error) {
		return Run(ctx, Options{Services: 200, Namespaces: 3, Workers: 4, Duration: 300 * time.Millisecond, Rounds: 2, Sample: 10})
	})
	t.Log("\n" + printed)
	if len(res.Servers) != 1 {
		t.Fatalf("measured %d servers, want svcnet alone", len(res.Servers))
	}
	s := res.Servers[0]
	if s.Queries == 0 || s.QPS() <= 0 || s.P50 <= 0 || s.P99 < s.P50 || s.Ready <= 0 {
		t.Errorf("implausible figures %+v", s)
	}
	if s.Wrong != 0 {
		t.Errorf("%d of %d answers had another rcode than expected", s.Wrong, s.Queries)
	}
	if !strings.Contains(printed, "CoreDNS not measured") {
		t.Errorf("printed result does not say CoreDNS was left out:\n%s", printed)
	}
}

// The comparison ignores order and TTLs, and SOA serials, but not the
// records or the rcode.
func TestNormalize(t *testing.T) {
	msg := func(rcode int, rrs ...string) *dns.Msg {
		m := new(dns.Msg)
		m.Rcode = rcode
		for _, s := range rrs {
			rr, err := dns.NewRR(s)
			if err != nil {
				t.Fatal(err)
			}
			m.Answer = append(m.Answer, rr)
		}
		return m
	}
	a := msg(dns.RcodeSuccess, "x.cluster.local. 5 IN A 10.0.0.1", "x.cluster.local. 5 IN A 10.0.0.2")
	for _, c := range []struct {
		name string
		b    *dns.Msg
		same bool
	}{
		{"other order and TTL", msg(dns.RcodeSuccess, "x.cluster.local. 30 IN A 10.0.0.2", "x.cluster.local. 5 IN A 10.0.0.1"), true},
		{"other address", msg(dns.RcodeSuccess, "x.cluster.local. 5 IN A 10.0.0.1", "x.cluster.local. 5 IN A 10.0.0.3"), false},
		{"one record fewer", msg(dns.RcodeSuccess, "x.cluster.local. 5 IN A 10.0.0.1"), false},
		{"other rcode", msg(dns.RcodeNameError, "x.cluster.local. 5 IN A 10.0.0.1", "x.cluster.local. 5 IN A 10.0.0.2"), false},
	} {
		if got := normalize(a) == normalize(c.b); got != c.same {
			t.Errorf("%s: same = %v, want %v:\n%s\n%s", c.name, got, c.same, normalize(a), normalize(c.b))
		}
	}
	soa := "cluster.local. 5 IN SOA ns.dns.cluster.local. hostmaster.cluster.local. %d 7200 1800 86400 5"
	if normalize(msg(0, strings.Replace(soa, "%d", "1", 1))) != normalize(msg(0, strings.Replace(soa, "%d", "2", 1))) {
		t.Error("SOA serials are compared")
	}
}
