package bootstrappolicy

import (
	"context"
	"errors"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/component-helpers/auth/rbac/validation"
)

func ctxFor(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func ensure(t *testing.T, ctx context.Context, client *fake.Clientset) {
	t.Helper()
	client.ClearActions()
	if err := Ensure(ctx, client); err != nil {
		t.Fatalf("Ensure: %v", err)
	}
}

// writes counts the writing actions of the last Ensure by "verb resource".
func writes(client *fake.Clientset) map[string]int {
	out := map[string]int{}
	for _, a := range client.Actions() {
		if v := a.GetVerb(); v != "get" && v != "list" && v != "watch" {
			out[v+" "+a.GetResource().Resource]++
		}
	}
	return out
}

func TestEnsureCreatesThenIsIdempotent(t *testing.T) {
	ctx := ctxFor(t)
	client := fake.NewClientset()
	ensure(t, ctx, client)
	want := map[string]int{
		"create clusterroles":        len(ClusterRoles()),
		"create clusterrolebindings": len(ClusterRoleBindings()),
		"create roles":               7,
		"create rolebindings":        7,
		"create namespaces":          2, // kube-system, kube-public
	}
	if got := writes(client); !reflect.DeepEqual(got, want) {
		t.Errorf("first run wrote %v, want %v", got, want)
	}
	for _, r := range ClusterRoles() {
		got, err := client.RbacV1().ClusterRoles().Get(ctx, r.Name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(got.Rules, r.Rules) || !reflect.DeepEqual(got.AggregationRule, r.AggregationRule) ||
			!reflect.DeepEqual(got.Labels, r.Labels) || !reflect.DeepEqual(got.Annotations, r.Annotations) {
			t.Errorf("stored %s differs from the policy", r.Name)
		}
	}
	for ns, bs := range NamespaceRoleBindings() {
		for _, b := range bs {
			if _, err := client.RbacV1().RoleBindings(ns).Get(ctx, b.Name, metav1.GetOptions{}); err != nil {
				t.Error(err)
			}
		}
	}

	ensure(t, ctx, client)
	if got := writes(client); len(got) != 0 {
		t.Errorf("second run wrote %v, want nothing", got)
	}
}

func TestEnsureReconcilesAutoupdate(t *testing.T) {
	ctx := ctxFor(t)
	client := fake.NewClientset()
	ensure(t, ctx, client)
	crs, crbs := client.RbacV1().ClusterRoles(), client.RbacV1().ClusterRoleBindings()

	// autoupdate=true, a default rule lost, a rule and a label added by an
	// administrator: the rule comes back, the additions stay.
	custom := rbacv1.PolicyRule{Verbs: []string{"get"}, APIGroups: []string{"example.com"}, Resources: []string{"widgets"}}
	view, _ := crs.Get(ctx, "system:aggregate-to-view", metav1.GetOptions{})
	lost := view.Rules[0]
	view.Rules = append(slices.Clone(view.Rules[1:]), custom)
	view.Labels["team"] = "a"
	if _, err := crs.Update(ctx, view, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}

	// autoupdate=false: left alone, rule missing or not.
	proxier, _ := crs.Get(ctx, "system:node-proxier", metav1.GetOptions{})
	proxier.Annotations[rbacv1.AutoUpdateAnnotationKey] = "false"
	proxier.Rules = proxier.Rules[:1]
	if _, err := crs.Update(ctx, proxier, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}

	// A binding with its default subject gone and another one added.
	extra := rbacv1.Subject{Kind: "User", APIGroup: rbacv1.GroupName, Name: "alice"}
	basic, _ := crbs.Get(ctx, "system:basic-user", metav1.GetOptions{})
	basic.Subjects = []rbacv1.Subject{extra}
	if _, err := crbs.Update(ctx, basic, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	// The same on a protected binding.
	admin, _ := crbs.Get(ctx, "cluster-admin", metav1.GetOptions{})
	admin.Annotations[rbacv1.AutoUpdateAnnotationKey] = "false"
	admin.Subjects = []rbacv1.Subject{extra}
	if _, err := crbs.Update(ctx, admin, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}

	// A binding recreated by hand with another roleRef is deleted and
	// created anew, as upstream does (roleRef is immutable).
	if err := crbs.Delete(ctx, "system:kube-dns", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	dns := clusterBinding("system:kube-dns", extra)
	dns.RoleRef.Name = "view"
	if _, err := crbs.Create(ctx, &dns, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	ensure(t, ctx, client)
	want := map[string]int{"update clusterroles": 1, "update clusterrolebindings": 1, "delete clusterrolebindings": 1, "create clusterrolebindings": 1}
	if got := writes(client); !reflect.DeepEqual(got, want) {
		t.Errorf("wrote %v, want %v", got, want)
	}

	view, _ = crs.Get(ctx, "system:aggregate-to-view", metav1.GetOptions{})
	// The library restores what is missing as one rule per verb and
	// resource, as upstream does.
	if covers, _ := validation.Covers(view.Rules, []rbacv1.PolicyRule{lost}); !covers ||
		!slices.ContainsFunc(view.Rules, func(r rbacv1.PolicyRule) bool { return reflect.DeepEqual(r, custom) }) ||
		view.Labels["team"] != "a" || view.Labels[bootstrapLabel] != bootstrapValue {
		t.Errorf("system:aggregate-to-view not reconciled: rules %v, labels %v", view.Rules, view.Labels)
	}
	proxier, _ = crs.Get(ctx, "system:node-proxier", metav1.GetOptions{})
	if len(proxier.Rules) != 1 {
		t.Errorf("protected system:node-proxier was changed: %v", proxier.Rules)
	}
	basic, _ = crbs.Get(ctx, "system:basic-user", metav1.GetOptions{})
	wantSubjects := []rbacv1.Subject{extra, {Kind: "Group", APIGroup: rbacv1.GroupName, Name: "system:authenticated"}}
	if !reflect.DeepEqual(basic.Subjects, wantSubjects) {
		t.Errorf("system:basic-user subjects = %v, want %v", basic.Subjects, wantSubjects)
	}
	admin, _ = crbs.Get(ctx, "cluster-admin", metav1.GetOptions{})
	if !reflect.DeepEqual(admin.Subjects, []rbacv1.Subject{extra}) {
		t.Errorf("protected cluster-admin binding was changed: %v", admin.Subjects)
	}
	got, _ := crbs.Get(ctx, "system:kube-dns", metav1.GetOptions{})
	if want := clusterBindingNamed(t, "system:kube-dns"); got.RoleRef != want.RoleRef || !reflect.DeepEqual(got.Subjects, want.Subjects) {
		t.Errorf("system:kube-dns = %v %v, want %v %v", got.RoleRef, got.Subjects, want.RoleRef, want.Subjects)
	}
}

func TestEnsureRetriesConflicts(t *testing.T) {
	ctx := ctxFor(t)
	client := fake.NewClientset()
	ensure(t, ctx, client)
	crs := client.RbacV1().ClusterRoles()
	edit, _ := crs.Get(ctx, "system:aggregate-to-edit", metav1.GetOptions{})
	edit.Rules = edit.Rules[1:]
	if _, err := crs.Update(ctx, edit, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}

	conflicts := 2
	client.PrependReactor("update", "clusterroles", func(k8stesting.Action) (bool, runtime.Object, error) {
		if conflicts == 0 {
			return false, nil, nil
		}
		conflicts--
		return true, nil, apierrors.NewConflict(schema.GroupResource{Group: rbacv1.GroupName, Resource: "clusterroles"}, "system:aggregate-to-edit", errors.New("changed"))
	})
	ensure(t, ctx, client)
	edit, _ = crs.Get(ctx, "system:aggregate-to-edit", metav1.GetOptions{})
	if covers, _ := validation.Covers(edit.Rules, clusterRoleNamed(t, "system:aggregate-to-edit").Rules); conflicts != 0 || !covers {
		t.Errorf("after conflicts: %d conflicts left, rules restored %v", conflicts, covers)
	}
}

func TestEnsureGoesOnAndReportsFailures(t *testing.T) {
	ctx := ctxFor(t)
	client := fake.NewClientset()
	client.PrependReactor("create", "clusterroles", func(a k8stesting.Action) (bool, runtime.Object, error) {
		if a.(k8stesting.CreateAction).GetObject().(*rbacv1.ClusterRole).Name == "edit" {
			return true, nil, apierrors.NewInternalError(errors.New("etcd down"))
		}
		return false, nil, nil
	})
	err := Ensure(ctx, client)
	if err == nil || !strings.Contains(err.Error(), "clusterrole edit") || !strings.Contains(err.Error(), "etcd down") {
		t.Fatalf("Ensure = %v, want the failure of clusterrole edit", err)
	}
	if !apierrors.IsInternalError(err) {
		t.Errorf("cause not kept in %v", err)
	}
	if _, err := client.RbacV1().ClusterRoles().Get(ctx, "view", metav1.GetOptions{}); err != nil {
		t.Errorf("roles after the failed one were not created: %v", err)
	}
	if _, err := client.RbacV1().RoleBindings("kube-public").Get(ctx, controllerPrefix+"bootstrap-signer", metav1.GetOptions{}); err != nil {
		t.Errorf("role bindings were not created: %v", err)
	}

	cancelled, cancel := context.WithCancel(ctx)
	cancel()
	if err := Ensure(cancelled, fake.NewClientset()); !errors.Is(err, context.Canceled) {
		t.Errorf("Ensure with a cancelled context = %v", err)
	}
}

func TestEnsureMigratesLegacyRoles(t *testing.T) {
	ctx := ctxFor(t)
	custom := rbacv1.PolicyRule{Verbs: []string{"get"}, APIGroups: []string{"example.com"}, Resources: []string{"widgets"}}
	legacyAdmin := &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "admin"}, Rules: []rbacv1.PolicyRule{custom}}
	discovery := clusterBinding("system:discovery", group("system:authenticated"), group("ops"))
	discovery.Annotations = map[string]string{rbacv1.AutoUpdateAnnotationKey: "false"}
	client := fake.NewClientset(legacyAdmin, &discovery)
	ensure(t, ctx, client)

	agg, err := client.RbacV1().ClusterRoles().Get(ctx, "system:aggregate-to-admin", metav1.GetOptions{})
	if err != nil || !slices.ContainsFunc(agg.Rules, func(r rbacv1.PolicyRule) bool { return reflect.DeepEqual(r, custom) }) {
		t.Errorf("admin's own rules were not carried to system:aggregate-to-admin: %v %v", agg, err)
	}
	admin, _ := client.RbacV1().ClusterRoles().Get(ctx, "admin", metav1.GetOptions{})
	if admin.AggregationRule == nil {
		t.Error("admin did not become aggregated")
	}
	piv, _ := client.RbacV1().ClusterRoleBindings().Get(ctx, "system:public-info-viewer", metav1.GetOptions{})
	if !slices.Contains(piv.Subjects, group("ops")) || piv.Annotations[rbacv1.AutoUpdateAnnotationKey] != "false" {
		t.Errorf("system:public-info-viewer not split from system:discovery: %v %v", piv.Subjects, piv.Annotations)
	}
}
