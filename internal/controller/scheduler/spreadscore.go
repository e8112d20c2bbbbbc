package scheduler

import (
	"math"

	corev1 "k8s.io/api/core/v1"
)

// softSpread is upstream's PodTopologySpread scoring of a pod's
// ScheduleAnyway constraints: a node scores by the matching pods in its
// domains, each constraint weighted by the log of its number of domains,
// so that spreading over a few zones is not drowned by spreading over
// many nodes.
type softSpread struct {
	constraints []spreadConstraint
	namespace   string
	// counts[i] are the matching pods per domain of constraints[i] that
	// some feasible node is in; nil for a hostname constraint, whose
	// domain is the node itself.
	counts  []map[string]int
	weights []float64
}

// newSoftSpread counts the existing pods (assumed ones included) for the
// candidate's ScheduleAnyway constraints; nil without any.
func newSoftSpread(c *cache, cand *candidate, nodes []feasible) *softSpread {
	if len(cand.softSpread) == 0 {
		return nil
	}
	n := len(cand.softSpread)
	ss := &softSpread{constraints: cand.softSpread, namespace: cand.pod.Namespace, counts: make([]map[string]int, n), weights: make([]float64, n)}
	scored := 0
	for i := range nodes {
		node := nodes[i].info.node
		if !hasTopologyKeys(node, ss.constraints) {
			continue
		}
		scored++
		for j := range ss.constraints {
			if key := ss.constraints[j].topologyKey; key != corev1.LabelHostname {
				if ss.counts[j] == nil {
					ss.counts[j] = map[string]int{}
				}
				ss.counts[j][node.Labels[key]] = 0
			}
		}
	}
	for i := range ss.constraints {
		size := len(ss.counts[i])
		if ss.constraints[i].topologyKey == corev1.LabelHostname {
			size = scored
		}
		ss.weights[i] = math.Log(float64(size + 2))
	}
	for _, ni := range c.nodes {
		if ni.node != nil && hasTopologyKeys(ni.node, ss.constraints) {
			ss.countNode(ni, cand)
		}
	}
	return ss
}

// countNode adds the node's matching pods to its domains that a feasible
// node is in, for the constraints it is eligible for.
func (ss *softSpread) countNode(n *nodeInfo, cand *candidate) {
	for i := range ss.constraints {
		sc := &ss.constraints[i]
		if ss.counts[i] == nil || sc.honorAffinity && !cand.matchesAffinity(n.node) || sc.honorTaints && cand.untoleratedTaint(n) {
			continue
		}
		v := n.node.Labels[sc.topologyKey]
		if _, ok := ss.counts[i][v]; ok {
			ss.counts[i][v] += countMatching(n, sc.selector, ss.namespace)
		}
	}
}

// raw is a feasible node's score before normalizing, the fewer matching
// pods the lower; ok is false for a node without every topology key,
// which scores 0.
func (ss *softSpread) raw(n *nodeInfo) (score float64, ok bool) {
	if !hasTopologyKeys(n.node, ss.constraints) {
		return 0, false
	}
	for i := range ss.constraints {
		sc := &ss.constraints[i]
		var count int
		if sc.topologyKey == corev1.LabelHostname {
			count = countMatching(n, sc.selector, ss.namespace)
		} else {
			count = ss.counts[i][n.node.Labels[sc.topologyKey]]
		}
		// maxSkew-1 waters the differences down: the larger maxSkew,
		// the more skew the score tolerates.
		score += float64(count)*ss.weights[i] + float64(sc.maxSkew-1)
	}
	return score, true
}
