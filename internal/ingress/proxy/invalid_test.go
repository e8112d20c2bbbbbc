package proxy

import (
	"net/http"
	"testing"

	"github.com/svcnet/svcnet/internal/ingress/routes"
)

// TestInvalidBackend: a backend whose reference did not resolve answers
// 500 (the Gateway API's rule), one without endpoints 503.
func TestInvalidBackend(t *testing.T) {
	invalid := svc("gone", backend(t, "gone"))
	invalid.Invalid = true
	p := New(nil)
	p.Swap(table(&routes.Listener{Hosts: []*routes.VirtualHost{{Routes: []*routes.Route{
		route("r", routes.PathPrefix, "/invalid", invalid),
		route("r", routes.PathPrefix, "/empty", svc("empty")),
	}}}}))
	base, _ := start(t, p)
	for path, want := range map[string]int{"/invalid": http.StatusInternalServerError, "/empty": http.StatusServiceUnavailable} {
		if status, body, _ := get(t, http.DefaultClient, base+path, "web.example.test"); status != want {
			t.Errorf("%s: %d %q, want %d", path, status, body, want)
		}
	}
}
