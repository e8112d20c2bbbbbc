package apiserver

import (
	"net/http/httptest"
	"testing"

	"github.com/svcnet/svcnet/internal/registry"
)

// The target's path is what follows the object's own /proxy, whatever
// else in the path is called proxy.
func TestProxyPath(t *testing.T) {
	for _, tc := range []struct{ resource, name, path, want string }{
		{"pods", "web", "/api/v1/namespaces/default/pods/web/proxy/x/y", "/x/y"},
		{"pods", "web", "/api/v1/namespaces/default/pods/web/proxy", ""},
		{"pods", "web", "/api/v1/namespaces/proxy/pods/web/proxy/x", "/x"},
		{"pods", "proxy", "/api/v1/namespaces/default/pods/proxy/proxy/x", "/x"},
		{"services", "https:web:tls", "/api/v1/namespaces/default/services/https:web:tls/proxy/", "/"},
		{"nodes", "proxy", "/api/v1/nodes/proxy/proxy/healthz", "/healthz"},
	} {
		ri := &requestInfo{res: &registry.Resource{Resource: tc.resource}, name: tc.name, subresource: proxySubresource}
		if got := proxyPath(httptest.NewRequest("GET", tc.path, nil), ri); got != tc.want {
			t.Errorf("proxyPath(%s) = %q, want %q", tc.path, got, tc.want)
		}
	}
}
