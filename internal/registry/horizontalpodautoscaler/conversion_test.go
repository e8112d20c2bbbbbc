package horizontalpodautoscaler

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	autoscalingv1 "k8s.io/api/autoscaling/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

func TestV1RoundTrip(t *testing.T) {
	in := &autoscalingv1.HorizontalPodAutoscaler{
		TypeMeta:   metav1.TypeMeta{APIVersion: "autoscaling/v1", Kind: "HorizontalPodAutoscaler"},
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "default", Annotations: map[string]string{"keep": "me"}},
		Spec: autoscalingv1.HorizontalPodAutoscalerSpec{
			ScaleTargetRef: autoscalingv1.CrossVersionObjectReference{APIVersion: "apps/v1", Kind: "Deployment", Name: "web"},
			MinReplicas:    ptr.To[int32](1), MaxReplicas: 3, TargetCPUUtilizationPercentage: ptr.To[int32](50),
		},
		Status: autoscalingv1.HorizontalPodAutoscalerStatus{CurrentReplicas: 2, DesiredReplicas: 2, CurrentCPUUtilizationPercentage: ptr.To[int32](40)},
	}
	v2, err := ToV2(in)
	if err != nil {
		t.Fatal(err)
	}
	h := v2.(*autoscalingv2.HorizontalPodAutoscaler)
	if len(h.Spec.Metrics) != 1 || !isCPUUtilization(h.Spec.Metrics[0]) || *h.Spec.Metrics[0].Resource.Target.AverageUtilization != 50 {
		t.Fatalf("v2 metrics = %+v, want the CPU utilization target of 50", h.Spec.Metrics)
	}
	if len(h.Status.CurrentMetrics) != 1 || *h.Status.CurrentMetrics[0].Resource.Current.AverageUtilization != 40 {
		t.Fatalf("v2 current metrics = %+v, want CPU at 40", h.Status.CurrentMetrics)
	}
	back, err := ToV1(v2)
	if err != nil {
		t.Fatal(err)
	}
	got := back.(*autoscalingv1.HorizontalPodAutoscaler)
	// The current CPU utilization comes back in the current-metrics
	// annotation too, as upstream's.
	if _, ok := got.Annotations[CurrentMetricsAnnotation]; !ok {
		t.Errorf("annotations %v lack %s", got.Annotations, CurrentMetricsAnnotation)
	}
	delete(got.Annotations, CurrentMetricsAnnotation)
	if d := cmp.Diff(in, got); d != "" {
		t.Errorf("v1 -> v2 -> v1 (-want +got):\n%s", d)
	}
}

func TestV1NoTargetIsTheDefault(t *testing.T) {
	v2, err := ToV2(&autoscalingv1.HorizontalPodAutoscaler{Spec: autoscalingv1.HorizontalPodAutoscalerSpec{MaxReplicas: 3}})
	if err != nil {
		t.Fatal(err)
	}
	m := v2.(*autoscalingv2.HorizontalPodAutoscaler).Spec.Metrics
	if len(m) != 1 || !isCPUUtilization(m[0]) || *m[0].Resource.Target.AverageUtilization != DefaultCPUUtilization {
		t.Errorf("metrics = %+v, want CPU utilization %d", m, DefaultCPUUtilization)
	}
}

func TestV2RoundTrip(t *testing.T) {
	now := metav1.Now().Rfc3339Copy()
	in := &autoscalingv2.HorizontalPodAutoscaler{
		TypeMeta:   metav1.TypeMeta{APIVersion: "autoscaling/v2", Kind: "HorizontalPodAutoscaler"},
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "default", Annotations: map[string]string{"keep": "me"}},
		Spec: autoscalingv2.HorizontalPodAutoscalerSpec{
			ScaleTargetRef: autoscalingv2.CrossVersionObjectReference{APIVersion: "apps/v1", Kind: "Deployment", Name: "web"},
			MinReplicas:    ptr.To[int32](2), MaxReplicas: 10,
			// v1 keeps the CPU utilization in its field, the rest in
			// an annotation: they come back others first.
			Metrics: []autoscalingv2.MetricSpec{
				{Type: autoscalingv2.ResourceMetricSourceType, Resource: &autoscalingv2.ResourceMetricSource{Name: corev1.ResourceMemory,
					Target: autoscalingv2.MetricTarget{Type: autoscalingv2.AverageValueMetricType, AverageValue: ptr.To(resource.MustParse("100Mi"))}}},
				{Type: autoscalingv2.PodsMetricSourceType, Pods: &autoscalingv2.PodsMetricSource{
					Metric: autoscalingv2.MetricIdentifier{Name: "requests"},
					Target: autoscalingv2.MetricTarget{Type: autoscalingv2.AverageValueMetricType, AverageValue: ptr.To(resource.MustParse("10"))}}},
				{Type: autoscalingv2.ExternalMetricSourceType, External: &autoscalingv2.ExternalMetricSource{
					Metric: autoscalingv2.MetricIdentifier{Name: "queue", Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"q": "jobs"}}},
					Target: autoscalingv2.MetricTarget{Type: autoscalingv2.ValueMetricType, Value: ptr.To(resource.MustParse("30"))}}},
				cpuUtilization(60),
			},
			Behavior: &autoscalingv2.HorizontalPodAutoscalerBehavior{ScaleDown: &autoscalingv2.HPAScalingRules{
				StabilizationWindowSeconds: ptr.To[int32](60), SelectPolicy: ptr.To(autoscalingv2.MinChangePolicySelect),
				Policies: []autoscalingv2.HPAScalingPolicy{{Type: autoscalingv2.PodsScalingPolicy, Value: 1, PeriodSeconds: 30}}}},
		},
		Status: autoscalingv2.HorizontalPodAutoscalerStatus{
			CurrentReplicas: 3, DesiredReplicas: 4,
			CurrentMetrics: []autoscalingv2.MetricStatus{{Type: autoscalingv2.ResourceMetricSourceType, Resource: &autoscalingv2.ResourceMetricStatus{
				Name: corev1.ResourceCPU, Current: autoscalingv2.MetricValueStatus{AverageUtilization: ptr.To[int32](70), AverageValue: ptr.To(resource.MustParse("140m"))}}}},
			Conditions: []autoscalingv2.HorizontalPodAutoscalerCondition{{Type: autoscalingv2.AbleToScale, Status: corev1.ConditionTrue,
				LastTransitionTime: now, Reason: "ReadyForNewScale", Message: "recommended size matches current size"}},
		},
	}
	v1, err := ToV1(in)
	if err != nil {
		t.Fatal(err)
	}
	h := v1.(*autoscalingv1.HorizontalPodAutoscaler)
	if p := h.Spec.TargetCPUUtilizationPercentage; p == nil || *p != 60 {
		t.Errorf("targetCPUUtilizationPercentage = %v, want 60", p)
	}
	if p := h.Status.CurrentCPUUtilizationPercentage; p == nil || *p != 70 {
		t.Errorf("currentCPUUtilizationPercentage = %v, want 70", p)
	}
	for _, k := range []string{MetricsAnnotation, CurrentMetricsAnnotation, ConditionsAnnotation, BehaviorAnnotation, "keep"} {
		if _, ok := h.Annotations[k]; !ok {
			t.Errorf("v1 annotations lack %s: %v", k, h.Annotations)
		}
	}
	back, err := ToV2(v1)
	if err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff(in, back.(*autoscalingv2.HorizontalPodAutoscaler)); d != "" {
		t.Errorf("v2 -> v1 -> v2 (-want +got):\n%s", d)
	}
}
