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
	weightSpread   = 2 // PodTopologySpread: ScheduleAnyway constraints, or by default spread a controller's pods over nodes
	weightInterPod = 2 // InterPodAffinity: preferred pod (anti-)affinity, its own and the placed pods'
	weightLeast    = 1 // NodeResourcesFit: least allocated
)

// feasible is a node that passed the filters, with what scoring needs.
type feasible struct {
	name string
	info *nodeInfo
	// raw scores before normalizing over all feasible nodes
	untolerated, preferred, siblings int64
}

// podRaw are a feasible node's raw scores from other pods: by pod
// (anti-)affinity and by soft spread constraints. Kept apart from
// feasible, so that pods without such scores cost nothing more.
type podRaw struct {
	affinity float64
	spread   float64
	// spreadScored is false for a node that softSpread leaves out.
	spreadScored bool
}

// bounds are the least and greatest of some raw scores.
type bounds struct {
	lo, hi float64
	seen   bool
}

func (b *bounds) add(v float64) {
	if !b.seen {
		b.lo, b.hi, b.seen = v, v, true
		return
	}
	b.lo, b.hi = min(b.lo, v), max(b.hi, v)
}

// ascending scales v to [0, maxScore], the highest raw score best, as
// upstream's InterPodAffinity normalizes; all nodes score 0 when all raw
// scores are equal.
func (b *bounds) ascending(v float64) float64 {
	if b.hi == b.lo {
		return 0
	}
	return maxScore * (v - b.lo) / (b.hi - b.lo)
}

// pick scores the feasible nodes and returns the best one's name; ties go
// to a random one of the best.
func (c *candidate) pick(nodes []feasible, rng *rand.Rand) string {
	var maxUntolerated, maxPreferred int64
	minSiblings, maxSiblings := int64(-1), int64(0)
	var affinity, spread bounds
	var raws []podRaw
	if c.affinityScores != nil || c.spreadScores != nil {
		raws = make([]podRaw, len(nodes))
	}
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
		if raws != nil {
			raws[i] = c.podRaw(f.info, &affinity, &spread)
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
		spreadScore := share(maxSiblings-f.siblings, maxSiblings-minSiblings)
		if len(c.pod.Spec.TopologySpreadConstraints) > 0 {
			// Upstream's default constraints apply only to pods
			// without any of their own.
			spreadScore = c.spreadScore(raws, i, &spread)
		}
		score := weightLeast*c.leastAllocated(f.info) +
			weightTaints*share(maxUntolerated-f.untolerated, maxUntolerated) +
			weightAffinity*share(f.preferred, maxPreferred) +
			weightSpread*spreadScore +
			weightInterPod*c.interPodScore(raws, i, &affinity)
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

// podRaw works out a node's raw scores from other pods and widens the
// bounds by them.
func (c *candidate) podRaw(n *nodeInfo, affinity, spread *bounds) podRaw {
	var r podRaw
	if c.affinityScores != nil {
		r.affinity = float64(c.affinityScores.of(n.node))
		affinity.add(r.affinity)
	}
	if c.spreadScores != nil {
		if r.spread, r.spreadScored = c.spreadScores.raw(n); r.spreadScored {
			spread.add(r.spread)
		}
	}
	return r
}

// interPodScore is InterPodAffinity's normalized score of the i-th node.
func (c *candidate) interPodScore(raws []podRaw, i int, b *bounds) float64 {
	if c.affinityScores == nil {
		return 0
	}
	return b.ascending(raws[i].affinity)
}

// spreadScore is PodTopologySpread's normalized score of the i-th node
// for a pod with spread constraints: none without ScheduleAnyway ones,
// none for a node without every topology key, else the fewer matching
// pods the better, as upstream's maxScore*(max+min-raw)/max.
func (c *candidate) spreadScore(raws []podRaw, i int, b *bounds) float64 {
	switch {
	case c.spreadScores == nil || !raws[i].spreadScored:
		return 0
	case b.hi == 0:
		return maxScore
	}
	return maxScore * (b.hi + b.lo - raws[i].spread) / b.hi
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
