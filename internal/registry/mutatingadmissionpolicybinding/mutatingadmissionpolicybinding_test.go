package mutatingadmissionpolicybinding

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

func valid() *admissionregistrationv1.MutatingAdmissionPolicyBinding {
	b := &admissionregistrationv1.MutatingAdmissionPolicyBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "label-pods-binding"},
		Spec:       admissionregistrationv1.MutatingAdmissionPolicyBindingSpec{PolicyName: "label-pods"},
	}
	strategy{}.Default(b)
	return b
}

func TestDefault(t *testing.T) {
	in := valid()
	in.Spec.MatchResources = &admissionregistrationv1.MatchResources{ResourceRules: []admissionregistrationv1.NamedRuleWithOperations{{}}}
	want := in.DeepCopy()
	mr := want.Spec.MatchResources
	mr.MatchPolicy = ptr.To(admissionregistrationv1.Equivalent)
	mr.NamespaceSelector, mr.ObjectSelector = &metav1.LabelSelector{}, &metav1.LabelSelector{}
	mr.ResourceRules[0].Scope = ptr.To(admissionregistrationv1.AllScopes)
	registrytest.RunDefault(t, strategy{}, []registrytest.DefaultCase[*admissionregistrationv1.MutatingAdmissionPolicyBinding]{
		{Name: "match resources", In: in, Want: want},
		{Name: "none", In: valid(), Want: valid()},
	})
}

func TestValidate(t *testing.T) {
	type b = *admissionregistrationv1.MutatingAdmissionPolicyBinding
	registrytest.RunValidate(t, strategy{}, valid, []registrytest.Case[b]{
		{Name: "valid", Change: func(b) {}},
		{Name: "param ref by selector", Change: func(b b) {
			b.Spec.ParamRef = &admissionregistrationv1.ParamRef{Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"a": "b"}},
				ParameterNotFoundAction: ptr.To(admissionregistrationv1.AllowAction)}
		}},
		// No declarative validation here: upstream's own messages.
		{Name: "empty", Change: func(b b) { b.Spec = admissionregistrationv1.MutatingAdmissionPolicyBindingSpec{} }, Want: []string{
			"spec.policyName: Required value",
		}},
		{Name: "delete", Change: func(b b) {
			b.Spec.MatchResources = &admissionregistrationv1.MatchResources{ResourceRules: []admissionregistrationv1.NamedRuleWithOperations{{
				RuleWithOperations: admissionregistrationv1.RuleWithOperations{
					Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Delete},
					Rule:       admissionregistrationv1.Rule{APIGroups: []string{""}, APIVersions: []string{"v1"}, Resources: []string{"pods"}},
				},
			}}}
			strategy{}.Default(b)
		}, Want: []string{
			`spec.matchResources.resourceRules.operations: Unsupported value: "DELETE": supported values: "*", "CONNECT", "CREATE", "UPDATE"`,
		}},
		{Name: "param ref", Change: func(b b) {
			b.Spec.ParamRef = &admissionregistrationv1.ParamRef{Name: "x", ParameterNotFoundAction: ptr.To(admissionregistrationv1.ParameterNotFoundActionType(""))}
		}, Want: []string{
			"spec.paramRef.parameterNotFoundAction: Required value",
		}},
		{Name: "static name", Change: func(b b) { b.Name = "label.static.k8s.io" }, Want: []string{
			`metadata.name: Invalid value: "label.static.k8s.io": names ending with ".static.k8s.io" are reserved for static manifest-based configurations and cannot be managed via the API`,
		}},
	})
	registrytest.RunValidateUpdate(t, strategy{}, valid, []registrytest.Case[b]{
		{Name: "unchanged", Change: func(b) {}},
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
		return &admissionregistrationv1.ParamKind{APIVersion: "example.com/v1", Kind: "Labels"}, nil
	}
	resolve := func(gvk schema.GroupVersionKind) (schema.GroupVersionResource, error) {
		return gvk.GroupVersion().WithResource("labels"), nil
	}
	s := strategy{access: admissionpolicy.Access{Authorizer: configMapsOnly{}, Resolve: resolve}, paramKindOf: paramKindOf}
	ctx := authn.WithUser(context.Background(), &user.DefaultInfo{Name: "alice"})
	b := valid()
	b.Spec.ParamRef = &admissionregistrationv1.ParamRef{Selector: &metav1.LabelSelector{}, ParameterNotFoundAction: ptr.To(admissionregistrationv1.DenyAction)}
	// Upstream's message names the verb as the user and the user as
	// the verb.
	want := `MutatingAdmissionPolicyBinding.admissionregistration.k8s.io "label-pods-binding" is invalid: spec.paramRef: Forbidden: user list does not have "&{alice  [] map[]}" permission on the object referenced by paramRef`
	if err := s.Admit(ctx, b); !apierrors.IsInvalid(err) || err.Error() != want {
		t.Errorf("Admit: %v, want %s", err, want)
	}
	if err := s.AdmitUpdate(ctx, "", b, b.DeepCopy()); err == nil || err.Error() != want {
		t.Errorf("AdmitUpdate: %v, want %s", err, want)
	}
	if err := s.Admit(ctx, valid()); err != nil {
		t.Errorf("no paramRef: %v", err)
	}
}

func TestColumns(t *testing.T) {
	b := valid()
	b.Spec.ParamRef = &admissionregistrationv1.ParamRef{Name: "labels"}
	registrytest.ExpectRow(t, Resource(admissionpolicy.Access{}, nil).Columns, b, []string{"Name", "PolicyName", "ParamRef", "Age"},
		[]interface{}{"label-pods-binding", "label-pods", "*/labels", "<unknown>"})
}

func TestResource(t *testing.T) {
	r := Resource(admissionpolicy.Access{}, nil)
	if r.Resource != "mutatingadmissionpolicybindings" || r.Namespaced || r.Status || !r.Generation ||
		r.Kind.String() != "admissionregistration.k8s.io/v1, Kind=MutatingAdmissionPolicyBinding" {
		t.Errorf("unexpected discovery data: %+v", r)
	}
}
