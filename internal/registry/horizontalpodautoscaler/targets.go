package horizontalpodautoscaler

import (
	"fmt"
	"strings"

	autoscalingv2 "k8s.io/api/autoscaling/v2"
	"k8s.io/apimachinery/pkg/api/resource"
)

// unknown is what the TARGETS column shows for a metric not yet measured.
const unknown = "<unknown>"

// FormatMetrics is the TARGETS column as upstream prints it: each metric's
// current value against its target ("cpu: 12%/50%"), two at most, then
// "+ N more...".
func FormatMetrics(specs []autoscalingv2.MetricSpec, statuses []autoscalingv2.MetricStatus) string {
	if len(specs) == 0 {
		return "<none>"
	}
	var list []string
	for i, spec := range specs {
		var st *autoscalingv2.MetricStatus
		if i < len(statuses) {
			st = &statuses[i]
		}
		list = append(list, formatMetric(spec, st))
	}
	const shown = 2
	if len(list) > shown {
		return fmt.Sprintf("%s + %d more...", strings.Join(list[:shown], ", "), len(list)-shown)
	}
	return strings.Join(list, ", ")
}

func formatMetric(spec autoscalingv2.MetricSpec, st *autoscalingv2.MetricStatus) string {
	switch spec.Type {
	case autoscalingv2.ExternalMetricSourceType:
		var cur *autoscalingv2.MetricValueStatus
		if st != nil && st.External != nil {
			cur = &st.External.Current
		}
		return valueOrAverage(spec.External.Target, cur)
	case autoscalingv2.ObjectMetricSourceType:
		var cur *autoscalingv2.MetricValueStatus
		if st != nil && st.Object != nil {
			cur = &st.Object.Current
		}
		return valueOrAverage(spec.Object.Target, cur)
	case autoscalingv2.PodsMetricSourceType:
		current := unknown
		if st != nil && st.Pods != nil {
			current = quantity(st.Pods.Current.AverageValue)
		}
		return current + "/" + quantity(spec.Pods.Target.AverageValue)
	case autoscalingv2.ResourceMetricSourceType:
		var cur *autoscalingv2.MetricValueStatus
		if st != nil && st.Resource != nil {
			cur = &st.Resource.Current
		}
		return string(spec.Resource.Name) + ": " + resourceTarget(spec.Resource.Target, cur)
	case autoscalingv2.ContainerResourceMetricSourceType:
		var cur *autoscalingv2.MetricValueStatus
		if st != nil && st.ContainerResource != nil {
			cur = &st.ContainerResource.Current
		}
		return string(spec.ContainerResource.Name) + ": " + resourceTarget(spec.ContainerResource.Target, cur)
	}
	return "<unknown type>"
}

// valueOrAverage is an Object or External metric: "(avg)" marks a per-pod
// target.
func valueOrAverage(target autoscalingv2.MetricTarget, cur *autoscalingv2.MetricValueStatus) string {
	current := unknown
	if target.AverageValue != nil {
		if cur != nil && cur.AverageValue != nil {
			current = cur.AverageValue.String()
		}
		return current + "/" + target.AverageValue.String() + " (avg)"
	}
	if cur != nil {
		current = quantity(cur.Value)
	}
	return current + "/" + quantity(target.Value)
}

// resourceTarget is a resource metric's value or utilization.
func resourceTarget(target autoscalingv2.MetricTarget, cur *autoscalingv2.MetricValueStatus) string {
	current := unknown
	if target.AverageValue != nil {
		if cur != nil {
			current = quantity(cur.AverageValue)
		}
		return current + "/" + target.AverageValue.String()
	}
	if cur != nil && cur.AverageUtilization != nil {
		current = fmt.Sprintf("%d%%", *cur.AverageUtilization)
	}
	want := "<auto>"
	if target.AverageUtilization != nil {
		want = fmt.Sprintf("%d%%", *target.AverageUtilization)
	}
	return current + "/" + want
}

// quantity prints q, "0" when unset (upstream prints a nil quantity so).
func quantity(q *resource.Quantity) string {
	if q == nil {
		return "0"
	}
	return q.String()
}
