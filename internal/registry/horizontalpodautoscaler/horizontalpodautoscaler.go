// Package horizontalpodautoscaler is the autoscaling/v2
// HorizontalPodAutoscaler strategy: upstream's defaults (minReplicas 1, a
// CPU utilization target of 80% when no metric is given, the scaling
// behavior's default rules), its spec validation with upstream's messages,
// the status subresource and the REFERENCE, TARGETS, MINPODS, MAXPODS and
// REPLICAS columns.
package horizontalpodautoscaler

import (
	"fmt"
	"slices"
	"strings"

	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/validation/path"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/utils/ptr"

	"github.com/svcnet/svcnet/internal/registry"
	"github.com/svcnet/svcnet/internal/registry/validate"
)

// DefaultCPUUtilization is the target of the CPU metric an autoscaler
// without metrics gets, as upstream's.
const DefaultCPUUtilization = 80

// Upstream's bounds of the scaling rules.
const (
	maxPeriodSeconds              = 1800
	maxStabilizationWindowSeconds = 3600
)

// Resource describes horizontalpodautoscalers.
func Resource() *registry.Resource {
	spec := autoscalingv2.HorizontalPodAutoscalerSpec{}.SwaggerDoc()
	return &registry.Resource{
		Kind:       autoscalingv2.SchemeGroupVersion.WithKind("HorizontalPodAutoscaler"),
		Resource:   "horizontalpodautoscalers",
		Singular:   "horizontalpodautoscaler",
		ShortNames: []string{"hpa"},
		Categories: []string{"all"},
		Namespaced: true,
		Status:     true,
		// As upstream with HPAGeneration (beta, on by default in 1.37).
		Generation: true,
		Strategy:   strategy{},
		Columns: []registry.Column{
			registry.NameColumn(),
			registry.TextColumn("Reference", spec["scaleTargetRef"], func(h *autoscalingv2.HorizontalPodAutoscaler) string {
				return h.Spec.ScaleTargetRef.Kind + "/" + h.Spec.ScaleTargetRef.Name
			}),
			registry.TextColumn("Targets", spec["metrics"], func(h *autoscalingv2.HorizontalPodAutoscaler) string {
				return FormatMetrics(h.Spec.Metrics, h.Status.CurrentMetrics)
			}),
			registry.TextColumn("MinPods", spec["minReplicas"], func(h *autoscalingv2.HorizontalPodAutoscaler) string {
				if h.Spec.MinReplicas == nil {
					return "<unset>"
				}
				return fmt.Sprint(*h.Spec.MinReplicas)
			}),
			{TableColumnDefinition: metav1.TableColumnDefinition{Name: "MaxPods", Type: "string", Description: spec["maxReplicas"]},
				Cell: func(o runtime.Object) interface{} {
					return int64(o.(*autoscalingv2.HorizontalPodAutoscaler).Spec.MaxReplicas)
				}},
			{TableColumnDefinition: metav1.TableColumnDefinition{Name: "Replicas", Type: "string",
				Description: autoscalingv2.HorizontalPodAutoscalerStatus{}.SwaggerDoc()["currentReplicas"]},
				Cell: func(o runtime.Object) interface{} {
					return int64(o.(*autoscalingv2.HorizontalPodAutoscaler).Status.CurrentReplicas)
				}},
			registry.AgeColumn(),
		},
	}
}

type strategy struct{ registry.Base }

// Default follows upstream's SetDefaults_HorizontalPodAutoscaler.
func (strategy) Default(obj runtime.Object) {
	spec := &obj.(*autoscalingv2.HorizontalPodAutoscaler).Spec
	if spec.MinReplicas == nil {
		spec.MinReplicas = ptr.To[int32](1)
	}
	if len(spec.Metrics) == 0 {
		spec.Metrics = []autoscalingv2.MetricSpec{{
			Type: autoscalingv2.ResourceMetricSourceType,
			Resource: &autoscalingv2.ResourceMetricSource{Name: corev1.ResourceCPU, Target: autoscalingv2.MetricTarget{
				Type: autoscalingv2.UtilizationMetricType, AverageUtilization: ptr.To[int32](DefaultCPUUtilization)}},
		}}
	}
	if b := spec.Behavior; b != nil {
		b.ScaleUp = withDefaults(b.ScaleUp, ScaleUpDefaults())
		b.ScaleDown = withDefaults(b.ScaleDown, ScaleDownDefaults())
	}
}

// ScaleUpDefaults are upstream's scale-up rules: no stabilization, and at
// most 4 pods or doubling every 15 seconds, whichever is more.
func ScaleUpDefaults() *autoscalingv2.HPAScalingRules {
	return &autoscalingv2.HPAScalingRules{
		StabilizationWindowSeconds: ptr.To[int32](0),
		SelectPolicy:               ptr.To(autoscalingv2.MaxChangePolicySelect),
		Policies: []autoscalingv2.HPAScalingPolicy{
			{Type: autoscalingv2.PodsScalingPolicy, Value: 4, PeriodSeconds: 15},
			{Type: autoscalingv2.PercentScalingPolicy, Value: 100, PeriodSeconds: 15},
		},
	}
}

// ScaleDownDefaults are upstream's scale-down rules: down to none within
// 15 seconds. The stabilization window stays unset: the controller's
// --horizontal-pod-autoscaler-downscale-stabilization applies.
func ScaleDownDefaults() *autoscalingv2.HPAScalingRules {
	return &autoscalingv2.HPAScalingRules{
		SelectPolicy: ptr.To(autoscalingv2.MaxChangePolicySelect),
		Policies:     []autoscalingv2.HPAScalingPolicy{{Type: autoscalingv2.PercentScalingPolicy, Value: 100, PeriodSeconds: 15}},
	}
}

// withDefaults fills the unset fields of rules from defaults.
func withDefaults(rules, defaults *autoscalingv2.HPAScalingRules) *autoscalingv2.HPAScalingRules {
	if rules == nil {
		return defaults
	}
	if rules.SelectPolicy != nil {
		defaults.SelectPolicy = rules.SelectPolicy
	}
	if rules.StabilizationWindowSeconds != nil {
		defaults.StabilizationWindowSeconds = rules.StabilizationWindowSeconds
	}
	if rules.Policies != nil {
		defaults.Policies = rules.Policies
	}
	if rules.Tolerance != nil {
		defaults.Tolerance = rules.Tolerance
	}
	return defaults
}

func (strategy) Validate(obj runtime.Object) field.ErrorList {
	return validateSpec(&obj.(*autoscalingv2.HorizontalPodAutoscaler).Spec, nil)
}

func (strategy) ValidateUpdate(obj, old runtime.Object) field.ErrorList {
	return validateSpec(&obj.(*autoscalingv2.HorizontalPodAutoscaler).Spec, &old.(*autoscalingv2.HorizontalPodAutoscaler).Spec)
}

// refOptions are upstream's CrossVersionObjectReferenceValidationOptions.
type refOptions struct{ allowEmptyGroup, allowInvalidVersion bool }

// validateSpec follows upstream's validateHorizontalPodAutoscalerSpec,
// with HPAScaleToZero on (beta, on by default in 1.37): minReplicas may be
// 0 when an Object or External metric is given.
func validateSpec(spec, old *autoscalingv2.HorizontalPodAutoscalerSpec) field.ErrorList {
	var errs field.ErrorList
	p := field.NewPath("spec")
	if spec.MinReplicas != nil && *spec.MinReplicas < 0 {
		errs = append(errs, field.Invalid(p.Child("minReplicas"), *spec.MinReplicas, "must be greater than or equal to 0"))
	}
	switch {
	case spec.MaxReplicas == 0:
		errs = append(errs, field.Required(p.Child("maxReplicas"), "must be set and greater than 0"))
	case spec.MaxReplicas < 0:
		errs = append(errs, field.Invalid(p.Child("maxReplicas"), spec.MaxReplicas, "must be greater than or equal to 1"))
	}
	if spec.MinReplicas != nil && spec.MaxReplicas < *spec.MinReplicas {
		errs = append(errs, field.Invalid(p.Child("maxReplicas"), spec.MaxReplicas, "must be greater than or equal to `minReplicas`"))
	}
	target := refOptions{}
	switch {
	case old != nil && old.ScaleTargetRef.APIVersion == spec.ScaleTargetRef.APIVersion && old.ScaleTargetRef.Kind == spec.ScaleTargetRef.Kind:
		target.allowInvalidVersion = true
	case spec.ScaleTargetRef.Kind == "ReplicationController":
		target.allowEmptyGroup = true
	}
	errs = append(errs, validateReference(spec.ScaleTargetRef, p.Child("scaleTargetRef"), target)...)
	objects := refOptions{allowEmptyGroup: true}
	if old != nil {
		for _, m := range old.Metrics {
			if m.Type == autoscalingv2.ObjectMetricSourceType && m.Object != nil && apiVersionError(m.Object.DescribedObject, objects) != nil {
				objects.allowInvalidVersion = true
				break
			}
		}
	}
	errs = append(errs, validateMetrics(spec.Metrics, p.Child("metrics"), spec.MinReplicas, objects)...)
	if b := spec.Behavior; b != nil {
		errs = append(errs, validateRules(b.ScaleUp, p.Child("behavior", "scaleUp"))...)
		errs = append(errs, validateRules(b.ScaleDown, p.Child("behavior", "scaleDown"))...)
	}
	return errs
}

func validateReference(ref autoscalingv2.CrossVersionObjectReference, p *field.Path, o refOptions) field.ErrorList {
	var errs field.ErrorList
	if ref.Kind == "" {
		errs = append(errs, field.Required(p.Child("kind"), ""))
	} else {
		errs = append(errs, validate.Invalid(p.Child("kind"), ref.Kind, path.IsValidPathSegmentName(ref.Kind))...)
	}
	if ref.Name == "" {
		errs = append(errs, field.Required(p.Child("name"), ""))
	} else {
		errs = append(errs, validate.Invalid(p.Child("name"), ref.Name, path.IsValidPathSegmentName(ref.Name))...)
	}
	if err := apiVersionError(ref, o); err != nil {
		errs = append(errs, field.Invalid(p.Child("apiVersion"), ref.APIVersion, err.Error()))
	}
	return errs
}

func apiVersionError(ref autoscalingv2.CrossVersionObjectReference, o refOptions) error {
	if o.allowInvalidVersion {
		return nil
	}
	gv, err := schema.ParseGroupVersion(ref.APIVersion)
	if err != nil {
		return err
	}
	if !o.allowEmptyGroup && gv.Group == "" {
		return fmt.Errorf("apiVersion must specify API group")
	}
	return nil
}

// sourceTypes are the metric source types in upstream's message order.
var sourceTypes = []autoscalingv2.MetricSourceType{autoscalingv2.ContainerResourceMetricSourceType,
	autoscalingv2.ExternalMetricSourceType, autoscalingv2.ObjectMetricSourceType,
	autoscalingv2.PodsMetricSourceType, autoscalingv2.ResourceMetricSourceType}

func validateMetrics(metrics []autoscalingv2.MetricSpec, p *field.Path, minReplicas *int32, o refOptions) field.ErrorList {
	var errs field.ErrorList
	objectOrExternal := false
	for i, m := range metrics {
		errs = append(errs, validateMetric(m, p.Index(i), o)...)
		objectOrExternal = objectOrExternal || m.Type == autoscalingv2.ObjectMetricSourceType || m.Type == autoscalingv2.ExternalMetricSourceType
	}
	if minReplicas != nil && *minReplicas == 0 && !objectOrExternal {
		errs = append(errs, field.Forbidden(p, "must specify at least one Object or External metric to support scaling to zero replicas"))
	}
	return errs
}

// validateMetric follows upstream's validateMetricSpec: the type names
// one source, which must be the only one given.
func validateMetric(m autoscalingv2.MetricSpec, p *field.Path, o refOptions) field.ErrorList {
	var errs field.ErrorList
	if m.Type == "" {
		errs = append(errs, field.Required(p.Child("type"), "must specify a metric source type"))
	}
	if !slices.Contains(sourceTypes, m.Type) {
		errs = append(errs, field.NotSupported(p.Child("type"), m.Type, sourceTypes))
	}
	// Each given source, in upstream's order; only the first is checked.
	type given struct {
		name  string
		check func() field.ErrorList
	}
	var present []given
	if m.Object != nil {
		present = append(present, given{"object", func() field.ErrorList { return validateObject(m.Object, p.Child("object"), o) }})
	}
	if m.External != nil {
		present = append(present, given{"external", func() field.ErrorList { return validateExternal(m.External, p.Child("external")) }})
	}
	if m.Pods != nil {
		present = append(present, given{"pods", func() field.ErrorList { return validatePods(m.Pods, p.Child("pods")) }})
	}
	if m.Resource != nil {
		present = append(present, given{"resource", func() field.ErrorList {
			return validateResource(m.Resource.Name, m.Resource.Target, p.Child("resource"))
		}})
	}
	if m.ContainerResource != nil {
		present = append(present, given{"containerResource", func() field.ErrorList {
			return validateContainerResource(m.ContainerResource, p.Child("containerResource"))
		}})
	}
	if len(present) > 0 {
		errs = append(errs, present[0].check()...)
	}
	expected, isSet := "", false
	switch m.Type {
	case autoscalingv2.ObjectMetricSourceType:
		expected, isSet = "object", m.Object != nil
	case autoscalingv2.PodsMetricSourceType:
		expected, isSet = "pods", m.Pods != nil
	case autoscalingv2.ResourceMetricSourceType:
		expected, isSet = "resource", m.Resource != nil
	case autoscalingv2.ExternalMetricSourceType:
		expected, isSet = "external", m.External != nil
	case autoscalingv2.ContainerResourceMetricSourceType:
		expected, isSet = "containerResource", m.ContainerResource != nil
	default:
		errs = append(errs, field.NotSupported(p.Child("type"), m.Type, sourceTypes))
	}
	if expected != "" && !isSet {
		errs = append(errs, field.Required(p.Child(expected), "must populate information for the given metric source"))
	}
	if len(present) != 1 {
		for _, g := range present {
			if g.name != expected {
				errs = append(errs, field.Forbidden(p.Child(g.name), "must populate the given metric source only"))
			}
		}
	}
	return errs
}

func validateObject(src *autoscalingv2.ObjectMetricSource, p *field.Path, o refOptions) field.ErrorList {
	errs := validateReference(autoscalingv2.CrossVersionObjectReference(src.DescribedObject), p.Child("describedObject"), o)
	errs = append(errs, validateIdentifier(src.Metric, p.Child("metric"))...)
	errs = append(errs, validateTarget(src.Target, p.Child("target"))...)
	if src.Target.Value == nil && src.Target.AverageValue == nil {
		errs = append(errs, field.Required(p.Child("target", "averageValue"), "must set either a target value or averageValue"))
	}
	return errs
}

func validateExternal(src *autoscalingv2.ExternalMetricSource, p *field.Path) field.ErrorList {
	errs := validateIdentifier(src.Metric, p.Child("metric"))
	errs = append(errs, validateTarget(src.Target, p.Child("target"))...)
	if src.Target.Value == nil && src.Target.AverageValue == nil {
		errs = append(errs, field.Required(p.Child("target", "averageValue"), "must set either a target value for metric or a per-pod target"))
	}
	if src.Target.Value != nil && src.Target.AverageValue != nil {
		errs = append(errs, field.Forbidden(p.Child("target", "value"), "may not set both a target value for metric and a per-pod target"))
	}
	return errs
}

func validatePods(src *autoscalingv2.PodsMetricSource, p *field.Path) field.ErrorList {
	errs := validateIdentifier(src.Metric, p.Child("metric"))
	errs = append(errs, validateTarget(src.Target, p.Child("target"))...)
	if src.Target.AverageValue == nil {
		errs = append(errs, field.Required(p.Child("target", "averageValue"), "must specify a positive target averageValue"))
	}
	return errs
}

func validateContainerResource(src *autoscalingv2.ContainerResourceMetricSource, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	if src.Name == "" {
		errs = append(errs, field.Required(p.Child("name"), "must specify a resource name"))
	} else {
		errs = append(errs, containerResourceName(src.Name, p.Child("name"))...)
	}
	if src.Container == "" {
		errs = append(errs, field.Required(p.Child("container"), "must specify a container"))
	} else {
		errs = append(errs, validate.DNSLabel(src.Container, p.Child("container"))...)
	}
	return append(errs, validateResourceTarget(src.Target, p.Child("target"))...)
}

func validateResource(name corev1.ResourceName, target autoscalingv2.MetricTarget, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	if name == "" {
		errs = append(errs, field.Required(p.Child("name"), "must specify a resource name"))
	}
	return append(errs, validateResourceTarget(target, p.Child("target"))...)
}

func validateResourceTarget(t autoscalingv2.MetricTarget, p *field.Path) field.ErrorList {
	errs := validateTarget(t, p)
	if t.AverageUtilization == nil && t.AverageValue == nil {
		errs = append(errs, field.Required(p.Child("averageUtilization"), "must set either a target raw value or a target utilization"))
	}
	if t.AverageUtilization != nil && t.AverageValue != nil {
		errs = append(errs, field.Forbidden(p.Child("averageValue"), "may not set both a target raw value and a target utilization"))
	}
	return errs
}

// containerResourceName follows upstream's ValidateContainerResourceName:
// a qualified name that, without a domain, is a container resource.
func containerResourceName(name corev1.ResourceName, p *field.Path) field.ErrorList {
	errs := validate.QualifiedName(string(name), p)
	if len(errs) == 0 && !strings.Contains(string(name), "/") {
		switch {
		case name == corev1.ResourceCPU, name == corev1.ResourceMemory, name == corev1.ResourceEphemeralStorage,
			strings.HasPrefix(string(name), corev1.ResourceHugePagesPrefix):
		default:
			errs = append(errs, field.Invalid(p, name, "must be a standard resource for containers"))
		}
	}
	return errs
}

func validateTarget(t autoscalingv2.MetricTarget, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	if t.Type == "" {
		errs = append(errs, field.Required(p.Child("type"), "must specify a metric target type"))
	}
	if t.Type != autoscalingv2.UtilizationMetricType && t.Type != autoscalingv2.ValueMetricType && t.Type != autoscalingv2.AverageValueMetricType {
		errs = append(errs, field.Invalid(p.Child("type"), t.Type, "must be either Utilization, Value, or AverageValue"))
	}
	if t.Value != nil && t.Value.Sign() != 1 {
		errs = append(errs, field.Invalid(p.Child("value"), t.Value, "must be positive"))
	}
	if t.AverageValue != nil && t.AverageValue.Sign() != 1 {
		errs = append(errs, field.Invalid(p.Child("averageValue"), t.AverageValue, "must be positive"))
	}
	if t.AverageUtilization != nil && *t.AverageUtilization < 1 {
		errs = append(errs, field.Invalid(p.Child("averageUtilization"), t.AverageUtilization, "must be greater than 0"))
	}
	return errs
}

func validateIdentifier(id autoscalingv2.MetricIdentifier, p *field.Path) field.ErrorList {
	if id.Name == "" {
		return field.ErrorList{field.Required(p.Child("name"), "must specify a metric name")}
	}
	return validate.Invalid(p.Child("name"), id.Name, path.IsValidPathSegmentName(id.Name))
}

var (
	selectPolicies = []autoscalingv2.ScalingPolicySelect{autoscalingv2.DisabledPolicySelect,
		autoscalingv2.MaxChangePolicySelect, autoscalingv2.MinChangePolicySelect}
	policyTypes = []autoscalingv2.HPAScalingPolicyType{autoscalingv2.PercentScalingPolicy, autoscalingv2.PodsScalingPolicy}
)

func validateRules(rules *autoscalingv2.HPAScalingRules, p *field.Path) field.ErrorList {
	if rules == nil {
		return nil
	}
	var errs field.ErrorList
	if w := rules.StabilizationWindowSeconds; w != nil && *w < 0 {
		errs = append(errs, field.Invalid(p.Child("stabilizationWindowSeconds"), *w, "must be greater than or equal to zero"))
	} else if w != nil && *w > maxStabilizationWindowSeconds {
		errs = append(errs, field.Invalid(p.Child("stabilizationWindowSeconds"), *w,
			fmt.Sprintf("must be less than or equal to %v", maxStabilizationWindowSeconds)))
	}
	if s := rules.SelectPolicy; s != nil && !slices.Contains(selectPolicies, *s) {
		errs = append(errs, field.NotSupported(p.Child("selectPolicy"), *s, selectPolicies))
	}
	pp := p.Child("policies")
	if len(rules.Policies) == 0 {
		errs = append(errs, field.Required(pp, "must specify at least one Policy"))
	}
	for i, policy := range rules.Policies {
		ip := pp.Index(i)
		if !slices.Contains(policyTypes, policy.Type) {
			errs = append(errs, field.NotSupported(ip.Child("type"), policy.Type, policyTypes))
		}
		if policy.Value <= 0 {
			errs = append(errs, field.Invalid(ip.Child("value"), policy.Value, "must be greater than zero"))
		}
		if policy.PeriodSeconds <= 0 {
			errs = append(errs, field.Invalid(ip.Child("periodSeconds"), policy.PeriodSeconds, "must be greater than zero"))
		}
		if policy.PeriodSeconds > maxPeriodSeconds {
			errs = append(errs, field.Invalid(ip.Child("periodSeconds"), policy.PeriodSeconds,
				fmt.Sprintf("must be less than or equal to %v", maxPeriodSeconds)))
		}
	}
	if rules.Tolerance != nil {
		errs = append(errs, validate.NonNegativeQuantity(*rules.Tolerance, p.Child("tolerance"))...)
	}
	return errs
}
