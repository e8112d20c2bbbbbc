package role

import (
	"context"
	"errors"
	"testing"
	"time"

	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/svcnet/svcnet/internal/registry"
	"github.com/svcnet/svcnet/internal/registry/registrytest"
)

func valid() *rbacv1.Role {
	return &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: "reader", Namespace: "default"},
		Rules: []rbacv1.PolicyRule{{Verbs: []string{"get", "list"}, APIGroups: []string{""}, Resources: []string{"pods"}}}}
}

func rules(r ...rbacv1.PolicyRule) func(*rbacv1.Role) {
	return func(role *rbacv1.Role) { role.Rules = r }
}

// The messages and their order are upstream's (v1.37.2) with declarative
// validation as enforced by default, as its strategy gives them: the
// declarative "verbs: Required value" replaces the hand-written one and
// comes last.
var validateCases = []registrytest.Case[*rbacv1.Role]{
	{Name: "valid", Change: func(*rbacv1.Role) {}},
	{Name: "no rules", Change: rules()},
	{Name: "resource names", Change: rules(rbacv1.PolicyRule{Verbs: []string{"get"}, APIGroups: []string{"apps"}, Resources: []string{"deployments"}, ResourceNames: []string{"web"}})},
	{Name: "empty rule", Change: rules(rbacv1.PolicyRule{}), Want: []string{
		"rules[0].apiGroups: Required value: resource rules must supply at least one api group",
		"rules[0].resources: Required value: resource rules must supply at least one resource",
		"rules[0].verbs: Required value",
	}},
	{Name: "no verbs in the second rule", Change: rules(
		rbacv1.PolicyRule{Verbs: []string{"get"}, APIGroups: []string{""}, Resources: []string{"pods"}},
		rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"pods"}},
	), Want: []string{"rules[1].verbs: Required value"}},
	{Name: "no api groups", Change: rules(rbacv1.PolicyRule{Verbs: []string{"get"}, Resources: []string{"pods"}}), Want: []string{
		"rules[0].apiGroups: Required value: resource rules must supply at least one api group",
	}},
	{Name: "non-resource URLs", Change: rules(rbacv1.PolicyRule{Verbs: []string{"get"}, NonResourceURLs: []string{"/healthz"}}), Want: []string{
		`rules[0].nonResourceURLs: Invalid value: ["/healthz"]: namespaced rules cannot apply to non-resource URLs`,
	}},
	{Name: "non-resource URLs and resources", Change: rules(rbacv1.PolicyRule{NonResourceURLs: []string{"/healthz", "/api/*"}, ResourceNames: []string{"x"}}), Want: []string{
		`rules[0].nonResourceURLs: Invalid value: ["/healthz","/api/*"]: namespaced rules cannot apply to non-resource URLs`,
		`rules[0].nonResourceURLs: Invalid value: ["/healthz","/api/*"]: rules cannot apply to both regular resources and non-resource URLs`,
		"rules[0].verbs: Required value",
	}},
}

func TestValidate(t *testing.T) {
	registrytest.RunValidate(t, strategy{}, valid, validateCases)
}

var updateCases = []registrytest.Case[*rbacv1.Role]{
	{Name: "unchanged", Change: func(*rbacv1.Role) {}},
	{Name: "new rule without verbs", Change: func(r *rbacv1.Role) {
		r.Rules = append(r.Rules, rbacv1.PolicyRule{APIGroups: []string{"apps"}, Resources: []string{"deployments"}})
	}, Want: []string{"rules[1].verbs: Required value"}},
	// Declarative validation leaves unchanged rules alone: the stored
	// rule without verbs keeps its hand-written error.
	{Name: "stored rule without verbs, labels changed",
		Old:    func(r *rbacv1.Role) { r.Rules[0].Verbs = nil },
		Change: func(r *rbacv1.Role) { r.Labels = map[string]string{"a": "b"} },
		Want:   []string{"rules[0].verbs: Required value: verbs must contain at least one value"}},
	{Name: "non-resource URL", Change: rules(rbacv1.PolicyRule{Verbs: []string{"get"}, NonResourceURLs: []string{"/metrics"}}), Want: []string{
		`rules[0].nonResourceURLs: Invalid value: ["/metrics"]: namespaced rules cannot apply to non-resource URLs`,
	}},
}

func TestValidateUpdate(t *testing.T) {
	registrytest.RunValidateUpdate(t, strategy{}, valid, updateCases)
}

func TestValidateName(t *testing.T) {
	for name, want := range map[string]string{
		"system:controller:x": "",
		"UPPER_case ok":       "",
		".":                   "may not be '.'",
		"..":                  "may not be '..'",
		"a/b":                 "may not contain '/'",
		"a%b":                 "may not contain '%'",
	} {
		got := ValidateName(name, false)
		if want == "" && len(got) != 0 || want != "" && (len(got) != 1 || got[0] != want) {
			t.Errorf("%q: %q, want %q", name, got, want)
		}
	}
	// A generateName is a path segment too.
	if got := ValidateName("a/", true); len(got) != 1 {
		t.Errorf("generateName a/: %q", got)
	}
}

func TestColumns(t *testing.T) {
	r := valid()
	r.CreationTimestamp = metav1.NewTime(time.Date(2024, 5, 6, 7, 8, 9, 0, time.FixedZone("CEST", 2*3600)))
	registrytest.ExpectRow(t, Resource(nil).Columns, r, []string{"Name", "Created At"},
		[]interface{}{"reader", "2024-05-06T05:08:09Z"})
	cols := Resource(nil).Columns
	if cols[1].Type != "date" || cols[1].Description != (metav1.ObjectMeta{}).SwaggerDoc()["creationTimestamp"] || cols[0].Format != "name" {
		t.Errorf("columns %+v", cols)
	}
}

func TestResource(t *testing.T) {
	r := Resource(nil)
	if r.Resource != "roles" || r.Singular != "role" || !r.Namespaced || r.Status || r.Generation ||
		len(r.ShortNames) != 0 || len(r.Categories) != 0 || r.ReturnDeletedObject ||
		r.Kind.String() != "rbac.authorization.k8s.io/v1, Kind=Role" {
		t.Errorf("unexpected discovery data: %+v", r)
	}
	if got := r.NameValidation("a/b", false); len(got) != 1 {
		t.Errorf("name a/b: %q", got)
	}
}

// fakeGuard records the checks it is asked for.
type fakeGuard struct {
	calls []string
	err   error
}

func (g *fakeGuard) ConfirmRole(_ context.Context, namespace, name string, rules []rbacv1.PolicyRule, aggregating bool) error {
	g.calls = append(g.calls, "role "+namespace+"/"+name+" "+rulesString(rules)+map[bool]string{true: " aggregating"}[aggregating])
	return g.err
}

func (g *fakeGuard) ConfirmBinding(_ context.Context, namespace, name string, ref rbacv1.RoleRef) error {
	g.calls = append(g.calls, "binding "+namespace+"/"+name+" "+ref.Kind+"/"+ref.Name)
	return g.err
}

func rulesString(rules []rbacv1.PolicyRule) string {
	s := ""
	for _, r := range rules {
		s += r.String()
	}
	return s
}

// write runs the Writer hook as the API server does and reports whether
// it asked the guard.
func write(t *testing.T, r *registry.Resource, g *fakeGuard, obj, old runtime.Object) (bool, error) {
	t.Helper()
	before := len(g.calls)
	extra, done, err := r.Strategy.(registry.Writer).PrepareWrite(context.Background(), obj, old, false)
	if len(extra.If) != 0 || len(extra.Then) != 0 || done == nil {
		t.Fatalf("extra %+v, done %v", extra, done != nil)
	}
	done(nil)
	return len(g.calls) > before, err
}

func TestPrepareWrite(t *testing.T) {
	g := &fakeGuard{}
	r := Resource(g)
	stored := valid()
	stored.ResourceVersion = "5"

	if asked, err := write(t, r, g, valid(), nil); !asked || err != nil {
		t.Errorf("create: asked %t, %v", asked, err)
	}
	if want := "role default/reader " + valid().Rules[0].String(); len(g.calls) != 1 || g.calls[0] != want {
		t.Errorf("calls %q, want %q", g.calls, want)
	}

	// As upstream's policybased storage, every update is checked unless
	// it changes only what the garbage collector changes.
	changes := []struct {
		name   string
		change func(*rbacv1.Role)
		asked  bool
	}{
		{"rules", func(r *rbacv1.Role) { r.Rules[0].Verbs = []string{"*"} }, true},
		{"labels", func(r *rbacv1.Role) { r.Labels = map[string]string{"a": "b"} }, true},
		{"finalizers", func(r *rbacv1.Role) { r.Finalizers = []string{"example.com/f"} }, false},
		{"owner references", func(r *rbacv1.Role) {
			r.OwnerReferences = []metav1.OwnerReference{{APIVersion: "v1", Kind: "ConfigMap", Name: "o", UID: "u"}}
		}, false},
		{"managed fields", func(r *rbacv1.Role) { r.ManagedFields = []metav1.ManagedFieldsEntry{{Manager: "kubectl"}} }, false},
		{"nothing", func(*rbacv1.Role) {}, false},
	}
	for _, c := range changes {
		obj := stored.DeepCopy()
		c.change(obj)
		if asked, err := write(t, r, g, obj, stored); asked != c.asked || err != nil {
			t.Errorf("update of %s: asked %t, want %t (%v)", c.name, asked, c.asked, err)
		}
	}

	if asked, _ := write(t, r, g, nil, stored); asked {
		t.Error("delete asked the guard")
	}

	g.err = errors.New("forbidden")
	if _, err := write(t, r, g, valid(), nil); err != g.err {
		t.Errorf("refused create: %v", err)
	}

	// Without a guard nothing is checked.
	if _, err := write(t, Resource(nil), g, valid(), nil); err != nil {
		t.Errorf("no guard: %v", err)
	}
}
