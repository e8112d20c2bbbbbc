package podautoscaler

import (
	"context"
	"errors"
	"fmt"
	"math"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	metricsv1beta1 "k8s.io/metrics/pkg/apis/metrics/v1beta1"
)

// podMetric is one pod's usage of a resource, in milli-units.
type podMetric struct {
	timestamp time.Time
	window    time.Duration
	value     int64
}

// podMetrics are the usages by pod name.
type podMetrics map[string]podMetric

// resourceMetrics is the pods' usage of one resource, as upstream's REST
// metrics client reads it from metrics.k8s.io: a pod counts only if every
// one of its containers reports the resource. The timestamp is the
// first pod's.
func resourceMetrics(list []metricsv1beta1.PodMetrics, name corev1.ResourceName) (podMetrics, time.Time) {
	out := podMetrics{}
	var ts time.Time
	for _, m := range list {
		var sum int64
		missing := len(m.Containers) == 0
		for _, c := range m.Containers {
			q, ok := c.Usage[name]
			if !ok {
				missing = true
				break
			}
			sum += q.MilliValue()
		}
		if missing {
			continue
		}
		out[m.Name] = podMetric{timestamp: m.Timestamp.Time, window: m.Window.Duration, value: sum}
		if ts.IsZero() {
			ts = m.Timestamp.Time
		}
	}
	return out, ts
}

// tolerances are how far the usage ratio may stray below and above 1
// before the replica count changes.
type tolerances struct{ down, up float64 }

func (t tolerances) within(ratio float64) bool { return 1.0-t.down <= ratio && ratio <= 1.0+t.up }

// calculator is upstream's replica calculator for resource metrics.
type calculator struct {
	tolerances tolerances
	// cpuInitialization and readinessDelay are
	// --horizontal-pod-autoscaler-cpu-initialization-period and
	// --horizontal-pod-autoscaler-initial-readiness-delay.
	cpuInitialization, readinessDelay time.Duration
	now                               time.Time
}

// metricsSource lists the pods' metrics of a namespace and selector.
type metricsSource func(ctx context.Context, namespace string, sel labels.Selector) ([]metricsv1beta1.PodMetrics, error)

var errNoMetrics = errors.New("no metrics returned from resource metrics API")

// podGroups are the pods of the target as the calculator sorts them.
type podGroups struct {
	ready            int
	unready, missing map[string]bool
	ignored          map[string]bool
}

// group sorts pods as upstream's groupPods: deleted and failed pods are
// ignored; pending pods, and for CPU pods still initializing or whose
// sample predates their readiness, are unready; pods without a sample
// are missing.
func (c calculator) group(pods []*corev1.Pod, metrics podMetrics, resource corev1.ResourceName) podGroups {
	g := podGroups{unready: map[string]bool{}, missing: map[string]bool{}, ignored: map[string]bool{}}
	for _, pod := range pods {
		if pod.DeletionTimestamp != nil || pod.Status.Phase == corev1.PodFailed {
			g.ignored[pod.Name] = true
			continue
		}
		if pod.Status.Phase == corev1.PodPending {
			g.unready[pod.Name] = true
			continue
		}
		metric, found := metrics[pod.Name]
		if !found {
			g.missing[pod.Name] = true
			continue
		}
		if resource == corev1.ResourceCPU {
			var ready *corev1.PodCondition
			for i := range pod.Status.Conditions {
				if pod.Status.Conditions[i].Type == corev1.PodReady {
					ready = &pod.Status.Conditions[i]
				}
			}
			unready := ready == nil || pod.Status.StartTime == nil
			if !unready {
				start := pod.Status.StartTime.Time
				if start.Add(c.cpuInitialization).After(c.now) {
					unready = ready.Status == corev1.ConditionFalse || metric.timestamp.Before(ready.LastTransitionTime.Add(metric.window))
				} else {
					unready = ready.Status == corev1.ConditionFalse && start.Add(c.readinessDelay).After(ready.LastTransitionTime.Time)
				}
			}
			if unready {
				g.unready[pod.Name] = true
				continue
			}
		}
		g.ready++
	}
	return g
}

// requests sums each pod's container requests of resource, in milli-units.
func requests(pods []*corev1.Pod, resource corev1.ResourceName) (map[string]int64, error) {
	out := make(map[string]int64, len(pods))
	for _, pod := range pods {
		var sum int64
		for _, c := range pod.Spec.Containers {
			q, ok := c.Resources.Requests[resource]
			if !ok {
				return nil, fmt.Errorf("missing request for %s in container %s of Pod %s", resource, c.Name, pod.Name)
			}
			sum += q.MilliValue()
		}
		out[pod.Name] = sum
	}
	return out, nil
}

// utilizationRatio is the usage over the requests of the pods with both,
// against target percent: the ratio, the utilization in percent and the
// average usage.
func utilizationRatio(metrics podMetrics, reqs map[string]int64, target int32) (float64, int32, int64, error) {
	var usage, requested, n int64
	for name, m := range metrics {
		r, ok := reqs[name]
		if !ok {
			continue
		}
		usage += m.value
		requested += r
		n++
	}
	if requested == 0 {
		return 0, 0, 0, errors.New("no metrics returned matched known pods")
	}
	utilization := int32(usage * 100 / requested)
	return float64(utilization) / float64(target), utilization, usage / n, nil
}

// averageRatio is the average usage against a target average.
func averageRatio(metrics podMetrics, target int64) (float64, int64) {
	var sum int64
	for _, m := range metrics {
		sum += m.value
	}
	avg := sum / int64(len(metrics))
	return float64(avg) / float64(target), avg
}

// resourceResult is what one resource metric recommends.
type resourceResult struct {
	replicas    int32
	utilization int32 // percent, for a Utilization target
	average     int64 // milli-units per pod
	timestamp   time.Time
}

// replicas is upstream's GetResourceReplicas (utilization > 0) and
// GetRawResourceReplicas (a target average in milli-units): the ready
// pods' ratio to the target scales the ready count, unless it is within
// tolerance. Missing pods count as at the target on the way down and
// idle on the way up, unready pods as idle on the way up, and a
// recommendation they would reverse is dropped.
func (c calculator) replicas(current int32, metrics podMetrics, ts time.Time, pods []*corev1.Pod, resource corev1.ResourceName,
	utilization int32, average int64) (resourceResult, error) {
	if len(pods) == 0 {
		return resourceResult{}, errors.New("no pods returned by selector while calculating replica count")
	}
	g := c.group(pods, metrics, resource)
	for name := range g.ignored {
		delete(metrics, name)
	}
	for name := range g.unready {
		delete(metrics, name)
	}
	if len(metrics) == 0 {
		return resourceResult{}, errors.New("did not receive metrics for targeted pods (pods might be unready)")
	}
	var reqs map[string]int64
	ratio := func() (float64, resourceResult, error) {
		if utilization > 0 {
			r, u, avg, err := utilizationRatio(metrics, reqs, utilization)
			return r, resourceResult{utilization: u, average: avg, timestamp: ts}, err
		}
		r, avg := averageRatio(metrics, average)
		return r, resourceResult{average: avg, timestamp: ts}, nil
	}
	if utilization > 0 {
		var err error
		if reqs, err = requests(pods, resource); err != nil {
			return resourceResult{}, err
		}
	}
	usageRatio, res, err := ratio()
	if err != nil {
		return resourceResult{}, err
	}
	res.replicas = current
	scaleUpWithUnready := len(g.unready) > 0 && usageRatio > 1.0
	if !scaleUpWithUnready && len(g.missing) == 0 {
		if !c.tolerances.within(usageRatio) {
			res.replicas = int32(math.Ceil(usageRatio * float64(g.ready)))
		}
		return res, nil
	}
	for name := range g.missing {
		switch {
		case usageRatio < 1.0 && utilization > 0:
			metrics[name] = podMetric{value: reqs[name] * int64(max(100, utilization)) / 100}
		case usageRatio < 1.0:
			metrics[name] = podMetric{value: average}
		case usageRatio > 1.0:
			metrics[name] = podMetric{}
		}
	}
	if scaleUpWithUnready {
		for name := range g.unready {
			metrics[name] = podMetric{}
		}
	}
	newRatio, _, err := ratio()
	if err != nil {
		return resourceResult{}, err
	}
	if c.tolerances.within(newRatio) || (usageRatio < 1.0 && newRatio > 1.0) || (usageRatio > 1.0 && newRatio < 1.0) {
		return res, nil
	}
	n := int32(math.Ceil(newRatio * float64(len(metrics))))
	if (newRatio < 1.0 && n > current) || (newRatio > 1.0 && n < current) {
		return res, nil
	}
	res.replicas = n
	return res, nil
}
