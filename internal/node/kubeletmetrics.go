package node

import (
	"net/http"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// The kubelet's own /metrics series the node keeps.
var (
	nodeNameDesc = prometheus.NewDesc("kubelet_node_name",
		"[ALPHA] The node's name. The count is always 1.", []string{"node"}, nil)
	runningPodsDesc = prometheus.NewDesc("kubelet_running_pods",
		"[ALPHA] Number of pods that have a running pod sandbox", nil, nil)
	runningContainersDesc = prometheus.NewDesc("kubelet_running_containers",
		"[ALPHA] Number of containers currently running", []string{"container_state"}, nil)
)

// kubeletMetrics serves the kubelet's /metrics: the node's name, its
// running pods and containers, and the agent process's Go and process
// series, as the kubelet's registry holds its own.
func (a *Agent) kubeletMetrics() http.Handler {
	reg := prometheus.NewRegistry()
	reg.MustRegister(kubeletCollector{a}, collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return promhttp.HandlerFor(reg, promhttp.HandlerOpts{ErrorLog: slogPrinter{}})
}

type kubeletCollector struct{ a *Agent }

func (kubeletCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- nodeNameDesc
	ch <- runningPodsDesc
	ch <- runningContainersDesc
}

func (c kubeletCollector) Collect(ch chan<- prometheus.Metric) {
	ch <- prometheus.MustNewConstMetric(nodeNameDesc, prometheus.GaugeValue, 1, c.a.cfg.NodeName)
	pods, running, exited := 0, 0, 0
	for _, pod := range listPods(c.a.podLister) {
		runs, err := c.a.rt.containers(string(pod.UID))
		if err != nil {
			continue
		}
		up := false
		for _, run := range runs {
			if run.Running() {
				running++
				up = true
			} else {
				exited++
			}
		}
		if up {
			pods++
		}
	}
	ch <- prometheus.MustNewConstMetric(runningPodsDesc, prometheus.GaugeValue, float64(pods))
	ch <- prometheus.MustNewConstMetric(runningContainersDesc, prometheus.GaugeValue, float64(running), "running")
	ch <- prometheus.MustNewConstMetric(runningContainersDesc, prometheus.GaugeValue, float64(exited), "exited")
}
