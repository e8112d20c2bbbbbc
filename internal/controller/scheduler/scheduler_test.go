package scheduler

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	toolscache "k8s.io/client-go/tools/cache"

	"github.com/svcnet/svcnet/internal/controller"
	"github.com/svcnet/svcnet/internal/controller/controllertest"
)

const ns = "default"

func node(name string, mods ...func(*corev1.Node)) *corev1.Node {
	n := &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{corev1.LabelHostname: name}},
		Status: corev1.NodeStatus{
			Allocatable: corev1.ResourceList{
				corev1.ResourceCPU:    resource.MustParse("4"),
				corev1.ResourceMemory: resource.MustParse("8Gi"),
				corev1.ResourcePods:   resource.MustParse("110"),
			},
			Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}},
		},
	}
	for _, m := range mods {
		m(n)
	}
	return n
}

func labelled(k, v string) func(*corev1.Node) {
	return func(n *corev1.Node) { n.Labels[k] = v }
}

func tainted(key, value string, effect corev1.TaintEffect) func(*corev1.Node) {
	return func(n *corev1.Node) {
		n.Spec.Taints = append(n.Spec.Taints, corev1.Taint{Key: key, Value: value, Effect: effect})
	}
}

func allocatableOf(cpu, memory, pods string) func(*corev1.Node) {
	return func(n *corev1.Node) {
		n.Status.Allocatable = corev1.ResourceList{
			corev1.ResourceCPU: resource.MustParse(cpu), corev1.ResourceMemory: resource.MustParse(memory), corev1.ResourcePods: resource.MustParse(pods),
		}
	}
}

func pod(name string, mods ...func(*corev1.Pod)) *corev1.Pod {
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, UID: types.UID("uid-" + name)},
		Spec: corev1.PodSpec{SchedulerName: corev1.DefaultSchedulerName,
			Containers: []corev1.Container{{Name: "app", Image: "nginx"}}},
	}
	for _, m := range mods {
		m(p)
	}
	return p
}

func requesting(cpu, memory string) func(*corev1.Pod) {
	return func(p *corev1.Pod) {
		r := corev1.ResourceList{}
		if cpu != "" {
			r[corev1.ResourceCPU] = resource.MustParse(cpu)
		}
		if memory != "" {
			r[corev1.ResourceMemory] = resource.MustParse(memory)
		}
		p.Spec.Containers[0].Resources.Requests = r
	}
}

func selecting(k, v string) func(*corev1.Pod) {
	return func(p *corev1.Pod) { p.Spec.NodeSelector = map[string]string{k: v} }
}

func tolerating(t corev1.Toleration) func(*corev1.Pod) {
	return func(p *corev1.Pod) { p.Spec.Tolerations = append(p.Spec.Tolerations, t) }
}

func ownedBy(uid types.UID) func(*corev1.Pod) {
	return func(p *corev1.Pod) {
		p.OwnerReferences = []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: "rs", UID: uid, Controller: new(true)}}
	}
}

func onNode(name string) func(*corev1.Pod) {
	return func(p *corev1.Pod) { p.Spec.NodeName = name }
}

func hostPortOf(port int32) func(*corev1.Pod) {
	return func(p *corev1.Pod) {
		p.Spec.Containers[0].Ports = append(p.Spec.Containers[0].Ports, corev1.ContainerPort{ContainerPort: 80, HostPort: port})
	}
}

func requiredAffinity(terms ...corev1.NodeSelectorTerm) func(*corev1.Pod) {
	return func(p *corev1.Pod) {
		p.Spec.Affinity = &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{
			RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{NodeSelectorTerms: terms}}}
	}
}

func expr(key string, op corev1.NodeSelectorOperator, values ...string) corev1.NodeSelectorTerm {
	return corev1.NodeSelectorTerm{MatchExpressions: []corev1.NodeSelectorRequirement{{Key: key, Operator: op, Values: values}}}
}

// offline is a scheduler over a cache filled directly, for the decisions
// alone, with no namespaces known.
func offline(nodes []*corev1.Node, assigned ...*corev1.Pod) *Scheduler {
	s := &Scheduler{cache: newCache(), namespaces: toolscache.NewStore(toolscache.MetaNamespaceKeyFunc),
		rng: rand.New(rand.NewPCG(1, 2)), attempts: map[string]*attempts{}}
	for _, n := range nodes {
		s.cache.setNode(n)
	}
	for _, p := range assigned {
		s.cache.addPod(p.UID, newPodInfo(p, p.Spec.NodeName, false))
	}
	return s
}

func nodes(n ...*corev1.Node) []*corev1.Node { return n }

const (
	notHelpful = "Preemption is not helpful for scheduling"
	noVictims  = "No preemption victims found for incoming pod"
)

// TestFilters places one pod among nodes and checks the node chosen, or
// the message, word for word as upstream's.
func TestFilters(t *testing.T) {
	controlPlane := tainted("node-role.kubernetes.io/control-plane", "", corev1.TaintEffectNoSchedule)
	cordoned := func(n *corev1.Node) { n.Spec.Unschedulable = true }
	notReady := func(n *corev1.Node) { n.Status.Conditions[0].Status = corev1.ConditionFalse }
	tests := []placement{
		{"no nodes", nil, nil, pod("p"), "no nodes available to schedule pods"},
		{"selector and taint", nodes(node("cp", controlPlane, labelled("disk", "ssd")), node("a"), node("b")), nil, pod("p", selecting("disk", "ssd")),
			"0/3 nodes are available: 1 node(s) had untolerated taint(s), 2 node(s) didn't match Pod's node affinity/selector. preemption: 0/3 nodes are available: 3 " + notHelpful + "."},
		{"selector matches", nodes(node("a"), node("b", labelled("disk", "ssd"))), nil, pod("p", selecting("disk", "ssd")), "b"},
		{"toleration exists", nodes(node("cp", controlPlane)), nil,
			pod("p", tolerating(corev1.Toleration{Key: "node-role.kubernetes.io/control-plane", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule})), "cp"},
		{"empty key exists tolerates everything", nodes(node("cp", controlPlane, tainted("x", "y", corev1.TaintEffectNoExecute))), nil,
			pod("p", tolerating(corev1.Toleration{Operator: corev1.TolerationOpExists})), "cp"},
		{"equal needs the value", nodes(node("db", tainted("dedicated", "db", corev1.TaintEffectNoSchedule))), nil,
			pod("p", tolerating(corev1.Toleration{Key: "dedicated", Operator: corev1.TolerationOpEqual, Value: "web"})),
			"0/1 nodes are available: 1 node(s) had untolerated taint(s). preemption: 0/1 nodes are available: 1 " + notHelpful + "."},
		{"equal with the value", nodes(node("db", tainted("dedicated", "db", corev1.TaintEffectNoSchedule))), nil,
			pod("p", tolerating(corev1.Toleration{Key: "dedicated", Operator: corev1.TolerationOpEqual, Value: "db"})), "db"},
		{"toleration of another effect", nodes(node("db", tainted("dedicated", "db", corev1.TaintEffectNoExecute))), nil,
			pod("p", tolerating(corev1.Toleration{Key: "dedicated", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule})),
			"0/1 nodes are available: 1 node(s) had untolerated taint(s). preemption: 0/1 nodes are available: 1 " + notHelpful + "."},
		{"PreferNoSchedule does not filter", nodes(node("a", tainted("soft", "", corev1.TaintEffectPreferNoSchedule))), nil, pod("p"), "a"},
		{"cordoned", nodes(node("a", cordoned), node("b", cordoned)), nil, pod("p"),
			"0/2 nodes are available: 2 node(s) were unschedulable. preemption: 0/2 nodes are available: 2 " + notHelpful + "."},
		{"cordon tolerated", nodes(node("a", cordoned)), nil,
			pod("p", tolerating(corev1.Toleration{Key: corev1.TaintNodeUnschedulable, Operator: corev1.TolerationOpExists})), "a"},
		{"not ready", nodes(node("a", notReady), node("b")), nil, pod("p"), "b"},
		{"none ready", nodes(node("a", notReady)), nil, pod("p"),
			"0/1 nodes are available: 1 node(s) had untolerated taint(s). preemption: 0/1 nodes are available: 1 " + notHelpful + "."},
		{"cpu taken by pods on the node", nodes(node("a", allocatableOf("2", "4Gi", "110"))),
			[]*corev1.Pod{pod("old", onNode("a"), requesting("1500m", ""))}, pod("p", requesting("1", "")),
			"0/1 nodes are available: 1 Insufficient cpu. preemption: 0/1 nodes are available: 1 " + noVictims + "."},
		{"larger than the node", nodes(node("a", allocatableOf("2", "4Gi", "110"))), nil, pod("p", requesting("3", "")),
			"0/1 nodes are available: 1 Insufficient cpu. preemption: 0/1 nodes are available: 1 " + notHelpful + "."},
		{"cpu and memory", nodes(node("a", allocatableOf("1", "1Gi", "110")), node("b", allocatableOf("1", "4Gi", "110"))), nil,
			pod("p", requesting("2", "2Gi")),
			"0/2 nodes are available: 1 Insufficient memory, 2 Insufficient cpu. preemption: 0/2 nodes are available: 2 " + notHelpful + "."},
		{"too many pods", nodes(node("a", allocatableOf("1", "1Gi", "1"))), []*corev1.Pod{pod("old", onNode("a"))}, pod("p"),
			"0/1 nodes are available: 1 Too many pods. preemption: 0/1 nodes are available: 1 " + noVictims + "."},
		{"no allocatable pods", nodes(node("a", func(n *corev1.Node) { n.Status.Allocatable = nil })), nil, pod("p"),
			"0/1 nodes are available: 1 Too many pods. preemption: 0/1 nodes are available: 1 " + noVictims + "."},
		{"init container peak", nodes(node("a", allocatableOf("2", "4Gi", "110"))), nil,
			pod("p", requesting("1", ""), func(p *corev1.Pod) {
				p.Spec.InitContainers = []corev1.Container{{Name: "init", Resources: corev1.ResourceRequirements{
					Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("3")}}}}
			}),
			"0/1 nodes are available: 1 Insufficient cpu. preemption: 0/1 nodes are available: 1 " + notHelpful + "."},
		{"overhead", nodes(node("a", allocatableOf("2", "4Gi", "110"))), nil,
			pod("p", requesting("2", ""), func(p *corev1.Pod) {
				p.Spec.Overhead = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("100m")}
			}),
			"0/1 nodes are available: 1 Insufficient cpu. preemption: 0/1 nodes are available: 1 " + notHelpful + "."},
		{"host port taken", nodes(node("a"), node("b")), []*corev1.Pod{pod("old", onNode("a"), hostPortOf(8080))}, pod("p", hostPortOf(8080)), "b"},
		{"host port taken everywhere", nodes(node("a")), []*corev1.Pod{pod("old", onNode("a"), hostPortOf(8080))}, pod("p", hostPortOf(8080)),
			"0/1 nodes are available: 1 node(s) didn't have free ports for the requested pod ports. preemption: 0/1 nodes are available: 1 " + noVictims + "."},
		{"another host port", nodes(node("a")), []*corev1.Pod{pod("old", onNode("a"), hostPortOf(8080))}, pod("p", hostPortOf(8081)), "a"},
		{"affinity In", nodes(node("a", labelled("zone", "z1")), node("b", labelled("zone", "z2"))), nil,
			pod("p", requiredAffinity(expr("zone", corev1.NodeSelectorOpIn, "z2", "z3"))), "b"},
		{"affinity NotIn", nodes(node("a", labelled("zone", "z1")), node("b", labelled("zone", "z2"))), nil,
			pod("p", requiredAffinity(expr("zone", corev1.NodeSelectorOpNotIn, "z1"))), "b"},
		{"affinity Exists", nodes(node("a"), node("b", labelled("gpu", ""))), nil,
			pod("p", requiredAffinity(expr("gpu", corev1.NodeSelectorOpExists))), "b"},
		{"affinity DoesNotExist", nodes(node("a", labelled("gpu", "")), node("b")), nil,
			pod("p", requiredAffinity(expr("gpu", corev1.NodeSelectorOpDoesNotExist))), "b"},
		{"affinity Gt", nodes(node("a", labelled("cores", "4")), node("b", labelled("cores", "16"))), nil,
			pod("p", requiredAffinity(expr("cores", corev1.NodeSelectorOpGt, "8"))), "b"},
		{"affinity Lt", nodes(node("a", labelled("cores", "16")), node("b", labelled("cores", "4"))), nil,
			pod("p", requiredAffinity(expr("cores", corev1.NodeSelectorOpLt, "8"))), "b"},
		{"affinity terms are ORed", nodes(node("a"), node("b", labelled("zone", "z2"))), nil,
			pod("p", requiredAffinity(expr("zone", corev1.NodeSelectorOpIn, "z9"), expr("zone", corev1.NodeSelectorOpIn, "z2"))), "b"},
		{"affinity on the node name", nodes(node("a"), node("b")), nil,
			pod("p", requiredAffinity(corev1.NodeSelectorTerm{MatchFields: []corev1.NodeSelectorRequirement{
				{Key: "metadata.name", Operator: corev1.NodeSelectorOpIn, Values: []string{"b"}}}})), "b"},
		{"affinity and selector both apply", nodes(node("a", labelled("zone", "z1")), node("b", labelled("zone", "z1"), labelled("disk", "ssd"))), nil,
			pod("p", selecting("disk", "ssd"), requiredAffinity(expr("zone", corev1.NodeSelectorOpIn, "z1"))), "b"},
		{"empty term matches nothing", nodes(node("a")), nil, pod("p", requiredAffinity(corev1.NodeSelectorTerm{})),
			"0/1 nodes are available: 1 node(s) didn't match Pod's node affinity/selector. preemption: 0/1 nodes are available: 1 " + notHelpful + "."},
		{"preemption never", nodes(node("a", allocatableOf("1", "1Gi", "110"))), nil,
			pod("p", requesting("2", ""), func(p *corev1.Pod) { p.Spec.PreemptionPolicy = new(corev1.PreemptNever) }),
			"0/1 nodes are available: 1 Insufficient cpu. preemption: not eligible due to preemptionPolicy=Never."},
		{"first failing filter only", nodes(node("a", cordoned, controlPlane, allocatableOf("1", "1Gi", "110"))), nil, pod("p", requesting("2", "")),
			"0/1 nodes are available: 1 node(s) were unschedulable. preemption: 0/1 nodes are available: 1 " + notHelpful + "."},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			wantSchedule(t, offline(tt.nodes, tt.assigned...), tt.pod, tt.want)
		})
	}
}

// TestNoNodesReason: a cluster that runs no node says why in the message
// of the pods that wait.
func TestNoNodesReason(t *testing.T) {
	s := offline(nil)
	s.opts.NoNodesReason = "svcnet up runs no node here"
	wantSchedule(t, s, pod("p"), "no nodes available to schedule pods: svcnet up runs no node here")
	s.cache.setNode(node("a"))
	wantSchedule(t, s, pod("p"), "a")
}

// placement is a table case: a new pod among nodes that hold the assigned
// pods, and the node it goes to, or the whole message saying why none.
type placement struct {
	name     string
	nodes    []*corev1.Node
	assigned []*corev1.Pod
	pod      *corev1.Pod
	want     string
}

// wantSchedule schedules a new pod and checks the node chosen, or the
// message that says why there is none.
func wantSchedule(t *testing.T, s *Scheduler, pod *corev1.Pod, want string) {
	t.Helper()
	chosen, _, msg, busy := s.schedule(pod)
	if busy {
		t.Fatal("a new pod is busy")
	}
	if got := chosen + msg; got != want {
		t.Errorf("got\n%s\nwant\n%s", got, want)
	}
}

// TestMessageSortsCountsAsStrings follows upstream, which sorts "N reason"
// strings, so that 10 comes before 2.
func TestMessageSortsCountsAsStrings(t *testing.T) {
	var list []*corev1.Node
	for i := range 12 {
		if i < 10 {
			list = append(list, node(fmt.Sprintf("t%d", i), tainted("x", "", corev1.TaintEffectNoSchedule)))
		} else {
			list = append(list, node(fmt.Sprintf("c%d", i), func(n *corev1.Node) { n.Spec.Unschedulable = true }))
		}
	}
	_, _, msg, _ := offline(list).schedule(pod("p"))
	want := "0/12 nodes are available: 10 node(s) had untolerated taint(s), 2 node(s) were unschedulable. preemption: 0/12 nodes are available: 12 " + notHelpful + "."
	if msg != want {
		t.Errorf("got\n%s\nwant\n%s", msg, want)
	}
}

// TestScoring checks the soft preferences one at a time.
func TestScoring(t *testing.T) {
	preferring := func(p *corev1.Pod) {
		p.Spec.Affinity = &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{PreferredDuringSchedulingIgnoredDuringExecution: []corev1.PreferredSchedulingTerm{
			{Weight: 10, Preference: expr("zone", corev1.NodeSelectorOpIn, "z2")}}}}
	}
	tests := []placement{
		{"fewest pods of the same owner", nodes(node("a"), node("b")),
			[]*corev1.Pod{pod("s1", onNode("a"), ownedBy("rs1")), pod("x1", onNode("b"), ownedBy("rs2")), pod("x2", onNode("b"), ownedBy("rs2"))},
			pod("p", ownedBy("rs1")), "b"},
		{"least requested", nodes(node("a"), node("b")), []*corev1.Pod{pod("big", onNode("a"), requesting("3", "6Gi"))}, pod("p"), "b"},
		{"small requests on large nodes", nodes(node("a", allocatableOf("32", "64Gi", "110")), node("b", allocatableOf("32", "64Gi", "110"))),
			[]*corev1.Pod{pod("x1", onNode("a"), requesting("10m", "16Mi")), pod("x2", onNode("a"), requesting("10m", "16Mi")),
				pod("y1", onNode("b"), requesting("10m", "16Mi"))},
			pod("p", requesting("10m", "16Mi")), "b"},
		{"PreferNoSchedule avoided", nodes(node("a", tainted("soft", "", corev1.TaintEffectPreferNoSchedule)), node("b")), nil, pod("p"), "b"},
		{"PreferNoSchedule tolerated", nodes(node("a", tainted("soft", "", corev1.TaintEffectPreferNoSchedule)), node("b")),
			[]*corev1.Pod{pod("small", onNode("b"), requesting("100m", ""))},
			pod("p", tolerating(corev1.Toleration{Key: "soft", Operator: corev1.TolerationOpExists})), "a"},
		{"preferred affinity", nodes(node("a", labelled("zone", "z1")), node("b", labelled("zone", "z2"))), nil, pod("p", preferring), "b"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			wantChoice(t, tt.nodes, tt.assigned, tt.pod, tt.want)
		})
	}
}

// wantChoice places pod among nodes holding assigned 20 times, each on a
// fresh scheduler, and checks it always goes to want: ties are broken at
// random, so a test that means no tie must see one answer.
func wantChoice(t *testing.T, nodes []*corev1.Node, assigned []*corev1.Pod, pod *corev1.Pod, want string) {
	t.Helper()
	for range 20 {
		if chosen, _, msg, _ := offline(nodes, assigned...).schedule(pod); chosen != want {
			t.Fatalf("chose %q (%s), want %s", chosen, msg, want)
		}
	}
}

// TestTiesAreRandom places a pod among equal nodes many times; each wins
// sometimes.
func TestTiesAreRandom(t *testing.T) {
	s := offline(nodes(node("a"), node("b"), node("c")))
	won := map[string]int{}
	for i := range 300 {
		p := pod(fmt.Sprintf("p%d", i))
		chosen, _, _, _ := s.schedule(p)
		won[chosen]++
		s.cache.removePod(p.UID)
	}
	for _, n := range []string{"a", "b", "c"} {
		if won[n] < 50 {
			t.Errorf("node %s won %d of 300 ties: %v", n, won[n], won)
		}
	}
}

// TestAssumedPodsCount places a burst without the informer ever seeing a
// binding: the assumed pods alone spread the burst and stop overcommit.
func TestAssumedPodsCount(t *testing.T) {
	s := offline(nodes(node("a", allocatableOf("1", "4Gi", "110")), node("b", allocatableOf("1", "4Gi", "110"))))
	per := map[string]int{}
	for i := range 4 {
		chosen, _, msg, _ := s.schedule(pod(fmt.Sprintf("p%d", i), requesting("500m", ""), ownedBy("rs")))
		if chosen == "" {
			t.Fatalf("pod %d: %s", i, msg)
		}
		per[chosen]++
	}
	if per["a"] != 2 || per["b"] != 2 {
		t.Errorf("burst placed %v, want 2 on each", per)
	}
	if _, _, _, busy := s.schedule(pod("p0", requesting("500m", ""))); !busy {
		t.Error("an assumed pod was placed again")
	}
	_, _, msg, _ := s.schedule(pod("p4", requesting("500m", "")))
	if want := "0/2 nodes are available: 2 Insufficient cpu. preemption: 0/2 nodes are available: 2 " + noVictims + "."; msg != want {
		t.Errorf("fifth pod: %q, want %q", msg, want)
	}
	// A binding that failed gives the room back.
	s.cache.forget("uid-p0")
	if chosen, _, msg, _ := s.schedule(pod("p4", requesting("500m", ""))); chosen == "" {
		t.Errorf("no room after forgetting an assumed pod: %s", msg)
	}
}

// binder plays the API server's pods/binding for the fake clientset:
// it sets the pod's nodeName, or, while held, keeps the bindings back
// (the informer then does not see them).
type binder struct {
	cs      *fake.Clientset
	mu      sync.Mutex
	hold    bool
	pending []*corev1.Binding
	count   map[string]int // bindings per node
}

func newBinder(cs *fake.Clientset) *binder {
	b := &binder{cs: cs, count: map[string]int{}}
	cs.PrependReactor("create", "pods", func(a k8stesting.Action) (bool, runtime.Object, error) {
		if a.GetSubresource() != "binding" {
			return false, nil, nil
		}
		binding := a.(k8stesting.CreateAction).GetObject().(*corev1.Binding)
		b.mu.Lock()
		defer b.mu.Unlock()
		b.count[binding.Target.Name]++
		if b.hold {
			b.pending = append(b.pending, binding)
			return true, binding, nil
		}
		return true, binding, b.apply(binding)
	})
	return b
}

func (b *binder) apply(binding *corev1.Binding) error {
	gvr := corev1.SchemeGroupVersion.WithResource("pods")
	obj, err := b.cs.Tracker().Get(gvr, binding.Namespace, binding.Name)
	if err != nil {
		return err
	}
	p := obj.(*corev1.Pod).DeepCopy()
	if p.Spec.NodeName != "" {
		return apierrors.NewConflict(gvr.GroupResource(), p.Name, fmt.Errorf("pod %s is already assigned to node %q", p.Name, p.Spec.NodeName))
	}
	p.Spec.NodeName = binding.Target.Name
	return b.cs.Tracker().Update(gvr, p, binding.Namespace)
}

func (b *binder) release(t *testing.T) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.hold = false
	for _, binding := range b.pending {
		if err := b.apply(binding); err != nil {
			t.Error(err)
		}
	}
	b.pending = nil
}

func (b *binder) perNode() map[string]int {
	b.mu.Lock()
	defer b.mu.Unlock()
	out := map[string]int{}
	for k, v := range b.count {
		out[k] = v
	}
	return out
}

func start(t *testing.T, hold bool, objects ...runtime.Object) (*fake.Clientset, *binder) {
	t.Helper()
	return startWith(t, hold, DefaultOptions(), objects...)
}

// startWith runs the scheduler with opts, its backoff made short.
func startWith(t *testing.T, hold bool, opts Options, objects ...runtime.Object) (*fake.Clientset, *binder) {
	t.Helper()
	cs := controllertest.NewClient(objects...)
	b := newBinder(cs)
	b.hold = hold
	opts.InitialBackoff, opts.MaxBackoff = 10*time.Millisecond, 50*time.Millisecond
	controllertest.Start(t, cs, func(ctx context.Context, d controller.Deps) []func(context.Context) {
		s, err := New(ctx, d, cs, opts)
		if err != nil {
			t.Fatal(err)
		}
		return []func(context.Context){s.Run}
	})
	return cs, b
}

func getPod(t *testing.T, cs *fake.Clientset, name string) *corev1.Pod {
	t.Helper()
	p, err := cs.CoreV1().Pods(ns).Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func wantNode(t *testing.T, cs *fake.Clientset, name, want string) {
	t.Helper()
	controllertest.Eventually(t, func() string {
		if got := getPod(t, cs, name).Spec.NodeName; got != want {
			return fmt.Sprintf("pod %s on node %q, want %q", name, got, want)
		}
		return ""
	})
}

// eventsOf are the pod's events as "Type Reason: message".
func eventsOf(t *testing.T, cs *fake.Clientset, podName string) []string {
	t.Helper()
	list, err := cs.CoreV1().Events(ns).List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range list.Items {
		if e.InvolvedObject.Name == podName {
			if e.Source.Component != Name {
				t.Errorf("event from %q, want %q", e.Source.Component, Name)
			}
			out = append(out, e.Type+" "+e.Reason+": "+e.Message)
		}
	}
	return out
}

func wantEvent(t *testing.T, cs *fake.Clientset, podName, want string) {
	t.Helper()
	controllertest.Eventually(t, func() string {
		got := eventsOf(t, cs, podName)
		if !slices.Contains(got, want) {
			return fmt.Sprintf("events of %s: %q, want %q", podName, got, want)
		}
		return ""
	})
}

// TestBindsThroughTheBindingSubresource schedules a ReplicaSet's pods:
// bound by pods/binding, never by a pod update, spread one per node, each
// with its Scheduled event; another scheduler's pod is left alone.
func TestBindsThroughTheBindingSubresource(t *testing.T) {
	objects := []runtime.Object{node("a"), node("b"), node("c"), pod("other", func(p *corev1.Pod) { p.Spec.SchedulerName = "my-scheduler" })}
	for i := range 3 {
		objects = append(objects, pod(fmt.Sprintf("web-%d", i), ownedBy("rs-web")))
	}
	cs, b := start(t, false, objects...)
	controllertest.Eventually(t, func() string {
		if got := b.perNode(); got["a"] != 1 || got["b"] != 1 || got["c"] != 1 {
			return fmt.Sprintf("bindings per node %v, want one each", got)
		}
		return ""
	})
	for i := range 3 {
		name := fmt.Sprintf("web-%d", i)
		wantEvent(t, cs, name, fmt.Sprintf("Normal Scheduled: Successfully assigned default/%s to %s", name, getPod(t, cs, name).Spec.NodeName))
	}
	if n := getPod(t, cs, "other").Spec.NodeName; n != "" {
		t.Errorf("another scheduler's pod was put on %s", n)
	}
	for _, a := range cs.Actions() {
		if a.GetResource().Resource == "pods" && a.GetVerb() == "update" && a.GetSubresource() == "" {
			t.Errorf("pod updated directly: %v", a)
		}
	}
}

// TestUnschedulableUntilANodeFits leaves a pod that fits nowhere Pending
// with upstream's condition and event, and places it once a node that
// fits is added, and another once a node is labelled.
func TestUnschedulableUntilANodeFits(t *testing.T) {
	cs, _ := start(t, false, node("a"), pod("ssd", selecting("disk", "ssd")), pod("gpu", selecting("gpu", "yes")))
	msg := "0/1 nodes are available: 1 node(s) didn't match Pod's node affinity/selector. preemption: 0/1 nodes are available: 1 " + notHelpful + "."
	for _, name := range []string{"ssd", "gpu"} {
		wantEvent(t, cs, name, "Warning FailedScheduling: "+msg)
		controllertest.Eventually(t, func() string {
			for _, c := range getPod(t, cs, name).Status.Conditions {
				if c.Type == corev1.PodScheduled && c.Status == corev1.ConditionFalse && c.Reason == "Unschedulable" && c.Message == msg {
					return ""
				}
			}
			return fmt.Sprintf("conditions of %s: %+v", name, getPod(t, cs, name).Status.Conditions)
		})
	}

	ctx := context.Background()
	if _, err := cs.CoreV1().Nodes().Create(ctx, node("b", labelled("disk", "ssd")), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	wantNode(t, cs, "ssd", "b")

	a, err := cs.CoreV1().Nodes().Get(ctx, "a", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	a.Labels["gpu"] = "yes"
	if _, err := cs.CoreV1().Nodes().Update(ctx, a, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	wantNode(t, cs, "gpu", "a")
}

// TestRetryWhenAPodGoes fills a node, then deletes its pod: the waiting
// pod takes its place.
func TestRetryWhenAPodGoes(t *testing.T) {
	cs, _ := start(t, false, node("a", allocatableOf("1", "1Gi", "1")), pod("first", onNode("a")), pod("second"))
	wantEvent(t, cs, "second", "Warning FailedScheduling: 0/1 nodes are available: 1 Too many pods. preemption: 0/1 nodes are available: 1 "+noVictims+".")
	if err := cs.CoreV1().Pods(ns).Delete(context.Background(), "first", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	wantNode(t, cs, "second", "a")
}

// TestBurstBeforeTheInformerCatchesUp binds a burst while the informer
// sees none of the bindings: the assumed pods keep the node from being
// overcommitted.
func TestBurstBeforeTheInformerCatchesUp(t *testing.T) {
	objects := []runtime.Object{node("a", allocatableOf("1", "4Gi", "110")), node("b", allocatableOf("1", "4Gi", "110"))}
	for i := range 5 {
		objects = append(objects, pod(fmt.Sprintf("p%d", i), requesting("500m", "")))
	}
	cs, b := start(t, true, objects...)
	controllertest.Eventually(t, func() string {
		unschedulable := 0
		for i := range 5 {
			for _, c := range getPod(t, cs, fmt.Sprintf("p%d", i)).Status.Conditions {
				if c.Type == corev1.PodScheduled && c.Reason == "Unschedulable" {
					unschedulable++
				}
			}
		}
		if got := b.perNode(); got["a"] != 2 || got["b"] != 2 || unschedulable != 1 {
			return fmt.Sprintf("bindings %v and %d unschedulable, want 2 per node and 1", got, unschedulable)
		}
		return ""
	})
	b.release(t)
	controllertest.Eventually(t, func() string {
		bound := 0
		for i := range 5 {
			if getPod(t, cs, fmt.Sprintf("p%d", i)).Spec.NodeName != "" {
				bound++
			}
		}
		if bound != 4 {
			return fmt.Sprintf("%d pods bound, want 4", bound)
		}
		return ""
	})
	if got := b.perNode(); got["a"]+got["b"] != 4 {
		t.Errorf("bindings after the informer caught up: %v", got)
	}
}

// TestStatusNotRewritten makes a second attempt with the same outcome:
// it records the event again (counted) but does not rewrite the pod's
// status.
func TestStatusNotRewritten(t *testing.T) {
	cs, _ := start(t, false, node("a"), pod("p", selecting("disk", "ssd")))
	msg := "0/1 nodes are available: 1 node(s) didn't match Pod's node affinity/selector. preemption: 0/1 nodes are available: 1 " + notHelpful + "."
	wantEvent(t, cs, "p", "Warning FailedScheduling: "+msg)
	// The condition is written after the event: the second attempt must
	// come after it.
	controllertest.Eventually(t, func() string {
		for _, c := range getPod(t, cs, "p").Status.Conditions {
			if c.Type == corev1.PodScheduled && c.Message == msg {
				return ""
			}
		}
		return "no PodScheduled=False condition yet"
	})
	// A label that does not help still makes another attempt.
	ctx := context.Background()
	a, err := cs.CoreV1().Nodes().Get(ctx, "a", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	a.Labels["disk"] = "hdd"
	if _, err := cs.CoreV1().Nodes().Update(ctx, a, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	controllertest.Eventually(t, func() string {
		list, err := cs.CoreV1().Events(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return err.Error()
		}
		for _, e := range list.Items {
			if e.Reason == "FailedScheduling" && e.Count >= 2 {
				return ""
			}
		}
		return "no second FailedScheduling event"
	})
	patches := 0
	for _, a := range cs.Actions() {
		if a.GetResource().Resource == "pods" && a.GetVerb() == "patch" && a.GetSubresource() == "status" {
			patches++
		}
	}
	if patches != 1 {
		t.Errorf("%d status patches for two attempts with one message, want 1", patches)
	}
}
