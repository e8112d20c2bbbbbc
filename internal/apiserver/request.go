package apiserver

import (
	"net/http"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/svcnet/svcnet/internal/registry"
)

// requestInfo is a resource request's path, parsed.
type requestInfo struct {
	res         *registry.Resource
	namespace   string
	name        string
	subresource string
	verb        string // get, list, watch, create, update, patch, delete, deletecollection
}

// parseResourcePath splits /api/v1/... or /apis/g/v/... into its parts.
// It returns ok=false for paths that are not resource paths.
func parseResourcePath(path string) (gv schema.GroupVersion, parts []string, ok bool) {
	p := strings.Split(strings.Trim(path, "/"), "/")
	switch {
	case len(p) >= 3 && p[0] == "api":
		return schema.GroupVersion{Version: p[1]}, p[2:], true
	case len(p) >= 4 && p[0] == "apis":
		return schema.GroupVersion{Group: p[1], Version: p[2]}, p[3:], true
	}
	return gv, nil, false
}

// resolve turns a resource path into a requestInfo; it reports false for a
// path that names no resource (or subresource) this server serves.
func (s *Server) resolve(r *http.Request) (*requestInfo, bool) {
	gv, p, ok := parseResourcePath(r.URL.Path)
	if !ok {
		return nil, false
	}
	ri := &requestInfo{}
	var resource string
	switch {
	case p[0] == "namespaces" && len(p) >= 3 && !(len(p) == 3 && (p[2] == "status" || p[2] == "finalize")):
		ri.namespace, resource = p[1], p[2]
		if len(p) > 3 {
			ri.name = p[3]
		}
		if len(p) > 4 {
			ri.subresource = p[4]
		}
		// A proxy subresource's path goes on (serveProxy reads it).
		if len(p) > 5 && ri.subresource != proxySubresource {
			return nil, false
		}
	default:
		resource = p[0]
		if len(p) > 1 {
			ri.name = p[1]
		}
		if len(p) > 2 {
			ri.subresource = p[2]
		}
		if len(p) > 3 && ri.subresource != proxySubresource {
			return nil, false
		}
	}
	ri.res = s.resources.ByGVR(gv.WithResource(resource))
	if ri.res == nil || (ri.namespace != "" && !ri.res.Namespaced) {
		return nil, false
	}
	if ri.subresource != "" && !s.hasSubresource(ri.res, ri.subresource) {
		return nil, false
	}
	ri.verb = verbOf(r, ri)
	return ri, true
}

// notFound answers a path that names nothing served, as kube-apiserver
// does. There a path under /api or under an API group it serves belongs to
// that group's go-restful web service, whose 404 is a Status ("the server
// could not find the requested resource", details {}); any other path,
// such as one under a group it does not serve, falls through the
// delegation chain to its end, which answers net/http's plain-text
// "404 page not found".
func (s *Server) notFound(w http.ResponseWriter, r *http.Request) {
	if !s.discovery.get(s.resources).claims(r.URL.Path) {
		http.NotFound(w, r)
		return
	}
	writeError(w, r, apierrors.NewGenericServerResponse(http.StatusNotFound, "", schema.GroupResource{}, "", "", 0, false))
}

func (s *Server) hasSubresource(res *registry.Resource, sub string) bool {
	if _, ok := res.Actions[sub]; ok {
		return true
	}
	if _, ok := res.Subresources[sub]; ok {
		return true
	}
	switch sub {
	case "status":
		return res.Status
	case "scale":
		return res.Scale != nil
	case "finalize":
		return res.Resource == "namespaces"
	case "log", "binding", "exec", "attach", "portforward":
		return res.Resource == "pods" && res.Kind.Group == ""
	case proxySubresource:
		return (res.Resource == "pods" || res.Resource == "services" || res.Resource == "nodes") && res.Kind.Group == ""
	}
	return false
}

func verbOf(r *http.Request, ri *requestInfo) string {
	switch r.Method {
	case http.MethodGet, http.MethodHead:
		if ri.name == "" {
			// As upstream's bool parameters: any value but 0 or false.
			if w, ok := r.URL.Query()["watch"]; ok && w[0] != "0" && !strings.EqualFold(w[0], "false") {
				return "watch"
			}
			return "list"
		}
		return "get"
	case http.MethodPost:
		return "create"
	case http.MethodPut:
		return "update"
	case http.MethodPatch:
		return "patch"
	case http.MethodDelete:
		if ri.name == "" {
			return "deletecollection"
		}
		return "delete"
	}
	return strings.ToLower(r.Method)
}
