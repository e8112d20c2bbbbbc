package node

import (
	"log/slog"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	corev1 "k8s.io/api/core/v1"

	"github.com/svcnet/svcnet/internal/node/procstat"
)

// The kubelet's /metrics/resource series, which metrics-server scrapes.
var (
	containerCPUDesc = prometheus.NewDesc("container_cpu_usage_seconds_total",
		"[STABLE] Cumulative cpu time consumed by the container in core-seconds", []string{"container", "pod", "namespace"}, nil)
	containerMemoryDesc = prometheus.NewDesc("container_memory_working_set_bytes",
		"[STABLE] Current working set of the container in bytes", []string{"container", "pod", "namespace"}, nil)
	containerStartDesc = prometheus.NewDesc("container_start_time_seconds",
		"[STABLE] Start time of the container since unix epoch in seconds", []string{"container", "pod", "namespace"}, nil)
	podCPUDesc = prometheus.NewDesc("pod_cpu_usage_seconds_total",
		"[STABLE] Cumulative cpu time consumed by the pod in core-seconds", []string{"pod", "namespace"}, nil)
	podMemoryDesc = prometheus.NewDesc("pod_memory_working_set_bytes",
		"[STABLE] Current working set of the pod in bytes", []string{"pod", "namespace"}, nil)
	nodeCPUDesc = prometheus.NewDesc("node_cpu_usage_seconds_total",
		"[STABLE] Cumulative cpu time consumed by the node in core-seconds", nil, nil)
	nodeMemoryDesc = prometheus.NewDesc("node_memory_working_set_bytes",
		"[STABLE] Current working set of the node in bytes", nil, nil)
	scrapeErrorDesc = prometheus.NewDesc("scrape_error",
		"[ALPHA] 1 if there was an error while getting container metrics, 0 otherwise", nil, nil)
)

// procRoot is where the node reads processes and its own usage;
// cgroupRoot where it reads the cgroups of the containers runc runs.
const (
	procRoot   = "/proc"
	cgroupRoot = "/sys/fs/cgroup"
)

// resourceMetrics serves the kubelet's /metrics/resource: each running
// container's usage as procstat measures it, summed per pod, and the
// node's, every sample stamped with the time it was taken.
func (a *Agent) resourceMetrics() http.Handler {
	reg := prometheus.NewRegistry()
	reg.MustRegister(resourceCollector{a})
	return promhttp.HandlerFor(reg, promhttp.HandlerOpts{ErrorLog: slogPrinter{}})
}

type resourceCollector struct{ a *Agent }

func (resourceCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{containerCPUDesc, containerMemoryDesc, containerStartDesc,
		podCPUDesc, podMemoryDesc, nodeCPUDesc, nodeMemoryDesc, scrapeErrorDesc} {
		ch <- d
	}
}

func (c resourceCollector) Collect(ch chan<- prometheus.Metric) {
	now := time.Now()
	stamped := func(desc *prometheus.Desc, t prometheus.ValueType, v float64, labels ...string) {
		ch <- prometheus.NewMetricWithTimestamp(now, prometheus.MustNewConstMetric(desc, t, v, labels...))
	}
	failed := 0.0
	if node, err := procstat.Node(procRoot); err != nil {
		slog.Warn("measure the node's usage", "err", err)
		failed = 1
	} else {
		stamped(nodeCPUDesc, prometheus.CounterValue, node.CPUSeconds)
		stamped(nodeMemoryDesc, prometheus.GaugeValue, float64(node.MemoryBytes))
	}
	snap, err := procstat.Take(procRoot)
	if err != nil {
		slog.Warn("measure the containers' usage", "err", err)
		stamped(scrapeErrorDesc, prometheus.GaugeValue, 1)
		return
	}
	for _, pod := range listPods(c.a.podLister) {
		usage, err := c.a.measurePod(snap, pod)
		if err != nil {
			failed = 1
			continue
		}
		var pu procstat.Usage
		for _, u := range usage {
			pu.CPUSeconds += u.CPUSeconds
			pu.MemoryBytes += u.MemoryBytes
			labels := []string{u.name, pod.Name, pod.Namespace}
			stamped(containerCPUDesc, prometheus.CounterValue, u.CPUSeconds, labels...)
			stamped(containerMemoryDesc, prometheus.GaugeValue, float64(u.MemoryBytes), labels...)
			stamped(containerStartDesc, prometheus.GaugeValue, float64(u.started.UnixNano())/1e9, labels...)
		}
		if len(usage) > 0 {
			stamped(podCPUDesc, prometheus.CounterValue, pu.CPUSeconds, pod.Name, pod.Namespace)
			stamped(podMemoryDesc, prometheus.GaugeValue, float64(pu.MemoryBytes), pod.Name, pod.Namespace)
		}
	}
	stamped(scrapeErrorDesc, prometheus.GaugeValue, failed)
}

// containerUsage is what one running container of a pod uses.
type containerUsage struct {
	procstat.Usage
	name    string
	started time.Time
}

// measurePod is the usage of each of the pod's running containers that
// snap finds.
func (a *Agent) measurePod(snap *procstat.Snapshot, pod *corev1.Pod) ([]containerUsage, error) {
	runs, err := a.rt.containers(string(pod.UID))
	if err != nil {
		return nil, err
	}
	var out []containerUsage
	for _, run := range runs {
		if !run.Running() {
			continue
		}
		if u, ok := usageOf(snap, run); ok {
			out = append(out, containerUsage{Usage: u, name: run.Spec.Name, started: run.State.StartedAt})
		}
	}
	return out, nil
}

// usageOf measures a running container: one runc runs from its cgroup, a
// host process from its process tree in snap.
func usageOf(snap *procstat.Snapshot, run *container) (procstat.Usage, bool) {
	if run.Spec.OCI == nil {
		return snap.Tree(run.State.PID)
	}
	u, err := procstat.Cgroup(cgroupRoot, run.Spec.OCI.Linux.CgroupsPath)
	if err != nil {
		slog.Debug("measure a container's cgroup", "container", run.Spec.Name, "err", err)
		return u, false
	}
	return u, true
}

// slogPrinter logs promhttp's errors.
type slogPrinter struct{}

func (slogPrinter) Println(v ...interface{}) { slog.Warn("serve resource metrics", "err", v) }
