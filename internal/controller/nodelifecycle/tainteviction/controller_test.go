package tainteviction

import (
	"context"
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	clocktesting "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"

	"github.com/svcnet/svcnet/internal/controller"
	"github.com/svcnet/svcnet/internal/controller/controllertest"
)

var unreachable = corev1.Taint{Key: corev1.TaintNodeUnreachable, Effect: corev1.TaintEffectNoExecute}

func start(t *testing.T, objects ...runtime.Object) (*fake.Clientset, *clocktesting.FakeClock) {
	t.Helper()
	clk := clocktesting.NewFakeClock(time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC))
	cs := controllertest.NewClient(objects...)
	controllertest.Start(t, cs, func(ctx context.Context, d controller.Deps) []func(context.Context) {
		c, err := New(ctx, d, Options{Clock: clk})
		if err != nil {
			t.Fatal(err)
		}
		return []func(context.Context){c.Run}
	})
	return cs, clk
}

func node(name string, taints ...corev1.Taint) *corev1.Node {
	return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: corev1.NodeSpec{Taints: taints}}
}

// pod is a pod on node tolerating unreachable for seconds (nil: forever;
// negative: no toleration).
func pod(name, node string, seconds *int64) *corev1.Pod {
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"}, Spec: corev1.PodSpec{NodeName: node}}
	if seconds == nil || *seconds >= 0 {
		p.Spec.Tolerations = []corev1.Toleration{{Key: corev1.TaintNodeUnreachable, Operator: corev1.TolerationOpExists,
			Effect: corev1.TaintEffectNoExecute, TolerationSeconds: seconds}}
	}
	return p
}

func exists(cs *fake.Clientset, name string) bool {
	_, err := cs.CoreV1().Pods("default").Get(context.Background(), name, metav1.GetOptions{})
	return err == nil
}

func eventsOf(cs *fake.Clientset) map[string]bool {
	list, _ := cs.CoreV1().Events("").List(context.Background(), metav1.ListOptions{})
	out := map[string]bool{}
	for _, e := range list.Items {
		out[e.Reason+": "+e.Message] = true
	}
	return out
}

func TestEvictsByTolerationSeconds(t *testing.T) {
	cs, clk := start(t, node("n1", unreachable), node("n2"),
		pod("none", "n1", ptr.To[int64](-1)),
		pod("short", "n1", ptr.To[int64](30)),
		pod("forever", "n1", nil),
		pod("elsewhere", "n2", ptr.To[int64](-1)))
	// Deletion deletes via the API; the fake keeps the DisruptionTarget
	// condition in the update it records before the delete.
	controllertest.Eventually(t, func() string {
		if exists(cs, "none") {
			return "pod without toleration still exists"
		}
		return ""
	})
	controllertest.Eventually(t, func() string {
		if !eventsOf(cs)["TaintManagerEviction: Marking for deletion Pod default/none"] {
			return fmt.Sprintf("events = %v, want TaintManagerEviction for default/none", eventsOf(cs))
		}
		return ""
	})
	var sawCondition bool
	for _, a := range cs.Actions() {
		if u, ok := a.(interface{ GetObject() runtime.Object }); ok && a.GetVerb() == "update" && a.GetSubresource() == "status" {
			p := u.GetObject().(*corev1.Pod)
			for _, c := range p.Status.Conditions {
				if p.Name == "none" && c.Type == corev1.DisruptionTarget && c.Reason == "DeletionByTaintManager" &&
					c.Message == "Taint manager: deleting due to NoExecute taint" {
					sawCondition = true
				}
			}
		}
	}
	if !sawCondition {
		t.Error("no DisruptionTarget condition written before the deletion")
	}

	waitScheduled(t, clk)
	clk.Step(29 * time.Second)
	if !exists(cs, "short") {
		t.Fatal("pod tolerating 30s deleted after 29s")
	}
	clk.Step(time.Second)
	controllertest.Eventually(t, func() string {
		if exists(cs, "short") {
			return "pod tolerating 30s still exists after 30s"
		}
		return ""
	})
	clk.Step(time.Hour)
	for _, name := range []string{"forever", "elsewhere"} {
		if !exists(cs, name) {
			t.Errorf("pod %s was deleted", name)
		}
	}
}

func TestCancelsWhenTaintGoes(t *testing.T) {
	cs, clk := start(t, node("n1", unreachable), pod("short", "n1", ptr.To[int64](30)))
	ctx := context.Background()
	waitScheduled(t, clk)
	if _, err := cs.CoreV1().Nodes().Update(ctx, node("n1"), metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	want := "TaintManagerEviction: Cancelling deletion of Pod default/short"
	controllertest.Eventually(t, func() string {
		if !eventsOf(cs)[want] {
			return fmt.Sprintf("events = %v, want %q", eventsOf(cs), want)
		}
		return ""
	})
	clk.Step(time.Minute)
	if !exists(cs, "short") {
		t.Error("pod deleted after its node's taint went away")
	}
}

// waitScheduled waits until an eviction timer is set.
func waitScheduled(t *testing.T, clk *clocktesting.FakeClock) {
	t.Helper()
	controllertest.Eventually(t, func() string {
		if !clk.HasWaiters() {
			return "no eviction scheduled"
		}
		return ""
	})
}

func TestMinTolerationTime(t *testing.T) {
	tol := func(s *int64) corev1.Toleration { return corev1.Toleration{TolerationSeconds: s} }
	for _, tc := range []struct {
		name string
		in   []corev1.Toleration
		want time.Duration
	}{
		{"none", nil, 0},
		{"forever", []corev1.Toleration{tol(nil)}, -1},
		{"shortest wins", []corev1.Toleration{tol(ptr.To[int64](300)), tol(nil), tol(ptr.To[int64](20))}, 20 * time.Second},
		{"negative is now", []corev1.Toleration{tol(ptr.To[int64](-5)), tol(ptr.To[int64](20))}, 0},
	} {
		if got := minTolerationTime(tc.in); got != tc.want {
			t.Errorf("%s: minTolerationTime = %v, want %v", tc.name, got, tc.want)
		}
	}
}
