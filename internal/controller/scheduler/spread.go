package scheduler

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/utils/ptr"
)

// Upstream's PodTopologySpread reasons. A node without the topology key
// cannot be helped by evicting pods; a domain with too many matching pods
// could be.
const (
	reasonSpread      = "node(s) didn't match pod topology spread constraints"
	reasonSpreadLabel = reasonSpread + " (missing required label)"
)

// spreadConstraint is one compiled TopologySpreadConstraint.
type spreadConstraint struct {
	maxSkew, minDomains int
	topologyKey         string
	selector            labels.Selector
	// honorAffinity counts only the domains of nodes that match the
	// pod's nodeSelector and required node affinity (nodeAffinityPolicy,
	// Honor by default); honorTaints only those of nodes whose
	// NoSchedule and NoExecute taints it tolerates (nodeTaintsPolicy,
	// Ignore by default).
	honorAffinity, honorTaints bool
}

// spreadConstraints compiles the pod's constraints with the given
// whenUnsatisfiable. Upstream's system defaults, for pods without any, are
// all ScheduleAnyway and so never filter.
func spreadConstraints(pod *corev1.Pod, action corev1.UnsatisfiableConstraintAction) []spreadConstraint {
	var out []spreadConstraint
	for i := range pod.Spec.TopologySpreadConstraints {
		tc := &pod.Spec.TopologySpreadConstraints[i]
		if tc.WhenUnsatisfiable != action {
			continue
		}
		out = append(out, spreadConstraint{
			maxSkew:       int(tc.MaxSkew),
			minDomains:    int(ptr.Deref(tc.MinDomains, 1)),
			topologyKey:   tc.TopologyKey,
			selector:      asSelector(tc.LabelSelector), // matchLabelKeys merged in by the API server
			honorAffinity: ptr.Deref(tc.NodeAffinityPolicy, corev1.NodeInclusionPolicyHonor) == corev1.NodeInclusionPolicyHonor,
			honorTaints:   ptr.Deref(tc.NodeTaintsPolicy, corev1.NodeInclusionPolicyIgnore) == corev1.NodeInclusionPolicyHonor,
		})
	}
	return out
}

// spread is upstream's PodTopologySpread filter for one attempt: per
// constraint, the matching pods in each eligible domain, counted once so
// that each node is then checked in O(constraints).
type spread struct {
	constraints []spreadConstraint
	// counts[i] are the pods matching constraints[i] per domain of its
	// key, over the domains of the nodes eligible for it.
	counts []map[string]int
	// min[i] is the fewest of counts[i], the global minimum.
	min []int
	// self[i] is 1 if the incoming pod matches constraints[i] itself.
	self []int
}

// newSpread counts the existing pods (assumed ones included) for the
// candidate's DoNotSchedule constraints; nil without any.
func newSpread(c *cache, cand *candidate) *spread {
	if len(cand.spread) == 0 {
		return nil
	}
	n := len(cand.spread)
	sp := &spread{constraints: cand.spread, counts: make([]map[string]int, n), min: make([]int, n), self: make([]int, n)}
	for i := range sp.counts {
		sp.counts[i] = map[string]int{}
		if sp.constraints[i].selector.Matches(labels.Set(cand.pod.Labels)) {
			sp.self[i] = 1
		}
	}
	for _, ni := range c.nodes {
		if ni.node != nil && hasTopologyKeys(ni.node, sp.constraints) {
			sp.countNode(ni, cand)
		}
	}
	for i, counts := range sp.counts {
		sp.min[i] = minCount(counts)
	}
	return sp
}

// hasTopologyKeys tells whether the node has every constraint's key, as a
// node must to be eligible for any of them.
func hasTopologyKeys(node *corev1.Node, constraints []spreadConstraint) bool {
	for i := range constraints {
		if _, ok := node.Labels[constraints[i].topologyKey]; !ok {
			return false
		}
	}
	return true
}

// countNode adds the node's matching pods to its domain of each constraint
// it is eligible for; its domain counts even with none, so that an empty
// domain makes the minimum 0.
func (sp *spread) countNode(n *nodeInfo, cand *candidate) {
	for i := range sp.constraints {
		sc := &sp.constraints[i]
		if sc.honorAffinity && !cand.matchesAffinity(n.node) || sc.honorTaints && cand.untoleratedTaint(n) {
			continue
		}
		sp.counts[i][n.node.Labels[sc.topologyKey]] += countMatching(n, sc.selector, cand.pod.Namespace)
	}
}

// countMatching counts the node's pods of namespace that the selector
// matches, leaving out terminating ones; an empty selector ({}) counts
// none, as upstream's.
func countMatching(n *nodeInfo, selector labels.Selector, namespace string) int {
	if selector.Empty() {
		return 0
	}
	count := 0
	for p := range n.pods {
		if p.namespace == namespace && !p.terminating && selector.Matches(p.labels) {
			count++
		}
	}
	return count
}

// minCount is the fewest pods of any domain, 0 without domains.
func minCount(counts map[string]int) int {
	minimum, first := 0, true
	for _, v := range counts {
		if first || v < minimum {
			minimum, first = v, false
		}
	}
	return minimum
}

// fit checks each constraint on the node: the node has the key, and the
// skew (the matching pods in its domain, plus the pod if it matches,
// less the global minimum) is at most maxSkew. With fewer eligible
// domains than minDomains, the global minimum is 0.
func (sp *spread) fit(node *corev1.Node) (reason string, resolvable bool) {
	for i := range sp.constraints {
		sc := &sp.constraints[i]
		v, ok := node.Labels[sc.topologyKey]
		if !ok {
			return reasonSpreadLabel, false
		}
		minimum := sp.min[i]
		if len(sp.counts[i]) < sc.minDomains {
			minimum = 0
		}
		if sp.counts[i][v]+sp.self[i]-minimum > sc.maxSkew {
			return reasonSpread, true
		}
	}
	return "", false
}
