// Package poddisruptionbudget is the policy/v1 PodDisruptionBudget
// strategy: upstream's spec validation (minAvailable or maxUnavailable, the
// selector, unhealthyPodEvictionPolicy), the status subresource, generation
// tracking and the MIN AVAILABLE/MAX UNAVAILABLE/ALLOWED DISRUPTIONS
// columns.
package poddisruptionbudget

import (
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	metavalidation "k8s.io/apimachinery/pkg/apis/meta/v1/validation"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/svcnet/svcnet/internal/registry"
	"github.com/svcnet/svcnet/internal/registry/workload"
)

// Resource describes poddisruptionbudgets.
func Resource() *registry.Resource {
	orNA := func(v *intstr.IntOrString) string {
		if v == nil {
			return "N/A"
		}
		return v.String()
	}
	return &registry.Resource{
		Kind:       policyv1.SchemeGroupVersion.WithKind("PodDisruptionBudget"),
		Resource:   "poddisruptionbudgets",
		Singular:   "poddisruptionbudget",
		ShortNames: []string{"pdb"},
		Namespaced: true,
		Status:     true,
		Generation: true,
		Strategy:   strategy{},
		Columns: []registry.Column{
			registry.NameColumn(),
			{TableColumnDefinition: metav1.TableColumnDefinition{Name: "Min Available", Type: "string",
				Description: "The minimum number of pods that must be available."},
				Cell: func(o runtime.Object) interface{} { return orNA(o.(*policyv1.PodDisruptionBudget).Spec.MinAvailable) }},
			{TableColumnDefinition: metav1.TableColumnDefinition{Name: "Max Unavailable", Type: "string",
				Description: "The maximum number of pods that may be unavailable."},
				Cell: func(o runtime.Object) interface{} { return orNA(o.(*policyv1.PodDisruptionBudget).Spec.MaxUnavailable) }},
			{TableColumnDefinition: metav1.TableColumnDefinition{Name: "Allowed Disruptions", Type: "integer",
				Description: "Calculated number of pods that may be disrupted at this time."},
				Cell: func(o runtime.Object) interface{} {
					return int64(o.(*policyv1.PodDisruptionBudget).Status.DisruptionsAllowed)
				}},
			registry.AgeColumn(),
		},
	}
}

type strategy struct{ registry.Base }

func (strategy) Validate(obj runtime.Object) field.ErrorList {
	return validateSpec(&obj.(*policyv1.PodDisruptionBudget).Spec, field.NewPath("spec"))
}

func (strategy) ValidateUpdate(obj, _ runtime.Object) field.ErrorList {
	return validateSpec(&obj.(*policyv1.PodDisruptionBudget).Spec, field.NewPath("spec"))
}

// validateSpec follows upstream's ValidatePodDisruptionBudgetSpec.
func validateSpec(spec *policyv1.PodDisruptionBudgetSpec, fldPath *field.Path) field.ErrorList {
	var errs field.ErrorList
	if spec.MinAvailable != nil && spec.MaxUnavailable != nil {
		errs = append(errs, field.Invalid(fldPath, spec, "minAvailable and maxUnavailable cannot be both set"))
	}
	for _, f := range []struct {
		name string
		v    *intstr.IntOrString
	}{{"minAvailable", spec.MinAvailable}, {"maxUnavailable", spec.MaxUnavailable}} {
		if f.v != nil {
			errs = append(errs, workload.ValidateIntOrPercent(*f.v, fldPath.Child(f.name))...)
			errs = append(errs, workload.NotMoreThan100Percent(*f.v, fldPath.Child(f.name))...)
		}
	}
	errs = append(errs, metavalidation.ValidateLabelSelector(spec.Selector, metavalidation.LabelSelectorValidationOptions{}, fldPath.Child("selector"))...)
	if p := spec.UnhealthyPodEvictionPolicy; p != nil && *p != policyv1.IfHealthyBudget && *p != policyv1.AlwaysAllow {
		errs = append(errs, field.NotSupported(fldPath.Child("unhealthyPodEvictionPolicy"), *p,
			[]string{string(policyv1.AlwaysAllow), string(policyv1.IfHealthyBudget)}))
	}
	return errs
}
