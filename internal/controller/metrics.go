package controller

import (
	"errors"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/client-go/util/workqueue"
)

// Metrics are the Prometheus series of the controllers of one process.
type Metrics struct {
	queues        queueMetrics
	syncDuration  *prometheus.HistogramVec
	changeToWrite *prometheus.HistogramVec
}

// NewMetrics registers the controllers' series with reg: upstream's
// workqueue_* family per queue name, sync durations per controller and
// result, and the latency from an observed endpoint change to the API write
// that published it.
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		queues: newQueueMetrics(),
		syncDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "svcnet_controller_sync_duration_seconds",
			Help:    "Duration of one sync of one key, by controller and result (success, error, stale).",
			Buckets: prometheus.ExponentialBuckets(0.0005, 2, 16),
		}, []string{"controller", "result"}),
		changeToWrite: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "svcnet_endpoints_change_to_write_seconds",
			Help: "Time from the first observed change of a Service, Pod or Endpoints to the API write that published it, by controller.",
			// The batch period is usually the largest share: up to minutes.
			Buckets: prometheus.ExponentialBuckets(0.001, 2, 18),
		}, []string{"controller"}),
	}
	reg.MustRegister(m.syncDuration, m.changeToWrite)
	m.queues.register(reg)
	return m
}

func (m *Metrics) observeSync(controller string, d time.Duration, err error) {
	result := "success"
	switch {
	case errors.Is(err, ErrStale):
		result = "stale"
	case err != nil:
		result = "error"
	}
	m.syncDuration.WithLabelValues(controller, result).Observe(d.Seconds())
}

// queueMetrics implements workqueue.MetricsProvider with upstream's series
// names, labelled by queue name.
type queueMetrics struct {
	depth, unfinished, longest *prometheus.GaugeVec
	adds, retries              *prometheus.CounterVec
	latency, work              *prometheus.HistogramVec
}

func newQueueMetrics() queueMetrics {
	gauge := func(name, help string) *prometheus.GaugeVec {
		return prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: name, Help: help}, []string{"name"})
	}
	counter := func(name, help string) *prometheus.CounterVec {
		return prometheus.NewCounterVec(prometheus.CounterOpts{Name: name, Help: help}, []string{"name"})
	}
	histogram := func(name, help string) *prometheus.HistogramVec {
		return prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: name, Help: help,
			Buckets: prometheus.ExponentialBuckets(10e-9, 10, 12)}, []string{"name"})
	}
	return queueMetrics{
		depth:      gauge("workqueue_depth", "Current depth of workqueue"),
		unfinished: gauge("workqueue_unfinished_work_seconds", "How many seconds of work has been done that is in progress and hasn't been observed by work_duration."),
		longest:    gauge("workqueue_longest_running_processor_seconds", "How many seconds has the longest running processor for workqueue been running."),
		adds:       counter("workqueue_adds_total", "Total number of adds handled by workqueue"),
		retries:    counter("workqueue_retries_total", "Total number of retries handled by workqueue"),
		latency:    histogram("workqueue_queue_duration_seconds", "How long in seconds an item stays in workqueue before being requested."),
		work:       histogram("workqueue_work_duration_seconds", "How long in seconds processing an item from workqueue takes."),
	}
}

func (q queueMetrics) register(reg prometheus.Registerer) {
	reg.MustRegister(q.depth, q.unfinished, q.longest, q.adds, q.retries, q.latency, q.work)
}

func (q queueMetrics) NewDepthMetric(name string) workqueue.GaugeMetric {
	return q.depth.WithLabelValues(name)
}

func (q queueMetrics) NewAddsMetric(name string) workqueue.CounterMetric {
	return q.adds.WithLabelValues(name)
}

func (q queueMetrics) NewLatencyMetric(name string) workqueue.HistogramMetric {
	return q.latency.WithLabelValues(name)
}

func (q queueMetrics) NewWorkDurationMetric(name string) workqueue.HistogramMetric {
	return q.work.WithLabelValues(name)
}

func (q queueMetrics) NewUnfinishedWorkSecondsMetric(name string) workqueue.SettableGaugeMetric {
	return q.unfinished.WithLabelValues(name)
}

func (q queueMetrics) NewLongestRunningProcessorSecondsMetric(name string) workqueue.SettableGaugeMetric {
	return q.longest.WithLabelValues(name)
}

func (q queueMetrics) NewRetriesMetric(name string) workqueue.CounterMetric {
	return q.retries.WithLabelValues(name)
}

// ChangeLatency measures, per key, the time from the first change seen by
// an event handler to the API write that published it. Changes seen while
// a sync runs count from their own time, as they need another sync.
type ChangeLatency[T comparable] struct {
	observer prometheus.Observer
	mu       sync.Mutex
	seen     map[T]time.Time
}

// NewChangeLatency reports into m under controller's name.
func NewChangeLatency[T comparable](m *Metrics, controller string) *ChangeLatency[T] {
	return &ChangeLatency[T]{observer: m.changeToWrite.WithLabelValues(controller), seen: map[T]time.Time{}}
}

// Seen records a change of key now, unless an older one is still pending.
func (c *ChangeLatency[T]) Seen(key T) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.seen[key]; !ok {
		c.seen[key] = time.Now()
	}
}

// Track runs the sync of key that publishes its pending change. When the
// sync writes, the time since the change is observed; when it fails, the
// change stays pending, so that the retry is measured from the change.
func (c *ChangeLatency[T]) Track(key T, sync func() (wrote bool, err error)) error {
	c.mu.Lock()
	t, pending := c.seen[key]
	delete(c.seen, key)
	c.mu.Unlock()
	wrote, err := sync()
	switch {
	case !pending:
	case err != nil:
		c.mu.Lock()
		if cur, ok := c.seen[key]; !ok || t.Before(cur) {
			c.seen[key] = t
		}
		c.mu.Unlock()
	case wrote:
		c.observer.Observe(time.Since(t).Seconds())
	}
	return err
}
