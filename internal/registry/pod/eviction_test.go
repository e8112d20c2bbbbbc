package pod

import (
	"context"
	"testing"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes/fake"
)

func evictionPod(name string, phase corev1.PodPhase, ready bool) *corev1.Pod {
	status := corev1.ConditionFalse
	if ready {
		status = corev1.ConditionTrue
	}
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns", Labels: map[string]string{"app": "web"}},
		Status:     corev1.PodStatus{Phase: phase, Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: status}}},
	}
}

func budget(allowed, healthy, desired int32) *policyv1.PodDisruptionBudget {
	two := intstr.FromInt32(desired)
	return &policyv1.PodDisruptionBudget{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "ns", Generation: 1},
		Spec:       policyv1.PodDisruptionBudgetSpec{MinAvailable: &two, Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}}},
		Status: policyv1.PodDisruptionBudgetStatus{ObservedGeneration: 1, DisruptionsAllowed: allowed,
			CurrentHealthy: healthy, DesiredHealthy: desired, ExpectedPods: healthy},
	}
}

func evict(t *testing.T, e *Evictions, name string) error {
	t.Helper()
	_, err := e.evict(context.Background(), "ns", name, &policyv1.Eviction{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns"}})
	return err
}

func gone(t *testing.T, e *Evictions, name string) bool {
	_, err := e.Client.CoreV1().Pods("ns").Get(context.Background(), name, metav1.GetOptions{})
	return apierrors.IsNotFound(err)
}

func TestEvictionSpendsTheBudget(t *testing.T) {
	cs := fake.NewClientset(evictionPod("a", corev1.PodRunning, true), evictionPod("b", corev1.PodRunning, true), budget(1, 2, 1))
	e := &Evictions{Client: cs}
	if err := evict(t, e, "a"); err != nil {
		t.Fatalf("evict a: %v", err)
	}
	if !gone(t, e, "a") {
		t.Error("a not deleted")
	}
	pdb, _ := cs.PolicyV1().PodDisruptionBudgets("ns").Get(context.Background(), "web", metav1.GetOptions{})
	if _, ok := pdb.Status.DisruptedPods["a"]; !ok || pdb.Status.DisruptionsAllowed != 0 {
		t.Errorf("budget status after eviction %+v", pdb.Status)
	}
	err := evict(t, e, "b")
	if !apierrors.IsTooManyRequests(err) || err.Error() != "Cannot evict pod as it would violate the pod's disruption budget." {
		t.Fatalf("evict b with no disruption allowed: %v, want 429", err)
	}
	causes := err.(apierrors.APIStatus).Status().Details.Causes
	if len(causes) != 1 || causes[0].Type != policyv1.DisruptionBudgetCause || causes[0].Message != "The disruption budget web does not allow evicting pods currently" {
		t.Errorf("causes %+v", causes)
	}
	if gone(t, e, "b") {
		t.Error("b deleted against its budget")
	}
}

func TestEvictionOfPodsThatDisruptNothing(t *testing.T) {
	cs := fake.NewClientset(evictionPod("pending", corev1.PodPending, false), evictionPod("unready", corev1.PodRunning, false),
		evictionPod("done", corev1.PodSucceeded, false), budget(0, 2, 2))
	e := &Evictions{Client: cs}
	for _, name := range []string{"pending", "done", "unready"} {
		if err := evict(t, e, name); err != nil {
			t.Errorf("evict %s: %v", name, err)
		} else if !gone(t, e, name) {
			t.Errorf("%s not deleted", name)
		}
	}
}

func TestEvictionOfUnhealthyPodWhenBudgetIsShort(t *testing.T) {
	cs := fake.NewClientset(evictionPod("unready", corev1.PodRunning, false), budget(0, 1, 2))
	e := &Evictions{Client: cs}
	if err := evict(t, e, "unready"); !apierrors.IsTooManyRequests(err) {
		t.Errorf("IfHealthyBudget, short budget: %v, want 429", err)
	}
	always := policyv1.AlwaysAllow
	pdb := budget(0, 1, 2)
	pdb.Spec.UnhealthyPodEvictionPolicy = &always
	e = &Evictions{Client: fake.NewClientset(evictionPod("unready", corev1.PodRunning, false), pdb)}
	if err := evict(t, e, "unready"); err != nil || !gone(t, e, "unready") {
		t.Errorf("AlwaysAllow: %v", err)
	}
}

func TestEvictionWhileBudgetIsProcessed(t *testing.T) {
	pdb := budget(1, 2, 1)
	pdb.Generation = 2
	e := &Evictions{Client: fake.NewClientset(evictionPod("a", corev1.PodRunning, true), pdb)}
	err := evict(t, e, "a")
	if !apierrors.IsTooManyRequests(err) {
		t.Fatalf("stale budget: %v, want 429", err)
	}
	if c := err.(apierrors.APIStatus).Status().Details.Causes; len(c) != 1 || c[0].Message != "The disruption budget web is still being processed by the server." {
		t.Errorf("causes %+v", c)
	}
}
