package proxy

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Metrics are kube-proxy's sync metrics, under its names.
type Metrics struct {
	syncDuration        prometheus.Histogram
	fullSyncDuration    prometheus.Histogram
	partialSyncDuration prometheus.Histogram
	programming         prometheus.Histogram
	lastSync            prometheus.Gauge
	syncFailures        prometheus.Counter
	noLocalEndpoints    *prometheus.GaugeVec
	objects             *prometheus.GaugeVec
}

// Stats are what a backend reports about one sync.
type Stats struct {
	// Objects counts what the backend has installed by kind (for nftables:
	// chains, rules, elements).
	Objects map[string]int
	// NoLocalEndpoints counts Service ports with a Local policy and no
	// local endpoint, by traffic_policy (internal, external).
	NoLocalEndpoints map[string]int
}

// NewMetrics registers the metrics with reg.
func NewMetrics(reg prometheus.Registerer) *Metrics {
	syncBuckets := prometheus.ExponentialBuckets(0.001, 2, 15)
	m := &Metrics{
		syncDuration: prometheus.NewHistogram(prometheus.HistogramOpts{
			Subsystem: "kubeproxy", Name: "sync_proxy_rules_duration_seconds",
			Help: "SyncProxyRules latency in seconds", Buckets: syncBuckets,
		}),
		fullSyncDuration: prometheus.NewHistogram(prometheus.HistogramOpts{
			Subsystem: "kubeproxy", Name: "sync_full_proxy_rules_duration_seconds",
			Help: "SyncProxyRules latency in seconds for full resyncs", Buckets: syncBuckets,
		}),
		partialSyncDuration: prometheus.NewHistogram(prometheus.HistogramOpts{
			Subsystem: "kubeproxy", Name: "sync_partial_proxy_rules_duration_seconds",
			Help: "SyncProxyRules latency in seconds for partial resyncs", Buckets: syncBuckets,
		}),
		programming: prometheus.NewHistogram(prometheus.HistogramOpts{
			Subsystem: "kubeproxy", Name: "network_programming_duration_seconds",
			Help: "In Cluster Network Programming Latency in seconds",
			Buckets: append(append(append(prometheus.LinearBuckets(0.25, 0.25, 2),
				prometheus.LinearBuckets(1, 1, 59)...), prometheus.LinearBuckets(60, 5, 12)...),
				prometheus.LinearBuckets(120, 30, 7)...),
		}),
		lastSync: prometheus.NewGauge(prometheus.GaugeOpts{
			Subsystem: "kubeproxy", Name: "sync_proxy_rules_last_timestamp_seconds",
			Help: "The last time proxy rules were successfully synced",
		}),
		syncFailures: prometheus.NewCounter(prometheus.CounterOpts{
			Subsystem: "kubeproxy", Name: "sync_proxy_rules_nftables_sync_failures_total",
			Help: "Cumulative proxy nftables sync failures",
		}),
		noLocalEndpoints: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Subsystem: "kubeproxy", Name: "sync_proxy_rules_no_local_endpoints_total",
			Help: "Number of services with a Local traffic policy and no endpoints",
		}, []string{"traffic_policy"}),
		objects: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Subsystem: "kubeproxy", Name: "sync_proxy_rules_nftables_objects",
			Help: "Number of nftables chains, rules and map elements the proxy has installed",
		}, []string{"object"}),
	}
	reg.MustRegister(m.syncDuration, m.fullSyncDuration, m.partialSyncDuration, m.programming,
		m.lastSync, m.syncFailures, m.noLocalEndpoints, m.objects)
	return m
}

// synced records a successful sync that started at start and carried the
// EndpointSlice changes made at triggers.
func (m *Metrics) synced(start time.Time, full bool, triggers []time.Time, st Stats) {
	now := time.Now()
	d := now.Sub(start).Seconds()
	m.syncDuration.Observe(d)
	if full {
		m.fullSyncDuration.Observe(d)
	} else {
		m.partialSyncDuration.Observe(d)
	}
	for _, t := range triggers {
		if l := now.Sub(t).Seconds(); l >= 0 {
			m.programming.Observe(l)
		}
	}
	m.lastSync.Set(float64(now.Unix()))
	for k, v := range st.Objects {
		m.objects.WithLabelValues(k).Set(float64(v))
	}
	for _, policy := range []string{"internal", "external"} {
		m.noLocalEndpoints.WithLabelValues(policy).Set(float64(st.NoLocalEndpoints[policy]))
	}
}
