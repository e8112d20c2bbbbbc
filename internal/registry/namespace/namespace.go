// Package namespace is the Namespace strategy: a new namespace is Active
// and carries the "kubernetes" finalizer and its kubernetes.io/metadata.name
// label, as upstream.
package namespace

import (
	corev1 "k8s.io/api/core/v1"
	apivalidation "k8s.io/apimachinery/pkg/api/validation"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/svcnet/svcnet/internal/registry"
	"github.com/svcnet/svcnet/internal/registry/validate"
)

// Resource describes namespaces.
func Resource() *registry.Resource {
	return &registry.Resource{
		Kind:                corev1.SchemeGroupVersion.WithKind("Namespace"),
		Resource:            "namespaces",
		Singular:            "namespace",
		ShortNames:          []string{"ns"},
		NameValidation:      apivalidation.ValidateNamespaceName,
		Status:              true,
		ReturnDeletedObject: true,
		Strategy:            strategy{},
		Columns: []registry.Column{
			registry.NameColumn(),
			{TableColumnDefinition: metav1.TableColumnDefinition{Name: "Status", Type: "string", Description: "The status of the namespace"},
				Cell: func(o runtime.Object) interface{} { return string(o.(*corev1.Namespace).Status.Phase) }},
			registry.AgeColumn(),
		},
		Fields: func(obj runtime.Object) fields.Set {
			ns := obj.(*corev1.Namespace)
			// "name" is an upstream bug kept for compatibility.
			return fields.Set{"status.phase": string(ns.Status.Phase), "name": ns.Name}
		},
	}
}

type strategy struct{ registry.Base }

// Default labels the namespace with its own name and defaults the phase.
func (strategy) Default(obj runtime.Object) {
	ns := obj.(*corev1.Namespace)
	if ns.Name != "" {
		if ns.Labels == nil {
			ns.Labels = map[string]string{}
		}
		ns.Labels[corev1.LabelMetadataName] = ns.Name
	}
	if ns.Status.Phase == "" {
		ns.Status.Phase = corev1.NamespaceActive
	}
}

// PrepareForCreate makes the namespace Active and adds the "kubernetes"
// finalizer, which the namespace controller removes once it has emptied it.
func (strategy) PrepareForCreate(obj runtime.Object) {
	ns := obj.(*corev1.Namespace)
	ns.Status = corev1.NamespaceStatus{Phase: corev1.NamespaceActive}
	for _, f := range ns.Spec.Finalizers {
		if f == corev1.FinalizerKubernetes {
			return
		}
	}
	ns.Spec.Finalizers = append(ns.Spec.Finalizers, corev1.FinalizerKubernetes)
}

// PrepareForUpdate keeps the finalizers: only the finalize subresource
// changes them.
func (strategy) PrepareForUpdate(obj, old runtime.Object) {
	obj.(*corev1.Namespace).Spec.Finalizers = old.(*corev1.Namespace).Spec.Finalizers
}

func (strategy) Validate(obj runtime.Object) field.ErrorList {
	return validateNamespace(obj.(*corev1.Namespace))
}

// ValidateUpdate checks the new object as on create.
func (s strategy) ValidateUpdate(obj, _ runtime.Object) field.ErrorList {
	return s.Validate(obj)
}

func validateNamespace(ns *corev1.Namespace) field.ErrorList {
	var errs field.ErrorList
	p := field.NewPath("spec", "finalizers") // upstream reports these without an index
	for _, f := range ns.Spec.Finalizers {
		errs = append(errs, apivalidation.ValidateFinalizerName(string(f), p)...)
		errs = append(errs, validate.KubeFinalizerName(string(f), p)...)
	}
	return errs
}
