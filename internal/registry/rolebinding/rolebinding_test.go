package rolebinding

import (
	"context"
	"errors"
	"reflect"
	"testing"

	rbacv1 "k8s.io/api/rbac/v1"
	rbacv1beta1 "k8s.io/api/rbac/v1beta1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/svcnet/svcnet/internal/registry"
	"github.com/svcnet/svcnet/internal/registry/registrytest"
)

const group = "rbac.authorization.k8s.io"

func valid() *rbacv1.RoleBinding {
	return &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "read-pods", Namespace: "default"},
		RoleRef: rbacv1.RoleRef{APIGroup: group, Kind: "Role", Name: "pod-reader"},
		Subjects: []rbacv1.Subject{
			{Kind: "User", APIGroup: group, Name: "jane"},
			{Kind: "Group", APIGroup: group, Name: "system:authenticated"},
			{Kind: "ServiceAccount", Name: "default", Namespace: "kube-system"},
			{Kind: "ServiceAccount", Name: "builder"},
		}}
}

func subjects(s ...rbacv1.Subject) func(*rbacv1.RoleBinding) {
	return func(b *rbacv1.RoleBinding) { b.Subjects = s }
}

func roleRef(ref rbacv1.RoleRef) func(*rbacv1.RoleBinding) {
	return func(b *rbacv1.RoleBinding) { b.RoleRef = ref }
}

// The messages and their order are upstream's (v1.37.2) with declarative
// validation as enforced by default: the declarative required names
// replace the hand-written ones and come last, subjects before roleRef.
var validateCases = []registrytest.Case[*rbacv1.RoleBinding]{
	{Name: "valid", Change: func(*rbacv1.RoleBinding) {}},
	{Name: "cluster role, no subjects", Change: func(b *rbacv1.RoleBinding) {
		b.RoleRef.Kind = "ClusterRole"
		b.Subjects = nil
	}},
	{Name: "empty roleRef", Change: roleRef(rbacv1.RoleRef{}), Want: []string{
		`roleRef.apiGroup: Unsupported value: "": supported values: "rbac.authorization.k8s.io"`,
		`roleRef.kind: Unsupported value: "": supported values: "Role", "ClusterRole"`,
		"roleRef.name: Required value",
	}},
	{Name: "bad roleRef", Change: roleRef(rbacv1.RoleRef{APIGroup: "example.com", Kind: "role", Name: "a/%"}), Want: []string{
		`roleRef.apiGroup: Unsupported value: "example.com": supported values: "rbac.authorization.k8s.io"`,
		`roleRef.kind: Unsupported value: "role": supported values: "Role", "ClusterRole"`,
		`roleRef.name: Invalid value: "a/%": may not contain '/'`,
		`roleRef.name: Invalid value: "a/%": may not contain '%'`,
	}},
	{Name: "bad subjects", Change: subjects(
		rbacv1.Subject{Kind: "ServiceAccount", APIGroup: group, Name: "Bad_Name"},
		rbacv1.Subject{Kind: "User", Name: "bob"},
		rbacv1.Subject{Kind: "Group", APIGroup: "example.com", Name: "devs"},
		rbacv1.Subject{Kind: "Robot", Name: "r2"},
		rbacv1.Subject{Kind: "ServiceAccount"},
		rbacv1.Subject{Kind: "User", APIGroup: group},
	), Want: []string{
		`subjects[0].name: Invalid value: "Bad_Name": a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')`,
		`subjects[0].apiGroup: Unsupported value: "rbac.authorization.k8s.io": supported values: ""`,
		`subjects[1].apiGroup: Unsupported value: "": supported values: "rbac.authorization.k8s.io"`,
		`subjects[2].apiGroup: Unsupported value: "example.com": supported values: "rbac.authorization.k8s.io"`,
		`subjects[3].kind: Unsupported value: "Robot": supported values: "ServiceAccount", "User", "Group"`,
		"subjects[4].name: Required value",
		"subjects[5].name: Required value",
	}},
	{Name: "no names", Change: func(b *rbacv1.RoleBinding) {
		b.RoleRef.Name = ""
		b.Subjects[1].Name = ""
	}, Want: []string{"subjects[1].name: Required value", "roleRef.name: Required value"}},
}

func TestValidate(t *testing.T) {
	registrytest.RunValidate(t, strategy{}, valid, validateCases)
}

var updateCases = []registrytest.Case[*rbacv1.RoleBinding]{
	{Name: "unchanged", Change: func(*rbacv1.RoleBinding) {}},
	{Name: "subjects changed", Change: subjects(rbacv1.Subject{Kind: "User", APIGroup: group, Name: "joe"})},
	{Name: "roleRef changed", Change: func(b *rbacv1.RoleBinding) { b.RoleRef.Name = "admin" }, Want: []string{
		`roleRef: Invalid value: {"APIGroup":"rbac.authorization.k8s.io","Kind":"Role","Name":"admin"}: field is immutable`,
	}},
	// On update the declarative check of roleRef stops at its (alpha,
	// unenforced) immutability, so the hand-written required name stays.
	{Name: "roleRef name dropped", Change: func(b *rbacv1.RoleBinding) { b.RoleRef.Name = "" }, Want: []string{
		"roleRef.name: Required value",
		`roleRef: Invalid value: {"APIGroup":"rbac.authorization.k8s.io","Kind":"Role","Name":""}: field is immutable`,
	}},
	{Name: "subject without name added", Change: func(b *rbacv1.RoleBinding) {
		b.Subjects = append(b.Subjects, rbacv1.Subject{Kind: "Group", APIGroup: group})
	}, Want: []string{"subjects[4].name: Required value"}},
	{Name: "stored subject without name, labels changed",
		Old:    func(b *rbacv1.RoleBinding) { b.Subjects[0].Name = "" },
		Change: func(b *rbacv1.RoleBinding) { b.Labels = map[string]string{"a": "b"} },
		Want:   []string{"subjects[0].name: Required value"}},
}

func TestValidateUpdate(t *testing.T) {
	registrytest.RunValidateUpdate(t, strategy{}, valid, updateCases)
}

func TestDefault(t *testing.T) {
	registrytest.RunDefault(t, strategy{}, []registrytest.DefaultCase[*rbacv1.RoleBinding]{{
		Name: "api groups",
		In: &rbacv1.RoleBinding{RoleRef: rbacv1.RoleRef{Kind: "Role", Name: "r"}, Subjects: []rbacv1.Subject{
			{Kind: "User", Name: "u"}, {Kind: "Group", Name: "g"}, {Kind: "ServiceAccount", Name: "sa"},
			{Kind: "User", APIGroup: "example.com", Name: "x"}, {Kind: "Robot", Name: "r"},
		}},
		Want: &rbacv1.RoleBinding{RoleRef: rbacv1.RoleRef{APIGroup: group, Kind: "Role", Name: "r"}, Subjects: []rbacv1.Subject{
			{Kind: "User", APIGroup: group, Name: "u"}, {Kind: "Group", APIGroup: group, Name: "g"}, {Kind: "ServiceAccount", Name: "sa"},
			{Kind: "User", APIGroup: "example.com", Name: "x"}, {Kind: "Robot", Name: "r"},
		}},
	}})
}

func TestColumns(t *testing.T) {
	cols := Resource(nil).Columns
	registrytest.ExpectRow(t, cols, valid(), []string{"Name", "Role", "Age", "Users", "Groups", "ServiceAccounts"},
		[]interface{}{"read-pods", "Role/pod-reader", "<unknown>", "jane", "system:authenticated", "kube-system/default, /builder"})
	none := valid()
	none.Subjects = nil
	if got := registrytest.TextRow(t, cols, none); got != "read-pods|Role/pod-reader|||" {
		t.Errorf("row %q", got)
	}
	var priorities []int32
	var docs []string
	for _, c := range cols {
		priorities = append(priorities, c.Priority)
		docs = append(docs, c.Description)
	}
	if !reflect.DeepEqual(priorities, []int32{0, 0, 0, 1, 1, 1}) {
		t.Errorf("priorities %v", priorities)
	}
	if docs[1] != (rbacv1beta1.RoleBinding{}).SwaggerDoc()["roleRef"] || docs[3] != "Users in the roleBinding" ||
		docs[4] != "Groups in the roleBinding" || docs[5] != "ServiceAccounts in the roleBinding" {
		t.Errorf("descriptions %q", docs)
	}
}

func TestResource(t *testing.T) {
	r := Resource(nil)
	if r.Resource != "rolebindings" || r.Singular != "rolebinding" || !r.Namespaced || r.Status || r.Generation ||
		len(r.ShortNames) != 0 || len(r.Categories) != 0 || r.ReturnDeletedObject ||
		r.Kind.String() != "rbac.authorization.k8s.io/v1, Kind=RoleBinding" {
		t.Errorf("unexpected discovery data: %+v", r)
	}
	if got := r.NameValidation("a%b", false); len(got) != 1 {
		t.Errorf("name a%%b: %q", got)
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
	g.calls = append(g.calls, namespace+"/"+name+" "+ref.APIGroup+" "+ref.Kind+"/"+ref.Name)
	return g.err
}

func TestPrepareWrite(t *testing.T) {
	stored := valid()
	stored.ResourceVersion = "7"
	const asked = "default/read-pods rbac.authorization.k8s.io Role/pod-reader"
	tests := []struct {
		name   string
		obj    func() runtime.Object
		old    runtime.Object
		dryRun bool
		want   string
	}{
		{name: "create", obj: func() runtime.Object { return valid() }, want: asked},
		{name: "dry-run create", obj: func() runtime.Object { return valid() }, dryRun: true, want: asked},
		// Upstream checks every update beyond the garbage collector's,
		// whether roleRef changed or not.
		{name: "subjects", obj: func() runtime.Object { b := stored.DeepCopy(); b.Subjects = b.Subjects[:1]; return b }, old: stored, want: asked},
		{name: "annotations", obj: func() runtime.Object {
			b := stored.DeepCopy()
			b.Annotations = map[string]string{"a": "b"}
			return b
		}, old: stored, want: asked},
		{name: "owner references and finalizers", obj: func() runtime.Object {
			b := stored.DeepCopy()
			b.Finalizers = []string{"f"}
			b.OwnerReferences = []metav1.OwnerReference{{APIVersion: "v1", Kind: "Namespace", Name: "default", UID: "u"}}
			return b
		}, old: stored},
		{name: "delete", obj: func() runtime.Object { return nil }, old: stored},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := &fakeGuard{}
			extra, done, err := Resource(g).Strategy.(registry.Writer).PrepareWrite(context.Background(), tt.obj(), tt.old, tt.dryRun)
			if err != nil || done == nil || len(extra.If)+len(extra.Then) != 0 {
				t.Fatalf("extra %+v, done %t, err %v", extra, done != nil, err)
			}
			done(nil)
			want := []string{tt.want}
			if tt.want == "" {
				want = nil
			}
			if !reflect.DeepEqual(g.calls, want) {
				t.Errorf("calls %q, want %q", g.calls, want)
			}
		})
	}

	g := &fakeGuard{err: errors.New("forbidden")}
	if _, _, err := Resource(g).Strategy.(registry.Writer).PrepareWrite(context.Background(), valid(), nil, false); err != g.err {
		t.Errorf("refused: %v", err)
	}
	if _, _, err := Resource(nil).Strategy.(registry.Writer).PrepareWrite(context.Background(), valid(), nil, false); err != nil {
		t.Errorf("no guard: %v", err)
	}
}
