package admissionpolicy

import (
	"context"
	"errors"
	"reflect"
	"testing"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/apiserver/pkg/authentication/user"
	fakediscovery "k8s.io/client-go/discovery/fake"
	clienttesting "k8s.io/client-go/testing"
	"k8s.io/utils/ptr"

	"github.com/svcnet/svcnet/internal/auth/authn"
	"github.com/svcnet/svcnet/internal/auth/authz"
	"github.com/svcnet/svcnet/internal/registry/registrytest"
)

func TestDefaultMatchResources(t *testing.T) {
	DefaultMatchResources(nil) // no panic
	m := &admissionregistrationv1.MatchResources{
		ResourceRules:        []admissionregistrationv1.NamedRuleWithOperations{{}},
		ExcludeResourceRules: []admissionregistrationv1.NamedRuleWithOperations{{}, {RuleWithOperations: admissionregistrationv1.RuleWithOperations{Rule: admissionregistrationv1.Rule{Scope: ptr.To(admissionregistrationv1.ClusterScope)}}}},
	}
	DefaultMatchResources(m)
	want := &admissionregistrationv1.MatchResources{
		MatchPolicy:       ptr.To(admissionregistrationv1.Equivalent),
		NamespaceSelector: &metav1.LabelSelector{},
		ObjectSelector:    &metav1.LabelSelector{},
		ResourceRules: []admissionregistrationv1.NamedRuleWithOperations{
			{RuleWithOperations: admissionregistrationv1.RuleWithOperations{Rule: admissionregistrationv1.Rule{Scope: ptr.To(admissionregistrationv1.AllScopes)}}}},
		ExcludeResourceRules: []admissionregistrationv1.NamedRuleWithOperations{
			{RuleWithOperations: admissionregistrationv1.RuleWithOperations{Rule: admissionregistrationv1.Rule{Scope: ptr.To(admissionregistrationv1.AllScopes)}}},
			{RuleWithOperations: admissionregistrationv1.RuleWithOperations{Rule: admissionregistrationv1.Rule{Scope: ptr.To(admissionregistrationv1.ClusterScope)}}}},
	}
	if !reflect.DeepEqual(m, want) {
		t.Errorf("defaulted\n got %+v\nwant %+v", m, want)
	}
	set := &admissionregistrationv1.MatchResources{MatchPolicy: ptr.To(admissionregistrationv1.Exact),
		NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"a": "b"}}, ObjectSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"c": "d"}}}
	wantSet := set.DeepCopy()
	DefaultMatchResources(set)
	if !reflect.DeepEqual(set, wantSet) {
		t.Errorf("set values changed: %+v", set)
	}
	var fp *admissionregistrationv1.FailurePolicyType
	DefaultFailurePolicy(&fp)
	if fp == nil || *fp != admissionregistrationv1.Fail {
		t.Errorf("failurePolicy %v, want Fail", fp)
	}
}

func TestValidateParamKind(t *testing.T) {
	path := field.NewPath("spec", "paramKind")
	for _, tt := range []struct {
		pk   admissionregistrationv1.ParamKind
		want []string
	}{
		{pk: admissionregistrationv1.ParamKind{APIVersion: "v1", Kind: "ConfigMap"}},
		{pk: admissionregistrationv1.ParamKind{APIVersion: "example.com/v1beta1", Kind: "Limits"}},
		{pk: admissionregistrationv1.ParamKind{}, want: []string{
			"spec.paramKind.apiVersion: Required value",
			"spec.paramKind.kind: Required value",
		}},
		{pk: admissionregistrationv1.ParamKind{APIVersion: "a/b/c", Kind: "my_kind"}, want: []string{
			`spec.paramKind.apiVersion: Invalid value: "a/b/c": unexpected GroupVersion string: a/b/c`,
			`spec.paramKind.kind: Invalid value: "my_kind": may have mixed case, but should otherwise match: a DNS-1035 label must consist of lower case alphanumeric characters or '-', start with an alphabetic character, and end with an alphanumeric character (e.g. 'my-name',  or 'abc-123', regex used for validation is '[a-z]([-a-z0-9]*[a-z0-9])?')`,
		}},
		{pk: admissionregistrationv1.ParamKind{APIVersion: "Example.com/", Kind: "Limits"}, want: []string{
			`spec.paramKind.apiVersion: Invalid value: "Example.com": a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')`,
			`spec.paramKind.apiVersion: Invalid value: "Example.com/": version must be specified`,
		}},
		{pk: admissionregistrationv1.ParamKind{APIVersion: "example.com/V1", Kind: "Limits"}, want: []string{
			`spec.paramKind.apiVersion: Invalid value: "V1": a DNS-1035 label must consist of lower case alphanumeric characters or '-', start with an alphabetic character, and end with an alphanumeric character (e.g. 'my-name',  or 'abc-123', regex used for validation is '[a-z]([-a-z0-9]*[a-z0-9])?')`,
		}},
	} {
		registrytest.ExpectErrors(t, ValidateParamKind(tt.pk, path), tt.want...)
	}
}

func TestValidateMatchResources(t *testing.T) {
	path := field.NewPath("spec", "matchResources")
	registrytest.ExpectErrors(t, ValidateMatchResources(nil, path))
	registrytest.ExpectErrors(t, ValidateMatchConstraints(nil, path), "spec.matchResources: Required value")
	rule := admissionregistrationv1.RuleWithOperations{
		Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Create},
		Rule:       admissionregistrationv1.Rule{APIGroups: []string{""}, APIVersions: []string{"v1"}, Resources: []string{"configmaps"}},
	}
	m := &admissionregistrationv1.MatchResources{
		MatchPolicy: ptr.To(admissionregistrationv1.MatchPolicyType("Loose")),
		ObjectSelector: &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{
			{Key: "a", Operator: metav1.LabelSelectorOpIn, Values: []string{"b c"}}}},
		ExcludeResourceRules: []admissionregistrationv1.NamedRuleWithOperations{
			{ResourceNames: []string{"a", "a/b", "a", ".."}, RuleWithOperations: rule},
			{RuleWithOperations: admissionregistrationv1.RuleWithOperations{Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Delete}}},
		},
	}
	registrytest.ExpectErrors(t, ValidateMatchConstraints(m, path),
		`spec.matchResources.matchPolicy: Unsupported value: "Loose": supported values: "Equivalent", "Exact"`,
		"spec.matchResources.namespaceSelector: Required value",
		`spec.matchResources.objectSelector.matchExpressions[0].values[0]: Invalid value: "b c": a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyValue',  or 'my_value',  or '12345', regex used for validation is '(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')`,
		`spec.matchResources.excludeResourceRules[0].resourceNames[1]: Invalid value: "a/b": may not contain '/'`,
		`spec.matchResources.excludeResourceRules[0].resourceNames[2]: Duplicate value: "a"`,
		`spec.matchResources.excludeResourceRules[0].resourceNames[3]: Invalid value: "..": may not be '..'`,
		"spec.matchResources.excludeResourceRules[1].apiGroups: Required value",
		"spec.matchResources.excludeResourceRules[1].apiVersions: Required value",
		"spec.matchResources.excludeResourceRules[1].resources: Required value",
		"spec.matchResources.resourceRules: Required value",
	)
	m = &admissionregistrationv1.MatchResources{ResourceRules: []admissionregistrationv1.NamedRuleWithOperations{{RuleWithOperations: rule}}}
	m.ResourceRules[0].Operations = []admissionregistrationv1.OperationType{admissionregistrationv1.Delete, admissionregistrationv1.Create, admissionregistrationv1.OperationAll}
	registrytest.ExpectErrors(t, ValidateMutatingOperations(m, path.Child("resourceRules", "operations")),
		`spec.matchResources.resourceRules.operations: Unsupported value: "DELETE": supported values: "*", "CONNECT", "CREATE", "UPDATE"`)
}

func TestValidateParamRef(t *testing.T) {
	path := field.NewPath("spec", "paramRef")
	deny := ptr.To(admissionregistrationv1.DenyAction)
	registrytest.ExpectErrors(t, ValidateParamRef(nil, path))
	registrytest.ExpectErrors(t, ValidateParamRef(&admissionregistrationv1.ParamRef{Name: "limits", ParameterNotFoundAction: deny}, path))
	registrytest.ExpectErrors(t, ValidateParamRef(&admissionregistrationv1.ParamRef{Selector: &metav1.LabelSelector{}, ParameterNotFoundAction: deny}, path))
	registrytest.ExpectErrors(t, ValidateParamRef(&admissionregistrationv1.ParamRef{}, path),
		"spec.paramRef: Required value: one of name or selector must be specified",
		"spec.paramRef.parameterNotFoundAction: Required value")
	registrytest.ExpectErrors(t, ValidateParamRef(&admissionregistrationv1.ParamRef{Name: "a/b",
		Selector:                &metav1.LabelSelector{MatchLabels: map[string]string{"a": "b c"}},
		ParameterNotFoundAction: ptr.To(admissionregistrationv1.ParameterNotFoundActionType("Ignore"))}, path),
		`spec.paramRef.name: Invalid value: "a/b": may not contain '/'`,
		"spec.paramRef.name: Forbidden: name and selector are mutually exclusive",
		`spec.paramRef.selector.matchLabels: Invalid value: "b c": a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyValue',  or 'my_value',  or '12345', regex used for validation is '(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')`,
		"spec.paramRef.selector: Forbidden: name and selector are mutually exclusive",
		`spec.paramRef.parameterNotFoundAction: Unsupported value: "Ignore": supported values: "Deny", "Allow"`)
}

func TestValidatePolicyName(t *testing.T) {
	path := field.NewPath("spec", "policyName")
	registrytest.ExpectErrors(t, ValidatePolicyName("", true, path), "spec.policyName: Required value")
	registrytest.ExpectErrors(t, ValidatePolicyName("", false, path))
	registrytest.ExpectErrors(t, ValidatePolicyName("Policy", true, path),
		`spec.policyName: Invalid value: "Policy": a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')`)
}

func TestValidateVariable(t *testing.T) {
	path := field.NewPath("spec", "variables").Index(0)
	c := NewCompiler(true)
	registrytest.ExpectErrors(t, ValidateVariable(c, &admissionregistrationv1.Variable{Name: "replicas", Expression: "object.spec.replicas"}, false, NewStored(), path))
	registrytest.ExpectErrors(t, ValidateVariable(c, &admissionregistrationv1.Variable{Name: " ", Expression: ""}, false, NewStored(), path),
		"spec.variables[0].name: Required value: name is not specified",
		"spec.variables[0].expression: Required value: expression is not specified")
	registrytest.ExpectErrors(t, ValidateVariable(c, &admissionregistrationv1.Variable{Name: "if", Expression: "params.x"}, false, NewStored(), path),
		`spec.variables[0].name: Invalid value: "if": must be a valid CEL identifier`,
		"spec.variables[0].expression: Invalid value: \"params.x\": compilation failed: ERROR: <input>:1:1: undeclared reference to 'params' (in container '')\n | params.x\n | ^")
	registrytest.ExpectErrors(t, ValidateVariable(NewCompiler(false), &admissionregistrationv1.Variable{Name: "x", Expression: "1"}, false, NewStored(), path),
		"spec.variables[0]: Internal error: variable composition is not allowed")
	for name, want := range map[string]bool{"a": true, "_a1": true, "A_b": true, "1a": false, "a-b": false, "": false, "null": false, "namespace": false} {
		if got := isCELIdentifier(name); got != want {
			t.Errorf("isCELIdentifier(%q) = %v, want %v", name, got, want)
		}
	}
}

// authorizer allows what allow says, recording the attributes it is
// asked about.
type authorizer struct {
	allow func(authz.Attributes) bool
	asked []authz.Attributes
}

func (a *authorizer) Authorize(_ context.Context, attrs authz.Attributes) (authz.Decision, string, error) {
	a.asked = append(a.asked, attrs)
	if a.allow(attrs) {
		return authz.Allow, "", nil
	}
	return authz.NoOpinion, "", nil
}

func resolver(gvk schema.GroupVersionKind) (schema.GroupVersionResource, error) {
	if gvk.Kind == "ConfigMap" {
		return gvk.GroupVersion().WithResource("configmaps"), nil
	}
	return schema.GroupVersionResource{}, errors.New("unknown kind")
}

func TestParamKindAccess(t *testing.T) {
	alice := &user.DefaultInfo{Name: "alice", Groups: []string{"system:authenticated"}}
	ctx := authn.WithUser(context.Background(), alice)
	a := &authorizer{allow: func(attrs authz.Attributes) bool { return attrs.Resource == "configmaps" }}
	access := Access{Authorizer: a, Resolve: resolver}
	cm := &admissionregistrationv1.ParamKind{APIVersion: "v1", Kind: "ConfigMap"}
	if err := access.ParamKind(ctx, cm); err != nil {
		t.Errorf("configmaps: %v", err)
	}
	want := authz.Attributes{User: alice, Verb: "get", ResourceRequest: true, Name: "*", Namespace: "*", APIVersion: "v1", Resource: "configmaps"}
	if len(a.asked) != 1 || !reflect.DeepEqual(a.asked[0], want) {
		t.Errorf("asked %+v, want %+v", a.asked, want)
	}
	err := access.ParamKind(ctx, &admissionregistrationv1.ParamKind{APIVersion: "example.com/v1", Kind: "Limits"})
	if got := a.asked[1]; got.APIGroup != "example.com" || got.APIVersion != "v1" || got.Resource != "*" {
		t.Errorf("unresolved kind asked %+v", got)
	}
	if want := `user &{alice  [system:authenticated] map[]} must have "get" permission on all objects of the referenced paramKind (kind=Limits, apiVersion=example.com/v1)`; err == nil || err.Error() != want {
		t.Errorf("error %v, want %s", err, want)
	}
	if err := access.ParamKind(ctx, &admissionregistrationv1.ParamKind{APIVersion: "a/b/c", Kind: "X"}); err == nil || a.asked[2].APIGroup != "*" || a.asked[2].APIVersion != "*" {
		t.Errorf("unparsable version: %v, asked %+v", err, a.asked[2])
	}
	masters := authn.WithUser(context.Background(), &user.DefaultInfo{Name: "admin", Groups: []string{user.SystemPrivilegedGroup}})
	if err := access.ParamKind(masters, &admissionregistrationv1.ParamKind{APIVersion: "example.com/v1", Kind: "Limits"}); err != nil || len(a.asked) != 3 {
		t.Errorf("system:masters: %v (asked %d times)", err, len(a.asked))
	}
	if err := access.ParamKind(context.Background(), cm); err == nil || err.Error() != "cannot identify user to authorize read access to paramKind resources" {
		t.Errorf("no user: %v", err)
	}
	if err := (Access{}).ParamKind(ctx, cm); err != nil {
		t.Errorf("no authorizer: %v", err)
	}
}

func TestParamRefAccess(t *testing.T) {
	alice := &user.DefaultInfo{Name: "alice"}
	ctx := authn.WithUser(context.Background(), alice)
	a := &authorizer{allow: func(attrs authz.Attributes) bool { return attrs.Verb == "get" && attrs.Resource == "configmaps" }}
	access := Access{Authorizer: a, Resolve: resolver}
	policies := map[string]*admissionregistrationv1.ParamKind{
		"cm":       {APIVersion: "v1", Kind: "ConfigMap"},
		"limits":   {APIVersion: "example.com/v1", Kind: "Limits"},
		"bad":      {APIVersion: "a/b/c", Kind: "X"},
		"noparams": nil,
	}
	paramKindOf := func(_ context.Context, name string) (*admissionregistrationv1.ParamKind, error) {
		pk, ok := policies[name]
		if !ok {
			return nil, errors.New("not found")
		}
		return pk, nil
	}
	named := &admissionregistrationv1.ParamRef{Name: "limits", Namespace: "default"}
	if err := access.ParamRef(ctx, "cm", named, paramKindOf, false); err != nil {
		t.Errorf("configmap: %v", err)
	}
	want := authz.Attributes{User: alice, Verb: "get", ResourceRequest: true, Name: "limits", Namespace: "default", APIVersion: "v1", Resource: "configmaps"}
	if !reflect.DeepEqual(a.asked[0], want) {
		t.Errorf("asked %+v, want %+v", a.asked[0], want)
	}
	selector := &admissionregistrationv1.ParamRef{Selector: &metav1.LabelSelector{}}
	for _, tt := range []struct {
		policy   string
		ref      *admissionregistrationv1.ParamRef
		mutating bool
		want     string
	}{
		{"cm", selector, false, `user &{alice  [] map[]} does not have "list" permission on the object referenced by paramRef`},
		{"cm", selector, true, `user list does not have "&{alice  [] map[]}" permission on the object referenced by paramRef`},
		{"missing", named, false, `unable to get policy missing to determine minimum required permissions and user &{alice  [] map[]} does not have "get" permission for all groups, versions and resources`},
		{"bad", named, false, `unable to parse paramKind &{a/b/c X} to determine minimum required permissions and user &{alice  [] map[]} does not have "get" permission for all groups, versions and resources`},
		{"limits", named, true, `unable to resolve paramKind &{example.com/v1 Limits} to determine minimum required permissions and user &{alice  [] map[]} does not have "get" permission for all groups, versions and resources`},
		{"noparams", named, false, `user &{alice  [] map[]} does not have "get" permission on the object referenced by paramRef`},
	} {
		if err := access.ParamRef(ctx, tt.policy, tt.ref, paramKindOf, tt.mutating); err == nil || err.Error() != tt.want {
			t.Errorf("%s: %v, want %s", tt.policy, err, tt.want)
		}
	}
	if got := a.asked[len(a.asked)-1]; got.Resource != "*" || got.APIGroup != "*" {
		t.Errorf("a policy without paramKind asks about %+v, want every resource", got)
	}
	if err := access.ParamRef(ctx, "cm", nil, paramKindOf, false); err != nil {
		t.Errorf("no paramRef: %v", err)
	}
}

func TestDiscoveryResolver(t *testing.T) {
	d := &fakediscovery.FakeDiscovery{Fake: &clienttesting.Fake{Resources: []*metav1.APIResourceList{{
		GroupVersion: "v1",
		APIResources: []metav1.APIResource{{Name: "configmaps/status", Kind: "ConfigMap"}, {Name: "configmaps", Kind: "ConfigMap"}},
	}}}}
	resolve := DiscoveryResolver(d)
	if gvr, err := resolve(schema.GroupVersionKind{Version: "v1", Kind: "ConfigMap"}); err != nil || gvr.Resource != "configmaps" {
		t.Errorf("ConfigMap: %v %v", gvr, err)
	}
	if _, err := resolve(schema.GroupVersionKind{Version: "v1", Kind: "Secret"}); err == nil || err.Error() != `no matches for kind "Secret" in version "v1"` {
		t.Errorf("Secret: %v", err)
	}
}

func TestValidForAdmission(t *testing.T) {
	p := &admissionregistrationv1.ValidatingAdmissionPolicy{ObjectMeta: metav1.ObjectMeta{GenerateName: "policy-"}}
	var seen string
	pass := func(o runtime.Object) field.ErrorList {
		seen = o.(*admissionregistrationv1.ValidatingAdmissionPolicy).Name
		return nil
	}
	if !ValidForAdmission(p, pass) || seen != "policy-xxxxx" || p.Name != "" {
		t.Errorf("generated name: saw %q, object's %q", seen, p.Name)
	}
	fail := func(runtime.Object) field.ErrorList {
		return field.ErrorList{field.Required(field.NewPath("spec"), "")}
	}
	if ValidForAdmission(p, fail) {
		t.Error("an invalid object passed")
	}
	if ValidForAdmission(&admissionregistrationv1.ValidatingAdmissionPolicy{}, pass) {
		t.Error("an object without a name passed")
	}
}

func TestCells(t *testing.T) {
	for _, tt := range []struct {
		ref  *admissionregistrationv1.ParamRef
		want string
	}{
		{nil, "<unset>"},
		{&admissionregistrationv1.ParamRef{}, "<unset>"},
		{&admissionregistrationv1.ParamRef{Name: "limits", Namespace: "default"}, "default/limits"},
		{&admissionregistrationv1.ParamRef{Name: "limits"}, "*/limits"},
		{&admissionregistrationv1.ParamRef{Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"a": "b"}}}, `&LabelSelector{MatchLabels:map[string]string{a: b,},MatchExpressions:[]LabelSelectorRequirement{},}`},
	} {
		if got := ParamRefCell(tt.ref); got != tt.want {
			t.Errorf("ParamRefCell(%+v) = %q, want %q", tt.ref, got, tt.want)
		}
	}
	if got := ParamKindCell(&admissionregistrationv1.ParamKind{APIVersion: "v1", Kind: "ConfigMap"}); got != "v1/ConfigMap" {
		t.Errorf("ParamKindCell = %q", got)
	}
	if got := ParamKindCell(nil); got != "<unset>" {
		t.Errorf("ParamKindCell(nil) = %q", got)
	}
}
