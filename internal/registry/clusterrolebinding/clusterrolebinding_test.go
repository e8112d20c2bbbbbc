package clusterrolebinding

import (
	"context"
	"errors"
	"reflect"
	"testing"
	"time"

	rbacv1 "k8s.io/api/rbac/v1"
	rbacv1beta1 "k8s.io/api/rbac/v1beta1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/svcnet/svcnet/internal/registry"
	"github.com/svcnet/svcnet/internal/registry/registrytest"
)

const group = "rbac.authorization.k8s.io"

func valid() *rbacv1.ClusterRoleBinding {
	return &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "system:node-proxier"},
		RoleRef: rbacv1.RoleRef{APIGroup: group, Kind: "ClusterRole", Name: "system:node-proxier"},
		Subjects: []rbacv1.Subject{
			{Kind: "User", APIGroup: group, Name: "system:kube-proxy"},
			{Kind: "ServiceAccount", Name: "kube-proxy", Namespace: "kube-system"},
		}}
}

// The messages and their order are upstream's (v1.37.2) with declarative
// validation as enforced by default.
var validateCases = []registrytest.Case[*rbacv1.ClusterRoleBinding]{
	{Name: "valid", Change: func(*rbacv1.ClusterRoleBinding) {}},
	{Name: "role", Change: func(b *rbacv1.ClusterRoleBinding) { b.RoleRef.Kind = "Role" }, Want: []string{
		`roleRef.kind: Unsupported value: "Role": supported values: "ClusterRole"`,
	}},
	{Name: "service account without namespace", Change: func(b *rbacv1.ClusterRoleBinding) { b.Subjects[1].Namespace = "" }, Want: []string{
		"subjects[1].namespace: Required value",
	}},
	{Name: "everything wrong", Change: func(b *rbacv1.ClusterRoleBinding) {
		b.RoleRef = rbacv1.RoleRef{APIGroup: "rbac", Kind: "clusterrole"}
		b.Subjects = []rbacv1.Subject{{Kind: "ServiceAccount", APIGroup: "v1"}, {Kind: "Group", Name: "g"}}
	}, Want: []string{
		`roleRef.apiGroup: Unsupported value: "rbac": supported values: "rbac.authorization.k8s.io"`,
		`roleRef.kind: Unsupported value: "clusterrole": supported values: "ClusterRole"`,
		`subjects[0].apiGroup: Unsupported value: "v1": supported values: ""`,
		"subjects[0].namespace: Required value",
		`subjects[1].apiGroup: Unsupported value: "": supported values: "rbac.authorization.k8s.io"`,
		"subjects[0].name: Required value",
		"roleRef.name: Required value",
	}},
	{Name: "bad role name", Change: func(b *rbacv1.ClusterRoleBinding) { b.RoleRef.Name = ".." }, Want: []string{
		`roleRef.name: Invalid value: "..": may not be '..'`,
	}},
}

func TestValidate(t *testing.T) {
	registrytest.RunValidate(t, strategy{}, valid, validateCases)
}

var updateCases = []registrytest.Case[*rbacv1.ClusterRoleBinding]{
	{Name: "unchanged", Change: func(*rbacv1.ClusterRoleBinding) {}},
	{Name: "subjects dropped", Change: func(b *rbacv1.ClusterRoleBinding) { b.Subjects = nil }},
	{Name: "roleRef changed", Change: func(b *rbacv1.ClusterRoleBinding) { b.RoleRef.Name = "cluster-admin" }, Want: []string{
		`roleRef: Invalid value: {"APIGroup":"rbac.authorization.k8s.io","Kind":"ClusterRole","Name":"cluster-admin"}: field is immutable`,
	}},
	{Name: "roleRef kind changed", Change: func(b *rbacv1.ClusterRoleBinding) { b.RoleRef.Kind = "Role" }, Want: []string{
		`roleRef.kind: Unsupported value: "Role": supported values: "ClusterRole"`,
		`roleRef: Invalid value: {"APIGroup":"rbac.authorization.k8s.io","Kind":"Role","Name":"system:node-proxier"}: field is immutable`,
	}},
	{Name: "subject namespace dropped", Change: func(b *rbacv1.ClusterRoleBinding) { b.Subjects[1].Namespace = "" }, Want: []string{
		"subjects[1].namespace: Required value",
	}},
}

func TestValidateUpdate(t *testing.T) {
	registrytest.RunValidateUpdate(t, strategy{}, valid, updateCases)
}

func TestDefault(t *testing.T) {
	registrytest.RunDefault(t, strategy{}, []registrytest.DefaultCase[*rbacv1.ClusterRoleBinding]{{
		Name: "api groups",
		In: &rbacv1.ClusterRoleBinding{RoleRef: rbacv1.RoleRef{Kind: "ClusterRole", Name: "view"},
			Subjects: []rbacv1.Subject{{Kind: "Group", Name: "g"}, {Kind: "ServiceAccount", Name: "sa", Namespace: "ns"}}},
		Want: &rbacv1.ClusterRoleBinding{RoleRef: rbacv1.RoleRef{APIGroup: group, Kind: "ClusterRole", Name: "view"},
			Subjects: []rbacv1.Subject{{Kind: "Group", APIGroup: group, Name: "g"}, {Kind: "ServiceAccount", Name: "sa", Namespace: "ns"}}},
	}})
}

func TestColumns(t *testing.T) {
	b := valid()
	b.CreationTimestamp = metav1.NewTime(time.Now().Add(-90 * time.Second))
	b.Subjects = append(b.Subjects, rbacv1.Subject{Kind: "User", APIGroup: group, Name: "admin"},
		rbacv1.Subject{Kind: "Group", APIGroup: group, Name: "system:nodes"}, rbacv1.Subject{Kind: "Robot", Name: "r"})
	cols := Resource(nil).Columns
	registrytest.ExpectRow(t, cols, b, []string{"Name", "Role", "Age", "Users", "Groups", "ServiceAccounts"},
		[]interface{}{"system:node-proxier", "ClusterRole/system:node-proxier", "90s", "system:kube-proxy, admin", "system:nodes", "kube-system/kube-proxy"})
	if cols[1].Description != (rbacv1beta1.ClusterRoleBinding{}).SwaggerDoc()["roleRef"] || cols[3].Description != "Users in the clusterRoleBinding" ||
		cols[5].Priority != 1 || cols[2].Priority != 0 {
		t.Errorf("columns %+v", cols)
	}
}

func TestResource(t *testing.T) {
	r := Resource(nil)
	if r.Resource != "clusterrolebindings" || r.Singular != "clusterrolebinding" || r.Namespaced || r.Status || r.Generation ||
		len(r.ShortNames) != 0 || len(r.Categories) != 0 || r.ReturnDeletedObject ||
		r.Kind.String() != "rbac.authorization.k8s.io/v1, Kind=ClusterRoleBinding" {
		t.Errorf("unexpected discovery data: %+v", r)
	}
}

type fakeGuard struct {
	calls []string
	err   error
}

func (g *fakeGuard) ConfirmRole(context.Context, string, string, []rbacv1.PolicyRule, bool) error {
	panic("ConfirmRole")
}

func (g *fakeGuard) ConfirmBinding(_ context.Context, namespace, name string, ref rbacv1.RoleRef) error {
	g.calls = append(g.calls, namespace+"/"+name+" "+ref.Kind+"/"+ref.Name)
	return g.err
}

func TestPrepareWrite(t *testing.T) {
	stored := valid()
	stored.ResourceVersion = "9"
	const asked = "/system:node-proxier ClusterRole/system:node-proxier"
	tests := []struct {
		name string
		obj  runtime.Object
		old  runtime.Object
		want []string
	}{
		{"create", valid(), nil, []string{asked}},
		{"update of subjects", func() runtime.Object { b := stored.DeepCopy(); b.Subjects = nil; return b }(), stored, []string{asked}},
		{"update of labels", func() runtime.Object { b := stored.DeepCopy(); b.Labels = map[string]string{"a": "b"}; return b }(), stored, []string{asked}},
		{"finalizers only", func() runtime.Object { b := stored.DeepCopy(); b.Finalizers = []string{"f"}; return b }(), stored, nil},
		{"delete", nil, stored, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := &fakeGuard{}
			extra, done, err := Resource(g).Strategy.(registry.Writer).PrepareWrite(context.Background(), tt.obj, tt.old, false)
			if err != nil || done == nil || len(extra.If)+len(extra.Then) != 0 {
				t.Fatalf("extra %+v, done %t, err %v", extra, done != nil, err)
			}
			done(nil)
			if !reflect.DeepEqual(g.calls, tt.want) {
				t.Errorf("calls %q, want %q", g.calls, tt.want)
			}
		})
	}
	g := &fakeGuard{err: errors.New("forbidden")}
	if _, _, err := Resource(g).Strategy.(registry.Writer).PrepareWrite(context.Background(), valid(), nil, true); err != g.err {
		t.Errorf("refused dry run: %v", err)
	}
}
