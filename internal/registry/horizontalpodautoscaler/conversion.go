package horizontalpodautoscaler

import (
	"encoding/json"
	"fmt"
	"maps"

	autoscalingv1 "k8s.io/api/autoscaling/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/ptr"
)

// The annotations in which an autoscaling/v1 object keeps what only v2 can
// say, as upstream's: the metrics but the CPU utilization target, the
// current metrics, the conditions and the scaling behavior. The metrics,
// current metrics and conditions are in v1's alpha shapes
// (autoscalingv1.MetricSpec, ...).
const (
	MetricsAnnotation        = "autoscaling.alpha.kubernetes.io/metrics"
	CurrentMetricsAnnotation = "autoscaling.alpha.kubernetes.io/current-metrics"
	ConditionsAnnotation     = "autoscaling.alpha.kubernetes.io/conditions"
	BehaviorAnnotation       = "autoscaling.alpha.kubernetes.io/behavior"
)

// roundTrip are the annotations conversion owns: a v1 object's are read
// into v2 fields and dropped, and a v2 object's are replaced.
var roundTrip = []string{MetricsAnnotation, CurrentMetricsAnnotation, ConditionsAnnotation, BehaviorAnnotation,
	"autoscaling.alpha.kubernetes.io/scale-down-tolerance", "autoscaling.alpha.kubernetes.io/scale-up-tolerance"}

// withoutRoundTrip is annotations without those conversion owns, or
// nil when none is left.
func withoutRoundTrip(annotations map[string]string) map[string]string {
	out := maps.Clone(annotations)
	for _, k := range roundTrip {
		delete(out, k)
	}
	if len(out) == 0 {
		return nil
	}
	return out
}

// isCPUUtilization reports whether m is the metric v1 has a field for.
func isCPUUtilization(m autoscalingv2.MetricSpec) bool {
	return m.Type == autoscalingv2.ResourceMetricSourceType && m.Resource != nil &&
		m.Resource.Name == corev1.ResourceCPU && m.Resource.Target.AverageUtilization != nil
}

// ToV1 is a stored autoscaling/v2 HorizontalPodAutoscaler as
// autoscaling/v1 serves it (upstream's conversion).
func ToV1(obj runtime.Object) (runtime.Object, error) {
	in, ok := obj.(*autoscalingv2.HorizontalPodAutoscaler)
	if !ok {
		return nil, fmt.Errorf("conversion to autoscaling/v1 of %T", obj)
	}
	out := &autoscalingv1.HorizontalPodAutoscaler{
		TypeMeta:   metav1.TypeMeta{APIVersion: autoscalingv1.SchemeGroupVersion.String(), Kind: "HorizontalPodAutoscaler"},
		ObjectMeta: *in.ObjectMeta.DeepCopy(),
		Spec: autoscalingv1.HorizontalPodAutoscalerSpec{
			ScaleTargetRef: autoscalingv1.CrossVersionObjectReference(in.Spec.ScaleTargetRef),
			MinReplicas:    copyInt32(in.Spec.MinReplicas),
			MaxReplicas:    in.Spec.MaxReplicas,
		},
		Status: autoscalingv1.HorizontalPodAutoscalerStatus{
			ObservedGeneration: in.Status.ObservedGeneration,
			LastScaleTime:      in.Status.LastScaleTime.DeepCopy(),
			CurrentReplicas:    in.Status.CurrentReplicas,
			DesiredReplicas:    in.Status.DesiredReplicas,
		},
	}
	out.Annotations = withoutRoundTrip(out.Annotations)
	extra := map[string]interface{}{}
	var others []autoscalingv1.MetricSpec
	for _, m := range in.Spec.Metrics {
		if isCPUUtilization(m) {
			if out.Spec.TargetCPUUtilizationPercentage == nil {
				out.Spec.TargetCPUUtilizationPercentage = ptr.To(*m.Resource.Target.AverageUtilization)
			}
			continue
		}
		others = append(others, metricToV1(m))
	}
	if len(others) > 0 {
		extra[MetricsAnnotation] = others
	}
	if cur := in.Status.CurrentMetrics; len(cur) > 0 {
		status := make([]autoscalingv1.MetricStatus, len(cur))
		for i, m := range cur {
			status[i] = metricStatusToV1(m)
			if m.Type == autoscalingv2.ResourceMetricSourceType && m.Resource != nil && m.Resource.Name == corev1.ResourceCPU &&
				m.Resource.Current.AverageUtilization != nil {
				out.Status.CurrentCPUUtilizationPercentage = ptr.To(*m.Resource.Current.AverageUtilization)
			}
		}
		extra[CurrentMetricsAnnotation] = status
	}
	if in.Spec.Behavior != nil {
		extra[BehaviorAnnotation] = in.Spec.Behavior
	}
	if conds := in.Status.Conditions; len(conds) > 0 {
		v1 := make([]autoscalingv1.HorizontalPodAutoscalerCondition, len(conds))
		for i, c := range conds {
			v1[i] = autoscalingv1.HorizontalPodAutoscalerCondition{Type: autoscalingv1.HorizontalPodAutoscalerConditionType(c.Type),
				Status: c.Status, LastTransitionTime: c.LastTransitionTime, Reason: c.Reason, Message: c.Message}
		}
		extra[ConditionsAnnotation] = v1
	}
	for k, v := range extra {
		b, err := json.Marshal(v)
		if err != nil {
			return nil, fmt.Errorf("annotation %s: %w", k, err)
		}
		if out.Annotations == nil {
			out.Annotations = map[string]string{}
		}
		out.Annotations[k] = string(b)
	}
	return out, nil
}

// ToV2 is an autoscaling/v1 HorizontalPodAutoscaler as stored, at
// autoscaling/v2, with what its round-trip annotations hold (upstream's
// conversion: annotations that do not decode are ignored).
func ToV2(obj runtime.Object) (runtime.Object, error) {
	in, ok := obj.(*autoscalingv1.HorizontalPodAutoscaler)
	if !ok {
		return nil, fmt.Errorf("conversion to autoscaling/v2 of %T", obj)
	}
	out := &autoscalingv2.HorizontalPodAutoscaler{
		TypeMeta:   metav1.TypeMeta{APIVersion: autoscalingv2.SchemeGroupVersion.String(), Kind: "HorizontalPodAutoscaler"},
		ObjectMeta: *in.ObjectMeta.DeepCopy(),
		Spec: autoscalingv2.HorizontalPodAutoscalerSpec{
			ScaleTargetRef: autoscalingv2.CrossVersionObjectReference(in.Spec.ScaleTargetRef),
			MinReplicas:    copyInt32(in.Spec.MinReplicas),
			MaxReplicas:    in.Spec.MaxReplicas,
		},
		Status: autoscalingv2.HorizontalPodAutoscalerStatus{
			ObservedGeneration: in.Status.ObservedGeneration,
			LastScaleTime:      in.Status.LastScaleTime.DeepCopy(),
			CurrentReplicas:    in.Status.CurrentReplicas,
			DesiredReplicas:    in.Status.DesiredReplicas,
		},
	}
	var others []autoscalingv1.MetricSpec
	if decode(in.Annotations, MetricsAnnotation, &others) {
		for _, m := range others {
			out.Spec.Metrics = append(out.Spec.Metrics, metricToV2(m))
		}
	}
	if p := in.Spec.TargetCPUUtilizationPercentage; p != nil {
		out.Spec.Metrics = append(out.Spec.Metrics, cpuUtilization(*p))
	}
	if len(out.Spec.Metrics) == 0 {
		// v1's implicit target, made explicit as upstream's.
		out.Spec.Metrics = []autoscalingv2.MetricSpec{cpuUtilization(DefaultCPUUtilization)}
	}
	var behavior autoscalingv2.HorizontalPodAutoscalerBehavior
	if decode(in.Annotations, BehaviorAnnotation, &behavior) && (behavior.ScaleUp != nil || behavior.ScaleDown != nil) {
		out.Spec.Behavior = &behavior
	}
	var current []autoscalingv1.MetricStatus
	if decode(in.Annotations, CurrentMetricsAnnotation, &current) {
		for _, m := range current {
			out.Status.CurrentMetrics = append(out.Status.CurrentMetrics, metricStatusToV2(m))
		}
	} else if p := in.Status.CurrentCPUUtilizationPercentage; p != nil {
		out.Status.CurrentMetrics = []autoscalingv2.MetricStatus{{Type: autoscalingv2.ResourceMetricSourceType,
			Resource: &autoscalingv2.ResourceMetricStatus{Name: corev1.ResourceCPU,
				Current: autoscalingv2.MetricValueStatus{AverageUtilization: ptr.To(*p)}}}}
	}
	var conds []autoscalingv1.HorizontalPodAutoscalerCondition
	if decode(in.Annotations, ConditionsAnnotation, &conds) {
		for _, c := range conds {
			out.Status.Conditions = append(out.Status.Conditions, autoscalingv2.HorizontalPodAutoscalerCondition{
				Type: autoscalingv2.HorizontalPodAutoscalerConditionType(c.Type), Status: c.Status,
				LastTransitionTime: c.LastTransitionTime, Reason: c.Reason, Message: c.Message})
		}
	}
	out.Annotations = withoutRoundTrip(out.Annotations)
	return out, nil
}

// decode reads annotation k of annotations into v, reporting whether it
// was there and decoded.
func decode(annotations map[string]string, k string, v interface{}) bool {
	s, ok := annotations[k]
	return ok && json.Unmarshal([]byte(s), v) == nil
}

func cpuUtilization(percent int32) autoscalingv2.MetricSpec {
	return autoscalingv2.MetricSpec{Type: autoscalingv2.ResourceMetricSourceType,
		Resource: &autoscalingv2.ResourceMetricSource{Name: corev1.ResourceCPU,
			Target: autoscalingv2.MetricTarget{Type: autoscalingv2.UtilizationMetricType, AverageUtilization: ptr.To(percent)}}}
}

// averageOrUtilization is the target type of v1's resource metrics: a
// utilization when one is given.
func averageOrUtilization(utilization *int32) autoscalingv2.MetricTargetType {
	if utilization == nil {
		return autoscalingv2.AverageValueMetricType
	}
	return autoscalingv2.UtilizationMetricType
}

func metricToV1(m autoscalingv2.MetricSpec) autoscalingv1.MetricSpec {
	out := autoscalingv1.MetricSpec{Type: autoscalingv1.MetricSourceType(m.Type)}
	if s := m.Object; s != nil {
		out.Object = &autoscalingv1.ObjectMetricSource{
			Target:       autoscalingv1.CrossVersionObjectReference(s.DescribedObject),
			MetricName:   s.Metric.Name,
			Selector:     s.Metric.Selector,
			AverageValue: s.Target.AverageValue,
		}
		if s.Target.Value != nil {
			out.Object.TargetValue = *s.Target.Value
		}
	}
	if s := m.Pods; s != nil {
		out.Pods = &autoscalingv1.PodsMetricSource{MetricName: s.Metric.Name, Selector: s.Metric.Selector}
		if s.Target.AverageValue != nil {
			out.Pods.TargetAverageValue = *s.Target.AverageValue
		}
	}
	if s := m.Resource; s != nil {
		out.Resource = &autoscalingv1.ResourceMetricSource{Name: s.Name,
			TargetAverageUtilization: s.Target.AverageUtilization, TargetAverageValue: s.Target.AverageValue}
	}
	if s := m.ContainerResource; s != nil {
		out.ContainerResource = &autoscalingv1.ContainerResourceMetricSource{Name: s.Name, Container: s.Container,
			TargetAverageUtilization: s.Target.AverageUtilization, TargetAverageValue: s.Target.AverageValue}
	}
	if s := m.External; s != nil {
		out.External = &autoscalingv1.ExternalMetricSource{MetricName: s.Metric.Name, MetricSelector: s.Metric.Selector,
			TargetValue: s.Target.Value, TargetAverageValue: s.Target.AverageValue}
	}
	return out
}

func metricToV2(m autoscalingv1.MetricSpec) autoscalingv2.MetricSpec {
	out := autoscalingv2.MetricSpec{Type: autoscalingv2.MetricSourceType(m.Type)}
	if s := m.Object; s != nil {
		t := autoscalingv2.MetricTarget{Type: autoscalingv2.ValueMetricType, Value: ptr.To(s.TargetValue), AverageValue: s.AverageValue}
		if s.AverageValue != nil {
			// v1 cannot omit targetValue: a zero one is none.
			t.Type, t.Value = autoscalingv2.AverageValueMetricType, nil
			if !s.TargetValue.IsZero() {
				t.Value = ptr.To(s.TargetValue)
			}
		}
		out.Object = &autoscalingv2.ObjectMetricSource{
			DescribedObject: autoscalingv2.CrossVersionObjectReference(s.Target),
			Metric:          autoscalingv2.MetricIdentifier{Name: s.MetricName, Selector: s.Selector},
			Target:          t,
		}
	}
	if s := m.Pods; s != nil {
		out.Pods = &autoscalingv2.PodsMetricSource{
			Metric: autoscalingv2.MetricIdentifier{Name: s.MetricName, Selector: s.Selector},
			Target: autoscalingv2.MetricTarget{Type: autoscalingv2.AverageValueMetricType, AverageValue: ptr.To(s.TargetAverageValue)},
		}
	}
	if s := m.Resource; s != nil {
		out.Resource = &autoscalingv2.ResourceMetricSource{Name: s.Name, Target: autoscalingv2.MetricTarget{
			Type: averageOrUtilization(s.TargetAverageUtilization), AverageUtilization: s.TargetAverageUtilization, AverageValue: s.TargetAverageValue}}
	}
	if s := m.ContainerResource; s != nil {
		out.ContainerResource = &autoscalingv2.ContainerResourceMetricSource{Name: s.Name, Container: s.Container,
			Target: autoscalingv2.MetricTarget{Type: averageOrUtilization(s.TargetAverageUtilization),
				AverageUtilization: s.TargetAverageUtilization, AverageValue: s.TargetAverageValue}}
	}
	if s := m.External; s != nil {
		t := autoscalingv2.MetricTarget{Type: autoscalingv2.ValueMetricType, Value: s.TargetValue, AverageValue: s.TargetAverageValue}
		if s.TargetValue == nil {
			t.Type = autoscalingv2.AverageValueMetricType
		}
		out.External = &autoscalingv2.ExternalMetricSource{
			Metric: autoscalingv2.MetricIdentifier{Name: s.MetricName, Selector: s.MetricSelector}, Target: t}
	}
	return out
}

func copyInt32(p *int32) *int32 {
	if p == nil {
		return nil
	}
	return ptr.To(*p)
}

// deref is a quantity or zero, as v1's non-pointer quantities.
func deref(q *resource.Quantity) resource.Quantity {
	if q == nil {
		return resource.Quantity{}
	}
	return *q
}

func metricStatusToV1(m autoscalingv2.MetricStatus) autoscalingv1.MetricStatus {
	out := autoscalingv1.MetricStatus{Type: autoscalingv1.MetricSourceType(m.Type)}
	if s := m.Object; s != nil {
		out.Object = &autoscalingv1.ObjectMetricStatus{Target: autoscalingv1.CrossVersionObjectReference(s.DescribedObject),
			MetricName: s.Metric.Name, Selector: s.Metric.Selector, CurrentValue: deref(s.Current.Value), AverageValue: s.Current.AverageValue}
	}
	if s := m.Pods; s != nil {
		out.Pods = &autoscalingv1.PodsMetricStatus{MetricName: s.Metric.Name, Selector: s.Metric.Selector,
			CurrentAverageValue: deref(s.Current.AverageValue)}
	}
	if s := m.Resource; s != nil {
		out.Resource = &autoscalingv1.ResourceMetricStatus{Name: s.Name,
			CurrentAverageUtilization: s.Current.AverageUtilization, CurrentAverageValue: deref(s.Current.AverageValue)}
	}
	if s := m.ContainerResource; s != nil {
		out.ContainerResource = &autoscalingv1.ContainerResourceMetricStatus{Name: s.Name, Container: s.Container,
			CurrentAverageUtilization: s.Current.AverageUtilization, CurrentAverageValue: deref(s.Current.AverageValue)}
	}
	if s := m.External; s != nil {
		out.External = &autoscalingv1.ExternalMetricStatus{MetricName: s.Metric.Name, MetricSelector: s.Metric.Selector,
			CurrentValue: deref(s.Current.Value), CurrentAverageValue: s.Current.AverageValue}
	}
	return out
}

func metricStatusToV2(m autoscalingv1.MetricStatus) autoscalingv2.MetricStatus {
	out := autoscalingv2.MetricStatus{Type: autoscalingv2.MetricSourceType(m.Type)}
	if s := m.Object; s != nil {
		out.Object = &autoscalingv2.ObjectMetricStatus{DescribedObject: autoscalingv2.CrossVersionObjectReference(s.Target),
			Metric:  autoscalingv2.MetricIdentifier{Name: s.MetricName, Selector: s.Selector},
			Current: autoscalingv2.MetricValueStatus{Value: ptr.To(s.CurrentValue), AverageValue: s.AverageValue}}
	}
	if s := m.Pods; s != nil {
		out.Pods = &autoscalingv2.PodsMetricStatus{Metric: autoscalingv2.MetricIdentifier{Name: s.MetricName, Selector: s.Selector},
			Current: autoscalingv2.MetricValueStatus{AverageValue: ptr.To(s.CurrentAverageValue)}}
	}
	if s := m.Resource; s != nil {
		out.Resource = &autoscalingv2.ResourceMetricStatus{Name: s.Name, Current: autoscalingv2.MetricValueStatus{
			AverageUtilization: s.CurrentAverageUtilization, AverageValue: ptr.To(s.CurrentAverageValue)}}
	}
	if s := m.ContainerResource; s != nil {
		out.ContainerResource = &autoscalingv2.ContainerResourceMetricStatus{Name: s.Name, Container: s.Container,
			Current: autoscalingv2.MetricValueStatus{AverageUtilization: s.CurrentAverageUtilization, AverageValue: ptr.To(s.CurrentAverageValue)}}
	}
	if s := m.External; s != nil {
		out.External = &autoscalingv2.ExternalMetricStatus{Metric: autoscalingv2.MetricIdentifier{Name: s.MetricName, Selector: s.MetricSelector},
			Current: autoscalingv2.MetricValueStatus{Value: ptr.To(s.CurrentValue), AverageValue: s.CurrentAverageValue}}
	}
	return out
}
