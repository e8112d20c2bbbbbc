package clusterrole

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

func valid() *rbacv1.ClusterRole {
	return &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "system:reader"},
		Rules: []rbacv1.PolicyRule{
			{Verbs: []string{"get"}, APIGroups: []string{""}, Resources: []string{"nodes"}},
			{Verbs: []string{"get"}, NonResourceURLs: []string{"/healthz", "/readyz"}},
		}}
}

func aggregate(selectors ...metav1.LabelSelector) func(*rbacv1.ClusterRole) {
	return func(cr *rbacv1.ClusterRole) {
		cr.AggregationRule = &rbacv1.AggregationRule{ClusterRoleSelectors: selectors}
	}
}

var badExpression = metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{
	{Key: "a", Operator: metav1.LabelSelectorOpIn, Values: []string{"b c"}}}}

func labels(m map[string]string) metav1.LabelSelector { return metav1.LabelSelector{MatchLabels: m} }

// The messages and their order are upstream's (v1.37.2) with declarative
// validation as enforced by default.
var validateCases = []registrytest.Case[*rbacv1.ClusterRole]{
	{Name: "valid", Change: func(*rbacv1.ClusterRole) {}},
	{Name: "aggregating", Change: aggregate(labels(map[string]string{"rbac.example.com/aggregate-to-view": "true"}),
		metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "tier", Operator: metav1.LabelSelectorOpExists}}})},
	{Name: "empty selector", Change: aggregate(metav1.LabelSelector{})},
	{Name: "no selectors", Change: aggregate(), Want: []string{
		"aggregationRule.clusterRoleSelectors: Required value: at least one clusterRoleSelector required if aggregationRule is non-nil",
	}},
	{Name: "bad label value", Change: aggregate(labels(map[string]string{"a": "b c"})), Want: []string{
		`aggregationRule.clusterRoleSelectors[0].matchLabels: Invalid value: "b c": a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyValue',  or 'my_value',  or '12345', regex used for validation is '(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')`,
		"aggregationRule.clusterRoleSelectors[0]: Invalid value: null: invalid label selector.",
	}},
	{Name: "bad operator", Change: aggregate(labels(nil), metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "k", Operator: "Near"}}}), Want: []string{
		`aggregationRule.clusterRoleSelectors[1].matchExpressions[0].operator: Invalid value: "Near": not a valid selector operator`,
		"aggregationRule.clusterRoleSelectors[1]: Invalid value: null: invalid label selector.",
	}},
	{Name: "bad rules and selector", Change: func(cr *rbacv1.ClusterRole) {
		cr.Rules = []rbacv1.PolicyRule{{Resources: []string{"pods"}}, {NonResourceURLs: []string{"/x"}, APIGroups: []string{""}}}
		aggregate(metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "k", Operator: metav1.LabelSelectorOpIn}}})(cr)
	}, Want: []string{
		"rules[0].apiGroups: Required value: resource rules must supply at least one api group",
		`rules[1].nonResourceURLs: Invalid value: ["/x"]: rules cannot apply to both regular resources and non-resource URLs`,
		"aggregationRule.clusterRoleSelectors[0].matchExpressions[0].values: Required value: must be specified when `operator` is 'In' or 'NotIn'",
		"aggregationRule.clusterRoleSelectors[0]: Invalid value: null: invalid label selector.",
		"rules[0].verbs: Required value",
		"rules[1].verbs: Required value",
	}},
}

func TestValidate(t *testing.T) {
	registrytest.RunValidate(t, strategy{}, valid, validateCases)
}

var updateCases = []registrytest.Case[*rbacv1.ClusterRole]{
	{Name: "unchanged", Change: func(*rbacv1.ClusterRole) {}},
	{Name: "aggregation added", Change: aggregate(labels(map[string]string{"a": "b"}))},
	{Name: "rule without verbs", Change: func(cr *rbacv1.ClusterRole) { cr.Rules[1].Verbs = nil }, Want: []string{
		"rules[1].verbs: Required value",
	}},
	// A stored selector with a bad label value lets validation pass the
	// values of match expressions (never those of matchLabels), but
	// building the selector still fails, as upstream's.
	{Name: "stored bad expression value",
		Old:    aggregate(badExpression),
		Change: func(cr *rbacv1.ClusterRole) { cr.Labels = map[string]string{"x": "y"} },
		Want:   []string{"aggregationRule.clusterRoleSelectors[0]: Invalid value: null: invalid label selector."}},
	{Name: "stored bad matchLabels value",
		Old:    aggregate(labels(map[string]string{"a": "b c"})),
		Change: func(cr *rbacv1.ClusterRole) { cr.Labels = map[string]string{"x": "y"} },
		Want: []string{
			`aggregationRule.clusterRoleSelectors[0].matchLabels: Invalid value: "b c": a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyValue',  or 'my_value',  or '12345', regex used for validation is '(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')`,
			"aggregationRule.clusterRoleSelectors[0]: Invalid value: null: invalid label selector.",
		}},
	{Name: "bad expression value", Change: aggregate(badExpression), Want: []string{
		`aggregationRule.clusterRoleSelectors[0].matchExpressions[0].values[0]: Invalid value: "b c": a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyValue',  or 'my_value',  or '12345', regex used for validation is '(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')`,
		"aggregationRule.clusterRoleSelectors[0]: Invalid value: null: invalid label selector.",
	}},
	{Name: "new bad label value",
		Old:    aggregate(labels(map[string]string{"a": "b"})),
		Change: aggregate(labels(map[string]string{"a": "-"})),
		Want: []string{
			`aggregationRule.clusterRoleSelectors[0].matchLabels: Invalid value: "-": a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyValue',  or 'my_value',  or '12345', regex used for validation is '(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')`,
			"aggregationRule.clusterRoleSelectors[0]: Invalid value: null: invalid label selector.",
		}},
}

func TestValidateUpdate(t *testing.T) {
	registrytest.RunValidateUpdate(t, strategy{}, valid, updateCases)
}

func TestColumns(t *testing.T) {
	cr := valid()
	cr.CreationTimestamp = metav1.NewTime(time.Date(2024, 1, 2, 3, 4, 5, 0, time.UTC))
	registrytest.ExpectRow(t, Resource(nil).Columns, cr, []string{"Name", "Created At"},
		[]interface{}{"system:reader", "2024-01-02T03:04:05Z"})
}

func TestResource(t *testing.T) {
	r := Resource(nil)
	if r.Resource != "clusterroles" || r.Singular != "clusterrole" || r.Namespaced || r.Status || r.Generation ||
		len(r.ShortNames) != 0 || len(r.Categories) != 0 || r.ReturnDeletedObject ||
		r.Kind.String() != "rbac.authorization.k8s.io/v1, Kind=ClusterRole" {
		t.Errorf("unexpected discovery data: %+v", r)
	}
	if got := r.NameValidation("..", false); len(got) != 1 {
		t.Errorf("name ..: %q", got)
	}
}

type call struct {
	name        string
	rules       int
	aggregating bool
}

type fakeGuard struct {
	calls []call
	err   error
}

func (g *fakeGuard) ConfirmRole(_ context.Context, namespace, name string, rules []rbacv1.PolicyRule, aggregating bool) error {
	if namespace != "" {
		panic("namespace " + namespace)
	}
	g.calls = append(g.calls, call{name, len(rules), aggregating})
	return g.err
}

func (g *fakeGuard) ConfirmBinding(context.Context, string, string, rbacv1.RoleRef) error {
	panic("ConfirmBinding")
}

func TestPrepareWrite(t *testing.T) {
	sel := labels(map[string]string{"a": "b"})
	stored := valid()
	stored.ResourceVersion = "3"
	aggregating := stored.DeepCopy()
	aggregate(sel)(aggregating)
	tests := []struct {
		name     string
		obj, old *rbacv1.ClusterRole
		dryRun   bool
		want     []call
	}{
		{name: "create", obj: valid(), want: []call{{"system:reader", 2, false}}},
		{name: "dry-run create", obj: valid(), dryRun: true, want: []call{{"system:reader", 2, false}}},
		{name: "create aggregating", obj: aggregating, want: []call{{"system:reader", 2, true}}},
		{name: "update rules", obj: func() *rbacv1.ClusterRole { c := stored.DeepCopy(); c.Rules = c.Rules[:1]; return c }(), old: stored,
			want: []call{{"system:reader", 1, false}}},
		{name: "aggregation added", obj: aggregating, old: stored, want: []call{{"system:reader", 2, true}}},
		{name: "aggregation removed", obj: stored, old: aggregating, want: []call{{"system:reader", 2, true}}},
		{name: "aggregating, annotation", obj: func() *rbacv1.ClusterRole {
			c := aggregating.DeepCopy()
			c.Annotations = map[string]string{"a": "b"}
			return c
		}(), old: aggregating, want: []call{{"system:reader", 2, true}}},
		{name: "finalizer only", obj: func() *rbacv1.ClusterRole { c := aggregating.DeepCopy(); c.Finalizers = []string{"f"}; return c }(), old: aggregating},
		{name: "delete", old: stored},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := &fakeGuard{}
			var obj, old = registryObj(tt.obj), registryObj(tt.old)
			extra, done, err := Resource(g).Strategy.(registry.Writer).PrepareWrite(context.Background(), obj, old, tt.dryRun)
			if err != nil || done == nil || len(extra.If)+len(extra.Then) != 0 {
				t.Fatalf("extra %+v, done %t, err %v", extra, done != nil, err)
			}
			done(nil)
			if len(g.calls) != len(tt.want) || len(tt.want) == 1 && g.calls[0] != tt.want[0] {
				t.Errorf("calls %+v, want %+v", g.calls, tt.want)
			}
		})
	}

	g := &fakeGuard{err: errors.New("must have cluster-admin privileges to use the aggregationRule")}
	if _, _, err := Resource(g).Strategy.(registry.Writer).PrepareWrite(context.Background(), aggregating, nil, false); err != g.err {
		t.Errorf("refused: %v", err)
	}
}

// registryObj passes a nil role on as an untyped nil, as the API server.
func registryObj(cr *rbacv1.ClusterRole) runtime.Object {
	if cr == nil {
		return nil
	}
	return cr
}
