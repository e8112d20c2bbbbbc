package apiserver

import (
	"bufio"
	"context"
	"net"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// metrics are the API server's Prometheus series, named as upstream's.
type metrics struct {
	reg      *prometheus.Registry
	requests *prometheus.CounterVec
	latency  *prometheus.HistogramVec
	http.Handler
}

func newMetrics() *metrics {
	m := &metrics{reg: prometheus.NewRegistry()}
	m.requests = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "apiserver_request_total",
		Help: "Counter of apiserver requests broken out for each verb, group, resource and HTTP response code.",
	}, []string{"verb", "group", "resource", "subresource", "code"})
	m.latency = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "apiserver_request_duration_seconds",
		Help:    "Response latency distribution in seconds for each verb, group, resource and subresource.",
		Buckets: []float64{0.005, 0.01, 0.025, 0.05, 0.1, 0.2, 0.4, 0.6, 0.8, 1, 1.25, 1.5, 2, 3, 4, 5, 6, 8, 10, 15, 20, 30, 45, 60},
	}, []string{"verb", "group", "resource", "subresource"})
	m.reg.MustRegister(m.requests, m.latency, collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	m.Handler = promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{})
	return m
}

// requestLabels is filled in by routing and read back by instrument.
type requestLabels struct{ verb, group, resource, subresource string }

type labelsKey struct{}

func setRequestLabels(r *http.Request, ri *requestInfo) {
	l, ok := r.Context().Value(labelsKey{}).(*requestLabels)
	if !ok {
		return
	}
	// As upstream: the HTTP method, except LIST, WATCH and APPLY.
	l.verb = r.Method
	switch {
	case ri.verb == "list" || ri.verb == "watch":
		l.verb = strings.ToUpper(ri.verb)
	case ri.verb == "patch" && strings.HasPrefix(r.Header.Get("Content-Type"), "application/apply-patch"):
		l.verb = "APPLY"
	}
	l.group, l.resource, l.subresource = ri.res.Kind.Group, ri.res.Resource, ri.subresource
}

// statusRecorder remembers the response code and keeps Flush working for
// watches.
type statusRecorder struct {
	http.ResponseWriter
	code int
}

func (w *statusRecorder) WriteHeader(code int) {
	if w.code == 0 {
		w.code = code
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *statusRecorder) Write(b []byte) (int, error) {
	if w.code == 0 {
		w.code = http.StatusOK
	}
	return w.ResponseWriter.Write(b)
}

func (w *statusRecorder) Flush() {
	if f, ok := w.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

func (w *statusRecorder) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// Hijack hands the connection over for an upgraded request (pods/exec).
func (w *statusRecorder) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	if w.code == 0 {
		w.code = http.StatusSwitchingProtocols
	}
	return http.NewResponseController(w.ResponseWriter).Hijack()
}

func (m *metrics) instrument(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		l := &requestLabels{}
		rec := &statusRecorder{ResponseWriter: w}
		next.ServeHTTP(rec, r.WithContext(context.WithValue(r.Context(), labelsKey{}, l)))
		if l.resource == "" {
			return // only resource requests are counted, as upstream does
		}
		code := rec.code
		if code == 0 {
			code = http.StatusOK
		}
		m.requests.WithLabelValues(l.verb, l.group, l.resource, l.subresource, strconv.Itoa(code)).Inc()
		if l.verb != "WATCH" {
			m.latency.WithLabelValues(l.verb, l.group, l.resource, l.subresource).Observe(time.Since(start).Seconds())
		}
	})
}
