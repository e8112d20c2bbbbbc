// Package mutatingadmissionpolicybinding is the
// admissionregistration.k8s.io/v1 MutatingAdmissionPolicyBinding strategy:
// upstream's defaults, its validation, the authorization of a paramRef and
// the POLICYNAME and PARAMREF columns.
package mutatingadmissionpolicybinding

import (
	"context"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/svcnet/svcnet/internal/registry"
	"github.com/svcnet/svcnet/internal/registry/admissionpolicy"
	"github.com/svcnet/svcnet/internal/registry/admissionwebhook"
)

var groupKind = admissionregistrationv1.SchemeGroupVersion.WithKind("MutatingAdmissionPolicyBinding").GroupKind()

// Resource describes mutatingadmissionpolicybindings; access authorizes
// the paramRef of what is written, of the kind paramKindOf reads from the
// bound policy.
func Resource(access admissionpolicy.Access, paramKindOf admissionpolicy.ParamKindOf) *registry.Resource {
	return &registry.Resource{
		Kind:       admissionregistrationv1.SchemeGroupVersion.WithKind("MutatingAdmissionPolicyBinding"),
		Resource:   "mutatingadmissionpolicybindings",
		Singular:   "mutatingadmissionpolicybinding",
		Categories: []string{"api-extensions"},
		// Upstream starts at generation 1 and bumps it when the spec
		// changes.
		Generation: true,
		Strategy:   strategy{access: access, paramKindOf: paramKindOf},
		Columns: []registry.Column{
			registry.NameColumn(),
			registry.TextColumn("PolicyName", "PolicyName indicates the policy definition which the policy binding binded to",
				func(b *admissionregistrationv1.MutatingAdmissionPolicyBinding) string { return b.Spec.PolicyName }),
			registry.TextColumn("ParamRef", "ParamRef indicates the param resource which sets the configuration param",
				func(b *admissionregistrationv1.MutatingAdmissionPolicyBinding) string {
					return admissionpolicy.ParamRefCell(b.Spec.ParamRef)
				}),
			registry.AgeColumn(),
		},
	}
}

type strategy struct {
	registry.Base
	access      admissionpolicy.Access
	paramKindOf admissionpolicy.ParamKindOf
}

// Default follows upstream's SetObjectDefaults_MutatingAdmissionPolicyBinding.
func (strategy) Default(obj runtime.Object) {
	admissionpolicy.DefaultMatchResources(obj.(*admissionregistrationv1.MutatingAdmissionPolicyBinding).Spec.MatchResources)
}

// Validate follows upstream's ValidateMutatingAdmissionPolicyBinding, with
// the names reserved for static configurations refused.
func (strategy) Validate(obj runtime.Object) field.ErrorList {
	b := obj.(*admissionregistrationv1.MutatingAdmissionPolicyBinding)
	return append(validateSpec(&b.Spec, field.NewPath("spec")), admissionwebhook.ValidateName(b.Name)...)
}

// ValidateUpdate validates the binding as on create, as upstream.
func (strategy) ValidateUpdate(obj, _ runtime.Object) field.ErrorList {
	return validateSpec(&obj.(*admissionregistrationv1.MutatingAdmissionPolicyBinding).Spec, field.NewPath("spec"))
}

// Admit authorizes a new binding's paramRef, as upstream's strategy once
// the binding passes validation (a refused one that fails it is left for
// validation to report).
func (s strategy) Admit(ctx context.Context, obj runtime.Object) error {
	b := obj.(*admissionregistrationv1.MutatingAdmissionPolicyBinding)
	err := s.access.ParamRef(ctx, b.Spec.PolicyName, b.Spec.ParamRef, s.paramKindOf, true)
	if err == nil || !admissionpolicy.ValidForAdmission(b, s.Validate) {
		return nil
	}
	return admissionpolicy.Forbidden(groupKind, b.Name, field.NewPath("spec", "paramRef"), err)
}

// AdmitUpdate authorizes the paramRef of an update, as upstream's
// authorizeUpdate, whose == of paramRefs compares their pointers: every
// update of a binding with a paramRef is checked.
func (s strategy) AdmitUpdate(ctx context.Context, sub string, obj, old runtime.Object) error {
	b, prev := obj.(*admissionregistrationv1.MutatingAdmissionPolicyBinding), old.(*admissionregistrationv1.MutatingAdmissionPolicyBinding)
	if sub != "" || b.Spec.ParamRef == nil ||
		(prev.Spec.ParamRef != nil && *prev.Spec.ParamRef == *b.Spec.ParamRef && prev.Spec.PolicyName == b.Spec.PolicyName) {
		return nil
	}
	if err := s.access.ParamRef(ctx, b.Spec.PolicyName, b.Spec.ParamRef, s.paramKindOf, true); err != nil {
		return admissionpolicy.Forbidden(groupKind, b.Name, field.NewPath("spec", "paramRef"), err)
	}
	return nil
}

// validateSpec follows upstream's validateMutatingAdmissionPolicyBindingSpec.
func validateSpec(spec *admissionregistrationv1.MutatingAdmissionPolicyBindingSpec, path *field.Path) field.ErrorList {
	errs := admissionpolicy.ValidatePolicyName(spec.PolicyName, true, path.Child("policyName"))
	errs = append(errs, admissionpolicy.ValidateParamRef(spec.ParamRef, path.Child("paramRef"))...)
	matchPath := path.Child("matchResources")
	errs = append(errs, admissionpolicy.ValidateMatchResources(spec.MatchResources, matchPath)...)
	// Only creates and updates can be mutated.
	return append(errs, admissionpolicy.ValidateMutatingOperations(spec.MatchResources, matchPath.Child("resourceRules", "operations"))...)
}
