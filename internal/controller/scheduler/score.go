package scheduler

import (
	"math/rand/v2"

	corev1 "k8s.io/api/core/v1"
)

// maxScore is the top of every score, as upstream's MaxNodeScore. Scores
// are not rounded to integers as upstream's are, so that small requests
// on large nodes still tell the nodes apart.
const maxScore = 100.0

// The weights upstream's default profile gives its score plugins.
const (
	weightTaints   = 3 // TaintToleration: PreferNoSchedule taints
	weightAffinity = 2 // NodeAffinity: preferred terms
	weightSpread   = 2 // PodTopologySpread's default: spread a controller's pods over nodes
	weightLeast    = 1 // NodeResourcesFit: least allocated
)

// feasible is a node that passed the filters, with what scoring needs.
type feasible struct {
	name string
	info *nodeInfo
	// raw scores before normalizing over all feasible nodes
	untolerated, preferred, siblings int64
}

// pick scores the feasible nodes and returns the best one's name; ties go
// to a random one of the best.
func (c *candidate) pick(nodes []feasible, rng *rand.Rand) string {
	var maxUntolerated, maxPreferred int64
	minSiblings, maxSiblings := int64(-1), int64(0)
	for i := range nodes {
		f := &nodes[i]
		for j := range f.info.taints {
			t := &f.info.taints[j]
			if t.Effect == corev1.TaintEffectPreferNoSchedule && !c.tolerates(t) {
				f.untolerated++
			}
		}
		for _, t := range c.preferred {
			if t.matches(f.info.node) {
				f.preferred += t.weight
			}
		}
		if c.owner != "" {
			f.siblings = int64(f.info.owners[c.owner])
		}
		maxUntolerated = max(maxUntolerated, f.untolerated)
		maxPreferred = max(maxPreferred, f.preferred)
		maxSiblings = max(maxSiblings, f.siblings)
		if minSiblings < 0 || f.siblings < minSiblings {
			minSiblings = f.siblings
		}
	}
	// share scales v in [0, highest] to [0, maxScore]; all nodes score
	// the same when all raw scores are equal.
	share := func(v, highest int64) float64 {
		if highest == 0 {
			return maxScore
		}
		return float64(v) * maxScore / float64(highest)
	}
	best, bestScore, ties := "", -1.0, 0
	for i := range nodes {
		f := &nodes[i]
		score := weightLeast*c.leastAllocated(f.info) +
			weightTaints*share(maxUntolerated-f.untolerated, maxUntolerated) +
			weightAffinity*share(f.preferred, maxPreferred) +
			weightSpread*share(maxSiblings-f.siblings, maxSiblings-minSiblings)
		switch {
		case score > bestScore:
			best, bestScore, ties = f.name, score, 1
		case score == bestScore:
			// Reservoir sampling: each of the tied nodes wins with
			// equal chance.
			ties++
			if rng.IntN(ties) == 0 {
				best = f.name
			}
		}
	}
	return best
}

// leastAllocated favours the node with the most cpu and memory left after
// placing the pod, counting requests as upstream's scoring does (with
// defaults for containers that state none).
func (c *candidate) leastAllocated(n *nodeInfo) float64 {
	free := func(want, used, alloc int64) float64 {
		if alloc == 0 || want+used > alloc {
			return 0
		}
		return float64(alloc-want-used) * maxScore / float64(alloc)
	}
	return (free(c.nonZero.milliCPU, n.nonZero.milliCPU, n.allocatable.milliCPU) +
		free(c.nonZero.memory, n.nonZero.memory, n.allocatable.memory)) / 2
}
