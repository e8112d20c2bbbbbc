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

// resolve turns a resource path into a requestInfo, or a 404.
func (s *Server) resolve(r *http.Request, gv schema.GroupVersion, p []string) (*requestInfo, error) {
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
		if len(p) > 5 {
			return nil, apierrors.NewNotFound(schema.GroupResource{}, "")
		}
	default:
		resource = p[0]
		if len(p) > 1 {
			ri.name = p[1]
		}
		if len(p) > 2 {
			ri.subresource = p[2]
		}
		if len(p) > 3 {
			return nil, apierrors.NewNotFound(schema.GroupResource{}, "")
		}
	}
	ri.res = s.resources.ByGVR(gv.WithResource(resource))
	if ri.res == nil || (ri.namespace != "" && !ri.res.Namespaced) {
		return nil, apierrors.NewNotFound(schema.GroupResource{}, "")
	}
	if ri.subresource != "" && !s.hasSubresource(ri.res, ri.subresource) {
		return nil, apierrors.NewNotFound(schema.GroupResource{}, "")
	}
	ri.verb = verbOf(r, ri)
	return ri, nil
}

func (s *Server) hasSubresource(res *registry.Resource, sub string) bool {
	switch sub {
	case "status":
		return res.Status
	case "scale":
		return res.Scale != nil
	case "finalize":
		return res.Resource == "namespaces"
	case "log", "binding", "exec", "attach", "portforward":
		return res.Resource == "pods" && res.Kind.Group == ""
	}
	return false
}

func verbOf(r *http.Request, ri *requestInfo) string {
	switch r.Method {
	case http.MethodGet, http.MethodHead:
		if ri.name == "" {
			if w := r.URL.Query().Get("watch"); w == "true" || w == "1" {
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
