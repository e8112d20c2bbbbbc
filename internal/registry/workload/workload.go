// Package workload holds what the workload kinds (the apps/v1 deployments,
// replicasets, statefulsets, daemonsets, and core/v1 replicationcontrollers)
// share: their common discovery flags, the hooks into pod-template
// defaulting and validation, the scale subresource, the table layout with
// its CONTAINERS/IMAGES/SELECTOR columns, and the selector-and-template
// checks of upstream's pkg/apis/apps/validation (and their core twin,
// ValidatePodTemplateSpecForRC).
package workload

import (
	"fmt"
	"strconv"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/validation"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	metavalidation "k8s.io/apimachinery/pkg/apis/meta/v1/validation"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/intstr"
	utilvalidation "k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/svcnet/svcnet/internal/registry"
)

// PodTemplateDefaults fills the pod defaults (restartPolicy, dnsPolicy,
// container imagePullPolicy, ...) into a workload's pod template, as
// upstream's recursive defaulting does. It is nil until the pod package
// wires it; a nil hook leaves the template alone.
var PodTemplateDefaults func(*corev1.PodTemplateSpec)

// ValidatePodTemplate validates a workload's pod template the way upstream's
// core ValidatePodTemplateSpec does (template labels and annotations, the
// pod spec and its containers), reporting errors under fldPath (the
// ".template" path). It is nil until the pod package wires it; a nil hook
// skips the check, so only the workload-level template rules apply.
var ValidatePodTemplate func(template *corev1.PodTemplateSpec, fldPath *field.Path) field.ErrorList

// DefaultTemplate applies PodTemplateDefaults when it is wired.
func DefaultTemplate(template *corev1.PodTemplateSpec) {
	if PodTemplateDefaults != nil {
		PodTemplateDefaults(template)
	}
}

// DefaultInt32 sets an unset *int32 field to v, the shape of upstream's
// "replicas: 1" and similar defaults.
func DefaultInt32(p **int32, v int32) {
	if *p == nil {
		*p = &v
	}
}

// parts points at the fields a Deployment, ReplicaSet, StatefulSet,
// DaemonSet or ReplicationController share; a DaemonSet has no replicas
// (nil). A ReplicationController's map selector is given as matchLabels.
type parts struct {
	replicas       **int32
	statusReplicas int32
	selector       *metav1.LabelSelector
	template       *corev1.PodTemplateSpec
}

func partsOf(obj runtime.Object) parts {
	switch o := obj.(type) {
	case *appsv1.Deployment:
		return parts{&o.Spec.Replicas, o.Status.Replicas, o.Spec.Selector, &o.Spec.Template}
	case *appsv1.ReplicaSet:
		return parts{&o.Spec.Replicas, o.Status.Replicas, o.Spec.Selector, &o.Spec.Template}
	case *appsv1.StatefulSet:
		return parts{&o.Spec.Replicas, o.Status.Replicas, o.Spec.Selector, &o.Spec.Template}
	case *appsv1.DaemonSet:
		return parts{nil, 0, o.Spec.Selector, &o.Spec.Template}
	case *corev1.ReplicationController:
		template := o.Spec.Template
		if template == nil {
			template = &corev1.PodTemplateSpec{}
		}
		return parts{&o.Spec.Replicas, o.Status.Replicas, &metav1.LabelSelector{MatchLabels: o.Spec.Selector}, template}
	}
	panic(fmt.Sprintf("workload: %T is not a workload kind", obj))
}

// Resource completes r, the names, strategy and table of one workload kind,
// with what every workload kind is: namespaced, listed by `kubectl get
// all`, with a status subresource, generation tracking and the scale
// subresource.
func Resource(r *registry.Resource) *registry.Resource {
	r = Unscaled(r)
	r.Scale = ScaleAccess()
	return r
}

// Unscaled is Resource for a workload kind without replicas (daemonsets):
// no scale subresource.
func Unscaled(r *registry.Resource) *registry.Resource {
	r.Categories = []string{"all"}
	r.Namespaced = true
	r.Status = true
	r.Generation = true
	return r
}

// Replicas is spec.replicas, 0 when unset or for a kind without replicas.
func Replicas(obj runtime.Object) int32 {
	if p := partsOf(obj).replicas; p != nil && *p != nil {
		return **p
	}
	return 0
}

// ScaleAccess serves the scale subresource of a workload kind: spec.replicas,
// status.replicas and the selector in its string form.
func ScaleAccess() *registry.ScaleAccess {
	return &registry.ScaleAccess{
		Get: func(obj runtime.Object) (int32, int32, string) {
			p := partsOf(obj)
			selector := ""
			if s, err := metav1.LabelSelectorAsSelector(p.selector); err == nil {
				selector = s.String()
			}
			return Replicas(obj), p.statusReplicas, selector
		},
		Set: func(obj runtime.Object, replicas int32) {
			*partsOf(obj).replicas = &replicas
		},
	}
}

// Columns is a workload kind's table: NAME, the kind's own status columns,
// AGE, the wide CONTAINERS and IMAGES columns, then any further wide
// columns (SELECTOR).
func Columns(status []registry.Column, wide ...registry.Column) []registry.Column {
	columns := append([]registry.Column{registry.NameColumn()}, status...)
	columns = append(columns, registry.AgeColumn())
	columns = append(columns, containerColumns()...)
	return append(columns, wide...)
}

// containerColumns are the wide CONTAINERS and IMAGES columns of a workload
// kind.
func containerColumns() []registry.Column {
	return ContainerColumns(func(o runtime.Object) *corev1.PodTemplateSpec { return partsOf(o).template })
}

// ContainerColumns are the wide CONTAINERS and IMAGES columns of any kind
// with a pod template (template finds it): the template's container names
// and images, each joined with ",".
func ContainerColumns(template func(runtime.Object) *corev1.PodTemplateSpec) []registry.Column {
	join := func(o runtime.Object, field func(corev1.Container) string) string {
		containers := template(o).Spec.Containers
		out := make([]string, len(containers))
		for i, c := range containers {
			out[i] = field(c)
		}
		return strings.Join(out, ",")
	}
	return []registry.Column{
		{TableColumnDefinition: metav1.TableColumnDefinition{Name: "Containers", Type: "string", Priority: 1,
			Description: "Names of each container in the template."},
			Cell: func(o runtime.Object) interface{} { return join(o, func(c corev1.Container) string { return c.Name }) }},
		{TableColumnDefinition: metav1.TableColumnDefinition{Name: "Images", Type: "string", Priority: 1,
			Description: "Images referenced by each container in the template."},
			Cell: func(o runtime.Object) interface{} { return join(o, func(c corev1.Container) string { return c.Image }) }},
	}
}

// SelectorColumn is the wide SELECTOR column, rendered by format.
func SelectorColumn(description string, format func(*metav1.LabelSelector) string) registry.Column {
	return registry.Column{
		TableColumnDefinition: metav1.TableColumnDefinition{Name: "Selector", Type: "string", Priority: 1,
			Description: description},
		Cell: func(o runtime.Object) interface{} { return format(partsOf(o).selector) },
	}
}

// SelectorString renders a selector as the deployment printer does:
// "<invalid>" when it does not convert, and an empty string for none.
func SelectorString(s *metav1.LabelSelector) string {
	selector, err := metav1.LabelSelectorAsSelector(s)
	if err != nil {
		return "<invalid>"
	}
	return selector.String()
}

// Rules holds the kind-specific wording of the shared selector and template
// checks; upstream words them differently per kind.
type Rules struct {
	// SelectorKind ends "empty selector is invalid for <SelectorKind>".
	SelectorKind string
	// BadSelector is the detail when the selector does not convert.
	BadSelector string
	// DeadlineKind is the kind named in "activeDeadlineSeconds in <DeadlineKind> is not Supported".
	DeadlineKind string
}

// DeploymentRules are the wording deployments and replicasets share
// upstream (ValidatePodTemplateSpecForReplicaSet serves both).
var DeploymentRules = Rules{SelectorKind: "deployment", BadSelector: "invalid label selector", DeadlineKind: "ReplicaSet"}

// ValidateSelectorAndTemplate checks spec.selector and spec.template as
// upstream does for all three kinds: the selector is required, valid and
// non-empty, the template labels match it, the template passes
// ValidatePodTemplate, restartPolicy is Always and activeDeadlineSeconds is
// unset.
func ValidateSelectorAndTemplate(sel *metav1.LabelSelector, template *corev1.PodTemplateSpec, r Rules, specPath *field.Path) field.ErrorList {
	var errs field.ErrorList
	selPath := specPath.Child("selector")
	if sel == nil {
		errs = append(errs, field.Required(selPath, ""))
	} else {
		errs = append(errs, metavalidation.ValidateLabelSelector(sel, metavalidation.LabelSelectorValidationOptions{}, selPath)...)
		if len(sel.MatchLabels)+len(sel.MatchExpressions) == 0 {
			errs = append(errs, field.Invalid(selPath, sel, "empty selector is invalid for "+r.SelectorKind))
		}
	}
	selector, err := metav1.LabelSelectorAsSelector(sel)
	if err != nil {
		return append(errs, field.Invalid(selPath, sel, r.BadSelector))
	}
	return append(errs, ValidateTemplate(selector, template, r.DeadlineKind, specPath.Child("template"))...)
}

// ValidateTemplate checks a controller's pod template against its
// selector (already converted: a ReplicationController's map selector is
// labels.SelectorFromSet of it), as upstream's
// ValidatePodTemplateSpecForReplicaSet and ValidatePodTemplateSpecForRC
// do: the template is required, its labels match a non-empty selector, it
// passes ValidatePodTemplate, restartPolicy is Always and
// activeDeadlineSeconds is unset ("activeDeadlineSeconds in <deadlineKind>
// is not Supported"). tmplPath is the ".template" path.
func ValidateTemplate(selector labels.Selector, template *corev1.PodTemplateSpec, deadlineKind string, tmplPath *field.Path) field.ErrorList {
	if template == nil {
		return field.ErrorList{field.Required(tmplPath, "")}
	}
	var errs field.ErrorList
	if !selector.Empty() && !selector.Matches(labels.Set(template.Labels)) {
		errs = append(errs, field.Invalid(tmplPath.Child("metadata", "labels"), template.Labels,
			"`selector` does not match template `labels`"))
	}
	if ValidatePodTemplate != nil {
		errs = append(errs, ValidatePodTemplate(template, tmplPath)...)
	}
	if template.Spec.RestartPolicy != corev1.RestartPolicyAlways {
		errs = append(errs, field.NotSupported(tmplPath.Child("spec", "restartPolicy"), template.Spec.RestartPolicy,
			[]string{string(corev1.RestartPolicyAlways)}))
	}
	if template.Spec.ActiveDeadlineSeconds != nil {
		errs = append(errs, field.Forbidden(tmplPath.Child("spec", "activeDeadlineSeconds"),
			"activeDeadlineSeconds in "+deadlineKind+" is not Supported"))
	}
	return errs
}

// ValidateSelectorUnchanged is the apps/v1 rule that an update never
// changes spec.selector.
func ValidateSelectorUnchanged(obj, old runtime.Object) field.ErrorList {
	return validation.ValidateImmutableField(partsOf(obj).selector, partsOf(old).selector, field.NewPath("spec", "selector"))
}

// ValidateReplicas checks that a defaulted spec.replicas is not negative.
func ValidateReplicas(replicas *int32, fldPath *field.Path) field.ErrorList {
	if replicas == nil {
		return nil
	}
	return validation.ValidateNonnegativeField(int64(*replicas), fldPath)
}

// ValidateIntOrPercent follows upstream's ValidatePositiveIntOrPercent: a
// valid "N%" string or a non-negative integer.
func ValidateIntOrPercent(v intstr.IntOrString, fldPath *field.Path) field.ErrorList {
	switch v.Type {
	case intstr.String:
		var errs field.ErrorList
		for _, msg := range utilvalidation.IsValidPercent(v.StrVal) {
			errs = append(errs, field.Invalid(fldPath, v, msg))
		}
		return errs
	case intstr.Int:
		return validation.ValidateNonnegativeField(int64(v.IntValue()), fldPath)
	}
	// Upstream's text, including its unformatted "%%".
	return field.ErrorList{field.Invalid(fldPath, v, "must be an integer or percentage (e.g '5%%')")}
}

// NotMoreThan100Percent rejects a percentage above 100%.
func NotMoreThan100Percent(v intstr.IntOrString, fldPath *field.Path) field.ErrorList {
	if p, ok := percent(v); ok && p > 100 {
		return field.ErrorList{field.Invalid(fldPath, v, "must not be greater than 100%")}
	}
	return nil
}

// IntOrPercentValue is the number an int-or-percent stands for before any
// scaling: N for "N%", the integer otherwise (0 for an invalid string).
func IntOrPercentValue(v intstr.IntOrString) int {
	if p, ok := percent(v); ok {
		return p
	}
	return v.IntValue()
}

// percent parses a valid "N%" value.
func percent(v intstr.IntOrString) (int, bool) {
	if v.Type != intstr.String || len(utilvalidation.IsValidPercent(v.StrVal)) != 0 {
		return 0, false
	}
	n, err := strconv.Atoi(strings.TrimSuffix(v.StrVal, "%"))
	return n, err == nil
}
