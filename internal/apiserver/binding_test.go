package apiserver

import (
	"context"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

func TestPodBinding(t *testing.T) {
	_, cs := newTestServer(t)
	ctx := context.Background()
	pods := cs.CoreV1().Pods("default")
	_, err := pods.Create(ctx, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p"},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "busybox"}}}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	bind := &corev1.Binding{ObjectMeta: metav1.ObjectMeta{Name: "p", Annotations: map[string]string{"scheduled-by": "test"}},
		Target: corev1.ObjectReference{Kind: "Node", Name: "n1"}}
	if err := pods.Bind(ctx, bind, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	p, err := pods.Get(ctx, "p", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	scheduled := false
	for _, c := range p.Status.Conditions {
		scheduled = scheduled || (c.Type == corev1.PodScheduled && c.Status == corev1.ConditionTrue)
	}
	if p.Spec.NodeName != "n1" || !scheduled || p.Annotations["scheduled-by"] != "test" {
		t.Fatalf("bound pod: node %q conditions %v annotations %v", p.Spec.NodeName, p.Status.Conditions, p.Annotations)
	}
	// A bound pod is not bound again, and a plain update may not move it.
	bind.Target.Name = "n2"
	err = pods.Bind(ctx, bind, metav1.CreateOptions{})
	if !apierrors.IsConflict(err) || err.Error() != `Operation cannot be fulfilled on pods/binding "p": pod p is already assigned to node "n1"` {
		t.Fatalf("second binding: %v", err)
	}
	p.Spec.NodeName = "n2"
	if _, err := pods.Update(ctx, p, metav1.UpdateOptions{}); !apierrors.IsInvalid(err) {
		t.Fatalf("update moving the pod: %v", err)
	}
}

// A pod's generation is 1 from its creation (whatever the client says)
// through its binding, grows with each spec change and not with metadata,
// and once more when its graceful deletion starts (upstream's
// PodObservedGenerationTracking).
func TestPodGeneration(t *testing.T) {
	_, cs := newTestServer(t)
	ctx := context.Background()
	pods := cs.CoreV1().Pods("default")
	p, err := pods.Create(ctx, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Generation: 100},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "busybox"}}}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	want := int64(1)
	check := func(what string, p *corev1.Pod) {
		t.Helper()
		if p.Generation != want {
			t.Errorf("after %s: generation %d, want %d", what, p.Generation, want)
		}
	}
	check("create", p)
	if err := pods.Bind(ctx, &corev1.Binding{ObjectMeta: metav1.ObjectMeta{Name: "p"}, Target: corev1.ObjectReference{Name: "n1"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	p, _ = pods.Get(ctx, "p", metav1.GetOptions{})
	check("binding", p)
	p.Annotations = map[string]string{"k": "v"}
	p.Generation = 7
	p, err = pods.Update(ctx, p, metav1.UpdateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	check("a metadata update", p)
	p.Spec.ActiveDeadlineSeconds = ptr.To(int64(5000))
	if p, err = pods.Update(ctx, p, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	want++
	check("a spec update", p)
	if err := pods.Delete(ctx, "p", metav1.DeleteOptions{GracePeriodSeconds: ptr.To(int64(30))}); err != nil {
		t.Fatal(err)
	}
	p, _ = pods.Get(ctx, "p", metav1.GetOptions{})
	want++
	check("a graceful delete", p)
}
