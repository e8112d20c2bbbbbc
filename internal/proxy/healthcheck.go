package proxy

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/types"
)

// healthServers answer on the healthCheckNodePort of every Service with
// externalTrafficPolicy Local, as kube-proxy does: 200 while the node has
// a local ready endpoint of the Service, 503 otherwise, with a JSON body
// naming the Service and the count, so that a load balancer sends traffic
// only to nodes that keep it.
type healthServers struct {
	listen func(network, address string) (net.Listener, error)
	log    *slog.Logger

	mu      sync.Mutex
	servers map[int32]*healthServer
}

type healthServer struct {
	name  types.NamespacedName
	local int
	srv   *http.Server
}

func newHealthServers(listen func(network, address string) (net.Listener, error), log *slog.Logger) *healthServers {
	return &healthServers{listen: listen, log: log, servers: map[int32]*healthServer{}}
}

// sync opens the ports of services that need one, closes the others and
// updates the counts.
func (h *healthServers) sync(services map[types.NamespacedName]*Service) {
	if h.listen == nil {
		return
	}
	want := map[int32]*Service{}
	for _, s := range services {
		if s.HealthCheckNodePort != 0 {
			want[s.HealthCheckNodePort] = s
		}
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	for port, hs := range h.servers {
		if s, ok := want[port]; !ok || s.Name != hs.name {
			_ = hs.srv.Close()
			delete(h.servers, port)
		}
	}
	for port, s := range want {
		hs := h.servers[port]
		if hs == nil {
			ln, err := h.listen("tcp", fmt.Sprintf(":%d", port))
			if err != nil {
				h.log.Error("open health check node port", "service", s.Name, "port", port, "err", err)
				continue
			}
			hs = &healthServer{name: s.Name}
			hs.srv = &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { h.serve(w, port) }), ReadHeaderTimeout: 10 * time.Second}
			h.servers[port] = hs
			go func() {
				if err := hs.srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
					h.log.Error("health check node port", "service", s.Name, "port", port, "err", err)
				}
			}()
		}
		hs.local = localReady(s)
	}
}

func (h *healthServers) serve(w http.ResponseWriter, port int32) {
	h.mu.Lock()
	hs := h.servers[port]
	var name types.NamespacedName
	local := 0
	if hs != nil {
		name, local = hs.name, hs.local
	}
	h.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	if local == 0 {
		w.WriteHeader(http.StatusServiceUnavailable)
	} else {
		w.WriteHeader(http.StatusOK)
	}
	fmt.Fprintf(w, "{\n\t\"service\": {\n\t\t\"namespace\": %q,\n\t\t\"name\": %q\n\t},\n\t\"localEndpoints\": %d,\n\t\"serviceProxyHealthy\": true\n}", name.Namespace, name.Name, local)
}

// close stops every server.
func (h *healthServers) close() {
	h.mu.Lock()
	defer h.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	for port, hs := range h.servers {
		_ = hs.srv.Shutdown(ctx)
		delete(h.servers, port)
	}
}

// localReady counts the Service's distinct ready endpoint addresses on
// this node.
func localReady(s *Service) int {
	seen := map[netip.Addr]bool{}
	for _, p := range s.Ports {
		for _, e := range p.Endpoints {
			if e.Local && e.Ready {
				seen[e.Addr] = true
			}
		}
	}
	return len(seen)
}
