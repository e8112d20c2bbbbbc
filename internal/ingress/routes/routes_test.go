package routes

import (
	"crypto/tls"
	"net/http/httptest"
	"net/netip"
	"regexp"
	"strings"
	"testing"
)

// paths builds the routes of one host from "Type:/path" specs, each route
// named by its spec, sorted as an Ingress's.
func paths(specs ...string) []*Route {
	var rs []*Route
	for _, s := range specs {
		t, v, _ := strings.Cut(s, ":")
		rs = append(rs, &Route{Source: Source{Name: s}, Matches: []Match{{Path: PathMatch{Type: PathType(t), Value: v}}}})
	}
	SortIngressPaths(rs)
	return rs
}

// TestIngressPathExamples is the table of examples in the Ingress
// documentation ("Examples" under "Path types"), plus its multiple-match
// rules: the longest path wins, Exact before Prefix.
func TestIngressPathExamples(t *testing.T) {
	for _, tc := range []struct {
		paths []string
		req   string
		want  string // the spec of the route that serves, "" none
	}{
		{[]string{"Prefix:/"}, "/anything", "Prefix:/"},
		{[]string{"Exact:/foo"}, "/foo", "Exact:/foo"},
		{[]string{"Exact:/foo"}, "/bar", ""},
		{[]string{"Exact:/foo"}, "/foo/", ""},
		{[]string{"Exact:/foo/"}, "/foo", ""},
		{[]string{"Prefix:/foo"}, "/foo", "Prefix:/foo"},
		{[]string{"Prefix:/foo"}, "/foo/", "Prefix:/foo"},
		{[]string{"Prefix:/foo/"}, "/foo", "Prefix:/foo/"},
		{[]string{"Prefix:/foo/"}, "/foo/", "Prefix:/foo/"},
		{[]string{"Prefix:/aaa/bb"}, "/aaa/bbb", ""},
		{[]string{"Prefix:/aaa/bbb"}, "/aaa/bbb", "Prefix:/aaa/bbb"},
		{[]string{"Prefix:/aaa/bbb/"}, "/aaa/bbb", "Prefix:/aaa/bbb/"},
		{[]string{"Prefix:/aaa/bbb"}, "/aaa/bbb/", "Prefix:/aaa/bbb"},
		{[]string{"Prefix:/aaa/bbb"}, "/aaa/bbb/ccc", "Prefix:/aaa/bbb"},
		{[]string{"Prefix:/aaa/bbb"}, "/aaa/bbbxyz", ""},
		{[]string{"Prefix:/", "Prefix:/aaa"}, "/aaa/ccc", "Prefix:/aaa"},
		{[]string{"Prefix:/", "Prefix:/aaa", "Prefix:/aaa/bbb"}, "/aaa/bbb", "Prefix:/aaa/bbb"},
		{[]string{"Prefix:/", "Prefix:/aaa", "Prefix:/aaa/bbb"}, "/ccc", "Prefix:/"},
		{[]string{"Prefix:/aaa"}, "/ccc", ""},
		{[]string{"Prefix:/foo", "Exact:/foo"}, "/foo", "Exact:/foo"},
		{[]string{"Prefix:/foo", "Exact:/foo"}, "/foo/bar", "Prefix:/foo"},
		{[]string{"Exact:/foo/bar", "Prefix:/foo"}, "/foo/bar", "Exact:/foo/bar"},
		{[]string{"Prefix:/foo/", "Exact:/foo"}, "/foo", "Exact:/foo"},
	} {
		l := &Listener{Hosts: []*VirtualHost{{Routes: paths(tc.paths...)}}}
		rt, _ := l.Route(httptest.NewRequest("GET", "http://h"+tc.req, nil))
		got := ""
		if rt != nil {
			got = rt.Source.Name
		}
		if got != tc.want {
			t.Errorf("paths %v, request %s: served by %q, want %q", tc.paths, tc.req, got, tc.want)
		}
	}
}

// TestHosts follows the Ingress docs' host rules: exact names, a
// wildcard standing for exactly one label, rules without a host for
// every other host, and the default backend when no host or path
// matches; Gateway API's wildcards match any depth.
func TestHosts(t *testing.T) {
	route := func(name string) []*Route { return []*Route{{Source: Source{Name: name}}} }
	l := &Listener{
		Hosts: []*VirtualHost{
			{Hostname: "", Routes: route("any")},
			{Hostname: "*.foo.com", Routes: route("wildcard")},
			{Hostname: "bar.foo.com", Routes: route("bar")},
			{Hostname: "*.b.foo.com", Routes: route("longer wildcard")},
			{Hostname: "only.test", Routes: paths("Exact:/x")},
		},
		Default: &Route{Source: Source{Name: "default"}},
	}
	for host, want := range map[string]string{
		"bar.foo.com":       "bar",
		"BAR.foo.com:8443":  "bar",
		"baz.foo.com":       "wildcard",
		"baz.foo.com.":      "wildcard",
		"foo.com":           "any",
		"a.baz.foo.com":     "any",
		"a.b.foo.com":       "longer wildcard",
		"other.test":        "any",
		"only.test":         "default", // the host matched, its path did not
		"[2001:db8::1]:80":  "any",
		"192.0.2.1":         "any",
		"x.y.z.b.foo.com:1": "any",
	} {
		rt, _ := l.Route(httptest.NewRequest("GET", "http://"+host+"/", nil))
		if rt == nil || rt.Source.Name != want {
			t.Errorf("host %s: served by %v, want %s", host, rt, want)
		}
	}
	l.SuffixWildcards = true
	if rt, _ := l.Route(httptest.NewRequest("GET", "http://a.baz.foo.com/", nil)); rt.Source.Name != "wildcard" {
		t.Errorf("suffix wildcard: a.baz.foo.com served by %s", rt.Source.Name)
	}
	l.Default = nil
	if rt, _ := l.Route(httptest.NewRequest("GET", "http://only.test/y", nil)); rt != nil {
		t.Errorf("no default backend: served by %s, want none (404)", rt.Source.Name)
	}
}

// TestMatches covers the Gateway API conditions: all of a match's
// conditions must hold, any of a route's matches will do.
func TestMatches(t *testing.T) {
	rt := &Route{Matches: []Match{
		{Path: PathMatch{Type: PathPrefix, Value: "/api"}, Method: "POST",
			Headers:     []ValueMatch{{Name: "X-Env", Value: "canary"}},
			QueryParams: []ValueMatch{{Name: "v", Type: MatchRegularExpression, Regexp: regexp.MustCompile(`^[0-9]+$`)}}},
		{Path: PathMatch{Type: PathRegularExpression, Regexp: regexp.MustCompile(`^/img/.*\.png$`)}},
	}}
	for _, tc := range []struct {
		method, url string
		headers     map[string]string
		want        int // index of the match, -1 none
	}{
		{"POST", "/api/x?v=12", map[string]string{"x-env": "canary"}, 0},
		{"GET", "/api/x?v=12", map[string]string{"x-env": "canary"}, -1},
		{"POST", "/api/x?v=1a", map[string]string{"x-env": "canary"}, -1},
		{"POST", "/api/x?v=12", map[string]string{"x-env": "prod"}, -1},
		{"POST", "/api/x?v=12", nil, -1},
		{"GET", "/img/a/b.png", nil, 1},
		{"GET", "/img/a/b.jpg", nil, -1},
	} {
		r := httptest.NewRequest(tc.method, "http://h"+tc.url, nil)
		for k, v := range tc.headers {
			r.Header.Set(k, v)
		}
		m := rt.Match(r)
		got := -1
		for i := range rt.Matches {
			if m == &rt.Matches[i] {
				got = i
			}
		}
		if got != tc.want {
			t.Errorf("%s %s %v: match %d, want %d", tc.method, tc.url, tc.headers, got, tc.want)
		}
	}
}

func TestPickByWeight(t *testing.T) {
	a, b, off := &Backend{Service: "a", Weight: 90}, &Backend{Service: "b", Weight: 10}, &Backend{Service: "off"}
	rt := &Route{Backends: []*Backend{a, b, off}}
	n := map[string]int{}
	for range 10000 {
		n[rt.Pick().Service]++
	}
	if n["off"] != 0 || n["a"] < 8500 || n["a"] > 9500 {
		t.Errorf("picks %v, want about 9000 a, 1000 b, no off", n)
	}
	if got := (&Route{Backends: []*Backend{off}}).Pick(); got != nil {
		t.Errorf("only weight 0: picked %s, want none", got.Service)
	}
}

func TestEndpointRoundRobin(t *testing.T) {
	e1, e2 := netip.MustParseAddrPort("10.0.0.1:80"), netip.MustParseAddrPort("10.0.0.2:80")
	b := &Backend{Weight: 1, Endpoints: []netip.AddrPort{e1, e2}}
	var got []netip.AddrPort
	for range 4 {
		e, _ := b.Endpoint()
		got = append(got, e)
	}
	if got[0] != e1 || got[1] != e2 || got[2] != e1 || got[3] != e2 {
		t.Errorf("round robin gave %v", got)
	}
	if _, ok := (&Backend{}).Endpoint(); ok {
		t.Error("a backend without endpoints gave one")
	}
}

func TestCertificateBySNI(t *testing.T) {
	exact, wild, def := &tls.Certificate{}, &tls.Certificate{}, &tls.Certificate{}
	l := &Listener{
		Certificates:       []Certificate{{Hosts: []string{"*.example.test"}, Cert: wild}, {Hosts: []string{"web.example.test"}, Cert: exact}},
		DefaultCertificate: def,
	}
	for name, want := range map[string]*tls.Certificate{
		"web.example.test": exact, "WEB.example.test": exact, "api.example.test": wild,
		"a.b.example.test": def, "example.test": def, "": def,
	} {
		if got := l.Certificate(name); got != want {
			t.Errorf("SNI %q: wrong certificate", name)
		}
	}
}

func TestFilters(t *testing.T) {
	prefix := &Match{Path: PathMatch{Type: PathPrefix, Value: "/old/"}}
	for _, tc := range []struct {
		rd    Redirect
		url   string
		https bool
		want  string
	}{
		{Redirect{Scheme: "https"}, "http://web.test/a?q=1", false, "https://web.test/a?q=1"},
		{Redirect{Hostname: "other.test"}, "http://web.test:8080/a", false, "http://other.test:8080/a"},
		{Redirect{Port: 8443, Scheme: "https"}, "http://web.test/a", false, "https://web.test:8443/a"},
		{Redirect{Path: &PathModifier{FullPath: true, ReplaceFullPath: "/new"}}, "http://web.test/old/x", false, "http://web.test/new"},
		{Redirect{Path: &PathModifier{ReplacePrefixMatch: "/new"}}, "http://web.test/old/x", false, "http://web.test/new/x"},
		{Redirect{Path: &PathModifier{ReplacePrefixMatch: "/"}}, "http://web.test/old/x", false, "http://web.test/x"},
		{Redirect{Path: &PathModifier{ReplacePrefixMatch: "/"}}, "http://web.test/old", false, "http://web.test/"},
		{Redirect{Scheme: "http"}, "https://web.test/a", true, "http://web.test/a"},
	} {
		r := httptest.NewRequest("GET", tc.url, nil)
		port := 80
		if tc.https {
			port = 443
		}
		if strings.Contains(tc.url, ":8080") {
			port = 8080
		}
		if got := tc.rd.Location(r, prefix, port, tc.https); got != tc.want {
			t.Errorf("redirect %+v of %s: %s, want %s", tc.rd, tc.url, got, tc.want)
		}
	}
	if s := (&Redirect{}).Status(); s != 302 {
		t.Errorf("default redirect status %d", s)
	}

	r := httptest.NewRequest("GET", "http://web.test/old/x", nil)
	r.Header.Set("X-Drop", "1")
	r.Header.Set("X-Keep", "1")
	(&HeaderModifier{Set: []Header{{"X-Keep", "2"}}, Add: []Header{{"X-More", "a"}, {"X-More", "b"}}, Remove: []string{"x-drop"}}).Apply(r.Header)
	if r.Header.Get("X-Keep") != "2" || len(r.Header.Values("X-More")) != 2 || r.Header.Get("X-Drop") != "" {
		t.Errorf("headers after modifier: %v", r.Header)
	}
	(&Rewrite{Hostname: "backend.test", Path: &PathModifier{ReplacePrefixMatch: "/v2"}}).Apply(r, prefix)
	if r.Host != "backend.test" || r.URL.Path != "/v2/x" {
		t.Errorf("rewrite gave host %s path %s", r.Host, r.URL.Path)
	}
}
