package defaultservicecidr

import (
	"context"
	"slices"
	"testing"
	"time"

	networkingv1 "k8s.io/api/networking/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/record"
)

const (
	v4 = "10.96.0.0/12"
	v6 = "fd00:10:96::/112"
)

func serviceCIDR(cidrs []string, conditions ...metav1.Condition) *networkingv1.ServiceCIDR {
	return &networkingv1.ServiceCIDR{ObjectMeta: metav1.ObjectMeta{Name: Name},
		Spec: networkingv1.ServiceCIDRSpec{CIDRs: cidrs}, Status: networkingv1.ServiceCIDRStatus{Conditions: conditions}}
}

// run syncs twice (the second finds nothing more to do) and returns the
// ServiceCIDR and the events.
func run(t *testing.T, flags []string, existing ...*networkingv1.ServiceCIDR) (*networkingv1.ServiceCIDR, []string, *fake.Clientset) {
	t.Helper()
	var objs []runtime.Object
	for _, o := range existing {
		objs = append(objs, o)
	}
	client := fake.NewClientset(objs...)
	events := record.NewFakeRecorder(10)
	c := New(client, flags, events)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := c.Start(ctx); err != nil {
		t.Fatal(err)
	}
	if err := c.sync(ctx); err != nil {
		t.Fatal(err)
	}
	close(events.Events)
	var got []string
	for e := range events.Events {
		got = append(got, e)
	}
	sc, err := client.NetworkingV1().ServiceCIDRs().Get(ctx, Name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return sc, got, client
}

func TestCreatesReady(t *testing.T) {
	for _, flags := range [][]string{{v4}, {v6, v4}} {
		sc, events, _ := run(t, flags)
		if !slices.Equal(sc.Spec.CIDRs, flags) || len(events) != 0 {
			t.Errorf("%v: cidrs %v, events %q", flags, sc.Spec.CIDRs, events)
		}
		ready := apimeta.FindStatusCondition(sc.Status.Conditions, networkingv1.ServiceCIDRConditionReady)
		if ready == nil || ready.Status != metav1.ConditionTrue || ready.Reason != "" ||
			ready.Message != "Kubernetes default Service CIDR is ready" || ready.LastTransitionTime.IsZero() {
			t.Errorf("%v: Ready condition %+v", flags, ready)
		}
	}
}

func TestKeepsOtherCIDRs(t *testing.T) {
	sc, events, _ := run(t, []string{v4}, serviceCIDR([]string{"10.0.0.0/16"}))
	want := "Warning KubernetesDefaultServiceCIDRInconsistent The default ServiceCIDR [10.0.0.0/16] does not match the controller flag configurations [10.96.0.0/12]"
	if sc.Spec.CIDRs[0] != "10.0.0.0/16" || len(sc.Status.Conditions) != 0 || len(events) != 1 || events[0] != want {
		t.Errorf("cidrs %v, conditions %v, events %q", sc.Spec.CIDRs, sc.Status.Conditions, events)
	}
}

func TestUpgradesToDualStack(t *testing.T) {
	ready := metav1.Condition{Type: "Ready", Status: metav1.ConditionTrue, Message: "Kubernetes default Service CIDR is ready"}
	sc, events, _ := run(t, []string{v4, v6}, serviceCIDR([]string{v4}, ready))
	if !slices.Equal(sc.Spec.CIDRs, []string{v4, v6}) || len(events) != 0 {
		t.Errorf("cidrs %v, events %q", sc.Spec.CIDRs, events)
	}
	// A dual-stack one is not made single-stack.
	sc, events, _ = run(t, []string{v4}, serviceCIDR([]string{v4, v6}, ready))
	if len(sc.Spec.CIDRs) != 2 || len(events) != 1 {
		t.Errorf("cidrs %v, events %q", sc.Spec.CIDRs, events)
	}
}

func TestLeavesNotReady(t *testing.T) {
	notReady := metav1.Condition{Type: "Ready", Status: metav1.ConditionFalse, Reason: "Terminating", Message: "There are still IPAddresses"}
	sc, events, _ := run(t, []string{v4}, serviceCIDR([]string{v4}, notReady))
	want := "Warning Terminating Configuration matches, but There are still IPAddresses"
	if sc.Status.Conditions[0].Status != metav1.ConditionFalse || len(events) != 1 || events[0] != want {
		t.Errorf("conditions %v, events %q", sc.Status.Conditions, events)
	}
}

func TestReadyIsLeftAlone(t *testing.T) {
	ready := metav1.Condition{Type: "Ready", Status: metav1.ConditionTrue, Message: "Kubernetes Service CIDR is ready"}
	_, events, client := run(t, []string{v4}, serviceCIDR([]string{v4}, ready))
	for _, a := range client.Actions() {
		if a.GetVerb() != "get" {
			t.Errorf("unexpected %s %s", a.GetVerb(), a.GetSubresource())
		}
	}
	if len(events) != 0 {
		t.Errorf("events %q", events)
	}
}
