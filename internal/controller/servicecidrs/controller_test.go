package servicecidrs

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/svcnet/svcnet/internal/controller"
	"github.com/svcnet/svcnet/internal/controller/controllertest"
)

func start(t *testing.T, cs *fake.Clientset) {
	t.Helper()
	controllertest.Start(t, cs, func(ctx context.Context, d controller.Deps) []func(context.Context) {
		c, err := New(ctx, d)
		if err != nil {
			t.Fatal(err)
		}
		return []func(context.Context){c.Run}
	})
}

func serviceCIDR(name string, cidrs ...string) *networkingv1.ServiceCIDR {
	return &networkingv1.ServiceCIDR{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: networkingv1.ServiceCIDRSpec{CIDRs: cidrs}}
}

// deleting is a ServiceCIDR deleted at when, held by the finalizer.
func deleting(sc *networkingv1.ServiceCIDR, when time.Time) *networkingv1.ServiceCIDR {
	sc.Finalizers = []string{Finalizer}
	sc.DeletionTimestamp = &metav1.Time{Time: when}
	return sc
}

// longAgo is a deletion time past the grace period.
var longAgo = time.Now().Add(-time.Minute)

// ipAddress is an IPAddress of the allocator's, or, when byHand, one
// without its labels.
func ipAddress(addr string, byHand bool) *networkingv1.IPAddress {
	ip := &networkingv1.IPAddress{ObjectMeta: metav1.ObjectMeta{Name: addr},
		Spec: networkingv1.IPAddressSpec{ParentRef: &networkingv1.ParentReference{Resource: "services", Namespace: "default", Name: "s"}}}
	if !byHand {
		family := corev1.IPv4Protocol
		if strings.Contains(addr, ":") {
			family = corev1.IPv6Protocol
		}
		ip.Labels = map[string]string{networkingv1.LabelIPAddressFamily: string(family), networkingv1.LabelManagedBy: "ipallocator.k8s.io"}
	}
	return ip
}

// state summarises a ServiceCIDR: whether it keeps the finalizer and its
// Ready condition.
func state(t *testing.T, cs *fake.Clientset, name string) string {
	t.Helper()
	sc, err := cs.NetworkingV1().ServiceCIDRs().Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	s := fmt.Sprintf("finalizer=%t", slices.Contains(sc.Finalizers, Finalizer))
	if ready := apimeta.FindStatusCondition(sc.Status.Conditions, networkingv1.ServiceCIDRConditionReady); ready != nil {
		s += fmt.Sprintf(" Ready=%s reason=%q message=%q", ready.Status, ready.Reason, ready.Message)
	}
	return s
}

func want(t *testing.T, cs *fake.Clientset, name, want string) {
	t.Helper()
	controllertest.Eventually(t, func() string {
		if got := state(t, cs, name); got != want {
			return fmt.Sprintf("ServiceCIDR %s: %s, want %s", name, got, want)
		}
		return ""
	})
}

const (
	ready           = `finalizer=true Ready=True reason="" message="Kubernetes Service CIDR is ready"`
	terminatingCond = `Ready=False reason="Terminating" message="There are still IPAddresses referencing the ServiceCIDR, please remove them or create a new ServiceCIDR"`
	// terminating is a deletion blocked; released one let go, the
	// condition as it was.
	terminating = "finalizer=true " + terminatingCond
	released    = "finalizer=false " + terminatingCond
)

func TestFinalizerAndReady(t *testing.T) {
	// The default ServiceCIDR as the API server leaves it: Ready=True in
	// its own words, which this controller's replace, as upstream's.
	def := serviceCIDR("kubernetes", "10.96.0.0/12")
	def.Status.Conditions = []metav1.Condition{{Type: networkingv1.ServiceCIDRConditionReady, Status: metav1.ConditionTrue,
		Message: "Kubernetes default Service CIDR is ready", LastTransitionTime: metav1.Now()}}
	other := serviceCIDR("other", "10.100.0.0/24", "fd00:100::/120")
	other.Finalizers = []string{"example.com/keep"}
	cs := controllertest.NewClient(def, other)
	start(t, cs)
	want(t, cs, "kubernetes", ready)
	want(t, cs, "other", ready)
	sc, err := cs.NetworkingV1().ServiceCIDRs().Get(context.Background(), "other", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(sc.Finalizers) != 2 || !slices.Contains(sc.Finalizers, "example.com/keep") {
		t.Errorf("finalizers %v, want the other one kept", sc.Finalizers)
	}

	// A new one gets them too.
	if _, err := cs.NetworkingV1().ServiceCIDRs().Create(context.Background(), serviceCIDR("new", "10.101.0.0/24"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	want(t, cs, "new", ready)
}

func TestDeletionBlockedUntilAddressesGo(t *testing.T) {
	cs := controllertest.NewClient(
		serviceCIDR("kubernetes", "10.96.0.0/12"),
		deleting(serviceCIDR("extra", "10.100.0.0/24", "fd00:100::/120"), longAgo),
		ipAddress("fd00:100::5", false),
		// Not the allocator's, and outside the ServiceCIDR: neither blocks.
		ipAddress("10.100.0.6", true),
		ipAddress("10.96.0.1", false),
	)
	start(t, cs)
	want(t, cs, "extra", terminating)
	// Still blocked a moment later, when the first syncs are long done.
	time.Sleep(200 * time.Millisecond)
	want(t, cs, "extra", terminating)

	// The last address in it goes: the deletion completes.
	if err := cs.NetworkingV1().IPAddresses().Delete(context.Background(), "fd00:100::5", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	want(t, cs, "extra", released)
	want(t, cs, "kubernetes", ready)
}

func TestDeletionOfCoveredCIDR(t *testing.T) {
	cs := controllertest.NewClient(
		serviceCIDR("kubernetes", "10.96.0.0/12"),
		// Within the default one, which keeps its addresses.
		deleting(serviceCIDR("inner", "10.96.0.0/24"), longAgo),
		ipAddress("10.96.0.5", false),
		// As upstream's, a ServiceCIDR being deleted still covers: a,
		// within b, goes; b holds 10.200.2.1 alone.
		deleting(serviceCIDR("a", "10.200.0.0/24"), longAgo),
		deleting(serviceCIDR("b", "10.200.0.0/16"), longAgo),
		ipAddress("10.200.0.7", false),
		ipAddress("10.200.2.1", false),
	)
	start(t, cs)
	want(t, cs, "inner", "finalizer=false")
	want(t, cs, "a", "finalizer=false")
	want(t, cs, "b", terminating)

	// A new ServiceCIDR that holds b's last address of its own lets b go.
	if _, err := cs.NetworkingV1().ServiceCIDRs().Create(context.Background(), serviceCIDR("c", "10.200.2.0/24"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	want(t, cs, "c", ready)
	want(t, cs, "b", released)
}

// TestDeletionGracePeriod: an unblocked ServiceCIDR keeps its finalizer
// until the grace period after its deletion has passed.
func TestDeletionGracePeriod(t *testing.T) {
	old := deletionGracePeriod
	deletionGracePeriod = 500 * time.Millisecond
	t.Cleanup(func() { deletionGracePeriod = old })
	deleted := time.Now().Truncate(time.Second)
	cs := controllertest.NewClient(deleting(serviceCIDR("extra", "10.100.0.0/24"), deleted))
	var mu sync.Mutex
	var patched time.Time
	cs.PrependReactor("patch", "servicecidrs", func(k8stesting.Action) (bool, runtime.Object, error) {
		mu.Lock()
		defer mu.Unlock()
		patched = time.Now()
		return false, nil, nil
	})
	start(t, cs)
	want(t, cs, "extra", "finalizer=false")
	mu.Lock()
	defer mu.Unlock()
	if early := deleted.Add(deletionGracePeriod).Sub(patched); early > 0 {
		t.Errorf("finalizer removed %v before the grace period ended", early)
	}
}

func TestStatusErrorEvent(t *testing.T) {
	cs := controllertest.NewClient(serviceCIDR("other", "10.100.0.0/24"))
	cs.PrependReactor("patch", "servicecidrs", func(a k8stesting.Action) (bool, runtime.Object, error) {
		if a.GetSubresource() == "status" {
			return true, nil, errors.New("no status today")
		}
		return false, nil, nil
	})
	start(t, cs)
	controllertest.Eventually(t, func() string {
		evs, err := cs.CoreV1().Events("").List(context.Background(), metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range evs.Items {
			if e.Type == corev1.EventTypeWarning && e.Reason == "KubernetesServiceCIDRError" &&
				e.Message == "The ServiceCIDR Status can not be set to Ready=True" && e.InvolvedObject.Name == "other" &&
				e.Source.Component == ControllerName {
				return ""
			}
		}
		return fmt.Sprintf("no KubernetesServiceCIDRError event in %v", evs.Items)
	})
	want(t, cs, "other", "finalizer=true")
}
