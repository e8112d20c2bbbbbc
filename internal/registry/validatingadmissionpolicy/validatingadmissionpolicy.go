// Package validatingadmissionpolicy is the admissionregistration.k8s.io/v1
// ValidatingAdmissionPolicy strategy: upstream's defaults, its validation
// (the CEL expressions compiled as upstream does, shared checks in
// internal/registry/admissionpolicy), the status subresource (type
// checking results and conditions, written only through /status), the
// authorization of a paramKind and the VALIDATIONS and PARAMKIND columns.
// Enforcing the policies is the API server's admission, not this
// package's.
package validatingadmissionpolicy

import (
	"context"
	"fmt"
	"regexp"
	"strings"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	metav1validation "k8s.io/apimachinery/pkg/apis/meta/v1/validation"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apimachinery/pkg/util/validation/field"
	plugincel "k8s.io/apiserver/pkg/admission/plugin/cel"
	"k8s.io/apiserver/pkg/admission/plugin/policy/validating"
	"k8s.io/client-go/util/jsonpath"

	"github.com/svcnet/svcnet/internal/registry"
	"github.com/svcnet/svcnet/internal/registry/admissionpolicy"
	"github.com/svcnet/svcnet/internal/registry/admissionwebhook"
	"github.com/svcnet/svcnet/internal/registry/validate"
)

const (
	// maxAuditAnnotations is upstream's limit on a policy's audit
	// annotations.
	maxAuditAnnotations = 20
	// maxAuditAnnotationValueExpressionLength is upstream's 5kb limit on
	// an audit annotation's expression (half the value's limit).
	maxAuditAnnotationValueExpressionLength = 5 * 1024
)

// reasons are the reasons a validation may give, sorted.
var reasons = sets.New(
	string(metav1.StatusReasonForbidden),
	string(metav1.StatusReasonInvalid),
	string(metav1.StatusReasonRequestEntityTooLarge))

var groupKind = admissionregistrationv1.SchemeGroupVersion.WithKind("ValidatingAdmissionPolicy").GroupKind()

// Resource describes validatingadmissionpolicies; access authorizes the
// paramKind of what is written.
func Resource(access admissionpolicy.Access) *registry.Resource {
	policy := func(o runtime.Object) *admissionregistrationv1.ValidatingAdmissionPolicy {
		return o.(*admissionregistrationv1.ValidatingAdmissionPolicy)
	}
	return &registry.Resource{
		Kind:       admissionregistrationv1.SchemeGroupVersion.WithKind("ValidatingAdmissionPolicy"),
		Resource:   "validatingadmissionpolicies",
		Singular:   "validatingadmissionpolicy",
		Categories: []string{"api-extensions"},
		// The status (upstream's type checking controller writes it) is
		// written only through /status; upstream starts at generation 1
		// and bumps it when the spec changes.
		Status:     true,
		Generation: true,
		Strategy:   strategy{access: access},
		Columns: []registry.Column{
			registry.NameColumn(),
			{TableColumnDefinition: metav1.TableColumnDefinition{Name: "Validations", Type: "integer",
				Description: "Validations indicates the number of validation rules defined in this configuration"},
				Cell: func(o runtime.Object) interface{} { return int64(len(policy(o).Spec.Validations)) }},
			registry.TextColumn("ParamKind", "ParamKind specifies the kind of resources used to parameterize this policy",
				func(p *admissionregistrationv1.ValidatingAdmissionPolicy) string {
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

// Default follows upstream's SetObjectDefaults_ValidatingAdmissionPolicy.
func (strategy) Default(obj runtime.Object) {
	spec := &obj.(*admissionregistrationv1.ValidatingAdmissionPolicy).Spec
	admissionpolicy.DefaultFailurePolicy(&spec.FailurePolicy)
	admissionpolicy.DefaultMatchResources(spec.MatchConstraints)
}

// Validate follows upstream's ValidateValidatingAdmissionPolicy, with the
// names reserved for static configurations refused.
func (strategy) Validate(obj runtime.Object) field.ErrorList {
	p := obj.(*admissionregistrationv1.ValidatingAdmissionPolicy)
	errs := validateSpec(p.Name, &p.Spec, options{stored: admissionpolicy.NewStored()}, field.NewPath("spec"))
	return append(errs, admissionwebhook.ValidateName(p.Name)...)
}

// ValidateUpdate follows upstream's ValidateValidatingAdmissionPolicyUpdate
// for a write of the policy, and its status strategy's
// ValidateValidatingAdmissionPolicyStatusUpdate for a write of the status:
// only /status changes the status (the main resource keeps the stored
// one), and it keeps the stored spec.
func (strategy) ValidateUpdate(obj, old runtime.Object) field.ErrorList {
	p, prev := obj.(*admissionregistrationv1.ValidatingAdmissionPolicy), old.(*admissionregistrationv1.ValidatingAdmissionPolicy)
	if !apiequality.Semantic.DeepEqual(p.Status, prev.Status) && apiequality.Semantic.DeepEqual(p.Spec, prev.Spec) {
		return validateStatus(&p.Status, field.NewPath("status"))
	}
	return validateSpec(p.Name, &p.Spec, updateOptions(p, prev), field.NewPath("spec"))
}

// PrepareForStatusUpdate keeps the stored labels, annotations, finalizers
// and owner references: upstream's status strategy resets all the object
// metadata (ResetObjectMetaForStatus).
func (strategy) PrepareForStatusUpdate(obj, old runtime.Object) {
	m, prev := &obj.(*admissionregistrationv1.ValidatingAdmissionPolicy).ObjectMeta, &old.(*admissionregistrationv1.ValidatingAdmissionPolicy).ObjectMeta
	m.Labels, m.Annotations, m.Finalizers, m.OwnerReferences = prev.Labels, prev.Annotations, prev.Finalizers, prev.OwnerReferences
}

// Admit authorizes a new policy's paramKind. Upstream does it once the
// policy passes validation, so a refused one that fails validation is left
// for validation to report.
func (s strategy) Admit(ctx context.Context, obj runtime.Object) error {
	p := obj.(*admissionregistrationv1.ValidatingAdmissionPolicy)
	err := s.access.ParamKind(ctx, p.Spec.ParamKind)
	if err == nil {
		return nil
	}
	if !admissionpolicy.ValidForAdmission(p, s.Validate) {
		return nil
	}
	return admissionpolicy.Forbidden(groupKind, p.Name, field.NewPath("spec", "paramKind"), err)
}

// AdmitUpdate authorizes a changed paramKind, as upstream's
// authorizeUpdate; status writes are not checked.
func (s strategy) AdmitUpdate(ctx context.Context, sub string, obj, old runtime.Object) error {
	if sub != "" {
		return nil
	}
	p, prev := obj.(*admissionregistrationv1.ValidatingAdmissionPolicy), old.(*admissionregistrationv1.ValidatingAdmissionPolicy)
	if p.Spec.ParamKind == nil || (prev.Spec.ParamKind != nil && *prev.Spec.ParamKind == *p.Spec.ParamKind) {
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
func updateOptions(p, old *admissionregistrationv1.ValidatingAdmissionPolicy) options {
	opts := options{
		ignoreMatchConditions: apiequality.Semantic.DeepEqual(p.Spec.ParamKind, old.Spec.ParamKind) &&
			apiequality.Semantic.DeepEqual(p.Spec.MatchConditions, old.Spec.MatchConditions),
		stored: admissionpolicy.NewStored(),
	}
	for _, mc := range old.Spec.MatchConditions {
		opts.stored.MatchConditions.Insert(mc.Expression)
	}
	for _, v := range old.Spec.Validations {
		opts.stored.Validations.Insert(v.Expression)
		if v.MessageExpression != "" {
			opts.stored.MessageExpressions.Insert(v.MessageExpression)
		}
	}
	for _, a := range old.Spec.AuditAnnotations {
		opts.stored.AuditAnnotations.Insert(a.ValueExpression)
	}
	return opts
}

// validateSpec follows upstream's validateValidatingAdmissionPolicySpec,
// in its order. name is the policy's, which audit annotation keys carry.
func validateSpec(name string, spec *admissionregistrationv1.ValidatingAdmissionPolicySpec, opts options, path *field.Path) field.ErrorList {
	// Variables need a compiler of the policy's own, which composes them;
	// it is built only when an expression is compiled.
	var compiler plugincel.Compiler
	getCompiler := func() plugincel.Compiler {
		if compiler == nil {
			compiler = admissionpolicy.NewCompiler(len(spec.Variables) > 0)
		}
		return compiler
	}
	errs := admissionpolicy.ValidateFailurePolicy(spec.FailurePolicy, path.Child("failurePolicy"))
	params := spec.ParamKind != nil
	if params {
		errs = append(errs, admissionpolicy.ValidateParamKind(*spec.ParamKind, path.Child("paramKind"))...)
	}
	errs = append(errs, admissionpolicy.ValidateMatchConstraints(spec.MatchConstraints, path.Child("matchConstraints"))...)
	if !opts.ignoreMatchConditions {
		errs = append(errs, admissionpolicy.ValidateMatchConditions(spec.MatchConditions, params, opts.stored, path.Child("matchConditions"))...)
	}
	for i := range spec.Variables {
		errs = append(errs, admissionpolicy.ValidateVariable(getCompiler(), &spec.Variables[i], params, opts.stored, path.Child("variables").Index(i))...)
	}
	if len(spec.Validations) == 0 && len(spec.AuditAnnotations) == 0 {
		const msg = "validations or auditAnnotations must contain at least one item"
		return append(errs, field.Required(path.Child("validations"), msg), field.Required(path.Child("auditAnnotations"), msg))
	}
	for i := range spec.Validations {
		errs = append(errs, validateValidation(getCompiler(), &spec.Validations[i], params, opts.stored, path.Child("validations").Index(i))...)
	}
	if spec.AuditAnnotations != nil {
		annotationsPath := path.Child("auditAnnotations")
		if len(spec.AuditAnnotations) > maxAuditAnnotations {
			errs = append(errs, field.Invalid(annotationsPath, internalAuditAnnotations(spec.AuditAnnotations),
				fmt.Sprintf("must not have more than %d auditAnnotations", maxAuditAnnotations)))
		}
		keys := sets.New[string]()
		for i := range spec.AuditAnnotations {
			a := &spec.AuditAnnotations[i]
			errs = append(errs, validateAuditAnnotation(getCompiler(), name, a, params, opts.stored, annotationsPath.Index(i))...)
			if keys.Has(a.Key) {
				errs = append(errs, field.Duplicate(annotationsPath.Index(i).Child("key"), a.Key))
			}
			keys.Insert(a.Key)
		}
	}
	return errs
}

// internalAuditAnnotation is upstream's internal AuditAnnotation, whose
// JSON (Go field names, no tags) its "must not have more than" error
// prints.
type internalAuditAnnotation struct {
	Key             string
	ValueExpression string
}

func internalAuditAnnotations(in []admissionregistrationv1.AuditAnnotation) []internalAuditAnnotation {
	out := make([]internalAuditAnnotation, len(in))
	for i, a := range in {
		out[i] = internalAuditAnnotation{Key: a.Key, ValueExpression: a.ValueExpression}
	}
	return out
}

// newlines are the line breaks of CEL's grammar.
var newlines = regexp.MustCompile(`[\n\r]+`)

// validateValidation follows upstream's validateValidation: a bool
// expression, an optional string messageExpression (which sees params,
// not the authorizer), a one-line message and a supported reason.
func validateValidation(c plugincel.Compiler, v *admissionregistrationv1.Validation, params bool, stored admissionpolicy.Stored, path *field.Path) field.ErrorList {
	var errs field.ErrorList
	if strings.TrimSpace(v.Expression) == "" {
		errs = append(errs, field.Required(path.Child("expression"), "expression is not specified"))
	} else {
		errs = append(errs, admissionpolicy.Compile(c, &validating.ValidationCondition{Expression: v.Expression},
			plugincel.OptionalVariableDeclarations{HasParams: params, HasAuthorizer: true},
			stored.Validations.Has(v.Expression), v.Expression, path.Child("expression"))...)
	}
	if v.MessageExpression != "" && strings.TrimSpace(v.MessageExpression) == "" {
		errs = append(errs, field.Invalid(path.Child("messageExpression"), v.MessageExpression, "must be non-empty if specified"))
	} else if v.MessageExpression != "" {
		// The untrimmed expression, so that the compiler's columns are
		// right.
		errs = append(errs, admissionpolicy.Compile(c, &validating.MessageExpressionCondition{MessageExpression: v.MessageExpression},
			plugincel.OptionalVariableDeclarations{HasParams: params},
			stored.MessageExpressions.Has(v.MessageExpression), v.MessageExpression, path.Child("messageExpression"))...)
	}
	msg := strings.TrimSpace(v.Message)
	if v.Message != "" && msg == "" {
		errs = append(errs, field.Invalid(path.Child("message"), v.Message, "must be non-empty if specified"))
	} else if newlines.MatchString(msg) {
		errs = append(errs, field.Invalid(path.Child("message"), v.Message, "must not contain line breaks"))
	}
	if v.Reason != nil && !reasons.Has(string(*v.Reason)) {
		errs = append(errs, field.NotSupported(path.Child("reason"), *v.Reason, sets.List(reasons)))
	}
	return errs
}

// validateAuditAnnotation follows upstream's validateAuditAnnotation: the
// key, prefixed with the policy's name, is a qualified name; the value a
// string (or null) expression of at most 5kb.
func validateAuditAnnotation(c plugincel.Compiler, name string, a *admissionregistrationv1.AuditAnnotation, params bool, stored admissionpolicy.Stored, path *field.Path) field.ErrorList {
	var errs field.ErrorList
	if name != "" {
		errs = append(errs, validate.QualifiedName(name+"/"+a.Key, path.Child("key"))...)
	} else {
		errs = append(errs, field.Invalid(path.Child("key"), a.Key, "requires metadata.name be non-empty"))
	}
	exprPath := path.Child("valueExpression")
	switch expr := strings.TrimSpace(a.ValueExpression); {
	case expr == "":
		errs = append(errs, field.Required(exprPath, "valueExpression is not specified"))
	case len(expr) > maxAuditAnnotationValueExpressionLength:
		errs = append(errs, field.Required(exprPath, fmt.Sprintf("must not exceed %d bytes in length", maxAuditAnnotationValueExpressionLength)))
	default:
		errs = append(errs, admissionpolicy.Compile(c, &validating.AuditAnnotationCondition{ValueExpression: expr},
			plugincel.OptionalVariableDeclarations{HasParams: params, HasAuthorizer: true},
			stored.AuditAnnotations.Has(a.ValueExpression), a.ValueExpression, exprPath)...)
	}
	return errs
}

// validateStatus follows upstream's validateValidatingAdmissionPolicyStatus:
// each type checking warning names its field by a JSONPath and says
// something; the conditions are metav1 conditions.
func validateStatus(status *admissionregistrationv1.ValidatingAdmissionPolicyStatus, path *field.Path) field.ErrorList {
	var errs field.ErrorList
	if tc := status.TypeChecking; tc != nil {
		for i, w := range tc.ExpressionWarnings {
			warningPath := path.Child("typeChecking", "expressionWarnings").Index(i)
			if w.Warning == "" {
				errs = append(errs, field.Required(warningPath.Child("warning"), ""))
			}
			errs = append(errs, validateFieldRef(w.FieldRef, warningPath.Child("fieldRef"))...)
		}
	}
	return append(errs, metav1validation.ValidateConditions(status.Conditions, path.Child("conditions"))...)
}

// validateFieldRef requires a JSONPath (without its braces).
func validateFieldRef(ref string, path *field.Path) field.ErrorList {
	ref = strings.TrimSpace(ref)
	if ref == "" {
		return field.ErrorList{field.Required(path, "")}
	}
	if err := jsonpath.New("spec").Parse("{" + ref + "}"); err != nil {
		return field.ErrorList{field.Invalid(path, ref, fmt.Sprintf("invalid JSONPath: %v", err))}
	}
	return nil
}
