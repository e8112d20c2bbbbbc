package clusterroleaggregation

import (
	"context"
	"fmt"
	"reflect"
	"testing"

	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/cache"

	"github.com/svcnet/svcnet/internal/controller"
	"github.com/svcnet/svcnet/internal/controller/controllertest"
)

const viewLabel = "rbac.example.com/aggregate-to-view"

func rule(verb, resource string) rbacv1.PolicyRule {
	return rbacv1.PolicyRule{Verbs: []string{verb}, APIGroups: []string{""}, Resources: []string{resource}}
}

func clusterRole(name string, labels map[string]string, rules ...rbacv1.PolicyRule) *rbacv1.ClusterRole {
	return &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels}, Rules: rules}
}

// aggregating is a ClusterRole aggregating those with each label set.
func aggregating(name string, rules []rbacv1.PolicyRule, selectors ...map[string]string) *rbacv1.ClusterRole {
	cr := clusterRole(name, nil, rules...)
	cr.AggregationRule = &rbacv1.AggregationRule{}
	for _, s := range selectors {
		cr.AggregationRule.ClusterRoleSelectors = append(cr.AggregationRule.ClusterRoleSelectors, metav1.LabelSelector{MatchLabels: s})
	}
	return cr
}

func start(t *testing.T, cs *fake.Clientset) {
	t.Helper()
	controllertest.Start(t, cs, func(_ context.Context, d controller.Deps) []func(context.Context) {
		c, err := New(d)
		if err != nil {
			t.Fatal(err)
		}
		return []func(context.Context){c.Run}
	})
}

func wantRules(t *testing.T, cs *fake.Clientset, name string, want ...rbacv1.PolicyRule) {
	t.Helper()
	controllertest.Eventually(t, func() string {
		cr, err := cs.RbacV1().ClusterRoles().Get(context.Background(), name, metav1.GetOptions{})
		if err != nil {
			return err.Error()
		}
		if len(cr.Rules) != len(want) || len(want) > 0 && !reflect.DeepEqual(cr.Rules, want) {
			return fmt.Sprintf("rules of %s\n got %v\nwant %v", name, cr.Rules, want)
		}
		return ""
	})
}

// writes counts the writes of ClusterRoles the fake has seen.
func writes(cs *fake.Clientset) int {
	n := 0
	for _, a := range cs.Actions() {
		if a.GetResource().Resource == "clusterroles" && (a.GetVerb() == "patch" || a.GetVerb() == "update") {
			n++
		}
	}
	return n
}

func TestAggregation(t *testing.T) {
	getPods, listPods, getNodes := rule("get", "pods"), rule("list", "pods"), rule("get", "nodes")
	cs := controllertest.NewClient(
		// The union is in the order of the selectors, then of the
		// names, each rule once; the role itself is left out even when
		// it matches, and unlabelled roles do not count.
		aggregating("view", []rbacv1.PolicyRule{rule("delete", "stale")},
			map[string]string{viewLabel: "true"}, map[string]string{"extra": "yes"}),
		clusterRole("b-source", map[string]string{viewLabel: "true"}, listPods, getPods),
		clusterRole("a-source", map[string]string{viewLabel: "true"}, getPods),
		clusterRole("c-extra", map[string]string{"extra": "yes"}, getNodes, listPods),
		clusterRole("unrelated", nil, rule("*", "*")),
	)
	start(t, cs)
	wantRules(t, cs, "view", getPods, listPods, getNodes)

	// A change of a source role changes the union.
	ctx := context.Background()
	b, err := cs.RbacV1().ClusterRoles().Get(ctx, "b-source", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	watchSecrets := rule("watch", "secrets")
	b.Rules = append(b.Rules, watchSecrets)
	if _, err := cs.RbacV1().ClusterRoles().Update(ctx, b, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	wantRules(t, cs, "view", getPods, listPods, watchSecrets, getNodes)

	// So does a new one, and a role losing its label.
	if _, err := cs.RbacV1().ClusterRoles().Create(ctx, clusterRole("0-new", map[string]string{viewLabel: "true"}, rule("get", "services")), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	wantRules(t, cs, "view", rule("get", "services"), getPods, listPods, watchSecrets, getNodes)
	patch := []byte(`{"metadata":{"labels":{"extra":null}}}`)
	if _, err := cs.RbacV1().ClusterRoles().Patch(ctx, "c-extra", types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	wantRules(t, cs, "view", rule("get", "services"), getPods, listPods, watchSecrets)

	// A deleted source goes, and with all gone the rules are empty.
	for _, name := range []string{"0-new", "a-source", "b-source"} {
		if err := cs.RbacV1().ClusterRoles().Delete(ctx, name, metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	wantRules(t, cs, "view")

	// The controller applied the rules as their manager.
	view, err := cs.RbacV1().ClusterRoles().Get(ctx, "view", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if view.AggregationRule == nil || len(view.AggregationRule.ClusterRoleSelectors) != 2 {
		t.Errorf("aggregationRule lost: %+v", view.AggregationRule)
	}
	found := false
	for _, a := range cs.Actions() {
		if p, ok := a.(interface{ GetPatchType() types.PatchType }); ok && a.GetResource().Resource == "clusterroles" && p.GetPatchType() == types.ApplyPatchType {
			found = true
		}
	}
	if !found {
		t.Error("no apply of a ClusterRole")
	}
}

// TestUnchanged syncs directly, so that nothing else runs: a union equal
// to the rules there are, or a ClusterRole that aggregates nothing, is
// not written.
func TestUnchanged(t *testing.T) {
	get := rule("get", "pods")
	cs := controllertest.NewClient(
		aggregating("view", []rbacv1.PolicyRule{get}, map[string]string{viewLabel: "true"}),
		aggregating("empty", nil, map[string]string{"nothing": "matches"}),
		clusterRole("plain", nil, rule("list", "pods")),
		clusterRole("source", map[string]string{viewLabel: "true"}, get, get),
	)
	var c *Controller
	controllertest.Start(t, cs, func(_ context.Context, d controller.Deps) []func(context.Context) {
		var err error
		if c, err = New(d); err != nil {
			t.Fatal(err)
		}
		return nil
	})
	if !cache.WaitForCacheSync(t.Context().Done(), c.synced...) {
		t.Fatal("cache not synced")
	}
	for _, name := range []string{"view", "empty", "plain", "gone"} {
		if err := c.sync(t.Context(), name); err != nil {
			t.Errorf("sync %s: %v", name, err)
		}
	}
	if n := writes(cs); n != 0 {
		t.Errorf("%d writes: %v", n, cs.Actions())
	}

	// A stale union is written once.
	cr, _ := c.roles.Get("view")
	stale := cr.DeepCopy()
	stale.Rules = nil
	if _, err := cs.RbacV1().ClusterRoles().Update(t.Context(), stale, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	controllertest.Eventually(t, func() string {
		if cr, _ := c.roles.Get("view"); len(cr.Rules) != 0 {
			return "cache not updated"
		}
		return ""
	})
	before := writes(cs)
	if err := c.sync(t.Context(), "view"); err != nil {
		t.Fatal(err)
	}
	if n := writes(cs) - before; n != 1 {
		t.Errorf("%d writes, want 1", n)
	}
	wantRules(t, cs, "view", get)
}
