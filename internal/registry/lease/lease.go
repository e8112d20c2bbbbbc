// Package lease is the coordination.k8s.io/v1 Lease strategy: upstream's
// spec validation, the dropping of the coordinated-leader-election fields
// while that feature is off (its default), and the HOLDER column.
package lease

import (
	"slices"
	"strings"

	coordinationv1 "k8s.io/api/coordination/v1"
	"k8s.io/apimachinery/pkg/api/validate/content"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/svcnet/svcnet/internal/registry"
)

var strategies = []coordinationv1.CoordinatedLeaseStrategy{coordinationv1.OldestEmulationVersion}

// Resource describes leases.
func Resource() *registry.Resource {
	return &registry.Resource{
		Kind:       coordinationv1.SchemeGroupVersion.WithKind("Lease"),
		Resource:   "leases",
		Singular:   "lease",
		Namespaced: true,
		Strategy:   strategy{},
		Columns: []registry.Column{
			registry.NameColumn(),
			{TableColumnDefinition: metav1.TableColumnDefinition{Name: "Holder", Type: "string",
				Description: coordinationv1.LeaseSpec{}.SwaggerDoc()["holderIdentity"]},
				Cell: func(o runtime.Object) interface{} {
					if h := o.(*coordinationv1.Lease).Spec.HolderIdentity; h != nil {
						return *h
					}
					return ""
				}},
			registry.AgeColumn(),
		},
	}
}

type strategy struct{ registry.Base }

// PrepareForCreate drops strategy and preferredHolder, which belong to the
// CoordinatedLeaderElection feature (beta, off by default).
func (strategy) PrepareForCreate(obj runtime.Object) {
	spec := &obj.(*coordinationv1.Lease).Spec
	spec.Strategy, spec.PreferredHolder = nil, nil
}

// PrepareForUpdate drops those fields too unless the stored lease already
// uses them.
func (strategy) PrepareForUpdate(obj, old runtime.Object) {
	spec, oldSpec := &obj.(*coordinationv1.Lease).Spec, &old.(*coordinationv1.Lease).Spec
	if oldSpec.Strategy == nil && oldSpec.PreferredHolder == nil {
		spec.Strategy, spec.PreferredHolder = nil, nil
	}
}

func (strategy) Validate(obj runtime.Object) field.ErrorList {
	return validateSpec(&obj.(*coordinationv1.Lease).Spec, field.NewPath("spec"))
}

// ValidateUpdate checks the new object as on create.
func (s strategy) ValidateUpdate(obj, _ runtime.Object) field.ErrorList {
	return s.Validate(obj)
}

// validateSpec follows upstream's ValidateLeaseSpec.
func validateSpec(spec *coordinationv1.LeaseSpec, fldPath *field.Path) field.ErrorList {
	var errs field.ErrorList
	if d := spec.LeaseDurationSeconds; d != nil && *d <= 0 {
		errs = append(errs, field.Invalid(fldPath.Child("leaseDurationSeconds"), d, "must be greater than 0"))
	}
	if t := spec.LeaseTransitions; t != nil && *t < 0 {
		errs = append(errs, field.Invalid(fldPath.Child("leaseTransitions"), t, "must be greater than or equal to 0"))
	}
	if spec.Strategy != nil {
		errs = append(errs, validateStrategy(*spec.Strategy, fldPath.Child("strategy"))...)
	}
	if spec.PreferredHolder != nil && *spec.PreferredHolder != "" && (spec.Strategy == nil || *spec.Strategy == "") {
		errs = append(errs, field.Forbidden(fldPath.Child("preferredHolder"), "may only be specified if `strategy` is defined"))
	}
	return errs
}

// validateStrategy follows upstream's ValidateCoordinatedLeaseStrategy,
// including its doubled "strategy.strategy" path.
func validateStrategy(s coordinationv1.CoordinatedLeaseStrategy, fldPath *field.Path) field.ErrorList {
	p := fldPath.Child("strategy")
	if !strings.Contains(string(s), "/") {
		if !slices.Contains(strategies, s) {
			return field.ErrorList{field.NotSupported(p, s, strategies)}
		}
		return nil
	}
	var errs field.ErrorList
	for _, msg := range content.IsLabelKey(string(s)) {
		errs = append(errs, field.Invalid(p, s, msg))
	}
	return errs
}
