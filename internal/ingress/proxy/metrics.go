package proxy

import (
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/svcnet/svcnet/internal/ingress/routes"
)

// metrics are the proxy's Prometheus series, labelled as ingress-nginx's
// (namespace and name of the Ingress, the Service, the status code).
type metrics struct {
	requests *prometheus.CounterVec
	duration *prometheus.HistogramVec
	inFlight prometheus.Gauge
}

func newMetrics(reg prometheus.Registerer) *metrics {
	m := &metrics{
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "svcnet", Subsystem: "ingress", Name: "requests_total",
			Help: "Requests served, by the Ingress (or route) that matched, its Service and the status code answered.",
		}, []string{"namespace", "ingress", "service", "status"}),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Namespace: "svcnet", Subsystem: "ingress", Name: "request_duration_seconds",
			Help:    "Time from a request's arrival until its response was sent, by Ingress and Service.",
			Buckets: []float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10},
		}, []string{"namespace", "ingress", "service"}),
		inFlight: prometheus.NewGauge(prometheus.GaugeOpts{
			Namespace: "svcnet", Subsystem: "ingress", Name: "requests_in_flight",
			Help: "Requests being served (upgraded connections included until they close).",
		}),
	}
	if reg != nil {
		reg.MustRegister(m.requests, m.duration, m.inFlight)
	}
	return m
}

func (m *metrics) observe(rt *routes.Route, b *routes.Backend, status int, d time.Duration) {
	var ns, name, svc string
	if rt != nil {
		ns, name = rt.Source.Namespace, rt.Source.Name
	}
	if b != nil {
		svc = b.Service
	}
	m.requests.WithLabelValues(ns, name, svc, strconv.Itoa(status)).Inc()
	m.duration.WithLabelValues(ns, name, svc).Observe(d.Seconds())
}
