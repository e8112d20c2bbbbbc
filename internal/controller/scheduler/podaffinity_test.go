package scheduler

import (
	"context"
	"fmt"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	podstrategy "github.com/svcnet/svcnet/internal/registry/pod"
)

const zone = corev1.LabelTopologyZone

func inZone(z string) func(*corev1.Node) { return labelled(zone, z) }

func cordoned(n *corev1.Node) { n.Spec.Unschedulable = true }

func withLabels(kv ...string) func(*corev1.Pod) {
	return func(p *corev1.Pod) {
		if p.Labels == nil {
			p.Labels = map[string]string{}
		}
		for i := 0; i+1 < len(kv); i += 2 {
			p.Labels[kv[i]] = kv[i+1]
		}
	}
}

func inNamespace(name string) func(*corev1.Pod) {
	return func(p *corev1.Pod) { p.Namespace = name }
}

func terminating(p *corev1.Pod) { p.DeletionTimestamp = new(metav1.Now()) }

// term selects pods labelled app=app in the domains of topologyKey.
func term(topologyKey, app string, mods ...func(*corev1.PodAffinityTerm)) corev1.PodAffinityTerm {
	t := corev1.PodAffinityTerm{TopologyKey: topologyKey, LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": app}}}
	for _, m := range mods {
		m(&t)
	}
	return t
}

func podAffinity(terms ...corev1.PodAffinityTerm) func(*corev1.Pod) {
	return func(p *corev1.Pod) {
		if p.Spec.Affinity == nil {
			p.Spec.Affinity = &corev1.Affinity{}
		}
		p.Spec.Affinity.PodAffinity = &corev1.PodAffinity{RequiredDuringSchedulingIgnoredDuringExecution: terms}
	}
}

func podAntiAffinity(terms ...corev1.PodAffinityTerm) func(*corev1.Pod) {
	return func(p *corev1.Pod) {
		if p.Spec.Affinity == nil {
			p.Spec.Affinity = &corev1.Affinity{}
		}
		p.Spec.Affinity.PodAntiAffinity = &corev1.PodAntiAffinity{RequiredDuringSchedulingIgnoredDuringExecution: terms}
	}
}

// spreadOver adds a DoNotSchedule constraint over topologyKey for pods
// labelled app=app.
func spreadOver(topologyKey, app string, maxSkew int32, mods ...func(*corev1.TopologySpreadConstraint)) func(*corev1.Pod) {
	return func(p *corev1.Pod) {
		c := corev1.TopologySpreadConstraint{MaxSkew: maxSkew, TopologyKey: topologyKey, WhenUnsatisfiable: corev1.DoNotSchedule,
			LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": app}}}
		for _, m := range mods {
			m(&c)
		}
		p.Spec.TopologySpreadConstraints = append(p.Spec.TopologySpreadConstraints, c)
	}
}

func namespace(name string, kv ...string) *corev1.Namespace {
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{}}}
	for i := 0; i+1 < len(kv); i += 2 {
		ns.Labels[kv[i]] = kv[i+1]
	}
	return ns
}

// web is a pod labelled app=web on node.
func web(name, node string, mods ...func(*corev1.Pod)) *corev1.Pod {
	return pod(name, append([]func(*corev1.Pod){withLabels("app", "web"), onNode(node)}, mods...)...)
}

// load is a pod taking a quarter of node, so that scoring alone would
// choose another.
func load(node string) *corev1.Pod {
	return pod("load-"+node, onNode(node), requesting("1", "2Gi"))
}

func unavailable(nodes int, reasons, preemption string) string {
	return fmt.Sprintf("0/%d nodes are available: %s. preemption: 0/%d nodes are available: %s.", nodes, reasons, nodes, preemption)
}

// TestPodAffinityAndSpread places one pod among nodes and pods already
// placed, and checks the node chosen or the message, word for word as
// upstream's.
func TestPodAffinityAndSpread(t *testing.T) {
	tests := []struct {
		name       string
		nodes      []*corev1.Node
		namespaces []*corev1.Namespace
		assigned   []*corev1.Pod
		pod        *corev1.Pod
		// want is the node chosen, or the whole message
		want string
	}{
		// InterPodAffinity: the pod's affinity.
		{"affinity to a pod in the zone", nodes(node("a", inZone("z1")), node("b", inZone("z2"), cordoned), node("c", inZone("z2"))),
			nil, []*corev1.Pod{pod("db", onNode("b"), withLabels("app", "db")), load("c")},
			pod("p", podAffinity(term(zone, "db"))), "c"},
		{"affinity with no pod to go to", nodes(node("a"), node("b")), nil, nil,
			pod("p", podAffinity(term(corev1.LabelHostname, "db"))),
			unavailable(2, "2 node(s) didn't match pod affinity rules", "2 "+notHelpful)},
		{"affinity to a pod elsewhere", nodes(node("a", inZone("z1")), node("b", inZone("z2"))), nil,
			[]*corev1.Pod{pod("db", onNode("b"), withLabels("app", "db"))},
			pod("p", podAffinity(term(zone, "db")), selecting(zone, "z1")),
			unavailable(2, "1 node(s) didn't match Pod's node affinity/selector, 1 node(s) didn't match pod affinity rules", "2 "+notHelpful)},
		{"first pod of a group", nodes(node("a")), nil, nil,
			pod("p", withLabels("app", "web"), podAffinity(term(corev1.LabelHostname, "web"))), "a"},
		{"first pod needs the topology key", nodes(node("a"), node("b", inZone("z1"))), nil, []*corev1.Pod{load("b")},
			pod("p", withLabels("app", "web"), podAffinity(term(zone, "web"))), "b"},
		{"not the first once a matching pod runs elsewhere", nodes(node("a", inZone("z1")), node("b", inZone("z2"))), nil,
			[]*corev1.Pod{web("w1", "b")},
			pod("p", withLabels("app", "web"), podAffinity(term(zone, "web")), selecting(zone, "z1")),
			unavailable(2, "1 node(s) didn't match Pod's node affinity/selector, 1 node(s) didn't match pod affinity rules", "2 "+notHelpful)},
		{"affinity to a pod on a node without the key", nodes(node("a"), node("b", inZone("z1"))), nil,
			[]*corev1.Pod{pod("db", onNode("a"), withLabels("app", "db"))},
			pod("p", podAffinity(term(zone, "db"))),
			unavailable(2, "2 node(s) didn't match pod affinity rules", "2 "+notHelpful)},
		{"affinity to a pod of another namespace", nodes(node("a")), nil,
			[]*corev1.Pod{pod("db", onNode("a"), withLabels("app", "db"), inNamespace("data"))},
			pod("p", podAffinity(term(corev1.LabelHostname, "db"))),
			unavailable(1, "1 node(s) didn't match pod affinity rules", "1 "+notHelpful)},
		{"affinity naming the namespace", nodes(node("a"), node("b")), nil,
			[]*corev1.Pod{pod("db", onNode("b"), withLabels("app", "db"), inNamespace("data"))},
			pod("p", podAffinity(term(corev1.LabelHostname, "db", func(t *corev1.PodAffinityTerm) { t.Namespaces = []string{"data"} }))), "b"},
		{"affinity selecting namespaces by label", nodes(node("a"), node("b")), []*corev1.Namespace{namespace("data", "tier", "storage")},
			[]*corev1.Pod{pod("db", onNode("b"), withLabels("app", "db"), inNamespace("data"))},
			pod("p", podAffinity(term(corev1.LabelHostname, "db", func(t *corev1.PodAffinityTerm) {
				t.NamespaceSelector = &metav1.LabelSelector{MatchLabels: map[string]string{"tier": "storage"}}
			}))), "b"},
		{"affinity to all namespaces", nodes(node("a"), node("b")), nil,
			[]*corev1.Pod{pod("db", onNode("b"), withLabels("app", "db"), inNamespace("data"))},
			pod("p", podAffinity(term(corev1.LabelHostname, "db", func(t *corev1.PodAffinityTerm) { t.NamespaceSelector = &metav1.LabelSelector{} }))), "b"},

		// InterPodAffinity: the pod's anti-affinity.
		{"anti-affinity to the node's pod", nodes(node("a"), node("b")), nil, []*corev1.Pod{web("w1", "a"), load("b")},
			pod("p", withLabels("app", "web"), podAntiAffinity(term(corev1.LabelHostname, "web"))), "b"},
		{"anti-affinity over a zone", nodes(node("a", inZone("z1")), node("b", inZone("z1")), node("c", inZone("z2"))), nil,
			[]*corev1.Pod{web("w1", "a"), load("c")}, pod("p", podAntiAffinity(term(zone, "web"))), "c"},
		{"anti-affinity everywhere", nodes(node("a"), node("b")), nil, []*corev1.Pod{web("w1", "a"), web("w2", "b")},
			pod("p", podAntiAffinity(term(corev1.LabelHostname, "web"))),
			unavailable(2, "2 node(s) didn't match pod anti-affinity rules", "2 "+noVictims)},
		{"anti-affinity ignores nodes without the key", nodes(node("a")), nil, []*corev1.Pod{web("w1", "a")},
			pod("p", podAntiAffinity(term(zone, "web"))), "a"},
		{"anti-affinity within the namespace", nodes(node("a")), nil, []*corev1.Pod{web("w1", "a", inNamespace("other"))},
			pod("p", podAntiAffinity(term(corev1.LabelHostname, "web"))), "a"},
		{"anti-affinity selecting namespaces by label", nodes(node("a")), []*corev1.Namespace{namespace("other", "team", "blue")},
			[]*corev1.Pod{web("w1", "a", inNamespace("other"))},
			pod("p", podAntiAffinity(term(corev1.LabelHostname, "web", func(t *corev1.PodAffinityTerm) {
				t.NamespaceSelector = &metav1.LabelSelector{MatchLabels: map[string]string{"team": "blue"}}
			}))),
			unavailable(1, "1 node(s) didn't match pod anti-affinity rules", "1 "+noVictims)},
		{"anti-affinity counts terminating pods", nodes(node("a")), nil, []*corev1.Pod{web("w1", "a", terminating)},
			pod("p", podAntiAffinity(term(corev1.LabelHostname, "web"))),
			unavailable(1, "1 node(s) didn't match pod anti-affinity rules", "1 "+noVictims)},
		{"anti-affinity with matchLabelKeys", nodes(node("a"), node("b")), nil,
			[]*corev1.Pod{web("old", "a", withLabels("version", "v1")), web("new", "b", withLabels("version", "v2"))},
			pod("p", withLabels("app", "web", "version", "v2"),
				podAntiAffinity(term(corev1.LabelHostname, "web", func(t *corev1.PodAffinityTerm) { t.MatchLabelKeys = []string{"version"} }))), "a"},
		{"anti-affinity with mismatchLabelKeys", nodes(node("a"), node("b")), nil,
			[]*corev1.Pod{pod("t2", onNode("a"), withLabels("tenant", "t2")), pod("t1", onNode("b"), withLabels("tenant", "t1"))},
			pod("p", withLabels("tenant", "t1"), podAntiAffinity(corev1.PodAffinityTerm{TopologyKey: corev1.LabelHostname,
				LabelSelector:     &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "tenant", Operator: metav1.LabelSelectorOpExists}}},
				MismatchLabelKeys: []string{"tenant"}})), "b"},

		// InterPodAffinity: the anti-affinity of the pods already placed.
		{"existing pod's anti-affinity", nodes(node("a"), node("b")), nil,
			[]*corev1.Pod{pod("loner", onNode("a"), podAntiAffinity(term(corev1.LabelHostname, "web"))), load("b")},
			pod("p", withLabels("app", "web")), "b"},
		{"existing pod's anti-affinity everywhere", nodes(node("a", inZone("z1")), node("b", inZone("z1"))), nil,
			[]*corev1.Pod{pod("loner", onNode("a"), podAntiAffinity(term(zone, "web")))},
			pod("p", withLabels("app", "web")),
			unavailable(2, "2 node(s) didn't satisfy existing pods anti-affinity rules", "2 "+noVictims)},
		{"existing pod's anti-affinity for another namespace", nodes(node("a")), nil,
			[]*corev1.Pod{pod("loner", onNode("a"), inNamespace("other"), podAntiAffinity(term(corev1.LabelHostname, "web")))},
			pod("p", withLabels("app", "web")), "a"},
		{"existing pod's anti-affinity by namespace labels", nodes(node("a")), []*corev1.Namespace{namespace(ns, "team", "blue")},
			[]*corev1.Pod{pod("loner", onNode("a"), inNamespace("other"), podAntiAffinity(term(corev1.LabelHostname, "web", func(t *corev1.PodAffinityTerm) {
				t.NamespaceSelector = &metav1.LabelSelector{MatchLabels: map[string]string{"team": "blue"}}
			})))},
			pod("p", withLabels("app", "web")),
			unavailable(1, "1 node(s) didn't satisfy existing pods anti-affinity rules", "1 "+noVictims)},
		{"own anti-affinity before the existing pods'", nodes(node("a")), nil,
			[]*corev1.Pod{web("w1", "a", podAntiAffinity(term(corev1.LabelHostname, "web")))},
			pod("p", withLabels("app", "web"), podAntiAffinity(term(corev1.LabelHostname, "web"))),
			unavailable(1, "1 node(s) didn't match pod anti-affinity rules", "1 "+noVictims)},
		{"resources before pod affinity", nodes(node("a", allocatableOf("1", "1Gi", "110"))), nil, nil,
			pod("p", requesting("2", ""), podAffinity(term(corev1.LabelHostname, "db"))),
			unavailable(1, "1 Insufficient cpu", "1 "+notHelpful)},

		// PodTopologySpread.
		{"maxSkew 1 over zones", nodes(node("a", inZone("z1")), node("b", inZone("z2"))), nil, []*corev1.Pod{web("w1", "a"), load("b")},
			pod("p", withLabels("app", "web"), spreadOver(zone, "web", 1)), "b"},
		{"skew too large", nodes(node("a", inZone("z1")), node("b", inZone("z2"), cordoned)), nil, []*corev1.Pod{web("w1", "a")},
			pod("p", withLabels("app", "web"), spreadOver(zone, "web", 1)),
			unavailable(2, "1 node(s) didn't match pod topology spread constraints, 1 node(s) were unschedulable", "1 "+noVictims+", 1 "+notHelpful)},
		{"maxSkew 2 allows one more", nodes(node("a", inZone("z1")), node("b", inZone("z2"), cordoned)), nil, []*corev1.Pod{web("w1", "a")},
			pod("p", withLabels("app", "web"), spreadOver(zone, "web", 2)), "a"},
		{"a pod that does not match adds no skew", nodes(node("a", inZone("z1")), node("b", inZone("z2"), cordoned)), nil, []*corev1.Pod{web("w1", "a")},
			pod("p", spreadOver(zone, "web", 1)), "a"},
		{"missing label", nodes(node("a"), node("b", inZone("z1"))), nil, []*corev1.Pod{web("w1", "b")},
			pod("p", withLabels("app", "web"), spreadOver(zone, "web", 1)), "b"},
		{"missing label everywhere", nodes(node("a")), nil, nil,
			pod("p", withLabels("app", "web"), spreadOver(zone, "web", 1)),
			unavailable(1, "1 node(s) didn't match pod topology spread constraints (missing required label)", "1 "+notHelpful)},
		{"minDomains above the domains", nodes(node("a", inZone("z1")), node("b", inZone("z2"))), nil, []*corev1.Pod{web("w1", "a"), web("w2", "b")},
			pod("p", withLabels("app", "web"), spreadOver(zone, "web", 1, func(c *corev1.TopologySpreadConstraint) { c.MinDomains = new(int32(3)) })),
			unavailable(2, "2 node(s) didn't match pod topology spread constraints", "2 "+noVictims)},
		{"minDomains met", nodes(node("a", inZone("z1")), node("b", inZone("z2"), cordoned)), nil, []*corev1.Pod{web("w1", "a"), web("w2", "b")},
			pod("p", withLabels("app", "web"), spreadOver(zone, "web", 1, func(c *corev1.TopologySpreadConstraint) { c.MinDomains = new(int32(2)) })), "a"},
		{"nodeAffinityPolicy Honor leaves out nodes the pod may not use",
			nodes(node("a", inZone("z1"), labelled("disk", "ssd")), node("b", inZone("z2"), labelled("disk", "ssd"), cordoned), node("c", inZone("z3"))),
			nil, []*corev1.Pod{web("w1", "a"), web("w2", "b")},
			pod("p", withLabels("app", "web"), selecting("disk", "ssd"), spreadOver(zone, "web", 1)), "a"},
		{"nodeAffinityPolicy Ignore counts them",
			nodes(node("a", inZone("z1"), labelled("disk", "ssd")), node("b", inZone("z2"), labelled("disk", "ssd"), cordoned), node("c", inZone("z3"))),
			nil, []*corev1.Pod{web("w1", "a"), web("w2", "b")},
			pod("p", withLabels("app", "web"), selecting("disk", "ssd"), spreadOver(zone, "web", 1, func(c *corev1.TopologySpreadConstraint) {
				c.NodeAffinityPolicy = new(corev1.NodeInclusionPolicyIgnore)
			})),
			unavailable(3, "1 node(s) didn't match Pod's node affinity/selector, 1 node(s) didn't match pod topology spread constraints, 1 node(s) were unschedulable",
				"1 "+noVictims+", 2 "+notHelpful)},
		{"nodeTaintsPolicy Ignore counts tainted nodes",
			nodes(node("a", inZone("z1")), node("b", inZone("z2"), cordoned), node("c", inZone("z3"), tainted("dedicated", "db", corev1.TaintEffectNoSchedule))),
			nil, []*corev1.Pod{web("w1", "a"), web("w2", "b")},
			pod("p", withLabels("app", "web"), spreadOver(zone, "web", 1)),
			unavailable(3, "1 node(s) didn't match pod topology spread constraints, 1 node(s) had untolerated taint(s), 1 node(s) were unschedulable",
				"1 "+noVictims+", 2 "+notHelpful)},
		{"nodeTaintsPolicy Honor leaves them out",
			nodes(node("a", inZone("z1")), node("b", inZone("z2"), cordoned), node("c", inZone("z3"), tainted("dedicated", "db", corev1.TaintEffectNoSchedule))),
			nil, []*corev1.Pod{web("w1", "a"), web("w2", "b")},
			pod("p", withLabels("app", "web"), spreadOver(zone, "web", 1, func(c *corev1.TopologySpreadConstraint) {
				c.NodeTaintsPolicy = new(corev1.NodeInclusionPolicyHonor)
			})), "a"},
		{"matchLabelKeys", nodes(node("a", inZone("z1")), node("b", inZone("z2"), cordoned)), nil,
			[]*corev1.Pod{web("w1", "a", withLabels("version", "v1")), web("w2", "a", withLabels("version", "v1"))},
			pod("p", withLabels("app", "web", "version", "v2"), spreadOver(zone, "web", 1, func(c *corev1.TopologySpreadConstraint) { c.MatchLabelKeys = []string{"version"} })), "a"},
		{"without matchLabelKeys", nodes(node("a", inZone("z1")), node("b", inZone("z2"), cordoned)), nil,
			[]*corev1.Pod{web("w1", "a", withLabels("version", "v1")), web("w2", "a", withLabels("version", "v1"))},
			pod("p", withLabels("app", "web", "version", "v2"), spreadOver(zone, "web", 1)),
			unavailable(2, "1 node(s) didn't match pod topology spread constraints, 1 node(s) were unschedulable", "1 "+noVictims+", 1 "+notHelpful)},
		{"other namespaces and terminating pods do not count", nodes(node("a", inZone("z1")), node("b", inZone("z2"), cordoned)), nil,
			[]*corev1.Pod{web("w1", "a", inNamespace("other")), web("w2", "a", terminating)},
			pod("p", withLabels("app", "web"), spreadOver(zone, "web", 1)), "a"},
		{"ScheduleAnyway does not filter", nodes(node("a", inZone("z1")), node("b", inZone("z2"), cordoned)), nil,
			[]*corev1.Pod{web("w1", "a"), web("w2", "a")},
			pod("p", withLabels("app", "web"), spreadOver(zone, "web", 1, func(c *corev1.TopologySpreadConstraint) { c.WhenUnsatisfiable = corev1.ScheduleAnyway })), "a"},
		{"spread before pod affinity", nodes(node("a")), nil, nil,
			pod("p", withLabels("app", "web"), spreadOver(zone, "web", 1), podAffinity(term(corev1.LabelHostname, "db"))),
			unavailable(1, "1 node(s) didn't match pod topology spread constraints (missing required label)", "1 "+notHelpful)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			// As the API server creates them: matchLabelKeys and
			// mismatchLabelKeys merged into the selectors.
			for _, p := range append(tt.assigned, tt.pod) {
				podstrategy.MergeLabelKeys(p)
			}
			s := offline(tt.nodes, tt.assigned...)
			for _, n := range tt.namespaces {
				if err := s.namespaces.Add(n); err != nil {
					t.Fatal(err)
				}
			}
			wantSchedule(t, s, tt.pod, tt.want)
		})
	}
}

// TestAntiAffinitySpreadsReplicas places the replicas of a workload with
// required anti-affinity on the hostname while no binding is seen back:
// the assumed replicas alone put one on each node and leave the fourth
// Pending with upstream's message.
func TestAntiAffinitySpreadsReplicas(t *testing.T) {
	s := offline(nodes(node("a"), node("b"), node("c")))
	replica := func(i int) *corev1.Pod {
		return pod(fmt.Sprintf("web-%d", i), withLabels("app", "web"), ownedBy("rs-web"), podAntiAffinity(term(corev1.LabelHostname, "web")))
	}
	used := map[string]bool{}
	for i := range 3 {
		chosen, _, msg, _ := s.schedule(replica(i))
		if chosen == "" || used[chosen] {
			t.Fatalf("replica %d on %q (%s), after %v", i, chosen, msg, used)
		}
		used[chosen] = true
	}
	_, _, msg, _ := s.schedule(replica(3))
	if want := unavailable(3, "3 node(s) didn't match pod anti-affinity rules", "3 "+noVictims); msg != want {
		t.Errorf("fourth replica: got\n%s\nwant\n%s", msg, want)
	}
	// A pod the replicas' anti-affinity selects is kept off their nodes
	// too, by their terms, not its own.
	_, _, msg, _ = s.schedule(pod("other", withLabels("app", "web")))
	if want := unavailable(3, "3 node(s) didn't satisfy existing pods anti-affinity rules", "3 "+noVictims); msg != want {
		t.Errorf("a pod the replicas repel: got\n%s\nwant\n%s", msg, want)
	}
	// A replica that goes makes room for the fourth on its node.
	s.cache.forget("uid-web-1")
	if chosen, _, msg, _ := s.schedule(replica(3)); chosen == "" {
		t.Errorf("no room after a replica went: %s", msg)
	}
}

// TestSpreadBurst places a burst over two zones with maxSkew 1, without
// the informer: the assumed pods keep the zones even.
func TestSpreadBurst(t *testing.T) {
	s := offline(nodes(node("a1", inZone("z1")), node("a2", inZone("z1")), node("b1", inZone("z2"))))
	per := map[string]int{}
	for i := range 6 {
		chosen, _, msg, _ := s.schedule(pod(fmt.Sprintf("p%d", i), withLabels("app", "web"), spreadOver(zone, "web", 1)))
		if chosen == "" {
			t.Fatalf("pod %d: %s", i, msg)
		}
		per[s.cache.nodes[chosen].node.Labels[zone]]++
		if d := per["z1"] - per["z2"]; d < -1 || d > 1 {
			t.Fatalf("after pod %d: %v per zone", i, per)
		}
	}
}

// TestAffinityWaitsForItsPod leaves a pod whose affinity no pod meets
// Pending, and places it next to the first pod that does once that one is
// on a node, without waiting for the longest backoff.
func TestAffinityWaitsForItsPod(t *testing.T) {
	cs, _ := start(t, false, node("a"), node("b"), pod("follower", podAffinity(term(corev1.LabelHostname, "db"))))
	wantEvent(t, cs, "follower", "Warning FailedScheduling: "+unavailable(2, "2 node(s) didn't match pod affinity rules", "2 "+notHelpful))
	if _, err := cs.CoreV1().Pods(ns).Create(context.Background(), pod("db", withLabels("app", "db"), onNode("b")), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	wantNode(t, cs, "follower", "b")
}

// TestNamespaceSelectorFromTheInformer reads the namespaces' labels from
// the API: an anti-affinity term selecting namespaces by label keeps the
// pod off the node of a matching pod in another namespace.
func TestNamespaceSelectorFromTheInformer(t *testing.T) {
	objects := []runtime.Object{node("a"), node("b"), namespace("other", "team", "blue"), web("w1", "a", inNamespace("other")), load("b"),
		pod("p", podAntiAffinity(term(corev1.LabelHostname, "web", func(t *corev1.PodAffinityTerm) {
			t.NamespaceSelector = &metav1.LabelSelector{MatchLabels: map[string]string{"team": "blue"}}
		})))}
	cs, _ := start(t, false, objects...)
	wantNode(t, cs, "p", "b")
}

func preferring(weight int32, t corev1.PodAffinityTerm) func(*corev1.Pod) {
	return weighted(false, weight, t)
}

func avoiding(weight int32, t corev1.PodAffinityTerm) func(*corev1.Pod) {
	return weighted(true, weight, t)
}

// weighted adds a preferred pod affinity term, or anti-affinity term if
// anti, to a pod.
func weighted(anti bool, weight int32, t corev1.PodAffinityTerm) func(*corev1.Pod) {
	return func(p *corev1.Pod) {
		if p.Spec.Affinity == nil {
			p.Spec.Affinity = &corev1.Affinity{}
		}
		a := p.Spec.Affinity
		var terms *[]corev1.WeightedPodAffinityTerm
		if anti {
			if a.PodAntiAffinity == nil {
				a.PodAntiAffinity = &corev1.PodAntiAffinity{}
			}
			terms = &a.PodAntiAffinity.PreferredDuringSchedulingIgnoredDuringExecution
		} else {
			if a.PodAffinity == nil {
				a.PodAffinity = &corev1.PodAffinity{}
			}
			terms = &a.PodAffinity.PreferredDuringSchedulingIgnoredDuringExecution
		}
		*terms = append(*terms, corev1.WeightedPodAffinityTerm{Weight: weight, PodAffinityTerm: t})
	}
}

func softly(c *corev1.TopologySpreadConstraint) { c.WhenUnsatisfiable = corev1.ScheduleAnyway }

// TestPodScoring checks the preferred pod (anti-)affinity and the soft
// spread constraints one at a time, each against least allocated, which
// alone would choose the other node.
func TestPodScoring(t *testing.T) {
	tests := []placement{
		{"preferred affinity", nodes(node("a"), node("b")), []*corev1.Pod{pod("db", onNode("b"), withLabels("app", "db")), load("b")},
			pod("p", preferring(10, term(corev1.LabelHostname, "db"))), "b"},
		{"preferred affinity over a zone", nodes(node("a", inZone("z1")), node("b", inZone("z2")), node("c", inZone("z2"))),
			[]*corev1.Pod{pod("db", onNode("b"), withLabels("app", "db")), load("c")},
			// requiredAffinity replaces the whole affinity, so it goes first.
			pod("p", requiredAffinity(expr(corev1.LabelHostname, corev1.NodeSelectorOpNotIn, "b")), preferring(10, term(zone, "db"))), "c"},
		{"preferred anti-affinity", nodes(node("a"), node("b")), []*corev1.Pod{web("w1", "a"), load("b")},
			pod("p", avoiding(10, term(corev1.LabelHostname, "web"))), "b"},
		{"the heavier term wins", nodes(node("a"), node("b")), []*corev1.Pod{web("w1", "a"), pod("db", onNode("a"), withLabels("app", "db"))},
			pod("p", avoiding(10, term(corev1.LabelHostname, "web")), preferring(20, term(corev1.LabelHostname, "db"))), "a"},
		{"a placed pod's preferred anti-affinity", nodes(node("a"), node("b")),
			[]*corev1.Pod{pod("loner", onNode("a"), avoiding(5, term(corev1.LabelHostname, "web"))), load("b")},
			pod("p", withLabels("app", "web")), "b"},
		{"a placed pod's preferred affinity", nodes(node("a"), node("b")),
			[]*corev1.Pod{pod("friend", onNode("a"), preferring(5, term(corev1.LabelHostname, "web"))), load("a")},
			pod("p", withLabels("app", "web")), "a"},
		{"a placed pod's required affinity", nodes(node("a"), node("b")),
			[]*corev1.Pod{pod("follower", onNode("a"), podAffinity(term(corev1.LabelHostname, "web"))), load("a")},
			pod("p", withLabels("app", "web")), "a"},
		{"soft spread over zones", nodes(node("a", inZone("z1")), node("b", inZone("z2"))),
			[]*corev1.Pod{web("w1", "a"), web("w2", "a"), load("b")},
			pod("p", withLabels("app", "web"), spreadOver(zone, "web", 1, softly)), "b"},
		{"soft spread over nodes", nodes(node("a"), node("b")),
			[]*corev1.Pod{web("w1", "a"), web("w2", "a"), load("b")},
			pod("p", withLabels("app", "web"), spreadOver(corev1.LabelHostname, "web", 1, softly)), "b"},
		{"soft spread scores nodes without the key last", nodes(node("a", inZone("z1")), node("c")),
			[]*corev1.Pod{web("w1", "a")},
			pod("p", withLabels("app", "web"), spreadOver(zone, "web", 1, softly)), "a"},
		{"own constraints replace spreading by owner", nodes(node("a"), node("b")),
			[]*corev1.Pod{pod("s1", onNode("a"), ownedBy("rs1")), pod("s2", onNode("a"), ownedBy("rs1")), load("b")},
			pod("p", ownedBy("rs1"), spreadOver(corev1.LabelHostname, "other", 10)), "a"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			wantChoice(t, tt.nodes, tt.assigned, tt.pod, tt.want)
		})
	}
}

// TestRetryWhenAPodIsRelabelled leaves a pod that keeps away from app=web
// Pending next to the only web pod, and places it once that pod is
// relabelled, without waiting for the longest backoff.
func TestRetryWhenAPodIsRelabelled(t *testing.T) {
	cs, _ := start(t, false, node("a"), web("w1", "a"), pod("p", podAntiAffinity(term(corev1.LabelHostname, "web"))))
	wantEvent(t, cs, "p", "Warning FailedScheduling: "+unavailable(1, "1 node(s) didn't match pod anti-affinity rules", "1 "+noVictims))
	w1 := getPod(t, cs, "w1")
	w1.Labels["app"] = "old"
	if _, err := cs.CoreV1().Pods(ns).Update(context.Background(), w1, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	wantNode(t, cs, "p", "a")
}
