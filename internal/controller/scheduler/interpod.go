package scheduler

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/sets"
	toolscache "k8s.io/client-go/tools/cache"
)

// Upstream's InterPodAffinity reasons. A node without a pod the incoming
// pod must be near cannot be helped by evicting pods; one with a pod it
// must keep away from (or that must keep away from it) could be.
const (
	reasonPodAffinity          = "node(s) didn't match pod affinity rules"
	reasonPodAntiAffinity      = "node(s) didn't match pod anti-affinity rules"
	reasonExistingAntiAffinity = "node(s) didn't satisfy existing pods anti-affinity rules"
)

// podTerm is one compiled PodAffinityTerm: which pods it selects, and the
// node label whose value makes a topology domain.
type podTerm struct {
	selector labels.Selector
	// namespaces are the namespaces the term names, or its pod's own when
	// it names none and has no namespaceSelector.
	namespaces sets.Set[string]
	// nsSelector selects more namespaces by their labels; nil without one.
	nsSelector  labels.Selector
	topologyKey string
}

// topologyPair is one topology domain: a node label and its value.
type topologyPair struct{ key, value string }

// affinityTerms are a pod's compiled pod affinity and anti-affinity
// terms, nil where it has none. Required affinity and the preferred terms
// draw the pods they match to the pod's domains, or push them away, in
// scoring; required anti-affinity keeps the pods it matches out of them.
type affinityTerms struct {
	affinity, antiAffinity                   []podTerm
	preferredAffinity, preferredAntiAffinity []weightedPodTerm
}

// compileAffinity compiles pod's pod affinity and anti-affinity terms.
func compileAffinity(pod *corev1.Pod) affinityTerms {
	var t affinityTerms
	a := pod.Spec.Affinity
	if a == nil {
		return t
	}
	if pa := a.PodAffinity; pa != nil {
		t.affinity = compilePodTerms(pod, pa.RequiredDuringSchedulingIgnoredDuringExecution)
		t.preferredAffinity = compileWeightedTerms(pod, pa.PreferredDuringSchedulingIgnoredDuringExecution)
	}
	if pa := a.PodAntiAffinity; pa != nil {
		t.antiAffinity = compilePodTerms(pod, pa.RequiredDuringSchedulingIgnoredDuringExecution)
		t.preferredAntiAffinity = compileWeightedTerms(pod, pa.PreferredDuringSchedulingIgnoredDuringExecution)
	}
	return t
}

// mapTerms applies f to each of terms; nil without any, so that pods
// without terms cost nothing further.
func mapTerms[T, U any](terms []T, f func(*T) U) []U {
	if len(terms) == 0 {
		return nil
	}
	out := make([]U, len(terms))
	for i := range terms {
		out[i] = f(&terms[i])
	}
	return out
}

// compilePodTerms compiles the affinity terms of owner.
func compilePodTerms(owner *corev1.Pod, terms []corev1.PodAffinityTerm) []podTerm {
	return mapTerms(terms, func(t *corev1.PodAffinityTerm) podTerm { return compilePodTerm(owner, t) })
}

func compilePodTerm(owner *corev1.Pod, t *corev1.PodAffinityTerm) podTerm {
	// The API server merged matchLabelKeys and mismatchLabelKeys into the
	// labelSelector when the pod was created, as upstream's does.
	term := podTerm{selector: asSelector(t.LabelSelector), topologyKey: t.TopologyKey}
	if len(t.Namespaces) == 0 && t.NamespaceSelector == nil {
		term.namespaces = sets.New(owner.Namespace)
	} else {
		term.namespaces = sets.New(t.Namespaces...)
	}
	if t.NamespaceSelector != nil {
		term.nsSelector = asSelector(t.NamespaceSelector)
	}
	return term
}

// asSelector converts a label selector: nil selects nothing, {} selects
// everything. One that does not parse (validation rejects those) selects
// nothing.
func asSelector(ls *metav1.LabelSelector) labels.Selector {
	sel, err := metav1.LabelSelectorAsSelector(ls)
	if err != nil {
		return labels.Nothing()
	}
	return sel
}

// matches tells whether the term selects a pod of namespace (whose
// labels are nsLabels) with podLabels.
func (t *podTerm) matches(namespace string, nsLabels, podLabels labels.Set) bool {
	if !t.namespaces.Has(namespace) && (t.nsSelector == nil || !t.nsSelector.Matches(nsLabels)) {
		return false
	}
	return t.selector.Matches(podLabels)
}

// resolved is the term with the namespaces its namespaceSelector selects
// now added to those it names, as upstream resolves the incoming pod's
// terms once per attempt. An empty namespaceSelector ({}) stays: it
// selects every namespace, even one created later.
func (t podTerm) resolved(namespaces toolscache.Store) podTerm {
	if t.nsSelector == nil || t.nsSelector.Empty() {
		return t
	}
	names := t.namespaces.Clone()
	for _, obj := range namespaces.List() {
		if ns, ok := obj.(*corev1.Namespace); ok && t.nsSelector.Matches(labels.Set(ns.Labels)) {
			names.Insert(ns.Name)
		}
	}
	t.namespaces, t.nsSelector = names, nil
	return t
}

// namespaceLabels are the labels of a namespace; none when it is not
// known, as upstream assumes.
func namespaceLabels(namespaces toolscache.Store, name string) labels.Set {
	obj, ok, err := namespaces.GetByKey(name)
	if err != nil || !ok {
		return nil
	}
	if ns, isNS := obj.(*corev1.Namespace); isNS {
		return ns.Labels
	}
	return nil
}

// interPod is upstream's InterPodAffinity filter for one attempt: the
// existing pods (assumed ones included) counted once per topology domain,
// so that each node is then checked in O(terms).
type interPod struct {
	// affinity and antiAffinity are the incoming pod's required terms,
	// namespaces resolved.
	affinity, antiAffinity []podTerm
	// affinityCounts are, per domain of each affinity term's key, the
	// existing pods that match all the affinity terms.
	affinityCounts map[topologyPair]int
	// antiAffinityCounts are, per domain, the existing pods that match an
	// anti-affinity term with that domain's key.
	antiAffinityCounts map[topologyPair]int
	// existingCounts are, per domain, the existing pods' anti-affinity
	// terms that match the incoming pod.
	existingCounts map[topologyPair]int
	// selfMatch tells whether the incoming pod matches all its own
	// affinity terms: then it may be the first of its group.
	selfMatch bool
}

// newInterPod counts the existing pods for the candidate; nil when
// neither it nor any existing pod has required (anti-)affinity terms.
func newInterPod(c *cache, cand *candidate, namespaces toolscache.Store) *interPod {
	existing := existingAntiAffinity(c, cand.pod, namespaces)
	if len(existing) == 0 && len(cand.affinity) == 0 && len(cand.antiAffinity) == 0 {
		return nil
	}
	ip := &interPod{
		affinity:           resolveAll(cand.affinity, namespaces),
		antiAffinity:       resolveAll(cand.antiAffinity, namespaces),
		affinityCounts:     map[topologyPair]int{},
		antiAffinityCounts: map[topologyPair]int{},
		existingCounts:     existing,
	}
	ip.selfMatch = matchesAll(ip.affinity, cand.pod.Namespace, cand.pod.Labels)
	if len(ip.affinity) > 0 || len(ip.antiAffinity) > 0 {
		ip.count(c)
	}
	return ip
}

func resolveAll(terms []podTerm, namespaces toolscache.Store) []podTerm {
	return mapTerms(terms, func(t *podTerm) podTerm { return t.resolved(namespaces) })
}

// existingAntiAffinity counts, per domain, the required anti-affinity
// terms of existing pods that match the incoming pod.
func existingAntiAffinity(c *cache, pod *corev1.Pod, namespaces toolscache.Store) map[topologyPair]int {
	if len(c.antiAffinity) == 0 {
		return nil
	}
	nsLabels := namespaceLabels(namespaces, pod.Namespace)
	counts := map[topologyPair]int{}
	for p := range c.antiAffinity {
		n := c.nodes[p.node]
		if n == nil || n.node == nil {
			continue
		}
		for i := range p.antiAffinity {
			t := &p.antiAffinity[i]
			if v, ok := n.node.Labels[t.topologyKey]; ok && t.matches(pod.Namespace, nsLabels, pod.Labels) {
				counts[topologyPair{t.topologyKey, v}]++
			}
		}
	}
	return counts
}

// count walks every existing pod for the incoming pod's terms.
func (ip *interPod) count(c *cache) {
	for _, n := range c.nodes {
		if n.node == nil {
			continue
		}
		for p := range n.pods {
			if matchesAll(ip.affinity, p.namespace, p.labels) {
				addDomains(ip.affinityCounts, n.node, ip.affinity)
			}
			for i := range ip.antiAffinity {
				t := &ip.antiAffinity[i]
				if v, ok := n.node.Labels[t.topologyKey]; ok && t.matches(p.namespace, nil, p.labels) {
					ip.antiAffinityCounts[topologyPair{t.topologyKey, v}]++
				}
			}
		}
	}
}

// matchesAll tells whether a pod matches every term; never without terms.
// The terms' namespaceSelectors are resolved, so no namespace labels are
// needed.
func matchesAll(terms []podTerm, namespace string, podLabels labels.Set) bool {
	if len(terms) == 0 {
		return false
	}
	for i := range terms {
		if !terms[i].matches(namespace, nil, podLabels) {
			return false
		}
	}
	return true
}

// addDomains counts a pod once in the node's domain of each term's key.
func addDomains(counts map[topologyPair]int, node *corev1.Node, terms []podTerm) {
	for i := range terms {
		if v, ok := node.Labels[terms[i].topologyKey]; ok {
			counts[topologyPair{terms[i].topologyKey, v}]++
		}
	}
}

// fit checks the node in upstream's order: the pod's affinity, its
// anti-affinity, then the existing pods' anti-affinity.
func (ip *interPod) fit(node *corev1.Node) (reason string, resolvable bool) {
	if !ip.affinityFits(node) {
		return reasonPodAffinity, false
	}
	if len(ip.antiAffinityCounts) > 0 {
		for i := range ip.antiAffinity {
			key := ip.antiAffinity[i].topologyKey
			if v, ok := node.Labels[key]; ok && ip.antiAffinityCounts[topologyPair{key, v}] > 0 {
				return reasonPodAntiAffinity, true
			}
		}
	}
	if len(ip.existingCounts) > 0 {
		for k, v := range node.Labels {
			if ip.existingCounts[topologyPair{k, v}] > 0 {
				return reasonExistingAntiAffinity, true
			}
		}
	}
	return "", false
}

// affinityFits: the node has every term's topology key, and a matching
// pod in each of those domains; or no pod anywhere matches and the pod
// matches its own terms, so that the first pod of a group that wants to
// be together is not left Pending forever.
func (ip *interPod) affinityFits(node *corev1.Node) bool {
	podsExist := true
	for i := range ip.affinity {
		key := ip.affinity[i].topologyKey
		v, ok := node.Labels[key]
		if !ok {
			return false
		}
		if ip.affinityCounts[topologyPair{key, v}] <= 0 {
			podsExist = false
		}
	}
	return podsExist || (len(ip.affinityCounts) == 0 && ip.selfMatch)
}
