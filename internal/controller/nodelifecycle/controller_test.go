package nodelifecycle

import (
	"context"
	"fmt"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	clocktesting "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"

	"github.com/svcnet/svcnet/internal/controller"
	"github.com/svcnet/svcnet/internal/controller/controllertest"
)

var t0 = time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)

type harness struct {
	t   *testing.T
	cs  *fake.Clientset
	clk *clocktesting.FakeClock
	c   *Controller
}

func start(t *testing.T, objects ...runtime.Object) *harness {
	t.Helper()
	h := &harness{t: t, clk: clocktesting.NewFakeClock(t0), cs: controllertest.NewClient(objects...)}
	controllertest.Start(t, h.cs, func(ctx context.Context, d controller.Deps) []func(context.Context) {
		c, err := New(ctx, d, Options{MonitorPeriod: 5 * time.Second, GracePeriod: 50 * time.Second, StartupGracePeriod: time.Minute,
			EvictionRate: 0.1, SecondaryRate: 0.01, LargeCluster: 50, UnhealthyZone: 0.55, Clock: h.clk})
		if err != nil {
			t.Fatal(err)
		}
		h.c = c
		return []func(context.Context){c.Run}
	})
	return h
}

// readyNode is a node that reported Ready at t0.
func readyNode(name string) *corev1.Node {
	hb := metav1.NewTime(t0)
	cond := func(t corev1.NodeConditionType, s corev1.ConditionStatus) corev1.NodeCondition {
		return corev1.NodeCondition{Type: t, Status: s, Reason: "Kubelet", LastHeartbeatTime: hb, LastTransitionTime: hb}
	}
	return &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: name, CreationTimestamp: hb, Labels: map[string]string{corev1.LabelOSStable: "linux"}},
		Status: corev1.NodeStatus{Conditions: []corev1.NodeCondition{
			cond(corev1.NodeMemoryPressure, corev1.ConditionFalse), cond(corev1.NodeDiskPressure, corev1.ConditionFalse),
			cond(corev1.NodePIDPressure, corev1.ConditionFalse), cond(corev1.NodeReady, corev1.ConditionTrue),
		}},
	}
}

func lease(name string, renewed time.Time) *coordinationv1.Lease {
	return &coordinationv1.Lease{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: corev1.NamespaceNodeLease},
		Spec:       coordinationv1.LeaseSpec{HolderIdentity: ptr.To(name), RenewTime: &metav1.MicroTime{Time: renewed}},
	}
}

func readyPod(name, node string) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"},
		Spec:       corev1.PodSpec{NodeName: node},
		Status: corev1.PodStatus{Phase: corev1.PodRunning, Conditions: []corev1.PodCondition{
			{Type: corev1.PodReady, Status: corev1.ConditionTrue}}},
	}
}

func (h *harness) node(name string) *corev1.Node {
	h.t.Helper()
	n, err := h.cs.CoreV1().Nodes().Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		h.t.Fatal(err)
	}
	return n
}

func (h *harness) hasEvent(reason, msg string) bool {
	list, _ := h.cs.CoreV1().Events("").List(context.Background(), metav1.ListOptions{})
	for _, e := range list.Items {
		if e.Reason == reason && e.Message == msg {
			return true
		}
	}
	return false
}

// waitEvent waits for an event the controller records.
func (h *harness) waitEvent(reason, msg string) {
	h.t.Helper()
	controllertest.Eventually(h.t, func() string {
		if !h.hasEvent(reason, msg) {
			return fmt.Sprintf("no event %s %q", reason, msg)
		}
		return ""
	})
}

// renew renews a node's Lease at the clock's time and waits until the
// controller's cache has it.
func (h *harness) renew(name string) {
	h.t.Helper()
	ctx := context.Background()
	l, err := h.cs.CoordinationV1().Leases(corev1.NamespaceNodeLease).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		h.t.Fatal(err)
	}
	now := h.clk.Now()
	l.Spec.RenewTime = &metav1.MicroTime{Time: now}
	if _, err := h.cs.CoordinationV1().Leases(corev1.NamespaceNodeLease).Update(ctx, l, metav1.UpdateOptions{}); err != nil {
		h.t.Fatal(err)
	}
	controllertest.Eventually(h.t, func() string {
		cached, err := h.c.leases.Leases(corev1.NamespaceNodeLease).Get(name)
		if err != nil || !cached.Spec.RenewTime.Time.Equal(now) {
			return "lease renewal not seen"
		}
		return ""
	})
}

// stepUntil moves the clock on by step until cond holds, as the
// controller's periodic passes need.
func (h *harness) stepUntil(step time.Duration, cond func() string) {
	h.t.Helper()
	controllertest.Eventually(h.t, func() string {
		msg := cond()
		if msg != "" {
			h.clk.Step(step)
		}
		return msg
	})
}

func taints(n *corev1.Node) map[string]bool {
	out := map[string]bool{}
	for _, t := range n.Spec.Taints {
		out[t.Key+":"+string(t.Effect)] = true
	}
	return out
}

func TestSilentNodeIsUnknownTaintedAndItsPodsNotReady(t *testing.T) {
	h := start(t, readyNode("lost"), readyNode("alive"), lease("lost", t0), lease("alive", t0), readyPod("web", "lost"))
	h.waitEvent("RegisteredNode", "Node lost event: Registered Node lost in Controller")
	h.waitEvent("RegisteredNode", "Node alive event: Registered Node alive in Controller")

	// "alive" renews its Lease every 10s as the node agent does; "lost"
	// has gone silent. Before the grace period nothing changes.
	for range 4 {
		h.clk.Step(10 * time.Second)
		h.renew("alive")
	}
	if ready := readyCondition(&h.node("lost").Status); ready.Status != corev1.ConditionTrue {
		t.Fatalf("lost is %s after 40s of silence, grace period is 50s", ready.Status)
	}
	for range 2 {
		h.clk.Step(10 * time.Second)
		h.renew("alive")
	}
	h.stepUntil(100*time.Millisecond, func() string {
		n := h.node("lost")
		for _, ct := range []corev1.NodeConditionType{corev1.NodeReady, corev1.NodeMemoryPressure, corev1.NodeDiskPressure, corev1.NodePIDPressure} {
			c := condition(&n.Status, ct)
			if c.Status != corev1.ConditionUnknown || c.Reason != "NodeStatusUnknown" || c.Message != "Kubelet stopped posting node status." {
				return fmt.Sprintf("condition %s = %s %s %q", ct, c.Status, c.Reason, c.Message)
			}
		}
		got := taints(n)
		if !got["node.kubernetes.io/unreachable:NoSchedule"] || !got["node.kubernetes.io/unreachable:NoExecute"] {
			return fmt.Sprintf("taints of lost = %v", got)
		}
		return ""
	})
	pod, err := h.cs.CoreV1().Pods("default").Get(context.Background(), "web", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if pod.Status.Conditions[0].Status != corev1.ConditionFalse {
		t.Errorf("pod on the lost node is Ready=%s, want False", pod.Status.Conditions[0].Status)
	}
	h.waitEvent("NodeNotReady", "Node lost status is now: NodeNotReady")
	h.waitEvent("NodeNotReady", "Node is not ready")
	alive := h.node("alive")
	if ready := readyCondition(&alive.Status); ready.Status != corev1.ConditionTrue || len(alive.Spec.Taints) != 0 {
		t.Errorf("alive node renewing its Lease: Ready=%s, taints %v", ready.Status, alive.Spec.Taints)
	}
	if got := h.node("lost").Labels["beta.kubernetes.io/os"]; got != "linux" {
		t.Errorf("beta os label = %q, want it copied from kubernetes.io/os", got)
	}

	// The node agent comes back and posts Ready: the taints go.
	n := h.node("lost")
	ready := readyCondition(&n.Status)
	ready.Status, ready.Reason, ready.Message = corev1.ConditionTrue, "KubeletReady", "kubelet is posting ready status"
	ready.LastHeartbeatTime, ready.LastTransitionTime = metav1.NewTime(h.clk.Now()), metav1.NewTime(h.clk.Now())
	if _, err := h.cs.CoreV1().Nodes().UpdateStatus(context.Background(), n, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	h.renew("lost")
	h.stepUntil(time.Second, func() string {
		if got := h.node("lost").Spec.Taints; len(got) != 0 {
			return fmt.Sprintf("taints of recovered node = %v", got)
		}
		return ""
	})
}

// TestPodOnNotReadyNodeIsNotReady: a pod assigned to a node that has not
// reported Ready yet (one that is starting) is marked not Ready.
func TestPodOnNotReadyNodeIsNotReady(t *testing.T) {
	starting := readyNode("starting")
	readyCondition(&starting.Status).Status = corev1.ConditionFalse
	h := start(t, starting, lease("starting", t0))
	h.waitEvent("RegisteredNode", "Node starting event: Registered Node starting in Controller")
	if _, err := h.cs.CoreV1().Pods("default").Create(context.Background(), readyPod("web", "starting"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	controllertest.Eventually(t, func() string {
		pod, err := h.cs.CoreV1().Pods("default").Get(context.Background(), "web", metav1.GetOptions{})
		if err != nil || pod.Status.Conditions[0].Status != corev1.ConditionFalse {
			return "the pod on the not-Ready node is still Ready"
		}
		return ""
	})
}

func TestNeverReportedNodeWithoutOthersIsNotEvicted(t *testing.T) {
	n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "new", CreationTimestamp: metav1.NewTime(t0)}}
	h := start(t, n)
	h.waitEvent("RegisteredNode", "Node new event: Registered Node new in Controller")
	h.clk.Step(55 * time.Second)
	h.stepUntil(time.Second, func() string {
		c := readyCondition(&h.node("new").Status)
		if c == nil || c.Status != corev1.ConditionUnknown || c.Reason != "NodeStatusNeverUpdated" || c.Message != "Kubelet never posted node status." {
			return fmt.Sprintf("Ready condition = %+v", c)
		}
		if !taints(h.node("new"))["node.kubernetes.io/unreachable:NoSchedule"] {
			return "no unreachable NoSchedule taint"
		}
		return ""
	})
	if c := readyCondition(&h.node("new").Status); c.LastTransitionTime.Time.Before(t0.Add(time.Minute)) {
		t.Errorf("Unknown since %v, before the startup grace period ended", c.LastTransitionTime)
	}
	// Every node is down: the controller suspects itself, not the nodes,
	// and stops NoExecute tainting.
	h.c.zoneMu.Lock()
	state, rate := h.c.zones[""], h.c.tainters[""].qps
	h.c.zoneMu.Unlock()
	if state != stateFullDisruption || rate != 0 {
		t.Errorf("zone state %s, tainting rate %v; want FullDisruption, 0", state, rate)
	}
	if got := taints(h.node("new")); got["node.kubernetes.io/unreachable:NoExecute"] {
		t.Errorf("taints = %v: NoExecute taint while every node is down", got)
	}
}

func TestNoScheduleTaintsFollowConditionsAndUnschedulable(t *testing.T) {
	n := readyNode("n1")
	n.Spec.Unschedulable = true
	condition(&n.Status, corev1.NodeMemoryPressure).Status = corev1.ConditionTrue
	h := start(t, n, lease("n1", t0))
	controllertest.Eventually(t, func() string {
		got := taints(h.node("n1"))
		if len(got) != 2 || !got["node.kubernetes.io/unschedulable:NoSchedule"] || !got["node.kubernetes.io/memory-pressure:NoSchedule"] {
			return fmt.Sprintf("taints = %v", got)
		}
		return ""
	})
	n = h.node("n1")
	n.Spec.Unschedulable = false
	n.Spec.Taints = append(n.Spec.Taints, corev1.Taint{Key: "dedicated", Value: "db", Effect: corev1.TaintEffectNoSchedule})
	if _, err := h.cs.CoreV1().Nodes().Update(context.Background(), n, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	controllertest.Eventually(t, func() string {
		got := taints(h.node("n1"))
		if len(got) != 2 || !got["dedicated:NoSchedule"] || !got["node.kubernetes.io/memory-pressure:NoSchedule"] {
			return fmt.Sprintf("taints = %v, want the user's and memory-pressure", got)
		}
		return ""
	})
}

func TestComputeZoneState(t *testing.T) {
	c := func(s corev1.ConditionStatus) *corev1.NodeCondition { return &corev1.NodeCondition{Status: s} }
	T, F, U := corev1.ConditionTrue, corev1.ConditionFalse, corev1.ConditionUnknown
	for _, tc := range []struct {
		name  string
		ready []*corev1.NodeCondition
		want  zoneState
	}{
		{"all ready", []*corev1.NodeCondition{c(T), c(T)}, stateNormal},
		{"none ready", []*corev1.NodeCondition{c(U), nil}, stateFullDisruption},
		{"two of three down is few", []*corev1.NodeCondition{c(T), c(F), c(U)}, stateNormal},
		{"three of four down", []*corev1.NodeCondition{c(T), c(F), c(U), c(U)}, statePartialDisruption},
		{"three of six down is under 55%", []*corev1.NodeCondition{c(T), c(T), c(T), c(F), c(U), c(U)}, stateNormal},
	} {
		if _, got := computeZoneState(tc.ready, 0.55); got != tc.want {
			t.Errorf("%s: state = %s, want %s", tc.name, got, tc.want)
		}
	}
}

func TestTainterRate(t *testing.T) {
	clk := clocktesting.NewFakeClock(t0)
	q := newTainter(clk, 0.1)
	q.add("a")
	q.add("b")
	var tainted []string
	taint := func(name string) (bool, time.Duration) { tainted = append(tainted, name); return true, 0 }
	q.try(taint)
	if fmt.Sprint(tainted) != "[a]" {
		t.Fatalf("first pass tainted %v, want [a] (burst 1)", tainted)
	}
	clk.Step(9 * time.Second)
	q.try(taint)
	if fmt.Sprint(tainted) != "[a]" {
		t.Fatalf("after 9s tainted %v, want still [a] at 0.1 nodes/s", tainted)
	}
	clk.Step(time.Second)
	q.try(taint)
	if fmt.Sprint(tainted) != "[a b]" {
		t.Fatalf("after 10s tainted %v, want [a b]", tainted)
	}
	if q.add("a") {
		t.Error("a tainted node was queued again before it was removed")
	}
	q.setRate(0)
	q.remove("a")
	q.add("a")
	clk.Step(time.Hour)
	q.try(taint)
	if len(tainted) != 2 {
		t.Errorf("tainted %v at rate 0", tainted)
	}
}
