// Package servicecidr is the networking.k8s.io/v1 ServiceCIDR strategy:
// upstream's validation of spec.cidrs (one or two canonical CIDRs, one of
// each family), the rule that the CIDRs never change except that a
// single-stack ServiceCIDR may add the other family, the status subresource,
// and the CIDRS column. The API server keeps the default `kubernetes`
// ServiceCIDR (internal/controlplane/defaultservicecidr).
package servicecidr

import (
	"strings"

	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/api/validation"
	"k8s.io/apimachinery/pkg/runtime"
	utilvalidation "k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
	netutils "k8s.io/utils/net"

	"github.com/svcnet/svcnet/internal/registry"
)

// maxCIDRs is upstream's limit on spec.cidrs: one per IP family.
const maxCIDRs = 2

// Resource describes servicecidrs. Their status (the Ready condition) is
// written through the status subresource: the main resource keeps the
// stored status and a create starts with none, as upstream with its
// ServiceCIDRStatusFieldWiping gate on (the default since 1.36).
func Resource() *registry.Resource {
	return &registry.Resource{
		Kind:     networkingv1.SchemeGroupVersion.WithKind("ServiceCIDR"),
		Resource: "servicecidrs",
		Singular: "servicecidr",
		Status:   true,
		Strategy: strategy{},
		Columns: []registry.Column{
			registry.NameColumn(),
			registry.TextColumn("CIDRs", networkingv1.ServiceCIDRSpec{}.SwaggerDoc()["cidrs"],
				func(c *networkingv1.ServiceCIDR) string { return strings.Join(c.Spec.CIDRs, ",") }),
			registry.AgeColumn(),
		},
	}
}

type strategy struct{ registry.Base }

// Validate follows upstream's ValidateServiceCIDR.
func (strategy) Validate(obj runtime.Object) field.ErrorList {
	return validateSpec(&obj.(*networkingv1.ServiceCIDR).Spec, field.NewPath("spec", "cidrs"))
}

// ValidateUpdate follows upstream's ValidateServiceCIDRUpdate: the CIDRs
// never change, except that one CIDR may become two (single-stack to
// dual-stack, https://issues.k8s.io/131261), keeping the first. Upstream
// validates the spec again only in that case. Status writes keep the
// stored spec, so they pass.
func (strategy) ValidateUpdate(obj, old runtime.Object) field.ErrorList {
	cidrs, oldCIDRs := obj.(*networkingv1.ServiceCIDR).Spec.CIDRs, old.(*networkingv1.ServiceCIDR).Spec.CIDRs
	path := field.NewPath("spec", "cidrs")
	var errs field.ErrorList
	switch {
	case len(oldCIDRs) == len(cidrs):
		for i, cidr := range oldCIDRs {
			if cidr != cidrs[i] {
				errs = append(errs, field.Invalid(path.Index(i), cidrs[i], validation.FieldImmutableErrorMsg))
			}
		}
	case len(oldCIDRs) == 1 && len(cidrs) == 2:
		if cidrs[0] != oldCIDRs[0] {
			errs = append(errs, field.Invalid(path.Index(0), cidrs[0], validation.FieldImmutableErrorMsg))
		}
		errs = append(errs, validateSpec(&obj.(*networkingv1.ServiceCIDR).Spec, path)...)
	default:
		errs = append(errs, field.Invalid(path, cidrs, validation.FieldImmutableErrorMsg))
	}
	return errs
}

// internalSpec stands for upstream's internal ServiceCIDRSpec, whose JSON
// (Go field names, no tags) upstream prints as the value of its "may only
// hold up to 2 values" error.
type internalSpec struct {
	CIDRs []string
}

// validateSpec follows upstream's validateServiceCIDRSpec.
func validateSpec(spec *networkingv1.ServiceCIDRSpec, path *field.Path) field.ErrorList {
	if len(spec.CIDRs) == 0 {
		return field.ErrorList{field.Required(path, "at least one CIDR required")}
	}
	if len(spec.CIDRs) > maxCIDRs {
		return field.ErrorList{field.Invalid(path, &internalSpec{CIDRs: spec.CIDRs}, "may only hold up to 2 values")}
	}
	var errs field.ErrorList
	for i, cidr := range spec.CIDRs {
		errs = append(errs, utilvalidation.IsValidCIDR(path.Index(i), cidr)...)
	}
	if len(spec.CIDRs) == 2 {
		first, second := netutils.IPFamilyOfCIDRString(spec.CIDRs[0]), netutils.IPFamilyOfCIDRString(spec.CIDRs[1])
		if first == second && first != netutils.IPFamilyUnknown {
			errs = append(errs, field.Invalid(path, spec.CIDRs,
				"may specify no more than one IP for each IP family, i.e 192.168.0.0/24 and 2001:db8::/64"))
		}
	}
	return errs
}
