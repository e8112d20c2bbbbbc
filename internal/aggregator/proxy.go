package aggregator

import (
	"net/http"
	"net/url"
	"strings"

	"k8s.io/apimachinery/pkg/util/httpstream"
	"k8s.io/apimachinery/pkg/util/proxy"
	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/client-go/transport"
)

// ServeHTTP proxies r when its path lies under the group version of an
// APIService that names a Service, and reports whether it did; u is the
// request's authenticated user.
func (a *Aggregator) ServeHTTP(w http.ResponseWriter, r *http.Request, u user.Info) bool {
	group, version, ok := groupVersionOf(r.URL.Path)
	if !ok {
		return false
	}
	b := a.backendFor(group, version)
	if b == nil {
		return false
	}
	if u == nil {
		http.Error(w, "missing user", http.StatusInternalServerError)
		return true
	}
	if !b.available {
		http.Error(w, "service unavailable", http.StatusServiceUnavailable)
		return true
	}
	location := &url.URL{Scheme: "https", Host: serviceHost(b.spec.Service), Path: r.URL.Path, RawQuery: r.URL.Query().Encode()}
	var rt http.RoundTripper = b.transport
	rt = transport.NewAuthProxyRoundTripper(u.GetName(), u.GetUID(), u.GetGroups(), u.GetExtra(), rt)
	upgrade := httpstream.IsUpgradeRequest(r)
	if upgrade {
		// An upgrade dials past the round tripper: the headers go on the
		// request itself, as upstream's.
		r = r.Clone(r.Context())
		transport.SetAuthProxyHeaders(r, u.GetName(), u.GetUID(), u.GetGroups(), u.GetExtra())
	}
	proxy.NewUpgradeAwareHandler(location, rt, true, upgrade, responder{w}).ServeHTTP(w, r)
	return true
}

// groupVersionOf is the group and version of a path under
// /apis/<group>/<version>.
func groupVersionOf(path string) (group, version string, ok bool) {
	rest, ok := strings.CutPrefix(path, "/apis/")
	if !ok {
		return "", "", false
	}
	parts := strings.SplitN(rest, "/", 3)
	if len(parts) < 2 || parts[0] == "" || parts[1] == "" {
		return "", "", false
	}
	return parts[0], parts[1], true
}

// responder answers a failed proxy as upstream's: 503 with the error.
type responder struct{ w http.ResponseWriter }

func (r responder) Error(_ http.ResponseWriter, _ *http.Request, err error) {
	http.Error(r.w, err.Error(), http.StatusServiceUnavailable)
}
