package controllerref

import (
	"context"
	"slices"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"
)

var rsKind = appsv1.SchemeGroupVersion.WithKind("ReplicaSet")

func pod(name string, app string, owner *metav1.OwnerReference) *corev1.Pod {
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default", UID: types.UID("uid-" + name), Labels: map[string]string{"app": app}}}
	if owner != nil {
		p.OwnerReferences = []metav1.OwnerReference{*owner}
	}
	return p
}

func owner(cs *fake.Clientset, rs *appsv1.ReplicaSet) *Owner {
	return &Owner{
		Object:   rs,
		Kind:     rsKind,
		Selector: labels.SelectorFromSet(labels.Set{"app": "web"}),
		Fresh: func(ctx context.Context) (metav1.Object, error) {
			return cs.AppsV1().ReplicaSets(rs.Namespace).Get(ctx, rs.Name, metav1.GetOptions{})
		},
		Patch: func(ctx context.Context, ns, name string, data []byte) error {
			_, err := cs.CoreV1().Pods(ns).Patch(ctx, name, types.StrategicMergePatchType, data, metav1.PatchOptions{})
			return err
		},
	}
}

func names(pods []*corev1.Pod) string {
	var n []string
	for _, p := range pods {
		n = append(n, p.Name)
	}
	slices.Sort(n)
	return strings.Join(n, ",")
}

func TestClaim(t *testing.T) {
	ctx := context.Background()
	rs := &appsv1.ReplicaSet{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "default", UID: "uid-rs"}}
	ours := metav1.NewControllerRef(rs, rsKind)
	theirs := &metav1.OwnerReference{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: "other", UID: "uid-other", Controller: new(true)}
	pods := []*corev1.Pod{
		pod("kept", "web", ours),
		pod("orphan", "web", nil),
		pod("relabelled", "db", ours),
		pod("foreign", "web", theirs),
		pod("unselected", "db", nil),
	}
	vanished := pod("vanished", "web", nil)
	cs := fake.NewClientset(rs, pods[0], pods[1], pods[2], pods[3], pods[4])
	claimed, err := Claim(ctx, owner(cs, rs), append(pods, vanished))
	if err != nil {
		t.Fatal(err)
	}
	if got := names(claimed); got != "kept,orphan" {
		t.Errorf("claimed %s, want kept,orphan", got)
	}
	refs := func(name string) []metav1.OwnerReference {
		p, err := cs.CoreV1().Pods("default").Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return p.OwnerReferences
	}
	if r := refs("orphan"); len(r) != 1 || r[0].UID != rs.UID || !*r[0].Controller || !*r[0].BlockOwnerDeletion {
		t.Errorf("orphan's owner references after adoption: %+v", r)
	}
	if r := refs("relabelled"); len(r) != 0 {
		t.Errorf("relabelled pod still has owner references %+v", r)
	}
	if r := refs("foreign"); len(r) != 1 || r[0].UID != "uid-other" {
		t.Errorf("foreign pod's owner references changed: %+v", r)
	}
	if r := refs("unselected"); len(r) != 0 {
		t.Errorf("unselected orphan was adopted: %+v", r)
	}
}

func TestNoAdoptionByRecreatedOrDeletingOwner(t *testing.T) {
	ctx := context.Background()
	cached := &appsv1.ReplicaSet{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "default", UID: "uid-old"}}
	recreated := cached.DeepCopy()
	recreated.UID = "uid-new"
	orphan := pod("orphan", "web", nil)
	cs := fake.NewClientset(recreated, orphan)
	if _, err := Claim(ctx, owner(cs, cached), []*corev1.Pod{orphan}); err == nil || !strings.Contains(err.Error(), "recreated") {
		t.Errorf("claim by a recreated owner: err = %v", err)
	}

	deleting := recreated.DeepCopy()
	deleting.DeletionTimestamp = &metav1.Time{}
	deleting.Finalizers = []string{"foregroundDeletion"}
	cs = fake.NewClientset(deleting, orphan)
	if _, err := Claim(ctx, owner(cs, recreated), []*corev1.Pod{orphan}); err == nil || !strings.Contains(err.Error(), "being deleted") {
		t.Errorf("claim by an owner being deleted: err = %v", err)
	}
	if p, _ := cs.CoreV1().Pods("default").Get(ctx, "orphan", metav1.GetOptions{}); len(p.OwnerReferences) != 0 {
		t.Errorf("orphan adopted by an owner being deleted: %+v", p.OwnerReferences)
	}
}
