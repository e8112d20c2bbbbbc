// Package replicationcontroller is the core/v1 ReplicationController
// strategy: upstream's defaults (the selector and the labels taken from the
// pod template's labels, one replica), its spec and status validation (a
// map selector that may change), the scale subresource, the orphaning
// default of a delete through /api/v1, the status.replicas field selector
// and the DESIRED/CURRENT/READY columns.
package replicationcontroller

import (
	"maps"
	"slices"
	"strconv"

	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/validation"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/svcnet/svcnet/internal/registry"
	"github.com/svcnet/svcnet/internal/registry/workload"
)

// Resource describes replicationcontrollers.
func Resource() *registry.Resource {
	rc := func(o runtime.Object) *corev1.ReplicationController { return o.(*corev1.ReplicationController) }
	columns := workload.Columns([]registry.Column{
		{TableColumnDefinition: metav1.TableColumnDefinition{Name: "Desired", Type: "integer",
			Description: corev1.ReplicationControllerSpec{}.SwaggerDoc()["replicas"]},
			Cell: func(o runtime.Object) interface{} { return int64(workload.Replicas(o)) }},
		{TableColumnDefinition: metav1.TableColumnDefinition{Name: "Current", Type: "integer",
			Description: corev1.ReplicationControllerStatus{}.SwaggerDoc()["replicas"]},
			Cell: func(o runtime.Object) interface{} { return int64(rc(o).Status.Replicas) }},
		{TableColumnDefinition: metav1.TableColumnDefinition{Name: "Ready", Type: "integer",
			Description: corev1.ReplicationControllerStatus{}.SwaggerDoc()["readyReplicas"]},
			Cell: func(o runtime.Object) interface{} { return int64(rc(o).Status.ReadyReplicas) }},
	}, registry.Column{
		TableColumnDefinition: metav1.TableColumnDefinition{Name: "Selector", Type: "string", Priority: 1,
			Description: corev1.ReplicationControllerSpec{}.SwaggerDoc()["selector"]},
		// A map selector prints as labels do: "<none>" when empty.
		Cell: func(o runtime.Object) interface{} { return labels.FormatLabels(rc(o).Spec.Selector) },
	})
	return workload.Resource(&registry.Resource{
		Kind:       corev1.SchemeGroupVersion.WithKind("ReplicationController"),
		Resource:   "replicationcontrollers",
		Singular:   "replicationcontroller",
		ShortNames: []string{"rc"},
		Strategy:   strategy{},
		Columns:    columns,
		Fields: func(o runtime.Object) fields.Set {
			return fields.Set{"status.replicas": strconv.Itoa(int(rc(o).Status.Replicas))}
		},
	})
}

type strategy struct{ registry.Base }

// Default follows upstream's SetObjectDefaults_ReplicationController: the
// selector and the object's labels, when empty, are the template's labels;
// one replica; the template's pod defaults.
func (strategy) Default(obj runtime.Object) {
	rc := obj.(*corev1.ReplicationController)
	if t := rc.Spec.Template; t != nil && t.Labels != nil {
		// Copies, where upstream shares the map: a later change of
		// one must not change the others.
		if len(rc.Spec.Selector) == 0 {
			rc.Spec.Selector = maps.Clone(t.Labels)
		}
		if len(rc.Labels) == 0 {
			rc.Labels = maps.Clone(t.Labels)
		}
	}
	workload.DefaultInt32(&rc.Spec.Replicas, 1)
	if rc.Spec.Template != nil {
		workload.DefaultTemplate(rc.Spec.Template)
	}
}

func (strategy) Validate(obj runtime.Object) field.ErrorList {
	return validateSpec(&obj.(*corev1.ReplicationController).Spec, field.NewPath("spec"))
}

// ValidateUpdate checks the spec as on create (the selector may change),
// and, when the status changed (a write of the status subresource), the
// status as upstream's ValidateReplicationControllerStatusUpdate.
func (s strategy) ValidateUpdate(obj, old runtime.Object) field.ErrorList {
	rc, oldRC := obj.(*corev1.ReplicationController), old.(*corev1.ReplicationController)
	errs := s.Validate(obj)
	if !apiequality.Semantic.DeepEqual(rc.Status, oldRC.Status) {
		errs = append(errs, validateStatus(&rc.Status, field.NewPath("status"))...)
	}
	return errs
}

// PrepareForDelete orphans the dependents by default, as upstream's
// DefaultGarbageCollectionPolicy does for replicationcontrollers served
// at core/v1: a delete that names no propagation policy, of a controller
// not yet being deleted and without a garbage collection finalizer, adds
// the orphan finalizer.
func (strategy) PrepareForDelete(obj runtime.Object, opts *metav1.DeleteOptions) (bool, error) {
	rc := obj.(*corev1.ReplicationController)
	if rc.DeletionTimestamp != nil || (opts != nil && (opts.PropagationPolicy != nil || opts.OrphanDependents != nil)) ||
		slices.Contains(rc.Finalizers, metav1.FinalizerOrphanDependents) || slices.Contains(rc.Finalizers, metav1.FinalizerDeleteDependents) {
		return false, nil
	}
	rc.Finalizers = append(rc.Finalizers, metav1.FinalizerOrphanDependents)
	return false, nil
}

// validateSpec follows upstream's ValidateReplicationControllerSpec.
func validateSpec(spec *corev1.ReplicationControllerSpec, fldPath *field.Path) field.ErrorList {
	errs := validation.ValidateNonnegativeField(int64(spec.MinReadySeconds), fldPath.Child("minReadySeconds"))
	selector := labels.SelectorFromSet(spec.Selector)
	if selector.Empty() {
		errs = append(errs, field.Required(fldPath.Child("selector"), ""))
	}
	if spec.Replicas == nil {
		errs = append(errs, field.Required(fldPath.Child("replicas"), ""))
	} else {
		errs = append(errs, validation.ValidateNonnegativeField(int64(*spec.Replicas), fldPath.Child("replicas"))...)
	}
	return append(errs, workload.ValidateTemplate(selector, spec.Template, "ReplicationController", fldPath.Child("template"))...)
}

// validateStatus follows upstream's ValidateReplicationControllerStatus.
func validateStatus(status *corev1.ReplicationControllerStatus, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	for _, f := range []struct {
		name  string
		value int64
	}{
		{"replicas", int64(status.Replicas)},
		{"fullyLabeledReplicas", int64(status.FullyLabeledReplicas)},
		{"readyReplicas", int64(status.ReadyReplicas)},
		{"availableReplicas", int64(status.AvailableReplicas)},
		{"observedGeneration", status.ObservedGeneration},
	} {
		errs = append(errs, validation.ValidateNonnegativeField(f.value, p.Child(f.name))...)
	}
	const msg = "cannot be greater than status.replicas"
	if status.FullyLabeledReplicas > status.Replicas {
		errs = append(errs, field.Invalid(p.Child("fullyLabeledReplicas"), status.FullyLabeledReplicas, msg))
	}
	if status.ReadyReplicas > status.Replicas {
		errs = append(errs, field.Invalid(p.Child("readyReplicas"), status.ReadyReplicas, msg))
	}
	if status.AvailableReplicas > status.Replicas {
		errs = append(errs, field.Invalid(p.Child("availableReplicas"), status.AvailableReplicas, msg))
	}
	if status.AvailableReplicas > status.ReadyReplicas {
		errs = append(errs, field.Invalid(p.Child("availableReplicas"), status.AvailableReplicas, "cannot be greater than readyReplicas"))
	}
	return errs
}
