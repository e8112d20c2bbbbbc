package cluster

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/svcnet/svcnet/internal/proxy"
)

// The node's Service proxy serves kube-proxy's two HTTP endpoints in the
// node's network namespace: its health (--proxy-healthz-bind-address,
// kube-proxy's 0.0.0.0:10256: /healthz and /livez, with kube-proxy's
// JSON and 200 or 503) and its metrics (--proxy-metrics-bind-address,
// 127.0.0.1:10249: /metrics, /proxyMode and /healthz). "0" turns one off;
// an address that cannot be bound is logged and left, as it takes nothing
// from the proxy's rules.

// proxyHealthBody is kube-proxy's /healthz answer.
type proxyHealthBody struct {
	LastUpdated  time.Time `json:"lastUpdated"`
	CurrentTime  time.Time `json:"currentTime"`
	NodeEligible *bool     `json:"nodeEligible,omitempty"`
	Healthy      bool      `json:"healthy"`
}

// proxyHealthHandler answers /healthz and /livez from the proxy's health.
func proxyHealthHandler(health *proxy.Health) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		now := time.Now()
		healthy := health.Check(now) == nil
		eligible := true
		body := proxyHealthBody{LastUpdated: health.LastSync(), CurrentTime: now, NodeEligible: &eligible, Healthy: healthy}
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("X-Content-Type-Options", "nosniff")
		if healthy {
			body.LastUpdated = now
			w.WriteHeader(http.StatusOK)
		} else {
			w.WriteHeader(http.StatusServiceUnavailable)
		}
		_ = json.NewEncoder(w).Encode(body)
	})
}

// proxyMetricsHandler answers kube-proxy's metrics port.
func proxyMetricsHandler(reg *prometheus.Registry, mode string) http.Handler {
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	mux.HandleFunc("/proxyMode", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		w.Header().Set("X-Content-Type-Options", "nosniff")
		fmt.Fprint(w, mode)
	})
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) { fmt.Fprint(w, "ok") })
	return mux
}

// serveProxyHTTP serves handler at addr (unless "0" or empty) with
// listen, until ctx ends; wg owns the server's goroutines.
func serveProxyHTTP(ctx context.Context, wg *sync.WaitGroup, log *slog.Logger, what, addr string,
	listen func(network, address string) (net.Listener, error), handler http.Handler) {
	if addr == "" || addr == "0" {
		return
	}
	ln, err := listen("tcp", addr)
	if err != nil {
		log.Warn("the Service proxy does not serve its "+what, "address", addr, "err", err)
		return
	}
	srv := &http.Server{Handler: handler, ReadHeaderTimeout: 10 * time.Second}
	wg.Go(func() { _ = srv.Serve(ln) })
	wg.Go(func() {
		<-ctx.Done()
		_ = srv.Close()
	})
}
