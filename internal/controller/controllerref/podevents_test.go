package controllerref

import (
	"slices"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

func TestPodEventsRouting(t *testing.T) {
	rs := func(name string) *appsv1.ReplicaSet {
		return &appsv1.ReplicaSet{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default", UID: types.UID("uid-rs-" + name)}}
	}
	a, b := rs("a"), rs("b")
	cache := map[string]*appsv1.ReplicaSet{"a": a, "b": b}
	var woken []string
	e := PodEvents[*appsv1.ReplicaSet]{
		Kind: rsKind,
		Get: func(_, name string) (*appsv1.ReplicaSet, error) {
			if r, ok := cache[name]; ok {
				return r, nil
			}
			return nil, apierrors.NewNotFound(appsv1.Resource("replicasets"), name)
		},
		Selecting: func(p *corev1.Pod) ([]*appsv1.ReplicaSet, error) {
			if p.Labels["app"] == "web" {
				return []*appsv1.ReplicaSet{a, b}, nil
			}
			return nil, apierrors.NewNotFound(appsv1.Resource("replicasets"), "")
		},
		Enqueue: func(r *appsv1.ReplicaSet) { woken = append(woken, r.Name) },
	}
	wake := func() string {
		defer func() { woken = nil }()
		slices.Sort(woken)
		return strings.Join(woken, ",")
	}
	refA, refB := metav1.NewControllerRef(a, rsKind), metav1.NewControllerRef(b, rsKind)
	stale := metav1.NewControllerRef(rs("a"), rsKind)
	stale.UID = "uid-of-a-deleted-a"

	if got, ok := e.Owner(pod("p", "web", refA)); !ok || got != a {
		t.Errorf("Owner = %v, %v; want a", got, ok)
	}
	if _, ok := e.Owner(pod("p", "web", stale)); ok {
		t.Error("a reference to an earlier a (another UID) resolved")
	}
	if got, ok := e.Added(pod("p", "web", refB)); !ok || got != b || wake() != "" {
		t.Errorf("Added(owned by b) = %v, %v; want b, for the caller to wake", got, ok)
	}
	if _, ok := e.Added(pod("p", "web", nil)); ok || wake() != "a,b" {
		t.Error("a new orphan did not wake the ReplicaSets selecting it")
	}
	for _, c := range []struct {
		name     string
		old, cur *corev1.Pod
		want     string
		owner    string
	}{
		{"same owner", pod("p", "web", refA), pod("p", "web", refA), "a", "a"},
		{"owner changed", pod("p", "web", refA), pod("p", "web", refB), "a,b", "b"},
		{"released", pod("p", "web", refA), pod("p", "web", nil), "a,a,b", ""},
		{"orphan relabelled", pod("p", "db", nil), pod("p", "web", nil), "a,b", ""},
		{"orphan unchanged", pod("p", "web", nil), pod("p", "web", nil), "", ""},
		{"orphan now unselected", pod("p", "web", nil), pod("p", "db", nil), "", ""},
	} {
		got, ok := e.Updated(c.old, c.cur)
		owner := ""
		if ok {
			owner = got.Name
		}
		if w := wake(); w != c.want || owner != c.owner {
			t.Errorf("%s: woke %q, owner %q; want %q, %q", c.name, w, owner, c.want, c.owner)
		}
	}
}
