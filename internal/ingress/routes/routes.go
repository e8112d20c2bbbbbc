// Package routes is the routing model the L7 proxy serves: a Table of
// listeners, each a set of virtual hosts with ordered routes, each route
// with matches, filters and weighted backends of endpoint addresses.
//
// It is the meeting point of the API kinds that configure HTTP routing:
// the Ingress controller translates Ingresses into a Table, a Gateway API
// controller translates Gateways and HTTPRoutes into the same Table, and
// the proxy serves whichever Table it was last given. The model therefore
// carries what the Gateway API can say (header, query and method matches,
// redirects, header modifiers, rewrites, weights) while Ingress uses a
// subset (paths and backends).
//
// The model decides nothing about precedence between API objects: a
// translator orders the routes of a virtual host (Ingress: longest path
// first, Exact before Prefix of the same length; Gateway API: its own
// precedence rules) and the matcher takes the first route that matches.
// The only ordering the matcher does itself is between virtual hosts: an
// exact host name beats a wildcard, a longer wildcard beats a shorter one,
// and the catch-all host "" comes last. Once a host is chosen its routes
// alone are tried (as nginx's server blocks): a translator that wants
// routes of a wildcard host to apply to an exact host too (Gateway API's
// merged hostnames) copies them into the exact host's list.
//
// A Table is immutable once built; the proxy swaps whole Tables, so a
// request sees one configuration from start to end.
package routes

import (
	"crypto/tls"
	"math/rand/v2"
	"net/http"
	"net/netip"
	"regexp"
	"slices"
	"strings"
	"sync/atomic"
)

// Table is one complete routing configuration.
type Table struct {
	// Listeners by name (the Ingress controller's "http" and "https"; a
	// Gateway's listener names).
	Listeners map[string]*Listener
}

// Listener is what one port serves.
type Listener struct {
	// Hosts are the virtual hosts, in any order: Host picks the most
	// specific one that matches a request's host.
	Hosts []*VirtualHost
	// SuffixWildcards makes "*.example.test" match any name ending in
	// ".example.test" (Gateway API); without it the wildcard stands for
	// exactly one label (Ingress: "foo.example.test", not
	// "a.foo.example.test").
	SuffixWildcards bool
	// Default serves requests that no route matched (an Ingress's
	// defaultBackend); nil answers 404.
	Default *Route
	// Certificates are served by SNI on a TLS listener; DefaultCertificate
	// for names none of them covers (and clients that send no SNI).
	Certificates       []Certificate
	DefaultCertificate *tls.Certificate
}

// Certificate is a certificate and the host names (exact or "*.wildcard",
// one label) it is served for.
type Certificate struct {
	Hosts []string
	Cert  *tls.Certificate
}

// VirtualHost is one host name's routes.
type VirtualHost struct {
	// Hostname is an exact name, a wildcard "*.example.test", or "" for
	// every host.
	Hostname string
	// Routes in precedence order: the first that matches serves.
	Routes []*Route
	// SuffixWildcard makes this host's wildcard a suffix match whatever
	// the listener's SuffixWildcards (Gateway API hosts merged into a
	// listener of Ingress hosts).
	SuffixWildcard bool
}

// Route is one rule: it serves a request that any of its Matches matches
// (a route without matches matches every request), after its Filters, by
// one of its Backends.
type Route struct {
	// Source is the API object the route comes from, for metrics and logs.
	Source  Source
	Matches []Match
	Filters []Filter
	// Backends share the requests by weight. A route with no backend of
	// positive weight answers 500 (Gateway API), unless a filter redirects.
	Backends []*Backend
}

// Source names the object a route was made from.
type Source struct {
	Kind, Namespace, Name string
}

// PathType is how a path match compares.
type PathType string

// Path match types. Prefix matches path elements: "/foo" matches "/foo",
// "/foo/" and "/foo/bar", not "/foobar"; a trailing slash in the prefix
// is ignored.
const (
	PathExact             PathType = "Exact"
	PathPrefix            PathType = "Prefix"
	PathRegularExpression PathType = "RegularExpression"
)

// MatchType is how a header or query parameter value compares.
type MatchType string

// Value match types.
const (
	MatchExact             MatchType = "Exact"
	MatchRegularExpression MatchType = "RegularExpression"
)

// Match is a conjunction: all its conditions must hold.
type Match struct {
	// Path (zero: every path).
	Path PathMatch
	// Headers (names case-insensitive) and QueryParams (names exact).
	Headers     []ValueMatch
	QueryParams []ValueMatch
	// Method is an HTTP method, or "" for any.
	Method string
}

// PathMatch matches the request path. Regexp must be set (by
// NewPathMatch or regexp.Compile) for RegularExpression.
type PathMatch struct {
	Type   PathType
	Value  string
	Regexp *regexp.Regexp
}

// ValueMatch matches one header or query parameter. Regexp must be set
// for RegularExpression.
type ValueMatch struct {
	Type   MatchType
	Name   string
	Value  string
	Regexp *regexp.Regexp
}

// Filter is one step applied to a request before it is proxied, or
// instead of proxying it (a redirect). Exactly one field is set.
type Filter struct {
	RequestHeaders  *HeaderModifier
	ResponseHeaders *HeaderModifier
	Redirect        *Redirect
	Rewrite         *Rewrite
}

// HeaderModifier sets, adds and removes headers, in that order.
type HeaderModifier struct {
	Set    []Header
	Add    []Header
	Remove []string
}

// Header is a header name and value.
type Header struct {
	Name, Value string
}

// Redirect answers with a redirect instead of proxying. Nil or zero
// fields keep the request's own.
type Redirect struct {
	Scheme   string
	Hostname string
	// Port 0 keeps the request's port, or drops it when the scheme
	// changes to one whose well-known port is implied.
	Port int32
	Path *PathModifier
	// StatusCode defaults to 302.
	StatusCode int
}

// Rewrite changes the request before it is proxied.
type Rewrite struct {
	Hostname string
	Path     *PathModifier
}

// PathModifier replaces the whole path or the part a Prefix match matched.
type PathModifier struct {
	// ReplaceFullPath, when FullPath is set, replaces the path.
	FullPath        bool
	ReplaceFullPath string
	// ReplacePrefixMatch replaces the matched prefix otherwise.
	ReplacePrefixMatch string
}

// Backend is one group of endpoints (a Service port) with its weight.
type Backend struct {
	// Name labels the backend in metrics and logs (namespace/service:port).
	Namespace, Service string
	Weight             int32
	// Endpoints are the ready addresses; empty answers 503.
	Endpoints []netip.AddrPort
	// Invalid answers 500: the reference did not resolve (Gateway API:
	// the requests an invalid backendRef's weight would get fail so).
	Invalid bool
	next    atomic.Uint32
}

// Host returns the virtual host that serves host (a request's Host
// without its port, any case), or nil.
func (l *Listener) Host(host string) *VirtualHost {
	host = strings.ToLower(strings.TrimSuffix(host, "."))
	var best *VirtualHost
	bestRank := -1
	for _, vh := range l.Hosts {
		r := hostRank(vh.Hostname, host, l.SuffixWildcards || vh.SuffixWildcard)
		if r > bestRank {
			best, bestRank = vh, r
		}
	}
	return best
}

// hostRank says how specifically pattern matches host: -1 not at all, 0
// the catch-all, then wildcards by length, exact names above all.
func hostRank(pattern, host string, suffix bool) int {
	switch {
	case pattern == "":
		return 0
	case pattern == host:
		return 1 << 20
	case strings.HasPrefix(pattern, "*."):
		rest, ok := strings.CutSuffix(host, pattern[1:])
		if !ok || rest == "" || (!suffix && strings.Contains(rest, ".")) {
			return -1
		}
		return len(pattern)
	}
	return -1
}

// Route returns the route that serves r and the match that chose it:
// the first route of the request's host that matches, else the
// listener's Default (with a zero match), else nil.
func (l *Listener) Route(r *http.Request) (*Route, *Match) {
	if vh := l.Host(HostOnly(r.Host)); vh != nil {
		for _, rt := range vh.Routes {
			if m := rt.Match(r); m != nil {
				return rt, m
			}
		}
	}
	if l.Default != nil {
		return l.Default, &Match{}
	}
	return nil, nil
}

// HostOnly strips the port from a Host header.
func HostOnly(host string) string {
	if i := strings.LastIndexByte(host, ':'); i >= 0 && !strings.Contains(host[i:], "]") {
		return strings.Trim(host[:i], "[]")
	}
	return strings.Trim(host, "[]")
}

var everything = &Match{}

// Match returns the first of the route's matches that r satisfies, or nil.
func (rt *Route) Match(r *http.Request) *Match {
	if len(rt.Matches) == 0 {
		return everything
	}
	for i := range rt.Matches {
		if rt.Matches[i].Matches(r) {
			return &rt.Matches[i]
		}
	}
	return nil
}

// Matches says whether r satisfies every condition of m.
func (m *Match) Matches(r *http.Request) bool {
	if m.Method != "" && m.Method != r.Method {
		return false
	}
	if !m.Path.Matches(r.URL.Path) {
		return false
	}
	for _, h := range m.Headers {
		if !h.matches(r.Header.Values(h.Name)) {
			return false
		}
	}
	if len(m.QueryParams) > 0 {
		q := r.URL.Query()
		for _, p := range m.QueryParams {
			if !p.matches(q[p.Name]) {
				return false
			}
		}
	}
	return true
}

// Matches says whether path satisfies the path match.
func (p PathMatch) Matches(path string) bool {
	switch p.Type {
	case "":
		return true
	case PathExact:
		return path == p.Value
	case PathRegularExpression:
		return p.Regexp != nil && p.Regexp.MatchString(path)
	}
	prefix := strings.TrimRight(p.Value, "/")
	if prefix == "" {
		return true
	}
	rest, ok := strings.CutPrefix(path, prefix)
	return ok && (rest == "" || rest[0] == '/')
}

// matches compares a header's or parameter's values; like Gateway API
// implementations, only the first value of a repeated one counts.
func (v ValueMatch) matches(values []string) bool {
	if len(values) == 0 {
		return false
	}
	if v.Type == MatchRegularExpression {
		return v.Regexp != nil && v.Regexp.MatchString(values[0])
	}
	return values[0] == v.Value
}

// Pick chooses a backend by weight, or nil when no backend has a positive
// weight.
func (rt *Route) Pick() *Backend {
	if len(rt.Backends) == 1 {
		if rt.Backends[0].Weight > 0 {
			return rt.Backends[0]
		}
		return nil
	}
	var total int64
	for _, b := range rt.Backends {
		total += int64(max(b.Weight, 0))
	}
	if total == 0 {
		return nil
	}
	n := rand.Int64N(total)
	for _, b := range rt.Backends {
		if n -= int64(max(b.Weight, 0)); n < 0 {
			return b
		}
	}
	return nil
}

// Endpoint returns the backend's next endpoint, round-robin, and false
// when it has none.
func (b *Backend) Endpoint() (netip.AddrPort, bool) {
	if len(b.Endpoints) == 0 {
		return netip.AddrPort{}, false
	}
	i := b.next.Add(1) - 1
	return b.Endpoints[int(i%uint32(len(b.Endpoints)))], true
}

// Certificate returns the certificate a TLS listener serves for the SNI
// name: an exact host first, then a wildcard, then the default.
func (l *Listener) Certificate(serverName string) *tls.Certificate {
	name := strings.ToLower(strings.TrimSuffix(serverName, "."))
	var wildcard *tls.Certificate
	for _, c := range l.Certificates {
		for _, h := range c.Hosts {
			switch r := hostRank(strings.ToLower(h), name, false); {
			case r == 1<<20:
				return c.Cert
			case r > 0 && wildcard == nil:
				wildcard = c.Cert
			}
		}
	}
	if wildcard != nil {
		return wildcard
	}
	return l.DefaultCertificate
}

// SortIngressPaths orders routes as the Ingress API asks: longer paths
// first, Exact before Prefix of the same length, the order given (a
// translator's stable order, e.g. oldest Ingress first) otherwise. Each
// route is taken to have one path match; routes without one go last.
func SortIngressPaths(rs []*Route) {
	key := func(r *Route) (int, bool) {
		if len(r.Matches) == 0 {
			return -1, false
		}
		p := r.Matches[0].Path
		if p.Type == PathExact {
			return len(p.Value), true
		}
		return len(strings.TrimRight(p.Value, "/")), false
	}
	slices.SortStableFunc(rs, func(a, b *Route) int {
		la, ea := key(a)
		lb, eb := key(b)
		if la != lb {
			return lb - la
		}
		switch {
		case ea && !eb:
			return -1
		case eb && !ea:
			return 1
		}
		return 0
	})
}
