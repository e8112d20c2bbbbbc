package horizontalpodautoscaler

import (
	"reflect"
	"testing"

	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/svcnet/svcnet/internal/registry/registrytest"
)

func valid() *autoscalingv2.HorizontalPodAutoscaler {
	h := &autoscalingv2.HorizontalPodAutoscaler{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "default"},
		Spec: autoscalingv2.HorizontalPodAutoscalerSpec{
			ScaleTargetRef: autoscalingv2.CrossVersionObjectReference{APIVersion: "apps/v1", Kind: "Deployment", Name: "web"},
			MaxReplicas:    5,
		},
	}
	strategy{}.Default(h)
	return h
}

func cpu(percent int32) autoscalingv2.MetricSpec {
	return autoscalingv2.MetricSpec{Type: autoscalingv2.ResourceMetricSourceType, Resource: &autoscalingv2.ResourceMetricSource{
		Name: corev1.ResourceCPU, Target: autoscalingv2.MetricTarget{Type: autoscalingv2.UtilizationMetricType, AverageUtilization: ptr.To(percent)}}}
}

func TestDefault(t *testing.T) {
	ref := autoscalingv2.CrossVersionObjectReference{APIVersion: "apps/v1", Kind: "Deployment", Name: "web"}
	registrytest.RunDefault(t, strategy{}, []registrytest.DefaultCase[*autoscalingv2.HorizontalPodAutoscaler]{{
		Name: "min replicas and the CPU metric",
		In:   &autoscalingv2.HorizontalPodAutoscaler{Spec: autoscalingv2.HorizontalPodAutoscalerSpec{ScaleTargetRef: ref, MaxReplicas: 3}},
		Want: &autoscalingv2.HorizontalPodAutoscaler{Spec: autoscalingv2.HorizontalPodAutoscalerSpec{ScaleTargetRef: ref, MaxReplicas: 3,
			MinReplicas: ptr.To[int32](1), Metrics: []autoscalingv2.MetricSpec{cpu(80)}}},
	}, {
		Name: "a behavior gets both rules filled",
		In: &autoscalingv2.HorizontalPodAutoscaler{Spec: autoscalingv2.HorizontalPodAutoscalerSpec{ScaleTargetRef: ref, MaxReplicas: 3,
			MinReplicas: ptr.To[int32](2), Metrics: []autoscalingv2.MetricSpec{cpu(50)},
			Behavior: &autoscalingv2.HorizontalPodAutoscalerBehavior{ScaleDown: &autoscalingv2.HPAScalingRules{StabilizationWindowSeconds: ptr.To[int32](60)}}}},
		Want: &autoscalingv2.HorizontalPodAutoscaler{Spec: autoscalingv2.HorizontalPodAutoscalerSpec{ScaleTargetRef: ref, MaxReplicas: 3,
			MinReplicas: ptr.To[int32](2), Metrics: []autoscalingv2.MetricSpec{cpu(50)},
			Behavior: &autoscalingv2.HorizontalPodAutoscalerBehavior{
				ScaleUp: &autoscalingv2.HPAScalingRules{StabilizationWindowSeconds: ptr.To[int32](0), SelectPolicy: ptr.To(autoscalingv2.MaxChangePolicySelect),
					Policies: []autoscalingv2.HPAScalingPolicy{{Type: "Pods", Value: 4, PeriodSeconds: 15}, {Type: "Percent", Value: 100, PeriodSeconds: 15}}},
				ScaleDown: &autoscalingv2.HPAScalingRules{StabilizationWindowSeconds: ptr.To[int32](60), SelectPolicy: ptr.To(autoscalingv2.MaxChangePolicySelect),
					Policies: []autoscalingv2.HPAScalingPolicy{{Type: "Percent", Value: 100, PeriodSeconds: 15}}},
			}}},
	}})
}

func TestValidate(t *testing.T) {
	registrytest.RunValidate(t, strategy{}, valid, []registrytest.Case[*autoscalingv2.HorizontalPodAutoscaler]{
		{Name: "valid", Change: func(*autoscalingv2.HorizontalPodAutoscaler) {}},
		{Name: "replicas", Change: func(h *autoscalingv2.HorizontalPodAutoscaler) {
			h.Spec.MinReplicas = ptr.To[int32](3)
			h.Spec.MaxReplicas = 2
		}, Want: []string{"spec.maxReplicas: Invalid value: 2: must be greater than or equal to `minReplicas`"}},
		{Name: "no max", Change: func(h *autoscalingv2.HorizontalPodAutoscaler) { h.Spec.MaxReplicas = 0; h.Spec.MinReplicas = nil }, Want: []string{
			"spec.maxReplicas: Required value: must be set and greater than 0"}},
		{Name: "scale to zero needs an object metric", Change: func(h *autoscalingv2.HorizontalPodAutoscaler) { h.Spec.MinReplicas = ptr.To[int32](0) }, Want: []string{
			"spec.metrics: Forbidden: must specify at least one Object or External metric to support scaling to zero replicas"}},
		{Name: "target", Change: func(h *autoscalingv2.HorizontalPodAutoscaler) {
			h.Spec.ScaleTargetRef = autoscalingv2.CrossVersionObjectReference{APIVersion: "v1", Name: "a/b"}
		}, Want: []string{
			"spec.scaleTargetRef.kind: Required value",
			"spec.scaleTargetRef.name: Invalid value: \"a/b\": may not contain '/'",
			"spec.scaleTargetRef.apiVersion: Invalid value: \"v1\": apiVersion must specify API group",
		}},
		{Name: "metric target", Change: func(h *autoscalingv2.HorizontalPodAutoscaler) {
			h.Spec.Metrics[0].Resource.Target = autoscalingv2.MetricTarget{Type: "Percent", AverageValue: ptr.To(resource.MustParse("-1")), AverageUtilization: ptr.To[int32](0)}
		}, Want: []string{
			"spec.metrics[0].resource.target.type: Invalid value: \"Percent\": must be either Utilization, Value, or AverageValue",
			"spec.metrics[0].resource.target.averageValue: Invalid value: \"-1\": must be positive",
			"spec.metrics[0].resource.target.averageUtilization: Invalid value: 0: must be greater than 0",
			"spec.metrics[0].resource.target.averageValue: Forbidden: may not set both a target raw value and a target utilization",
		}},
		{Name: "two sources", Change: func(h *autoscalingv2.HorizontalPodAutoscaler) {
			h.Spec.Metrics[0].Pods = &autoscalingv2.PodsMetricSource{Metric: autoscalingv2.MetricIdentifier{Name: "qps"},
				Target: autoscalingv2.MetricTarget{Type: autoscalingv2.AverageValueMetricType, AverageValue: ptr.To(resource.MustParse("1"))}}
		}, Want: []string{"spec.metrics[0].pods: Forbidden: must populate the given metric source only"}},
		{Name: "source missing", Change: func(h *autoscalingv2.HorizontalPodAutoscaler) {
			h.Spec.Metrics = []autoscalingv2.MetricSpec{{Type: autoscalingv2.ExternalMetricSourceType}}
		}, Want: []string{"spec.metrics[0].external: Required value: must populate information for the given metric source"}},
		{Name: "unknown type", Change: func(h *autoscalingv2.HorizontalPodAutoscaler) {
			h.Spec.Metrics = []autoscalingv2.MetricSpec{{Type: "Custom"}}
		}, Want: []string{
			`spec.metrics[0].type: Unsupported value: "Custom": supported values: "ContainerResource", "External", "Object", "Pods", "Resource"`,
			`spec.metrics[0].type: Unsupported value: "Custom": supported values: "ContainerResource", "External", "Object", "Pods", "Resource"`,
		}},
		{Name: "behavior", Change: func(h *autoscalingv2.HorizontalPodAutoscaler) {
			h.Spec.Behavior = &autoscalingv2.HorizontalPodAutoscalerBehavior{
				ScaleUp: &autoscalingv2.HPAScalingRules{StabilizationWindowSeconds: ptr.To[int32](3601), SelectPolicy: ptr.To[autoscalingv2.ScalingPolicySelect]("Any"),
					Policies: []autoscalingv2.HPAScalingPolicy{{Type: "Nodes", Value: 0, PeriodSeconds: 1801}}},
				ScaleDown: &autoscalingv2.HPAScalingRules{Policies: []autoscalingv2.HPAScalingPolicy{}, Tolerance: ptr.To(resource.MustParse("-0.1"))},
			}
		}, Want: []string{
			"spec.behavior.scaleUp.stabilizationWindowSeconds: Invalid value: 3601: must be less than or equal to 3600",
			`spec.behavior.scaleUp.selectPolicy: Unsupported value: "Any": supported values: "Disabled", "Max", "Min"`,
			`spec.behavior.scaleUp.policies[0].type: Unsupported value: "Nodes": supported values: "Percent", "Pods"`,
			"spec.behavior.scaleUp.policies[0].value: Invalid value: 0: must be greater than zero",
			"spec.behavior.scaleUp.policies[0].periodSeconds: Invalid value: 1801: must be less than or equal to 1800",
			"spec.behavior.scaleDown.policies: Required value: must specify at least one Policy",
			`spec.behavior.scaleDown.tolerance: Invalid value: "-100m": must be greater than or equal to 0`,
		}},
	})
}

func TestValidateUpdate(t *testing.T) {
	registrytest.RunValidateUpdate(t, strategy{}, valid, []registrytest.Case[*autoscalingv2.HorizontalPodAutoscaler]{
		{Name: "a stored target without group may stay", Old: func(h *autoscalingv2.HorizontalPodAutoscaler) { h.Spec.ScaleTargetRef.APIVersion = "v1" },
			Change: func(h *autoscalingv2.HorizontalPodAutoscaler) {
				h.Spec.ScaleTargetRef.APIVersion = "v1"
				h.Spec.MaxReplicas = 7
			}},
		{Name: "but not be changed to", Change: func(h *autoscalingv2.HorizontalPodAutoscaler) { h.Spec.ScaleTargetRef.APIVersion = "v1" }, Want: []string{
			"spec.scaleTargetRef.apiVersion: Invalid value: \"v1\": apiVersion must specify API group"}},
	})
}

func TestResource(t *testing.T) {
	r := Resource()
	if r.Resource != "horizontalpodautoscalers" || !reflect.DeepEqual(r.ShortNames, []string{"hpa"}) ||
		!reflect.DeepEqual(r.Categories, []string{"all"}) || !r.Status || !r.Generation || !r.Namespaced {
		t.Errorf("unexpected discovery data: %+v", r)
	}
}

func TestColumns(t *testing.T) {
	h := valid()
	h.Spec.Metrics = append(h.Spec.Metrics, autoscalingv2.MetricSpec{Type: autoscalingv2.ResourceMetricSourceType,
		Resource: &autoscalingv2.ResourceMetricSource{Name: corev1.ResourceMemory,
			Target: autoscalingv2.MetricTarget{Type: autoscalingv2.AverageValueMetricType, AverageValue: ptr.To(resource.MustParse("100Mi"))}}})
	h.Status.CurrentReplicas = 2
	h.Status.CurrentMetrics = []autoscalingv2.MetricStatus{{Type: autoscalingv2.ResourceMetricSourceType, Resource: &autoscalingv2.ResourceMetricStatus{
		Name: corev1.ResourceCPU, Current: autoscalingv2.MetricValueStatus{AverageUtilization: ptr.To[int32](12), AverageValue: ptr.To(resource.MustParse("12m"))}}}}
	registrytest.ExpectRow(t, Resource().Columns, h, []string{"Name", "Reference", "Targets", "MinPods", "MaxPods", "Replicas", "Age"},
		[]interface{}{"web", "Deployment/web", "cpu: 12%/80%, memory: <unknown>/100Mi", "1", int64(5), int64(2), "<unknown>"})
	h.Spec.Metrics = append(h.Spec.Metrics, cpu(10))
	if got := FormatMetrics(h.Spec.Metrics, nil); got != "cpu: <unknown>/80%, memory: <unknown>/100Mi + 1 more..." {
		t.Errorf("targets = %q", got)
	}
}
