package validatingadmissionpolicybinding

import (
	"context"
	"testing"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/utils/ptr"

	"github.com/svcnet/svcnet/internal/auth/authn"
	"github.com/svcnet/svcnet/internal/auth/authz"
	"github.com/svcnet/svcnet/internal/registry/admissionpolicy"
	"github.com/svcnet/svcnet/internal/registry/registrytest"
)

func valid() *admissionregistrationv1.ValidatingAdmissionPolicyBinding {
	b := &admissionregistrationv1.ValidatingAdmissionPolicyBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "replica-limit-binding"},
		Spec: admissionregistrationv1.ValidatingAdmissionPolicyBindingSpec{
			PolicyName:        "replica-limit",
			ValidationActions: []admissionregistrationv1.ValidationAction{admissionregistrationv1.Deny},
		},
	}
	strategy{}.Default(b)
	return b
}

func TestDefault(t *testing.T) {
	in := valid()
	in.Spec.MatchResources = &admissionregistrationv1.MatchResources{ExcludeResourceRules: []admissionregistrationv1.NamedRuleWithOperations{{}}}
	want := in.DeepCopy()
	mr := want.Spec.MatchResources
	mr.MatchPolicy = ptr.To(admissionregistrationv1.Equivalent)
	mr.NamespaceSelector, mr.ObjectSelector = &metav1.LabelSelector{}, &metav1.LabelSelector{}
	mr.ExcludeResourceRules[0].Scope = ptr.To(admissionregistrationv1.AllScopes)
	registrytest.RunDefault(t, strategy{}, []registrytest.DefaultCase[*admissionregistrationv1.ValidatingAdmissionPolicyBinding]{
		{Name: "match resources", In: in, Want: want},
		{Name: "none", In: valid(), Want: valid()},
	})
}

func TestValidate(t *testing.T) {
	type b = *admissionregistrationv1.ValidatingAdmissionPolicyBinding
	registrytest.RunValidate(t, strategy{}, valid, []registrytest.Case[b]{
		{Name: "valid", Change: func(b) {}},
		{Name: "param ref and match resources", Change: func(b b) {
			b.Spec.ParamRef = &admissionregistrationv1.ParamRef{Name: "limits", Namespace: "default", ParameterNotFoundAction: ptr.To(admissionregistrationv1.DenyAction)}
			b.Spec.MatchResources = &admissionregistrationv1.MatchResources{NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"env": "test"}}}
			strategy{}.Default(b)
			b.Spec.ValidationActions = []admissionregistrationv1.ValidationAction{admissionregistrationv1.Warn, admissionregistrationv1.Audit}
		}},
		{Name: "empty", Change: func(b b) { b.Spec = admissionregistrationv1.ValidatingAdmissionPolicyBindingSpec{} }, Want: []string{
			// Declarative validation's errors, in place of upstream's
			// handwritten ones it covers.
			"spec.policyName: Required value",
			"spec.validationActions: Required value",
		}},
		{Name: "policy name", Change: func(b b) { b.Spec.PolicyName = "Replica_Limit" }, Want: []string{
			`spec.policyName: Invalid value: "Replica_Limit": a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')`,
		}},
		{Name: "actions", Change: func(b b) {
			b.Spec.ValidationActions = []admissionregistrationv1.ValidationAction{"Deny", "Log", "Warn", "Deny"}
		}, Want: []string{
			`spec.validationActions[1]: Unsupported value: "Log": supported values: "Audit", "Deny", "Warn"`,
			`spec.validationActions[3]: Duplicate value: "Deny"`,
			`spec.validationActions: Invalid value: ["Deny","Log","Warn","Deny"]: must not contain both Deny and Warn (repeating the same validation failure information in the API response and headers serves no purpose)`,
		}},
		{Name: "param ref", Change: func(b b) { b.Spec.ParamRef = &admissionregistrationv1.ParamRef{} }, Want: []string{
			"spec.paramRef: Required value: one of name or selector must be specified",
			"spec.paramRef.parameterNotFoundAction: Required value",
		}},
		{Name: "match resources", Change: func(b b) {
			b.Spec.MatchResources = &admissionregistrationv1.MatchResources{}
		}, Want: []string{
			"spec.matchResources.matchPolicy: Required value",
			"spec.matchResources.namespaceSelector: Required value",
			"spec.matchResources.objectSelector: Required value",
		}},
		{Name: "static name", Change: func(b b) { b.Name = "limit.static.k8s.io" }, Want: []string{
			`metadata.name: Invalid value: "limit.static.k8s.io": names ending with ".static.k8s.io" are reserved for static manifest-based configurations and cannot be managed via the API`,
		}},
	})
}

func TestValidateUpdate(t *testing.T) {
	type b = *admissionregistrationv1.ValidatingAdmissionPolicyBinding
	noActions := func(b b) { b.Spec.ValidationActions = nil }
	registrytest.RunValidateUpdate(t, strategy{}, valid, []registrytest.Case[b]{
		{Name: "unchanged", Change: func(b) {}},
		{Name: "actions removed", Change: noActions, Want: []string{"spec.validationActions: Required value"}},
		// Declarative validation skips what did not change, leaving
		// upstream's handwritten error.
		{Name: "stored without actions", Old: noActions, Change: func(b b) { b.Labels = map[string]string{"a": "b"} }, Want: []string{
			"spec.validationActions: Required value: at least one validation action is required",
		}},
		{Name: "stored without actions, policy changed", Old: noActions, Change: func(b b) { b.Spec.PolicyName = "other" }, Want: []string{
			"spec.validationActions: Required value: at least one validation action is required",
		}},
		{Name: "stored without actions, empty list", Old: noActions, Change: func(b b) {
			b.Spec.ValidationActions = []admissionregistrationv1.ValidationAction{}
		}, Want: []string{
			"spec.validationActions: Required value: at least one validation action is required",
		}},
		{Name: "policy name removed", Change: func(b b) { b.Spec.PolicyName = "" }, Want: []string{"spec.policyName: Required value"}},
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
	paramKindOf := func(_ context.Context, name string) (*admissionregistrationv1.ParamKind, error) {
		if name == "replica-limit" {
			return &admissionregistrationv1.ParamKind{APIVersion: "example.com/v1", Kind: "Limits"}, nil
		}
		return nil, apierrors.NewNotFound(admissionregistrationv1.Resource("validatingadmissionpolicies"), name)
	}
	resolve := func(gvk schema.GroupVersionKind) (schema.GroupVersionResource, error) {
		return gvk.GroupVersion().WithResource("limits"), nil
	}
	s := strategy{access: admissionpolicy.Access{Authorizer: configMapsOnly{}, Resolve: resolve}, paramKindOf: paramKindOf}
	ctx := authn.WithUser(context.Background(), &user.DefaultInfo{Name: "alice"})
	b := valid()
	b.Spec.ParamRef = &admissionregistrationv1.ParamRef{Name: "limits", ParameterNotFoundAction: ptr.To(admissionregistrationv1.DenyAction)}
	want := `ValidatingAdmissionPolicyBinding.admissionregistration.k8s.io "replica-limit-binding" is invalid: spec.paramRef: Forbidden: user &{alice  [] map[]} does not have "get" permission on the object referenced by paramRef`
	if err := s.Admit(ctx, b); !apierrors.IsInvalid(err) || err.Error() != want {
		t.Errorf("Admit: %v, want %s", err, want)
	}
	if err := s.AdmitUpdate(ctx, "", b, b.DeepCopy()); err == nil || err.Error() != want {
		t.Errorf("AdmitUpdate: %v, want %s (upstream compares paramRef pointers)", err, want)
	}
	bad := b.DeepCopy()
	bad.Spec.ValidationActions = nil
	if err := s.Admit(ctx, bad); err != nil {
		t.Errorf("invalid binding: %v", err)
	}
	if err := s.Admit(ctx, valid()); err != nil {
		t.Errorf("no paramRef: %v", err)
	}
	missing := b.DeepCopy()
	missing.Spec.PolicyName = "missing"
	if err := s.Admit(ctx, missing); err == nil || err.Error() != `ValidatingAdmissionPolicyBinding.admissionregistration.k8s.io "replica-limit-binding" is invalid: spec.paramRef: Forbidden: unable to get policy missing to determine minimum required permissions and user &{alice  [] map[]} does not have "get" permission for all groups, versions and resources` {
		t.Errorf("missing policy: %v", err)
	}
}

func TestColumns(t *testing.T) {
	b := valid()
	cols := Resource(admissionpolicy.Access{}, nil).Columns
	names := []string{"Name", "PolicyName", "ParamRef", "Age"}
	registrytest.ExpectRow(t, cols, b, names, []interface{}{"replica-limit-binding", "replica-limit", "<unset>", "<unknown>"})
	b.Spec.ParamRef = &admissionregistrationv1.ParamRef{Name: "limits", Namespace: "default"}
	registrytest.ExpectRow(t, cols, b, names, []interface{}{"replica-limit-binding", "replica-limit", "default/limits", "<unknown>"})
}

func TestResource(t *testing.T) {
	r := Resource(admissionpolicy.Access{}, nil)
	if r.Resource != "validatingadmissionpolicybindings" || r.Namespaced || r.Status || !r.Generation ||
		r.Kind.String() != "admissionregistration.k8s.io/v1, Kind=ValidatingAdmissionPolicyBinding" {
		t.Errorf("unexpected discovery data: %+v", r)
	}
}
