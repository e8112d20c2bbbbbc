package metricsserver

import (
	"strings"
	"testing"
	"time"
)

const sample = `# TYPE container_cpu_usage_seconds_total counter
container_cpu_usage_seconds_total{container="busy",namespace="demo",pod="web-1"} 10 1700000010000
# TYPE container_memory_working_set_bytes gauge
container_memory_working_set_bytes{container="busy",namespace="demo",pod="web-1"} 2.097152e+06 1700000010000
# TYPE container_start_time_seconds gauge
container_start_time_seconds{container="busy",namespace="demo",pod="web-1"} 1.7e+09 1700000010000
# TYPE node_cpu_usage_seconds_total counter
node_cpu_usage_seconds_total 100 1700000010000
# TYPE node_memory_working_set_bytes gauge
node_memory_working_set_bytes 1e+09 1700000010000
# TYPE scrape_error gauge
scrape_error 0
`

func TestDecode(t *testing.T) {
	s, err := decode(strings.NewReader(sample))
	if err != nil {
		t.Fatal(err)
	}
	c := s.containers[containerKey{"demo", "web-1", "busy"}]
	if c == nil || c.cpu != 10 || c.memory != 2<<20 || !c.timestamp.Equal(time.UnixMilli(1700000010000)) || !c.start.Equal(time.Unix(1700000000, 0)) {
		t.Errorf("container point = %+v", c)
	}
	if s.node == nil || s.node.cpu != 100 || s.node.memory != 1e9 {
		t.Errorf("node point = %+v", s.node)
	}
}

func TestSeries(t *testing.T) {
	start := time.Unix(1000, 0)
	at := func(sec int, cpu float64) *point {
		return &point{start: start, timestamp: start.Add(time.Duration(sec) * time.Second), cpu: cpu}
	}
	const res = 15 * time.Second
	// A container older than the resolution needs two scrapes.
	s := series{}.add(at(60, 30), res)
	if _, _, ok := s.rate(); ok {
		t.Error("a rate from one sample of an old container")
	}
	s = s.add(at(75, 37.5), res)
	if cores, window, ok := s.rate(); !ok || cores != 0.5 || window != 15*time.Second {
		t.Errorf("rate = %v over %v (%v), want 0.5 over 15s", cores, window, ok)
	}
	// A container started within the resolution is measured from its start.
	if cores, window, ok := (series{}).add(at(10, 5), res).rate(); !ok || cores != 0.5 || window != 10*time.Second {
		t.Errorf("new container: %v over %v (%v), want 0.5 over 10s", cores, window, ok)
	}
	// A restart (a new start time) does not take a rate across runs.
	restarted := &point{start: start.Add(time.Minute), timestamp: start.Add(3 * time.Minute), cpu: 1}
	if _, _, ok := s.add(restarted, res).rate(); ok {
		t.Error("a rate across a restart")
	}
	// A sample no newer than the last is not a rate.
	if _, _, ok := s.add(at(75, 37.5), res).rate(); ok {
		t.Error("a rate over no time")
	}
}
