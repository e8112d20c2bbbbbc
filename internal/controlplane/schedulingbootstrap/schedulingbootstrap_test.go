package schedulingbootstrap

import (
	"context"
	"errors"
	"testing"

	schedulingv1 "k8s.io/api/scheduling/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
)

func TestEnsureCreates(t *testing.T) {
	ctx := context.Background()
	client := fake.NewClientset()
	if err := Ensure(ctx, client); err != nil {
		t.Fatal(err)
	}
	for name, want := range map[string]struct {
		value       int32
		description string
	}{
		"system-node-critical":    {2000001000, "Used for system critical pods that must not be moved from their current node."},
		"system-cluster-critical": {2000000000, "Used for system critical pods that must run in the cluster, but can be moved to another node if necessary."},
	} {
		c, err := client.SchedulingV1().PriorityClasses().Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			t.Errorf("%s: %v", name, err)
			continue
		}
		if c.Value != want.value || c.Description != want.description || c.GlobalDefault {
			t.Errorf("%s = %+v, want value %d, %q", name, c, want.value, want.description)
		}
	}
	// Once there, nothing is written again.
	client.ClearActions()
	if err := Ensure(ctx, client); err != nil {
		t.Fatal(err)
	}
	for _, a := range client.Actions() {
		if a.GetVerb() != "get" {
			t.Errorf("second run: %s %s", a.GetVerb(), a.GetResource().Resource)
		}
	}
}

// TestEnsureKeeps leaves an existing class alone and creates the other.
func TestEnsureKeeps(t *testing.T) {
	ctx := context.Background()
	existing := &schedulingv1.PriorityClass{ObjectMeta: metav1.ObjectMeta{Name: "system-node-critical"},
		Value: 2000001000, Description: "changed by the administrator"}
	client := fake.NewClientset(existing)
	if err := Ensure(ctx, client); err != nil {
		t.Fatal(err)
	}
	c, err := client.SchedulingV1().PriorityClasses().Get(ctx, "system-node-critical", metav1.GetOptions{})
	if err != nil || c.Description != "changed by the administrator" {
		t.Errorf("existing class: %+v, %v", c, err)
	}
	if _, err := client.SchedulingV1().PriorityClasses().Get(ctx, "system-cluster-critical", metav1.GetOptions{}); err != nil {
		t.Errorf("missing class not created: %v", err)
	}
}

// TestEnsureRaces accepts a class another API server created between the
// read and the create, and reports other errors.
func TestEnsureRaces(t *testing.T) {
	client := fake.NewClientset()
	client.PrependReactor("create", "priorityclasses", func(a k8stesting.Action) (bool, runtime.Object, error) {
		name := a.(k8stesting.CreateAction).GetObject().(*schedulingv1.PriorityClass).Name
		return true, nil, apierrors.NewAlreadyExists(schedulingv1.Resource("priorityclasses"), name)
	})
	if err := Ensure(context.Background(), client); err != nil {
		t.Errorf("AlreadyExists: %v", err)
	}
	client = fake.NewClientset()
	client.PrependReactor("get", "priorityclasses", func(k8stesting.Action) (bool, runtime.Object, error) {
		return true, nil, errors.New("etcd unavailable")
	})
	if err := Ensure(context.Background(), client); err == nil || err.Error() != "get PriorityClass system-node-critical: etcd unavailable" {
		t.Errorf("get error: %v", err)
	}
}
