// Package mutatingadmissionpolicy is the admissionregistration.k8s.io/v1
// MutatingAdmissionPolicy strategy: upstream's defaults, its validation
// (the CEL expressions of match conditions, variables and mutations
// compiled as upstream does, shared checks in
// internal/registry/admissionpolicy), the authorization of a paramKind and
// the MUTATIONS and PARAMKIND columns. Applying the mutations is the API
// server's admission, not this package's.
package mutatingadmissionpolicy

import (
	"context"
	"strings"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apimachinery/pkg/util/validation/field"
	plugincel "k8s.io/apiserver/pkg/admission/plugin/cel"
	"k8s.io/apiserver/pkg/admission/plugin/policy/mutating/patch"

	"github.com/svcnet/svcnet/internal/registry"
	"github.com/svcnet/svcnet/internal/registry/admissionpolicy"
	"github.com/svcnet/svcnet/internal/registry/admissionwebhook"
)

// patchTypes are the patch types of mutations, sorted.
var patchTypes = sets.New(
	string(admissionregistrationv1.PatchTypeApplyConfiguration),
	string(admissionregistrationv1.PatchTypeJSONPatch))

var groupKind = admissionregistrationv1.SchemeGroupVersion.WithKind("MutatingAdmissionPolicy").GroupKind()

// Resource describes mutatingadmissionpolicies; access authorizes the
// paramKind of what is written.
func Resource(access admissionpolicy.Access) *registry.Resource {
	return &registry.Resource{
		Kind:       admissionregistrationv1.SchemeGroupVersion.WithKind("MutatingAdmissionPolicy"),
		Resource:   "mutatingadmissionpolicies",
		Singular:   "mutatingadmissionpolicy",
		Categories: []string{"api-extensions"},
		// Upstream starts at generation 1 and bumps it when the spec
		// changes. The kind has no status.
		Generation: true,
		Strategy:   strategy{access: access},
		Columns: []registry.Column{
			registry.NameColumn(),
			{TableColumnDefinition: metav1.TableColumnDefinition{Name: "Mutations", Type: "integer",
				Description: "Mutation indicates the number of mutations rules defined in this configuration"},
				Cell: func(o runtime.Object) interface{} {
					return int64(len(o.(*admissionregistrationv1.MutatingAdmissionPolicy).Spec.Mutations))
				}},
			registry.TextColumn("ParamKind", "ParamKind specifies the kind of resources used to parameterize this policy",
				func(p *admissionregistrationv1.MutatingAdmissionPolicy) string {
					return admissionpolicy.ParamKindCell(p.Spec.ParamKind)
				}),
			registry.AgeColumn(),
		},
	}
}

type strategy struct {
	registry.Base
	access admissionpolicy.Access
}

// Default follows upstream's SetObjectDefaults_MutatingAdmissionPolicy:
// failurePolicy and match constraints. Upstream's v1 gives
// reinvocationPolicy no default (v1beta1's webhooks have one); it is
// required.
func (strategy) Default(obj runtime.Object) {
	spec := &obj.(*admissionregistrationv1.MutatingAdmissionPolicy).Spec
	admissionpolicy.DefaultFailurePolicy(&spec.FailurePolicy)
	admissionpolicy.DefaultMatchResources(spec.MatchConstraints)
}

// Validate follows upstream's ValidateMutatingAdmissionPolicy, with the
// names reserved for static configurations refused.
func (strategy) Validate(obj runtime.Object) field.ErrorList {
	p := obj.(*admissionregistrationv1.MutatingAdmissionPolicy)
	errs := validateSpec(&p.Spec, options{stored: admissionpolicy.NewStored()}, field.NewPath("spec"))
	return append(errs, admissionwebhook.ValidateName(p.Name)...)
}

// ValidateUpdate follows upstream's ValidateMutatingAdmissionPolicyUpdate.
func (strategy) ValidateUpdate(obj, old runtime.Object) field.ErrorList {
	p, prev := obj.(*admissionregistrationv1.MutatingAdmissionPolicy), old.(*admissionregistrationv1.MutatingAdmissionPolicy)
	return validateSpec(&p.Spec, updateOptions(p, prev), field.NewPath("spec"))
}

// Admit authorizes a new policy's paramKind, as upstream's strategy once
// the policy passes validation (a refused one that fails it is left for
// validation to report).
func (s strategy) Admit(ctx context.Context, obj runtime.Object) error {
	p := obj.(*admissionregistrationv1.MutatingAdmissionPolicy)
	err := s.access.ParamKind(ctx, p.Spec.ParamKind)
	if err == nil || !admissionpolicy.ValidForAdmission(p, s.Validate) {
		return nil
	}
	return admissionpolicy.Forbidden(groupKind, p.Name, field.NewPath("spec", "paramKind"), err)
}

// AdmitUpdate authorizes a changed paramKind, as upstream's
// authorizeUpdate.
func (s strategy) AdmitUpdate(ctx context.Context, sub string, obj, old runtime.Object) error {
	p, prev := obj.(*admissionregistrationv1.MutatingAdmissionPolicy), old.(*admissionregistrationv1.MutatingAdmissionPolicy)
	if sub != "" || p.Spec.ParamKind == nil || (prev.Spec.ParamKind != nil && *prev.Spec.ParamKind == *p.Spec.ParamKind) {
		return nil
	}
	if err := s.access.ParamKind(ctx, p.Spec.ParamKind); err != nil {
		return admissionpolicy.Forbidden(groupKind, p.Name, field.NewPath("spec", "paramKind"), err)
	}
	return nil
}

// options are upstream's validationOptions for policies.
type options struct {
	// ignoreMatchConditions skips the match conditions: an update that
	// changes neither them nor the paramKind.
	ignoreMatchConditions bool
	stored                admissionpolicy.Stored
}

// updateOptions are the options of an update from old to p.
func updateOptions(p, old *admissionregistrationv1.MutatingAdmissionPolicy) options {
	opts := options{
		ignoreMatchConditions: apiequality.Semantic.DeepEqual(p.Spec.ParamKind, old.Spec.ParamKind) &&
			apiequality.Semantic.DeepEqual(p.Spec.MatchConditions, old.Spec.MatchConditions),
		stored: admissionpolicy.NewStored(),
	}
	for _, mc := range old.Spec.MatchConditions {
		opts.stored.MatchConditions.Insert(mc.Expression)
	}
	for _, m := range old.Spec.Mutations {
		if m.ApplyConfiguration != nil {
			opts.stored.ApplyConfigurations.Insert(m.ApplyConfiguration.Expression)
		}
		if m.JSONPatch != nil {
			opts.stored.JSONPatches.Insert(m.JSONPatch.Expression)
		}
	}
	return opts
}

// validateSpec follows upstream's validateMutatingAdmissionPolicySpec, in
// its order.
func validateSpec(spec *admissionregistrationv1.MutatingAdmissionPolicySpec, opts options, path *field.Path) field.ErrorList {
	// Upstream always builds a composing compiler for a mutating policy.
	compiler := admissionpolicy.NewCompiler(true)
	errs := admissionpolicy.ValidateFailurePolicy(spec.FailurePolicy, path.Child("failurePolicy"))
	params := spec.ParamKind != nil
	if params {
		errs = append(errs, admissionpolicy.ValidateParamKind(*spec.ParamKind, path.Child("paramKind"))...)
	}
	constraintsPath := path.Child("matchConstraints")
	errs = append(errs, admissionpolicy.ValidateMatchConstraints(spec.MatchConstraints, constraintsPath)...)
	// Only creates and updates can be mutated.
	errs = append(errs, admissionpolicy.ValidateMutatingOperations(spec.MatchConstraints, constraintsPath.Child("resourceRules", "operations"))...)
	if !opts.ignoreMatchConditions {
		errs = append(errs, admissionpolicy.ValidateMatchConditions(spec.MatchConditions, params, opts.stored, path.Child("matchConditions"))...)
	}
	for i := range spec.Variables {
		errs = append(errs, admissionpolicy.ValidateVariable(compiler, &spec.Variables[i], params, opts.stored, path.Child("variables").Index(i))...)
	}
	if len(spec.Mutations) == 0 {
		errs = append(errs, field.Required(path.Child("mutations"), "mutations must contain at least one item"))
	}
	for i := range spec.Mutations {
		errs = append(errs, validateMutation(compiler, &spec.Mutations[i], params, opts.stored, path.Child("mutations").Index(i))...)
	}
	policyPath := path.Child("reinvocationPolicy")
	if spec.ReinvocationPolicy == "" {
		errs = append(errs, field.Required(policyPath, ""))
	} else if !admissionwebhook.ReinvocationPolicies.Has(string(spec.ReinvocationPolicy)) {
		errs = append(errs, field.NotSupported(policyPath, spec.ReinvocationPolicy, sets.List(admissionwebhook.ReinvocationPolicies)))
	}
	return errs
}

// validateMutation follows upstream's validateMutation: the patch type
// names which of applyConfiguration and jsonPatch the mutation has.
func validateMutation(c plugincel.Compiler, m *admissionregistrationv1.Mutation, params bool, stored admissionpolicy.Stored, path *field.Path) field.ErrorList {
	var errs field.ErrorList
	applyPath, patchPath := path.Child("applyConfiguration"), path.Child("jsonPatch")
	switch m.PatchType {
	case "":
		errs = append(errs, field.Required(path.Child("patchType"), ""))
	case admissionregistrationv1.PatchTypeJSONPatch:
		if m.JSONPatch == nil {
			errs = append(errs, field.Required(patchPath, "must be specified when patchType is JSONPatch"))
		} else {
			// As upstream, a JSON patch counts as stored when the stored
			// policy has it as an apply configuration.
			errs = append(errs, compileMutation(c, &patch.JSONPatchCondition{Expression: strings.TrimSpace(m.JSONPatch.Expression)},
				params, stored.ApplyConfigurations.Has(m.JSONPatch.Expression), patchPath.Child("expression"))...)
		}
		if m.ApplyConfiguration != nil {
			errs = append(errs, field.Invalid(applyPath, "{applyConfiguration}", "must not be specified when patchType is JSONPatch"))
		}
	case admissionregistrationv1.PatchTypeApplyConfiguration:
		if m.ApplyConfiguration == nil {
			errs = append(errs, field.Required(applyPath, "must be specified when patchType is ApplyConfiguration"))
		} else {
			errs = append(errs, compileMutation(c, &patch.ApplyConfigurationCondition{Expression: strings.TrimSpace(m.ApplyConfiguration.Expression)},
				params, stored.ApplyConfigurations.Has(m.ApplyConfiguration.Expression), applyPath.Child("expression"))...)
		}
		if m.JSONPatch != nil {
			errs = append(errs, field.Invalid(patchPath, "{jsonPatch}", "must not be specified when patchType is ApplyConfiguration"))
		}
	default:
		errs = append(errs, field.NotSupported(path.Child("patchType"), m.PatchType, sets.List(patchTypes)))
	}
	return errs
}

// compileMutation compiles a mutation's (trimmed) expression with the
// patch types (Object, JSONPatch) declared; an empty one is required.
func compileMutation(c plugincel.Compiler, expr plugincel.ExpressionAccessor, params, stored bool, path *field.Path) field.ErrorList {
	if expr.GetExpression() == "" {
		return field.ErrorList{field.Required(path, "")}
	}
	return admissionpolicy.Compile(c, expr, plugincel.OptionalVariableDeclarations{HasParams: params, HasAuthorizer: true, HasPatchTypes: true},
		stored, expr.GetExpression(), path)
}
