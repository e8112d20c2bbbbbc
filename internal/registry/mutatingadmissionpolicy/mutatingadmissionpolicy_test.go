package mutatingadmissionpolicy

import (
	"context"
	"testing"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apiserver/pkg/authentication/user"

	"github.com/svcnet/svcnet/internal/auth/authn"
	"github.com/svcnet/svcnet/internal/auth/authz"
	"github.com/svcnet/svcnet/internal/registry/admissionpolicy"
	"github.com/svcnet/svcnet/internal/registry/registrytest"
)

// labelPods adds a label to new pods.
const labelPods = `Object{metadata: Object.metadata{labels: {"mutated": "true"}}}`

func valid() *admissionregistrationv1.MutatingAdmissionPolicy {
	p := &admissionregistrationv1.MutatingAdmissionPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: "label-pods"},
		Spec: admissionregistrationv1.MutatingAdmissionPolicySpec{
			MatchConstraints: &admissionregistrationv1.MatchResources{ResourceRules: []admissionregistrationv1.NamedRuleWithOperations{{
				RuleWithOperations: admissionregistrationv1.RuleWithOperations{
					Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Create},
					Rule:       admissionregistrationv1.Rule{APIGroups: []string{""}, APIVersions: []string{"v1"}, Resources: []string{"pods"}},
				},
			}}},
			Mutations: []admissionregistrationv1.Mutation{{
				PatchType:          admissionregistrationv1.PatchTypeApplyConfiguration,
				ApplyConfiguration: &admissionregistrationv1.ApplyConfiguration{Expression: labelPods},
			}},
			ReinvocationPolicy: admissionregistrationv1.NeverReinvocationPolicy,
		},
	}
	strategy{}.Default(p)
	return p
}

func TestDefault(t *testing.T) {
	in := valid()
	in.Spec.FailurePolicy, in.Spec.MatchConstraints.MatchPolicy = nil, nil
	in.Spec.MatchConstraints.NamespaceSelector, in.Spec.MatchConstraints.ObjectSelector = nil, nil
	in.Spec.MatchConstraints.ResourceRules[0].Scope = nil
	in.Spec.ReinvocationPolicy = ""
	want := valid()
	// v1 has no default reinvocationPolicy: validation requires one.
	want.Spec.ReinvocationPolicy = ""
	registrytest.RunDefault(t, strategy{}, []registrytest.DefaultCase[*admissionregistrationv1.MutatingAdmissionPolicy]{
		{Name: "unset", In: in, Want: want},
		{Name: "set", In: valid(), Want: valid()},
	})
}

func TestValidate(t *testing.T) {
	type p = *admissionregistrationv1.MutatingAdmissionPolicy
	registrytest.RunValidate(t, strategy{}, valid, []registrytest.Case[p]{
		{Name: "valid", Change: func(p) {}},
		{Name: "json patch with params and variables", Change: func(p p) {
			p.Spec.ParamKind = &admissionregistrationv1.ParamKind{APIVersion: "v1", Kind: "ConfigMap"}
			p.Spec.MatchConditions = []admissionregistrationv1.MatchCondition{{Name: "has-value", Expression: "has(params.data.value)"}}
			p.Spec.Variables = []admissionregistrationv1.Variable{{Name: "value", Expression: "params.data.value"}}
			p.Spec.Mutations = append(p.Spec.Mutations, admissionregistrationv1.Mutation{
				PatchType: admissionregistrationv1.PatchTypeJSONPatch,
				JSONPatch: &admissionregistrationv1.JSONPatch{Expression: `[JSONPatch{op: "add", path: "/metadata/annotations/value", value: variables.value}]`},
			})
			p.Spec.ReinvocationPolicy = admissionregistrationv1.IfNeededReinvocationPolicy
		}},
		{Name: "empty", Change: func(p p) { p.Spec = admissionregistrationv1.MutatingAdmissionPolicySpec{} }, Want: []string{
			"spec.failurePolicy: Required value",
			"spec.matchConstraints: Required value",
			"spec.mutations: Required value: mutations must contain at least one item",
			"spec.reinvocationPolicy: Required value",
		}},
		{Name: "delete and policies", Change: func(p p) {
			p.Spec.MatchConstraints.ResourceRules[0].Operations = []admissionregistrationv1.OperationType{admissionregistrationv1.Delete}
			p.Spec.ReinvocationPolicy = "Always"
		}, Want: []string{
			`spec.matchConstraints.resourceRules.operations: Unsupported value: "DELETE": supported values: "*", "CONNECT", "CREATE", "UPDATE"`,
			`spec.reinvocationPolicy: Unsupported value: "Always": supported values: "IfNeeded", "Never"`,
		}},
		{Name: "mutations", Change: func(p p) {
			p.Spec.Mutations = []admissionregistrationv1.Mutation{
				{},
				{PatchType: "Merge"},
				{PatchType: admissionregistrationv1.PatchTypeJSONPatch, ApplyConfiguration: &admissionregistrationv1.ApplyConfiguration{Expression: labelPods}},
				{PatchType: admissionregistrationv1.PatchTypeApplyConfiguration, JSONPatch: &admissionregistrationv1.JSONPatch{Expression: "[]"}},
				{PatchType: admissionregistrationv1.PatchTypeApplyConfiguration, ApplyConfiguration: &admissionregistrationv1.ApplyConfiguration{Expression: " "}},
				{PatchType: admissionregistrationv1.PatchTypeJSONPatch, JSONPatch: &admissionregistrationv1.JSONPatch{Expression: " 'add' "}},
				{PatchType: admissionregistrationv1.PatchTypeApplyConfiguration, ApplyConfiguration: &admissionregistrationv1.ApplyConfiguration{Expression: "params"}},
			}
		}, Want: []string{
			"spec.mutations[0].patchType: Required value",
			`spec.mutations[1].patchType: Unsupported value: "Merge": supported values: "ApplyConfiguration", "JSONPatch"`,
			"spec.mutations[2].jsonPatch: Required value: must be specified when patchType is JSONPatch",
			`spec.mutations[2].applyConfiguration: Invalid value: "{applyConfiguration}": must not be specified when patchType is JSONPatch`,
			"spec.mutations[3].applyConfiguration: Required value: must be specified when patchType is ApplyConfiguration",
			`spec.mutations[3].jsonPatch: Invalid value: "{jsonPatch}": must not be specified when patchType is ApplyConfiguration`,
			"spec.mutations[4].applyConfiguration.expression: Required value",
			`spec.mutations[5].jsonPatch.expression: Invalid value: "'add'": must evaluate to list(JSONPatch) but got string`,
			"spec.mutations[6].applyConfiguration.expression: Invalid value: \"params\": compilation failed: ERROR: <input>:1:1: undeclared reference to 'params' (in container '')\n | params\n | ^",
		}},
		{Name: "static name", Change: func(p p) { p.Name = "label.static.k8s.io" }, Want: []string{
			`metadata.name: Invalid value: "label.static.k8s.io": names ending with ".static.k8s.io" are reserved for static manifest-based configurations and cannot be managed via the API`,
		}},
	})
}

func TestValidateUpdate(t *testing.T) {
	type p = *admissionregistrationv1.MutatingAdmissionPolicy
	registrytest.RunValidateUpdate(t, strategy{}, valid, []registrytest.Case[p]{
		{Name: "unchanged", Change: func(p) {}},
		{Name: "unchanged bad match condition skipped", Old: func(p p) {
			p.Spec.MatchConditions = []admissionregistrationv1.MatchCondition{{Name: "n", Expression: "1"}}
		}, Change: func(p p) { p.Spec.ReinvocationPolicy = admissionregistrationv1.IfNeededReinvocationPolicy }},
		{Name: "new bad mutation refused", Change: func(p p) { p.Spec.Mutations[0].ApplyConfiguration.Expression = "1" }, Want: []string{
			`spec.mutations[0].applyConfiguration.expression: Invalid value: "1": must evaluate to Object but got int`,
		}},
	})
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
	p.Spec.ParamKind = &admissionregistrationv1.ParamKind{APIVersion: "example.com/v1", Kind: "Labels"}
	want := `MutatingAdmissionPolicy.admissionregistration.k8s.io "label-pods" is invalid: spec.paramKind: Forbidden: user &{alice  [] map[]} must have "get" permission on all objects of the referenced paramKind (kind=Labels, apiVersion=example.com/v1)`
	if err := s.Admit(ctx, p); !apierrors.IsInvalid(err) || err.Error() != want {
		t.Errorf("Admit: %v, want %s", err, want)
	}
	if err := s.AdmitUpdate(ctx, "", p, p.DeepCopy()); err != nil {
		t.Errorf("same paramKind: %v", err)
	}
	if err := s.AdmitUpdate(ctx, "", p, valid()); err == nil || err.Error() != want {
		t.Errorf("new paramKind: %v, want %s", err, want)
	}
	bad := p.DeepCopy()
	bad.Spec.ReinvocationPolicy = ""
	if err := s.Admit(ctx, bad); err != nil {
		t.Errorf("invalid policy: %v", err)
	}
	masters := authn.WithUser(context.Background(), &user.DefaultInfo{Name: "admin", Groups: []string{user.SystemPrivilegedGroup}})
	if err := s.Admit(masters, p); err != nil {
		t.Errorf("system:masters: %v", err)
	}
	registrytest.Created(strategy{}, p.DeepCopy())
}

func TestColumns(t *testing.T) {
	p := valid()
	p.Spec.ParamKind = &admissionregistrationv1.ParamKind{APIVersion: "v1", Kind: "ConfigMap"}
	registrytest.ExpectRow(t, Resource(admissionpolicy.Access{}).Columns, p, []string{"Name", "Mutations", "ParamKind", "Age"},
		[]interface{}{"label-pods", int64(1), "v1/ConfigMap", "<unknown>"})
}

func TestResource(t *testing.T) {
	r := Resource(admissionpolicy.Access{})
	if r.Resource != "mutatingadmissionpolicies" || r.Namespaced || r.Status || !r.Generation ||
		r.Kind.String() != "admissionregistration.k8s.io/v1, Kind=MutatingAdmissionPolicy" {
		t.Errorf("unexpected discovery data: %+v", r)
	}
}
