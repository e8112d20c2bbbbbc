package scheduler

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	toolscache "k8s.io/client-go/tools/cache"
)

// hardPodAffinityWeight is what a placed pod's required affinity term
// that the incoming pod matches adds to the placed pod's domain, as
// upstream's default hardPodAffinityWeight.
const hardPodAffinityWeight = 1

// weightedPodTerm is a preferred pod (anti-)affinity term.
type weightedPodTerm struct {
	podTerm
	weight int64
}

func compileWeightedTerms(owner *corev1.Pod, terms []corev1.WeightedPodAffinityTerm) []weightedPodTerm {
	return mapTerms(terms, func(t *corev1.WeightedPodAffinityTerm) weightedPodTerm {
		return weightedPodTerm{podTerm: compilePodTerm(owner, &t.PodAffinityTerm), weight: int64(t.Weight)}
	})
}

func resolveWeighted(terms []weightedPodTerm, namespaces toolscache.Store) []weightedPodTerm {
	return mapTerms(terms, func(t *weightedPodTerm) weightedPodTerm {
		return weightedPodTerm{podTerm: t.resolved(namespaces), weight: t.weight}
	})
}

// topologyScores are upstream's InterPodAffinity PreScore: per topology
// key and value, the weights of the terms that draw the incoming pod to
// that domain less those that push it away.
type topologyScores map[string]map[string]int64

func (ts topologyScores) add(node *corev1.Node, key string, weight int64) {
	v, ok := node.Labels[key]
	if !ok {
		return
	}
	if ts[key] == nil {
		ts[key] = map[string]int64{}
	}
	ts[key][v] += weight
}

// of is a node's raw score: the sum over the domains it is in.
func (ts topologyScores) of(node *corev1.Node) int64 {
	var score int64
	for key, values := range ts {
		if v, ok := node.Labels[key]; ok {
			score += values[v]
		}
	}
	return score
}

// affinityScorer adds up topologyScores for one incoming pod.
type affinityScorer struct {
	pod      *corev1.Pod
	nsLabels labels.Set
	// affinity and antiAffinity are the incoming pod's preferred terms,
	// namespaces resolved.
	affinity, antiAffinity []weightedPodTerm
	scores                 topologyScores
}

// newTopologyScores walks every existing pod when the candidate has
// preferred terms, else only the pods whose own terms score others; nil
// when there is neither, so that other pods cost nothing.
func newTopologyScores(c *cache, cand *candidate, namespaces toolscache.Store) topologyScores {
	own := len(cand.preferredAffinity) > 0 || len(cand.preferredAntiAffinity) > 0
	if !own && len(c.withAffinity) == 0 {
		return nil
	}
	sc := &affinityScorer{
		pod:          cand.pod,
		nsLabels:     namespaceLabels(namespaces, cand.pod.Namespace),
		affinity:     resolveWeighted(cand.preferredAffinity, namespaces),
		antiAffinity: resolveWeighted(cand.preferredAntiAffinity, namespaces),
		scores:       topologyScores{},
	}
	if own {
		for _, n := range c.nodes {
			if n.node == nil {
				continue
			}
			for p := range n.pods {
				sc.visit(p, n.node)
			}
		}
		return sc.scores
	}
	for p := range c.withAffinity {
		if n := c.nodes[p.node]; n != nil && n.node != nil {
			sc.visit(p, n.node)
		}
	}
	return sc.scores
}

// visit scores the domains of an existing pod's node: by the incoming
// pod's preferred terms that the existing pod matches, and by the
// existing pod's required affinity and preferred terms that the incoming
// pod matches (anti-affinity subtracting).
func (sc *affinityScorer) visit(p *podInfo, node *corev1.Node) {
	if len(node.Labels) == 0 {
		return
	}
	// The incoming pod's terms have their namespaces resolved, so the
	// existing pod's namespace labels are not needed.
	sc.addMatching(sc.affinity, p.namespace, nil, p.labels, node, 1)
	sc.addMatching(sc.antiAffinity, p.namespace, nil, p.labels, node, -1)
	for i := range p.affinity {
		if t := &p.affinity[i]; t.matches(sc.pod.Namespace, sc.nsLabels, sc.pod.Labels) {
			sc.scores.add(node, t.topologyKey, hardPodAffinityWeight)
		}
	}
	sc.addMatching(p.preferredAffinity, sc.pod.Namespace, sc.nsLabels, sc.pod.Labels, node, 1)
	sc.addMatching(p.preferredAntiAffinity, sc.pod.Namespace, sc.nsLabels, sc.pod.Labels, node, -1)
}

// addMatching adds sign times the weight of each term that matches the
// pod to the node's domain of the term's key.
func (sc *affinityScorer) addMatching(terms []weightedPodTerm, namespace string, nsLabels, podLabels labels.Set, node *corev1.Node, sign int64) {
	for i := range terms {
		if t := &terms[i]; t.matches(namespace, nsLabels, podLabels) {
			sc.scores.add(node, t.topologyKey, sign*t.weight)
		}
	}
}
