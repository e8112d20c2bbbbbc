package daemonset

import (
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/tools/record"
	clocktesting "k8s.io/utils/clock/testing"
)

func daemonSet() *appsv1.DaemonSet {
	one, zero := intstr.FromInt32(1), intstr.FromInt32(0)
	return &appsv1.DaemonSet{
		ObjectMeta: metav1.ObjectMeta{Name: "agent", Namespace: "ns", UID: "ds-uid",
			Annotations: map[string]string{"deprecated.daemonset.template.generation": "2"}},
		Spec: appsv1.DaemonSetSpec{
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "agent"}},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "agent"}},
				Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "a", Image: "busybox"}}}},
			UpdateStrategy: appsv1.DaemonSetUpdateStrategy{Type: appsv1.RollingUpdateDaemonSetStrategyType,
				RollingUpdate: &appsv1.RollingUpdateDaemonSet{MaxUnavailable: &one, MaxSurge: &zero}},
		},
	}
}

func node(name string, labels map[string]string, taints ...corev1.Taint) *corev1.Node {
	return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels}, Spec: corev1.NodeSpec{Taints: taints}}
}

func TestShouldRun(t *testing.T) {
	ds := daemonSet()
	ds.Spec.Template.Spec.NodeSelector = map[string]string{"role": "edge"}
	p := placementOf(ds)
	edge := map[string]string{"role": "edge"}
	for _, tt := range []struct {
		name      string
		node      *corev1.Node
		run, keep bool
	}{
		{"selected", node("a", edge), true, true},
		{"not selected", node("b", nil), false, false},
		{"cordoned (tolerated by default)", node("c", edge, corev1.Taint{Key: corev1.TaintNodeUnschedulable, Effect: corev1.TaintEffectNoSchedule}), true, true},
		{"not ready (tolerated by default)", node("d", edge, corev1.Taint{Key: corev1.TaintNodeNotReady, Effect: corev1.TaintEffectNoExecute}), true, true},
		{"NoSchedule taint", node("e", edge, corev1.Taint{Key: "dedicated", Effect: corev1.TaintEffectNoSchedule}), false, true},
		{"NoExecute taint", node("f", edge, corev1.Taint{Key: "dedicated", Effect: corev1.TaintEffectNoExecute}), false, false},
		{"network unavailable, no host network", node("g", edge, corev1.Taint{Key: corev1.TaintNodeNetworkUnavailable, Effect: corev1.TaintEffectNoSchedule}), false, true},
	} {
		if run, keep := p.shouldRun(tt.node); run != tt.run || keep != tt.keep {
			t.Errorf("%s: run %v keep %v, want %v %v", tt.name, run, keep, tt.run, tt.keep)
		}
	}
}

func TestNewPod(t *testing.T) {
	pod := newPod(daemonSet(), "h1", "node-a")
	if pod.Labels[appsv1.DefaultDaemonSetUniqueLabelKey] != "h1" || pod.Labels[templateGenerationLabel] != "2" || pod.GenerateName != "agent-" {
		t.Errorf("pod labels %v, generateName %q", pod.Labels, pod.GenerateName)
	}
	if got := targetNode(pod); got != "node-a" || pod.Spec.NodeName != "" {
		t.Errorf("target node %q, nodeName %q: want pinned by affinity to node-a", got, pod.Spec.NodeName)
	}
	if len(pod.Spec.Tolerations) != 6 {
		t.Errorf("tolerations %v, want upstream's six defaults", pod.Spec.Tolerations)
	}
	if ref := metav1.GetControllerOf(pod); ref == nil || ref.UID != "ds-uid" {
		t.Errorf("controller %v", ref)
	}
}

func daemonPod(name, nodeName, hash string, ready bool) *corev1.Pod {
	status := corev1.ConditionFalse
	if ready {
		status = corev1.ConditionTrue
	}
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns", Labels: map[string]string{"app": "agent", appsv1.DefaultDaemonSetUniqueLabelKey: hash}},
		Spec:       corev1.PodSpec{NodeName: nodeName},
		Status: corev1.PodStatus{Phase: corev1.PodRunning, Conditions: []corev1.PodCondition{
			{Type: corev1.PodReady, Status: status, LastTransitionTime: metav1.NewTime(time.Unix(0, 0))}}},
	}
}

func names(pods []*corev1.Pod) []string {
	var out []string
	for _, p := range pods {
		out = append(out, p.Name)
	}
	return out
}

func TestPlanRollsOneNodeAtATime(t *testing.T) {
	c := &Controller{clock: clocktesting.NewFakePassiveClock(time.Unix(1000, 0)), recorder: record.NewFakeRecorder(10)}
	ds := daemonSet()
	nodes := []*corev1.Node{node("a", nil), node("b", nil), node("c", nil)}

	// All old and available: one old pod goes.
	w := c.world(ds, nodes, []*corev1.Pod{daemonPod("pa", "a", "old", true), daemonPod("pb", "b", "old", true), daemonPod("pc", "c", "old", true)}, "new")
	if p := c.placePods(ds, w); !p.empty() {
		t.Fatalf("placement %+v, want nothing to do", p)
	}
	if p := c.rollingUpdate(ds, w); len(p.delete) != 1 || p.delete[0].Name != "pa" || len(p.create) != 0 {
		t.Fatalf("rolling update deletes %v creates %v, want pa only", names(p.delete), p.create)
	}
	// a's replacement is not ready yet: nothing more goes.
	w = c.world(ds, nodes, []*corev1.Pod{daemonPod("na", "a", "new", false), daemonPod("pb", "b", "old", true), daemonPod("pc", "c", "old", true)}, "new")
	if p := c.rollingUpdate(ds, w); !p.empty() {
		t.Fatalf("rolling update deletes %v while a node is unavailable", names(p.delete))
	}
	// A node without a pod gets one first.
	w = c.world(ds, nodes, []*corev1.Pod{daemonPod("pb", "b", "old", true), daemonPod("pc", "c", "old", true)}, "new")
	if p := c.placePods(ds, w); len(p.create) != 1 || p.create[0] != "a" {
		t.Fatalf("placement creates %v, want a", p.create)
	}
	// An unavailable old pod is replaced at once, beside the budget.
	w = c.world(ds, nodes, []*corev1.Pod{daemonPod("na", "a", "new", false), daemonPod("pb", "b", "old", false), daemonPod("pc", "c", "old", true)}, "new")
	if p := c.rollingUpdate(ds, w); len(p.delete) != 1 || p.delete[0].Name != "pb" {
		t.Fatalf("rolling update deletes %v, want the unavailable pb", names(p.delete))
	}
	st := w.status(ds, 0, c)
	if st.DesiredNumberScheduled != 3 || st.CurrentNumberScheduled != 3 || st.NumberReady != 1 || st.UpdatedNumberScheduled != 1 || st.NumberUnavailable != 2 {
		t.Errorf("status %+v", st)
	}
}

func TestPlanSurge(t *testing.T) {
	c := &Controller{clock: clocktesting.NewFakePassiveClock(time.Unix(1000, 0)), recorder: record.NewFakeRecorder(10)}
	ds := daemonSet()
	one, zero := intstr.FromInt32(1), intstr.FromInt32(0)
	ds.Spec.UpdateStrategy.RollingUpdate = &appsv1.RollingUpdateDaemonSet{MaxUnavailable: &zero, MaxSurge: &one}
	nodes := []*corev1.Node{node("a", nil), node("b", nil)}
	w := c.world(ds, nodes, []*corev1.Pod{daemonPod("pa", "a", "old", true), daemonPod("pb", "b", "old", true)}, "new")
	if p := c.rollingUpdate(ds, w); len(p.create) != 1 || p.create[0] != "a" || len(p.delete) != 0 {
		t.Fatalf("surge creates %v deletes %v, want a new pod on a", p.create, names(p.delete))
	}
	w = c.world(ds, nodes, []*corev1.Pod{daemonPod("pa", "a", "old", true), daemonPod("na", "a", "new", true), daemonPod("pb", "b", "old", true)}, "new")
	if p := c.placePods(ds, w); !p.empty() {
		t.Fatalf("placement while surging %+v, want the two pods on a kept", p)
	}
	if p := c.rollingUpdate(ds, w); len(p.delete) != 1 || p.delete[0].Name != "pa" || len(p.create) != 1 || p.create[0] != "b" {
		t.Fatalf("surge deletes %v creates %v, want pa gone and b surged", names(p.delete), p.create)
	}
}
