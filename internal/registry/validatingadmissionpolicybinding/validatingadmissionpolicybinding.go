// Package validatingadmissionpolicybinding is the
// admissionregistration.k8s.io/v1 ValidatingAdmissionPolicyBinding
// strategy: upstream's defaults, its validation (with the declarative
// checks v1.37 enforces), the authorization of a paramRef and the
// POLICYNAME and PARAMREF columns.
package validatingadmissionpolicybinding

import (
	"context"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/svcnet/svcnet/internal/registry"
	"github.com/svcnet/svcnet/internal/registry/admissionpolicy"
	"github.com/svcnet/svcnet/internal/registry/admissionwebhook"
)

// actions are the validation actions, sorted.
var actions = sets.New(
	string(admissionregistrationv1.Deny),
	string(admissionregistrationv1.Warn),
	string(admissionregistrationv1.Audit))

var groupKind = admissionregistrationv1.SchemeGroupVersion.WithKind("ValidatingAdmissionPolicyBinding").GroupKind()

// Resource describes validatingadmissionpolicybindings; access authorizes
// the paramRef of what is written, of the kind paramKindOf reads from the
// bound policy.
func Resource(access admissionpolicy.Access, paramKindOf admissionpolicy.ParamKindOf) *registry.Resource {
	return &registry.Resource{
		Kind:       admissionregistrationv1.SchemeGroupVersion.WithKind("ValidatingAdmissionPolicyBinding"),
		Resource:   "validatingadmissionpolicybindings",
		Singular:   "validatingadmissionpolicybinding",
		Categories: []string{"api-extensions"},
		// Upstream starts at generation 1 and bumps it when the spec
		// changes.
		Generation: true,
		Strategy:   strategy{access: access, paramKindOf: paramKindOf},
		Columns: []registry.Column{
			registry.NameColumn(),
			registry.TextColumn("PolicyName", "PolicyName indicates the policy definition which the policy binding binded to",
				func(b *admissionregistrationv1.ValidatingAdmissionPolicyBinding) string { return b.Spec.PolicyName }),
			registry.TextColumn("ParamRef", "ParamRef indicates the param resource which sets the configuration param",
				func(b *admissionregistrationv1.ValidatingAdmissionPolicyBinding) string {
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

// Default follows upstream's SetObjectDefaults_ValidatingAdmissionPolicyBinding.
func (strategy) Default(obj runtime.Object) {
	admissionpolicy.DefaultMatchResources(obj.(*admissionregistrationv1.ValidatingAdmissionPolicyBinding).Spec.MatchResources)
}

// Validate follows upstream's ValidateValidatingAdmissionPolicyBinding and
// its declarative validation, with the names reserved for static
// configurations refused.
func (strategy) Validate(obj runtime.Object) field.ErrorList {
	b := obj.(*admissionregistrationv1.ValidatingAdmissionPolicyBinding)
	errs := validateSpec(&b.Spec, nil, field.NewPath("spec"))
	return append(errs, admissionwebhook.ValidateName(b.Name)...)
}

// ValidateUpdate validates the binding as on create; declarative
// validation leaves alone what did not change.
func (strategy) ValidateUpdate(obj, old runtime.Object) field.ErrorList {
	b, prev := obj.(*admissionregistrationv1.ValidatingAdmissionPolicyBinding), old.(*admissionregistrationv1.ValidatingAdmissionPolicyBinding)
	return validateSpec(&b.Spec, &prev.Spec, field.NewPath("spec"))
}

// Admit authorizes a new binding's paramRef, as upstream's strategy once
// the binding passes validation (a refused one that fails it is left for
// validation to report).
func (s strategy) Admit(ctx context.Context, obj runtime.Object) error {
	b := obj.(*admissionregistrationv1.ValidatingAdmissionPolicyBinding)
	err := s.access.ParamRef(ctx, b.Spec.PolicyName, b.Spec.ParamRef, s.paramKindOf, false)
	if err == nil || !admissionpolicy.ValidForAdmission(b, s.Validate) {
		return nil
	}
	return admissionpolicy.Forbidden(groupKind, b.Name, field.NewPath("spec", "paramRef"), err)
}

// AdmitUpdate authorizes the paramRef of an update, as upstream's
// authorizeUpdate. Upstream skips a binding whose paramRef and policy did
// not change, comparing the paramRefs with ==, which compares their
// pointers (selector, parameterNotFoundAction): two decoded objects never
// share them, so every update of a binding with a paramRef is checked.
func (s strategy) AdmitUpdate(ctx context.Context, sub string, obj, old runtime.Object) error {
	b, prev := obj.(*admissionregistrationv1.ValidatingAdmissionPolicyBinding), old.(*admissionregistrationv1.ValidatingAdmissionPolicyBinding)
	if sub != "" || b.Spec.ParamRef == nil ||
		(prev.Spec.ParamRef != nil && *prev.Spec.ParamRef == *b.Spec.ParamRef && prev.Spec.PolicyName == b.Spec.PolicyName) {
		return nil
	}
	if err := s.access.ParamRef(ctx, b.Spec.PolicyName, b.Spec.ParamRef, s.paramKindOf, false); err != nil {
		return admissionpolicy.Forbidden(groupKind, b.Name, field.NewPath("spec", "paramRef"), err)
	}
	return nil
}

// validateSpec follows upstream's validateValidatingAdmissionPolicyBindingSpec
// and the declarative validation of the spec (old is nil on create).
//
// In v1.37 policyName and validationActions are required declaratively
// (+k8s:required, beta and enforced by default): where the declarative
// check reports a missing one, its "Required value" error comes last and
// replaces the handwritten one, which it covers. Declarative validation
// skips what an update did not change, so a binding stored without them
// gets the handwritten errors.
func validateSpec(spec, old *admissionregistrationv1.ValidatingAdmissionPolicyBindingSpec, path *field.Path) field.ErrorList {
	declarative := declarativeErrors(spec, old, path)
	covered := func(p *field.Path) bool {
		for _, e := range declarative {
			if e.Field == p.String() {
				return true
			}
		}
		return false
	}
	namePath := path.Child("policyName")
	errs := admissionpolicy.ValidatePolicyName(spec.PolicyName, !covered(namePath), namePath)
	errs = append(errs, admissionpolicy.ValidateParamRef(spec.ParamRef, path.Child("paramRef"))...)
	errs = append(errs, admissionpolicy.ValidateMatchResources(spec.MatchResources, path.Child("matchResources"))...)
	actionsPath := path.Child("validationActions")
	errs = append(errs, validateActions(spec.ValidationActions, !covered(actionsPath), actionsPath)...)
	return append(errs, declarative...)
}

// declarativeErrors are the enforced errors of upstream's generated
// Validate_ValidatingAdmissionPolicyBindingSpec.
func declarativeErrors(spec, old *admissionregistrationv1.ValidatingAdmissionPolicyBindingSpec, path *field.Path) field.ErrorList {
	if old != nil && apiequality.Semantic.DeepEqual(spec, old) {
		return nil
	}
	var errs field.ErrorList
	if spec.PolicyName == "" && (old == nil || old.PolicyName != "") {
		errs = append(errs, field.Required(path.Child("policyName"), ""))
	}
	if len(spec.ValidationActions) == 0 && (old == nil || !apiequality.Semantic.DeepEqual(spec.ValidationActions, old.ValidationActions)) {
		errs = append(errs, field.Required(path.Child("validationActions"), ""))
	}
	return errs
}

// validateActions follows upstream's validateValidationActions; required
// says whether an empty list is reported here.
func validateActions(va []admissionregistrationv1.ValidationAction, required bool, path *field.Path) field.ErrorList {
	var errs field.ErrorList
	seen := sets.New[string]()
	for i, a := range va {
		if !actions.Has(string(a)) {
			errs = append(errs, field.NotSupported(path.Index(i), a, sets.List(actions)))
		}
		if seen.Has(string(a)) {
			errs = append(errs, field.Duplicate(path.Index(i), a))
		}
		seen.Insert(string(a))
	}
	if seen.Has(string(admissionregistrationv1.Deny)) && seen.Has(string(admissionregistrationv1.Warn)) {
		errs = append(errs, field.Invalid(path, va, "must not contain both Deny and Warn (repeating the same validation failure information in the API response and headers serves no purpose)"))
	}
	if len(seen) == 0 && required {
		errs = append(errs, field.Required(path, "at least one validation action is required"))
	}
	return errs
}
