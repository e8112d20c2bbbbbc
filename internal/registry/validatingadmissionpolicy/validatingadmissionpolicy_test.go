package validatingadmissionpolicy

import (
	"context"
	"strconv"
	"strings"
	"testing"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/utils/ptr"

	"github.com/svcnet/svcnet/internal/auth/authn"
	"github.com/svcnet/svcnet/internal/auth/authz"
	"github.com/svcnet/svcnet/internal/registry/admissionpolicy"
	"github.com/svcnet/svcnet/internal/registry/registrytest"
)

// rules match creates and updates of deployments.
func rules() *admissionregistrationv1.MatchResources {
	return &admissionregistrationv1.MatchResources{ResourceRules: []admissionregistrationv1.NamedRuleWithOperations{{
		RuleWithOperations: admissionregistrationv1.RuleWithOperations{
			Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Create, admissionregistrationv1.Update},
			Rule:       admissionregistrationv1.Rule{APIGroups: []string{"apps"}, APIVersions: []string{"v1"}, Resources: []string{"deployments"}},
		},
	}}}
}

func valid() *admissionregistrationv1.ValidatingAdmissionPolicy {
	p := &admissionregistrationv1.ValidatingAdmissionPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: "replica-limit"},
		Spec: admissionregistrationv1.ValidatingAdmissionPolicySpec{
			MatchConstraints: rules(),
			Validations:      []admissionregistrationv1.Validation{{Expression: "object.spec.replicas <= 5"}},
		},
	}
	strategy{}.Default(p)
	return p
}

func TestDefault(t *testing.T) {
	in := &admissionregistrationv1.ValidatingAdmissionPolicy{Spec: admissionregistrationv1.ValidatingAdmissionPolicySpec{MatchConstraints: rules()}}
	want := in.DeepCopy()
	want.Spec.FailurePolicy = ptr.To(admissionregistrationv1.Fail)
	mc := want.Spec.MatchConstraints
	mc.MatchPolicy = ptr.To(admissionregistrationv1.Equivalent)
	mc.NamespaceSelector, mc.ObjectSelector = &metav1.LabelSelector{}, &metav1.LabelSelector{}
	mc.ResourceRules[0].Scope = ptr.To(admissionregistrationv1.AllScopes)

	set := want.DeepCopy()
	set.Spec.FailurePolicy = ptr.To(admissionregistrationv1.Ignore)
	set.Spec.MatchConstraints.MatchPolicy = ptr.To(admissionregistrationv1.Exact)
	set.Spec.MatchConstraints.ResourceRules[0].Scope = ptr.To(admissionregistrationv1.NamespacedScope)

	registrytest.RunDefault(t, strategy{}, []registrytest.DefaultCase[*admissionregistrationv1.ValidatingAdmissionPolicy]{
		{Name: "unset", In: in, Want: want},
		{Name: "set", In: set, Want: set.DeepCopy()},
		{Name: "no match constraints", In: &admissionregistrationv1.ValidatingAdmissionPolicy{},
			Want: &admissionregistrationv1.ValidatingAdmissionPolicy{Spec: admissionregistrationv1.ValidatingAdmissionPolicySpec{FailurePolicy: ptr.To(admissionregistrationv1.Fail)}}},
	})
}

func TestValidate(t *testing.T) {
	type p = *admissionregistrationv1.ValidatingAdmissionPolicy
	registrytest.RunValidate(t, strategy{}, valid, []registrytest.Case[p]{
		{Name: "valid", Change: func(p) {}},
		{Name: "params, variables, messages and audit annotations", Change: func(p p) {
			p.Spec.ParamKind = &admissionregistrationv1.ParamKind{APIVersion: "v1", Kind: "ConfigMap"}
			p.Spec.MatchConditions = []admissionregistrationv1.MatchCondition{{Name: "limited", Expression: "has(params.data.limit)"}}
			p.Spec.Variables = []admissionregistrationv1.Variable{{Name: "limit", Expression: "int(params.data.limit)"}}
			p.Spec.Validations = []admissionregistrationv1.Validation{{
				Expression:        "object.spec.replicas <= variables.limit",
				MessageExpression: "'at most ' + string(variables.limit) + ' replicas'",
				Reason:            ptr.To(metav1.StatusReasonForbidden),
			}}
			p.Spec.AuditAnnotations = []admissionregistrationv1.AuditAnnotation{{Key: "high-replicas", ValueExpression: "object.spec.replicas > 3 ? 'high' : 'low'"}}
		}},
		{Name: "only audit annotations", Change: func(p p) {
			p.Spec.Validations = nil
			p.Spec.AuditAnnotations = []admissionregistrationv1.AuditAnnotation{{Key: "replicas", ValueExpression: "string(object.spec.replicas)"}}
		}},
		{Name: "empty", Change: func(p p) {
			p.Spec = admissionregistrationv1.ValidatingAdmissionPolicySpec{}
		}, Want: []string{
			"spec.failurePolicy: Required value",
			"spec.matchConstraints: Required value",
			"spec.validations: Required value: validations or auditAnnotations must contain at least one item",
			"spec.auditAnnotations: Required value: validations or auditAnnotations must contain at least one item",
		}},
		{Name: "policies and rules", Change: func(p p) {
			p.Spec.FailurePolicy = ptr.To(admissionregistrationv1.FailurePolicyType("Maybe"))
			p.Spec.MatchConstraints.ResourceRules = nil
			p.Spec.MatchConstraints.ObjectSelector = nil
		}, Want: []string{
			`spec.failurePolicy: Unsupported value: "Maybe": supported values: "Fail", "Ignore"`,
			"spec.matchConstraints.objectSelector: Required value",
			"spec.matchConstraints.resourceRules: Required value",
		}},
		{Name: "param kind", Change: func(p p) {
			p.Spec.ParamKind = &admissionregistrationv1.ParamKind{APIVersion: "example.com/v1"}
		}, Want: []string{
			"spec.paramKind.kind: Required value",
		}},
		{Name: "expressions", Change: func(p p) {
			p.Spec.Validations = []admissionregistrationv1.Validation{
				{Expression: "object.spec.replicas"},
				{Expression: "params.max > 1", MessageExpression: "authorizer.path('/').check('get').reason()"},
				{Expression: " ", MessageExpression: "  ", Message: "a\nb", Reason: ptr.To(metav1.StatusReasonNotFound)},
				{Expression: "true", Message: " "},
			}
		}, Want: []string{
			`spec.validations[0].expression: Invalid value: "object.spec.replicas": must evaluate to bool but got dyn`,
			"spec.validations[1].expression: Invalid value: \"params.max > 1\": compilation failed: ERROR: <input>:1:1: undeclared reference to 'params' (in container '')\n | params.max > 1\n | ^",
			"spec.validations[1].messageExpression: Invalid value: \"authorizer.path('/').check('get').reason()\": compilation failed: ERROR: <input>:1:1: undeclared reference to 'authorizer' (in container '')\n | authorizer.path('/').check('get').reason()\n | ^",
			"spec.validations[2].expression: Required value: expression is not specified",
			`spec.validations[2].messageExpression: Invalid value: "  ": must be non-empty if specified`,
			`spec.validations[2].message: Invalid value: "a\nb": must not contain line breaks`,
			`spec.validations[2].reason: Unsupported value: "NotFound": supported values: "Forbidden", "Invalid", "RequestEntityTooLarge"`,
			`spec.validations[3].message: Invalid value: " ": must be non-empty if specified`,
		}},
		{Name: "variables without composition are unknown", Change: func(p p) {
			p.Spec.Validations[0].Expression = "variables.limit > 1"
		}, Want: []string{
			"spec.validations[0].expression: Invalid value: \"variables.limit > 1\": compilation failed: ERROR: <input>:1:1: undeclared reference to 'variables' (in container '')\n | variables.limit > 1\n | ^",
		}},
		{Name: "variables", Change: func(p p) {
			p.Spec.Variables = []admissionregistrationv1.Variable{{Name: "1st", Expression: "1"}, {Name: "two", Expression: " "}}
		}, Want: []string{
			`spec.variables[0].name: Invalid value: "1st": must be a valid CEL identifier`,
			"spec.variables[1].expression: Required value: expression is not specified",
		}},
		{Name: "match conditions see params", Change: func(p p) {
			p.Spec.MatchConditions = []admissionregistrationv1.MatchCondition{{Name: "p", Expression: "params != null"}}
		}, Want: []string{
			"spec.matchConditions[0].expression: Invalid value: \"params != null\": compilation failed: ERROR: <input>:1:1: undeclared reference to 'params' (in container '')\n | params != null\n | ^",
		}},
		{Name: "audit annotations", Change: func(p p) {
			p.Spec.AuditAnnotations = []admissionregistrationv1.AuditAnnotation{
				{Key: "a", ValueExpression: "1"},
				{Key: "a b", ValueExpression: " "},
				{Key: "a", ValueExpression: "'" + strings.Repeat("x", 5*1024) + "'"},
			}
		}, Want: []string{
			`spec.auditAnnotations[0].valueExpression: Invalid value: "1": must evaluate to one of [string null_type] but got int`,
			`spec.auditAnnotations[1].key: Invalid value: "replica-limit/a b": name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')`,
			"spec.auditAnnotations[1].valueExpression: Required value: valueExpression is not specified",
			"spec.auditAnnotations[2].valueExpression: Required value: must not exceed 5120 bytes in length",
			`spec.auditAnnotations[2].key: Duplicate value: "a"`,
		}},
		{Name: "too many audit annotations", Change: func(p p) {
			for i := range 21 {
				p.Spec.AuditAnnotations = append(p.Spec.AuditAnnotations, admissionregistrationv1.AuditAnnotation{Key: "k" + strconv.Itoa(i), ValueExpression: "'v'"})
			}
		}, Want: []string{
			`spec.auditAnnotations: Invalid value: [{"Key":"k0","ValueExpression":"'v'"},{"Key":"k1","ValueExpression":"'v'"},{"Key":"k2","ValueExpression":"'v'"},{"Key":"k3","ValueExpression":"'v'"},{"Key":"k4","ValueExpression":"'v'"},{"Key":"k5","ValueExpression":"'v'"},{"Key":"k6","ValueExpression":"'v'"},{"Key":"k7","ValueExpression":"'v'"},{"Key":"k8","ValueExpression":"'v'"},{"Key":"k9","ValueExpression":"'v'"},{"Key":"k10","ValueExpression":"'v'"},{"Key":"k11","ValueExpression":"'v'"},{"Key":"k12","ValueExpression":"'v'"},{"Key":"k13","ValueExpression":"'v'"},{"Key":"k14","ValueExpression":"'v'"},{"Key":"k15","ValueExpression":"'v'"},{"Key":"k16","ValueExpression":"'v'"},{"Key":"k17","ValueExpression":"'v'"},{"Key":"k18","ValueExpression":"'v'"},{"Key":"k19","ValueExpression":"'v'"},{"Key":"k20","ValueExpression":"'v'"}]: must not have more than 20 auditAnnotations`,
		}},
		{Name: "static name", Change: func(p p) { p.Name = "limit.static.k8s.io" }, Want: []string{
			`metadata.name: Invalid value: "limit.static.k8s.io": names ending with ".static.k8s.io" are reserved for static manifest-based configurations and cannot be managed via the API`,
		}},
	})
}

func TestValidateUpdate(t *testing.T) {
	type p = *admissionregistrationv1.ValidatingAdmissionPolicy
	badCondition := func(p p) {
		p.Spec.MatchConditions = []admissionregistrationv1.MatchCondition{{Name: "n", Expression: "1"}}
	}
	registrytest.RunValidateUpdate(t, strategy{}, valid, []registrytest.Case[p]{
		{Name: "unchanged", Change: func(p) {}},
		{Name: "static name kept", Old: func(p p) { p.Name = "limit.static.k8s.io" }, Change: func(p) {}},
		{Name: "new bad validation refused", Change: func(p p) { p.Spec.Validations[0].Expression = "1" }, Want: []string{
			`spec.validations[0].expression: Invalid value: "1": must evaluate to bool but got int`,
		}},
		{Name: "unchanged bad match condition skipped", Old: badCondition, Change: func(p p) {
			p.Spec.Validations[0].Message = "too many replicas"
		}},
		{Name: "match conditions checked again with a new paramKind", Old: badCondition, Change: func(p p) {
			p.Spec.ParamKind = &admissionregistrationv1.ParamKind{APIVersion: "v1", Kind: "ConfigMap"}
		}, Want: []string{
			`spec.matchConditions[0].expression: Invalid value: "1": must evaluate to bool but got int`,
		}},
		{Name: "status write checks the status only", Old: func(p p) { p.Spec.Validations[0].Expression = "1" }, Change: func(p p) {
			p.Status.ObservedGeneration = 1
			p.Status.TypeChecking = &admissionregistrationv1.TypeChecking{ExpressionWarnings: []admissionregistrationv1.ExpressionWarning{
				{FieldRef: "spec.validations[0].expression", Warning: "apps/v1, Kind=Deployment: no such key: replica"},
				{FieldRef: " spec.validations[0 "},
			}}
			p.Status.Conditions = []metav1.Condition{{Type: "Bad Type", Status: "Maybe"}}
		}, Want: []string{
			"status.typeChecking.expressionWarnings[1].warning: Required value",
			`status.typeChecking.expressionWarnings[1].fieldRef: Invalid value: "spec.validations[0": invalid JSONPath: unterminated array`,
			`status.conditions[0].type: Invalid value: "Bad Type": name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')`,
			`status.conditions[0].status: Unsupported value: "Maybe": supported values: "False", "True", "Unknown"`,
			"status.conditions[0].lastTransitionTime: Required value",
			`status.conditions[0].reason: Required value`,
		}},
		{Name: "valid status", Change: func(p p) {
			p.Status = admissionregistrationv1.ValidatingAdmissionPolicyStatus{ObservedGeneration: 1, TypeChecking: &admissionregistrationv1.TypeChecking{},
				Conditions: []metav1.Condition{{Type: "TypeChecked", Status: metav1.ConditionTrue, Reason: "Checked", LastTransitionTime: metav1.Now()}}}
		}},
	})
}

func TestPrepareForStatusUpdate(t *testing.T) {
	old := valid()
	old.Labels, old.Annotations = map[string]string{"a": "b"}, map[string]string{"c": "d"}
	p := old.DeepCopy()
	p.Labels, p.Annotations, p.Finalizers = map[string]string{"x": "y"}, nil, []string{"example.com/f"}
	p.OwnerReferences = []metav1.OwnerReference{{Name: "o"}}
	strategy{}.PrepareForStatusUpdate(p, old)
	if p.Labels["a"] != "b" || p.Annotations["c"] != "d" || p.Finalizers != nil || p.OwnerReferences != nil {
		t.Errorf("status write changed metadata: %+v", p.ObjectMeta)
	}
}

// configMapsOnly allows reading configmaps only.
type configMapsOnly struct{}

func (configMapsOnly) Authorize(_ context.Context, a authz.Attributes) (authz.Decision, string, error) {
	if a.Resource == "configmaps" {
		return authz.Allow, "", nil
	}
	return authz.NoOpinion, "", nil
}

func TestAdmit(t *testing.T) {
	s := strategy{access: admissionpolicy.Access{Authorizer: configMapsOnly{}}}
	ctx := authn.WithUser(context.Background(), &user.DefaultInfo{Name: "alice"})
	p := valid()
	p.Spec.ParamKind = &admissionregistrationv1.ParamKind{APIVersion: "example.com/v1", Kind: "Limits"}
	err := s.Admit(ctx, p)
	want := `ValidatingAdmissionPolicy.admissionregistration.k8s.io "replica-limit" is invalid: spec.paramKind: Forbidden: user &{alice  [] map[]} must have "get" permission on all objects of the referenced paramKind (kind=Limits, apiVersion=example.com/v1)`
	if !apierrors.IsInvalid(err) || err.Error() != want {
		t.Errorf("Admit: %v, want %s", err, want)
	}
	// A policy that fails validation is left for validation to refuse.
	bad := p.DeepCopy()
	bad.Spec.Validations = nil
	if err := s.Admit(ctx, bad); err != nil {
		t.Errorf("invalid policy: %v", err)
	}
	// Without a paramKind there is nothing to authorize.
	if err := s.Admit(ctx, valid()); err != nil {
		t.Errorf("no paramKind: %v", err)
	}
	// Updates check a changed paramKind only, and never status writes.
	if err := s.AdmitUpdate(ctx, "", p, p.DeepCopy()); err != nil {
		t.Errorf("same paramKind: %v", err)
	}
	if err := s.AdmitUpdate(ctx, "status", p, valid()); err != nil {
		t.Errorf("status: %v", err)
	}
	if err := s.AdmitUpdate(ctx, "", p, valid()); err == nil || err.Error() != want {
		t.Errorf("new paramKind: %v, want %s", err, want)
	}
	// Without an authorizer every paramKind passes.
	registrytest.Created(strategy{}, p.DeepCopy())
}

func TestColumns(t *testing.T) {
	p := valid()
	registrytest.ExpectRow(t, Resource(admissionpolicy.Access{}).Columns, p, []string{"Name", "Validations", "ParamKind", "Age"},
		[]interface{}{"replica-limit", int64(1), "<unset>", "<unknown>"})
	p.Spec.ParamKind = &admissionregistrationv1.ParamKind{APIVersion: "v1", Kind: "ConfigMap"}
	p.Spec.Validations = append(p.Spec.Validations, p.Spec.Validations[0])
	registrytest.ExpectRow(t, Resource(admissionpolicy.Access{}).Columns, p, []string{"Name", "Validations", "ParamKind", "Age"},
		[]interface{}{"replica-limit", int64(2), "v1/ConfigMap", "<unknown>"})
}

func TestResource(t *testing.T) {
	r := Resource(admissionpolicy.Access{})
	if r.Resource != "validatingadmissionpolicies" || r.Namespaced || !r.Status || r.KeepStatusOnCreate || !r.Generation ||
		r.Kind.String() != "admissionregistration.k8s.io/v1, Kind=ValidatingAdmissionPolicy" {
		t.Errorf("unexpected discovery data: %+v", r)
	}
}
