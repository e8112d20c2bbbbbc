package routes

import (
	"crypto/tls"
	"net/http/httptest"
	"testing"
)

func TestMerge(t *testing.T) {
	def := &tls.Certificate{}
	ingressRoute := &Route{Source: Source{Kind: "Ingress", Name: "ing"}, Matches: []Match{{Path: PathMatch{Type: PathPrefix, Value: "/app"}}}}
	ingressL := &Listener{
		Hosts:              []*VirtualHost{{Hostname: "web.example.test", Routes: []*Route{ingressRoute}}, {Hostname: "*.example.test"}},
		DefaultCertificate: def,
	}
	ingress := &Table{Listeners: map[string]*Listener{"http": ingressL, "https": ingressL}}
	gwRoute := &Route{Source: Source{Kind: "HTTPRoute", Name: "r"}}
	wildRoute := &Route{Source: Source{Kind: "HTTPRoute", Name: "wild"}}
	gw := &Table{Listeners: map[string]*Listener{
		"http": {SuffixWildcards: true, Hosts: []*VirtualHost{
			{Hostname: "web.example.test", Routes: []*Route{gwRoute}},
			{Hostname: "*.example.test", Routes: []*Route{wildRoute}},
		}},
		"other": {},
	}}
	m := Merge(ingress, gw, nil)
	if len(m.Listeners) != 3 || m.Listeners["https"] != ingressL || m.Listeners["other"] != gw.Listeners["other"] {
		t.Fatalf("listeners: %v", m.Listeners)
	}
	l := m.Listeners["http"]
	if l.DefaultCertificate != def {
		t.Error("default certificate lost")
	}
	vh := l.Host("web.example.test")
	if vh == nil || len(vh.Routes) != 2 || vh.Routes[0] != ingressRoute || vh.Routes[1] != gwRoute {
		t.Fatalf("web.example.test: %+v", vh)
	}
	r := httptest.NewRequest("GET", "http://web.example.test/other", nil)
	if rt, _ := l.Route(r); rt != gwRoute {
		t.Errorf("/other served by %+v, want the HTTPRoute's", rt)
	}
	// The Gateway's wildcard is a suffix match, the Ingress's one label.
	if vh := l.Host("a.b.example.test"); vh == nil || len(vh.Routes) != 1 || vh.Routes[0] != wildRoute {
		t.Errorf("a.b.example.test: %+v", vh)
	}
}

func TestSources(t *testing.T) {
	var got *Table
	s := NewSources(2, func(t *Table) { got = t })
	s.Swap(1)(&Table{Listeners: map[string]*Listener{"gw": {}}})
	if got == nil || got.Listeners["gw"] == nil || len(got.Listeners) != 1 {
		t.Fatalf("after the second source: %+v", got)
	}
	s.Swap(0)(&Table{Listeners: map[string]*Listener{"http": {}}})
	if len(got.Listeners) != 2 {
		t.Fatalf("after both: %+v", got)
	}
	s.Swap(1)(&Table{})
	if len(got.Listeners) != 1 || got.Listeners["http"] == nil {
		t.Fatalf("after the second source emptied: %+v", got)
	}
}
