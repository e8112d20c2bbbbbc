package nftrace

import (
	"slices"
	"testing"
)

func TestResolvConfCandidates(t *testing.T) {
	rc := parseResolvConf([]byte(`# a pod's
search default.svc.cluster.local svc.cluster.local cluster.local
nameserver 10.96.0.10
options ndots:5 edns0
`))
	if !slices.Equal(rc.nameservers, []string{"10.96.0.10"}) || rc.ndots != 5 || len(rc.search) != 3 {
		t.Fatalf("parseResolvConf = %+v", rc)
	}
	for name, want := range map[string][]string{
		"web":                            {"web.default.svc.cluster.local.", "web.svc.cluster.local.", "web.cluster.local.", "web."},
		"web.default.svc.cluster.local.": {"web.default.svc.cluster.local."},
		"a.b.c.d.e.f":                    {"a.b.c.d.e.f.", "a.b.c.d.e.f.default.svc.cluster.local.", "a.b.c.d.e.f.svc.cluster.local.", "a.b.c.d.e.f.cluster.local."},
	} {
		if got := rc.candidates(name); !slices.Equal(got, want) {
			t.Errorf("candidates(%q) = %v, want %v", name, got, want)
		}
	}
	// The default ndots is 1: a dotted name goes as it is first.
	if got := parseResolvConf([]byte("search example.org\n")).candidates("a.b"); !slices.Equal(got, []string{"a.b.", "a.b.example.org."}) {
		t.Errorf("ndots 1: %v", got)
	}
}

func TestRequestValidate(t *testing.T) {
	r := Request{Namespace: "default", Pod: "client", Host: "10.96.0.10", Port: 53, Protocol: "udp"}
	if err := r.Validate(); err != nil || r.Protocol != "UDP" || r.Timeout != Duration(DefaultTimeout) {
		t.Errorf("Validate = %v, %+v", err, r)
	}
	for _, bad := range []Request{
		{Namespace: "default", Pod: "client", Host: "x", Port: 0},
		{Namespace: "default", Pod: "client", Host: "x", Port: 80, Protocol: "SCTP"},
		{Namespace: "default", Host: "x", Port: 80},
	} {
		if err := bad.Validate(); err == nil {
			t.Errorf("Validate(%+v) = nil", bad)
		}
	}
}
