package cluster

import (
	"context"
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"
)

// TestPriorityClasses starts the API server and finds the system
// PriorityClasses, which cannot be deleted; new pods get their class's
// priority through the Priority admission plugin (the global default's
// without a class), and an unknown class, a second global default or a
// changed value are refused.
func TestPriorityClasses(t *testing.T) {
	_, cfg := startTestAPIServer(t, APIServerOptions{})
	ctx := context.Background()
	cs := kubernetes.NewForConfigOrDie(cfg)
	pcs := cs.SchedulingV1().PriorityClasses()

	for name, value := range map[string]int32{"system-node-critical": 2000001000, "system-cluster-critical": 2000000000} {
		c, err := pcs.Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			t.Errorf("%s: %v", name, err)
			continue
		}
		if c.Value != value || c.GlobalDefault || ptr.Deref(c.PreemptionPolicy, "") != corev1.PreemptLowerPriority || c.Generation != 1 {
			t.Errorf("%s: %+v", name, c)
		}
		err = pcs.Delete(ctx, name, metav1.DeleteOptions{})
		if want := `priorityclasses.scheduling.k8s.io "` + name + `" is forbidden: this is a system priority class and cannot be deleted`; !apierrors.IsForbidden(err) || err.Error() != want {
			t.Errorf("delete %s: %v", name, err)
		}
	}

	// The pods' service account, which no controller makes here.
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "default"}}
	if _, err := cs.CoreV1().ServiceAccounts("default").Create(ctx, sa, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	newPod := func(name, class string) (*corev1.Pod, error) {
		return cs.CoreV1().Pods("default").Create(ctx, &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: name},
			Spec:       corev1.PodSpec{PriorityClassName: class, Containers: []corev1.Container{{Name: "c", Image: "pause"}}},
		}, metav1.CreateOptions{})
	}
	expect := func(p *corev1.Pod, err error, class string, priority int32, policy corev1.PreemptionPolicy) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		if p.Spec.PriorityClassName != class || ptr.Deref(p.Spec.Priority, -1) != priority || ptr.Deref(p.Spec.PreemptionPolicy, "") != policy {
			t.Errorf("pod %s: class %q, priority %v, policy %v; want %q, %d, %s", p.Name, p.Spec.PriorityClassName,
				ptr.Deref(p.Spec.Priority, -1), ptr.Deref(p.Spec.PreemptionPolicy, ""), class, priority, policy)
		}
	}
	p, err := newPod("critical", "system-node-critical")
	expect(p, err, "system-node-critical", 2000001000, corev1.PreemptLowerPriority)
	p, err = newPod("plain", "")
	expect(p, err, "", 0, corev1.PreemptLowerPriority)
	// An update that leaves the priority out keeps it.
	p.Spec.Priority, p.Spec.PreemptionPolicy = nil, nil
	p, err = cs.CoreV1().Pods("default").Update(ctx, p, metav1.UpdateOptions{})
	expect(p, err, "", 0, corev1.PreemptLowerPriority)
	_, err = newPod("lost", "urgent")
	if want := `pods "lost" is forbidden: no PriorityClass with name urgent was found`; !apierrors.IsForbidden(err) || err.Error() != want {
		t.Errorf("unknown class: %v", err)
	}

	labels := map[string]string{"test": "priority"}
	low := &schedulingv1.PriorityClass{ObjectMeta: metav1.ObjectMeta{Name: "low", Labels: labels},
		Value: 100, GlobalDefault: true, PreemptionPolicy: ptr.To(corev1.PreemptNever)}
	if _, err := pcs.Create(ctx, low, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	// A pod without a class gets the default one, once the plugin's
	// informer has seen it.
	deadline := time.Now().Add(5 * time.Second)
	for i := 0; ; i++ {
		p, err = newPod(fmt.Sprintf("defaulted-%d", i), "")
		if err != nil || p.Spec.PriorityClassName != "" || time.Now().After(deadline) {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	expect(p, err, "low", 100, corev1.PreemptNever)
	other := &schedulingv1.PriorityClass{ObjectMeta: metav1.ObjectMeta{Name: "other", Labels: labels}, Value: 5, GlobalDefault: true}
	_, err = pcs.Create(ctx, other, metav1.CreateOptions{})
	if want := `priorityclasses.scheduling.k8s.io "other" is forbidden: PriorityClass low is already marked as default. Only one default can exist`; !apierrors.IsForbidden(err) || err.Error() != want {
		t.Errorf("second default: %v", err)
	}
	stored, err := pcs.Get(ctx, "low", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	stored.Value = 200
	_, err = pcs.Update(ctx, stored, metav1.UpdateOptions{})
	if want := `PriorityClass.scheduling.k8s.io "low" is invalid: value: Forbidden: may not be changed in an update.`; !apierrors.IsInvalid(err) || err.Error() != want {
		t.Errorf("value changed: %v", err)
	}
	if err := pcs.DeleteCollection(ctx, metav1.DeleteOptions{}, metav1.ListOptions{LabelSelector: "test=priority"}); err != nil {
		t.Errorf("deletecollection: %v", err)
	}
	list, err := pcs.List(ctx, metav1.ListOptions{})
	if err != nil || len(list.Items) != 2 {
		t.Errorf("after deletecollection: %v, %v", list, err)
	}
}
