package metricsserver

import (
	"fmt"
	"io"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// point is one sample of cumulative CPU and current memory.
type point struct {
	// start is when the container (or node) started; a change means a
	// restart, whose counter began anew.
	start     time.Time
	timestamp time.Time
	cpu       float64 // core-seconds
	memory    float64 // bytes
}

// containerKey names a container of a pod.
type containerKey struct{ namespace, pod, container string }

// scrape is one node's /metrics/resource, decoded.
type scrape struct {
	node       *point
	containers map[containerKey]*point
}

// decode reads the kubelet's Prometheus text, as metrics-server's
// decoder: the node's and each container's CPU counter and working set,
// with the samples' own timestamps.
func decode(r io.Reader) (*scrape, error) {
	parser := expfmt.NewTextParser(model.UTF8Validation)
	families, err := parser.TextToMetricFamilies(r)
	if err != nil {
		return nil, fmt.Errorf("decode resource metrics: %w", err)
	}
	s := &scrape{containers: map[containerKey]*point{}}
	container := func(m *dto.Metric) *point {
		k := containerKey{}
		for _, l := range m.GetLabel() {
			switch l.GetName() {
			case "namespace":
				k.namespace = l.GetValue()
			case "pod":
				k.pod = l.GetValue()
			case "container":
				k.container = l.GetValue()
			}
		}
		if k.pod == "" || k.container == "" {
			return nil
		}
		if s.containers[k] == nil {
			s.containers[k] = &point{}
		}
		return s.containers[k]
	}
	node := func() *point {
		if s.node == nil {
			s.node = &point{}
		}
		return s.node
	}
	for name, f := range families {
		for _, m := range f.GetMetric() {
			var p *point
			if len(name) > 5 && name[:5] == "node_" {
				p = node()
			} else {
				p = container(m)
			}
			if p == nil {
				continue
			}
			ts := time.UnixMilli(m.GetTimestampMs())
			switch name {
			case "node_cpu_usage_seconds_total", "container_cpu_usage_seconds_total":
				p.cpu, p.timestamp = m.GetCounter().GetValue(), ts
			case "node_memory_working_set_bytes", "container_memory_working_set_bytes":
				p.memory = m.GetGauge().GetValue()
			case "container_start_time_seconds":
				v := m.GetGauge().GetValue()
				p.start = time.Unix(0, int64(v*1e9))
			}
		}
	}
	for k, p := range s.containers {
		if p.timestamp.IsZero() {
			delete(s.containers, k) // no CPU sample
		}
	}
	if s.node != nil && s.node.timestamp.IsZero() {
		s.node = nil
	}
	return s, nil
}
