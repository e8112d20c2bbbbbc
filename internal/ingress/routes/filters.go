package routes

import (
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
)

// Apply modifies h: set, then add, then remove.
func (hm *HeaderModifier) Apply(h http.Header) {
	for _, s := range hm.Set {
		h.Set(s.Name, s.Value)
	}
	for _, a := range hm.Add {
		h.Add(a.Name, a.Value)
	}
	for _, name := range hm.Remove {
		h.Del(name)
	}
}

// Apply rewrites r's host and path, m being the match that chose the
// route.
func (rw *Rewrite) Apply(r *http.Request, m *Match) {
	if rw.Hostname != "" {
		r.Host = rw.Hostname
	}
	if rw.Path != nil {
		r.URL.Path = rw.Path.apply(r.URL.Path, m)
		r.URL.RawPath = ""
	}
}

// apply returns path modified: replaced, or its prefix matched by m
// replaced (a path element boundary kept).
func (pm *PathModifier) apply(path string, m *Match) string {
	if pm.FullPath {
		return pm.ReplaceFullPath
	}
	prefix := ""
	if m != nil && m.Path.Type == PathPrefix {
		prefix = strings.TrimRight(m.Path.Value, "/")
	}
	rest := strings.TrimPrefix(path, prefix)
	repl := strings.TrimRight(pm.ReplacePrefixMatch, "/")
	switch {
	case repl == "" && rest == "":
		return "/"
	case repl == "" || rest == "" || rest[0] == '/':
		return repl + rest
	}
	return repl + "/" + rest
}

// Location is where the redirect sends r: listenerPort is the port the
// request came in on, https whether it came over TLS, m the match that
// chose the route. A port is left out when it is the scheme's own.
func (rd *Redirect) Location(r *http.Request, m *Match, listenerPort int, https bool) string {
	scheme := "http"
	if https {
		scheme = "https"
	}
	port := listenerPort
	if rd.Scheme != "" {
		scheme = rd.Scheme
		port = wellKnownPort(scheme)
	}
	if rd.Port != 0 {
		port = int(rd.Port)
	}
	host := HostOnly(r.Host)
	if rd.Hostname != "" {
		host = rd.Hostname
	}
	if port != 0 && port != wellKnownPort(scheme) {
		host = net.JoinHostPort(host, strconv.Itoa(port))
	} else if strings.Contains(host, ":") {
		host = "[" + host + "]"
	}
	u := url.URL{Scheme: scheme, Host: host, Path: r.URL.Path, RawQuery: r.URL.RawQuery}
	if rd.Path != nil {
		u.Path = rd.Path.apply(r.URL.Path, m)
	}
	return u.String()
}

// Status is the redirect's status code, 302 unless set.
func (rd *Redirect) Status() int {
	if rd.StatusCode == 0 {
		return http.StatusFound
	}
	return rd.StatusCode
}

func wellKnownPort(scheme string) int {
	if scheme == "https" {
		return 443
	}
	return 80
}
