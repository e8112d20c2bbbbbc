package rbac

import (
	"context"
	"strings"
	"testing"

	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apiserver/pkg/authentication/user"
	rbaclisters "k8s.io/client-go/listers/rbac/v1"
	"k8s.io/client-go/tools/cache"

	"github.com/svcnet/svcnet/internal/auth/authn"
	"github.com/svcnet/svcnet/internal/auth/authz"
)

// policy is an Authorizer over objs, with the chain an API server has.
func newPolicy(t *testing.T, objs ...runtime.Object) (*Authorizer, authz.Authorizer) {
	t.Helper()
	idx := func() cache.Indexer {
		return cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc})
	}
	roles, rbs, crs, crbs := idx(), idx(), idx(), idx()
	for _, o := range objs {
		var err error
		switch o.(type) {
		case *rbacv1.Role:
			err = roles.Add(o)
		case *rbacv1.RoleBinding:
			err = rbs.Add(o)
		case *rbacv1.ClusterRole:
			err = crs.Add(o)
		case *rbacv1.ClusterRoleBinding:
			err = crbs.Add(o)
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	a := New(Listers{Roles: rbaclisters.NewRoleLister(roles), RoleBindings: rbaclisters.NewRoleBindingLister(rbs),
		ClusterRoles: rbaclisters.NewClusterRoleLister(crs), ClusterRoleBindings: rbaclisters.NewClusterRoleBindingLister(crbs)})
	return a, authz.Union{authz.PrivilegedGroups{user.SystemPrivilegedGroup}, a}
}

func rule(verbs, groups, resources []string) rbacv1.PolicyRule {
	return rbacv1.PolicyRule{Verbs: verbs, APIGroups: groups, Resources: resources}
}

var (
	view = &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "view"}, Rules: []rbacv1.PolicyRule{
		rule([]string{"get", "list", "watch"}, []string{""}, []string{"pods", "pods/log", "configmaps"}),
	}}
	nodeReader = &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: "secret-reader", Namespace: "dev"}, Rules: []rbacv1.PolicyRule{
		{Verbs: []string{"get"}, APIGroups: []string{""}, Resources: []string{"secrets"}, ResourceNames: []string{"db"}},
	}}
	bindings = []runtime.Object{
		view, nodeReader,
		&rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "jane-view", Namespace: "dev"},
			RoleRef:  rbacv1.RoleRef{Kind: "ClusterRole", Name: "view"},
			Subjects: []rbacv1.Subject{{Kind: "User", Name: "jane"}, {Kind: "ServiceAccount", Name: "app"}}},
		&rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "db", Namespace: "dev"},
			RoleRef:  rbacv1.RoleRef{Kind: "Role", Name: "secret-reader"},
			Subjects: []rbacv1.Subject{{Kind: "Group", Name: "dev"}}},
		&rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "broken"},
			RoleRef:  rbacv1.RoleRef{Kind: "ClusterRole", Name: "gone"},
			Subjects: []rbacv1.Subject{{Kind: "User", Name: "jane"}}},
		&rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "health"},
			RoleRef:  rbacv1.RoleRef{Kind: "ClusterRole", Name: "health"},
			Subjects: []rbacv1.Subject{{Kind: "Group", Name: user.AllUnauthenticated}}},
		&rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "health"}, Rules: []rbacv1.PolicyRule{
			{Verbs: []string{"get"}, NonResourceURLs: []string{"/healthz", "/livez/*"}}}},
	}
)

func TestAuthorize(t *testing.T) {
	a, _ := newPolicy(t, bindings...)
	jane := &user.DefaultInfo{Name: "jane", Groups: []string{"dev"}}
	app := &user.DefaultInfo{Name: "system:serviceaccount:dev:app"}
	anon := authn.Anonymous()
	res := func(u user.Info, verb, ns, resource, sub, name string) authz.Attributes {
		return authz.Attributes{User: u, Verb: verb, ResourceRequest: true, Namespace: ns, Resource: resource, Subresource: sub, Name: name}
	}
	for _, c := range []struct {
		a      authz.Attributes
		allow  bool
		reason string
	}{
		{res(jane, "list", "dev", "pods", "", ""), true, `RBAC: allowed by RoleBinding "jane-view/dev" of ClusterRole "view" to User "jane"`},
		{res(app, "get", "dev", "pods", "log", "web"), true, `RBAC: allowed by RoleBinding "jane-view/dev" of ClusterRole "view" to ServiceAccount "app/dev"`},
		{res(app, "get", "other", "pods", "", "web"), false, ""},
		{res(&user.DefaultInfo{Name: "system:serviceaccount:dev:application"}, "get", "dev", "pods", "", "web"), false, ""},
		{res(&user.DefaultInfo{Name: "system:serviceaccount:de:vapp"}, "get", "dev", "pods", "", "web"), false, ""},
		{res(jane, "list", "", "pods", "", ""), false, `RBAC: clusterrole.rbac.authorization.k8s.io "gone" not found`},
		{res(jane, "delete", "dev", "pods", "", "web"), false, `RBAC: clusterrole.rbac.authorization.k8s.io "gone" not found`},
		{res(jane, "get", "dev", "pods", "exec", "web"), false, `RBAC: clusterrole.rbac.authorization.k8s.io "gone" not found`},
		{res(jane, "get", "dev", "secrets", "", "db"), true, `RBAC: allowed by RoleBinding "db/dev" of Role "secret-reader" to Group "dev"`},
		{res(jane, "get", "dev", "secrets", "", "other"), false, `RBAC: clusterrole.rbac.authorization.k8s.io "gone" not found`},
		{authz.Attributes{User: anon, Verb: "get", Path: "/healthz"}, true, `RBAC: allowed by ClusterRoleBinding "health" of ClusterRole "health" to Group "system:unauthenticated"`},
		{authz.Attributes{User: anon, Verb: "get", Path: "/livez/etcd"}, true, `RBAC: allowed by ClusterRoleBinding "health" of ClusterRole "health" to Group "system:unauthenticated"`},
		{authz.Attributes{User: anon, Verb: "get", Path: "/metrics"}, false, ""},
		{res(anon, "get", "dev", "pods", "", "web"), false, ""},
	} {
		d, reason, err := a.Authorize(context.Background(), c.a)
		if err != nil || (d == authz.Allow) != c.allow || reason != c.reason {
			t.Errorf("%+v: got %v %q %v, want allow=%v %q", c.a, d, reason, err, c.allow, c.reason)
		}
	}
	rules, err := a.RulesFor(jane, "dev")
	if len(rules) != 2 || err == nil || err.Error() != `clusterrole.rbac.authorization.k8s.io "gone" not found` {
		t.Errorf("jane's rules in dev: %v %v", rules, err)
	}
}

func TestEscalation(t *testing.T) {
	a, chain := newPolicy(t, append(bindings,
		&rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "escalator"}, Rules: []rbacv1.PolicyRule{
			rule([]string{"escalate", "bind"}, []string{"rbac.authorization.k8s.io"}, []string{"roles", "clusterroles"})}},
		&rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "bob"},
			RoleRef: rbacv1.RoleRef{Kind: "ClusterRole", Name: "escalator"}, Subjects: []rbacv1.Subject{{Kind: "User", Name: "bob"}}},
	)...)
	g := NewEscalation(a, chain)
	as := func(name string, groups ...string) context.Context {
		return authn.WithUser(context.Background(), &user.DefaultInfo{Name: name, Groups: groups})
	}
	podReader := []rbacv1.PolicyRule{rule([]string{"get", "list"}, []string{""}, []string{"pods"})}
	podWriter := []rbacv1.PolicyRule{rule([]string{"get", "delete"}, []string{""}, []string{"pods", "services"})}
	if err := g.ConfirmRole(as("jane"), "dev", "r", podReader, false); err != nil {
		t.Errorf("jane grants what she holds: %v", err)
	}
	err := g.ConfirmRole(as("jane", "dev"), "dev", "w", podWriter, false)
	want := `roles.rbac.authorization.k8s.io "w" is forbidden: user "jane" (groups=["dev"]) is attempting to grant RBAC permissions not currently held:
{APIGroups:[""], Resources:["pods"], Verbs:["delete"]}
{APIGroups:[""], Resources:["services"], Verbs:["get" "delete"]}; resolution errors: [clusterrole.rbac.authorization.k8s.io "gone" not found]`
	if err == nil || err.Error() != want {
		t.Errorf("jane escalates:\n got %v\nwant %s", err, want)
	}
	if err := g.ConfirmRole(as("jane"), "", "agg", nil, true); err == nil || !strings.Contains(err.Error(), "must have cluster-admin privileges to use the aggregationRule") {
		t.Errorf("jane aggregates: %v", err)
	}
	for _, ctx := range []context.Context{as("bob"), as("root", user.SystemPrivilegedGroup)} {
		if err := g.ConfirmRole(ctx, "dev", "w", podWriter, false); err != nil {
			t.Errorf("escalate allowed: %v", err)
		}
		if err := g.ConfirmBinding(ctx, "", "b", rbacv1.RoleRef{Kind: "ClusterRole", Name: "cluster-admin"}); err != nil {
			t.Errorf("bind allowed: %v", err)
		}
	}
	if err := g.ConfirmBinding(as("jane"), "dev", "b", rbacv1.RoleRef{Kind: "ClusterRole", Name: "view"}); err != nil {
		t.Errorf("jane binds view in dev, which she holds there: %v", err)
	}
	if err := g.ConfirmBinding(as("jane"), "", "b", rbacv1.RoleRef{Kind: "ClusterRole", Name: "view"}); err == nil ||
		!strings.HasPrefix(err.Error(), `clusterrolebindings.rbac.authorization.k8s.io "b" is forbidden: user "jane"`) {
		t.Errorf("jane binds view cluster-wide: %v", err)
	}
	if err := g.ConfirmBinding(as("jane"), "dev", "b", rbacv1.RoleRef{Kind: "Role", Name: "nope"}); err == nil || err.Error() != `role.rbac.authorization.k8s.io "nope" not found` {
		t.Errorf("binding a missing role: %v", err)
	}
}
