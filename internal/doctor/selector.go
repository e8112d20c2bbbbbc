package doctor

import (
	"cmp"
	"fmt"
	"maps"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
)

// listPage is the page size of the one list that may be long, the
// Service names of a namespace.
const listPage = 500

// serviceNotFound reports a missing Service, with the Services of a near
// name in its namespace and of the same name in other namespaces.
func (d *diagnosis) serviceNotFound() error {
	ns, name := d.report.Namespace, d.report.Name
	type near struct {
		name string
		dist int
	}
	var nears []near
	opts := metav1.ListOptions{Limit: listPage}
	for {
		list, err := d.client.CoreV1().Services(ns).List(d.ctx, opts)
		if err != nil {
			return fmt.Errorf("list services in namespace %s: %w", ns, err)
		}
		for _, s := range list.Items {
			if dist, ok := nearName(name, s.Name); ok {
				nears = append(nears, near{s.Name, dist})
			}
		}
		if list.Continue == "" {
			break
		}
		opts.Continue = list.Continue
	}
	slices.SortFunc(nears, func(a, b near) int { return cmp.Or(cmp.Compare(a.dist, b.dist), cmp.Compare(a.name, b.name)) })
	elsewhere, err := d.client.CoreV1().Services(metav1.NamespaceAll).List(d.ctx, metav1.ListOptions{
		FieldSelector: fields.OneTermEqualSelector("metadata.name", name).String(),
	})
	if err != nil {
		return fmt.Errorf("list services named %s in all namespaces: %w", name, err)
	}
	var others []string
	for _, s := range elsewhere.Items {
		if s.Name == name && s.Namespace != ns {
			others = append(others, s.Namespace)
		}
	}
	slices.Sort(others)

	sentence := fmt.Sprintf("Service %q does not exist in namespace %q.", name, ns)
	var evidence []Evidence
	if len(nears) > 0 {
		names := make([]string, len(nears))
		for i, n := range nears {
			names[i] = n.name
		}
		sentence += fmt.Sprintf(" Did you mean %q?", nears[0].name)
		evidence = append(evidence, ev("similar names in namespace "+ns, capped(names)))
	}
	if len(others) > 0 {
		sentence += fmt.Sprintf(" A Service named %q exists in %s %s: give that namespace (-n %s).", name, namespaceWord(len(others)), nameList(others), others[0])
		evidence = append(evidence, ev("namespaces with a service named "+name, capped(others)))
	}
	if len(nears) == 0 && len(others) == 0 {
		sentence += fmt.Sprintf(" No Service there has a similar name and no other namespace has one named %q: check the name with `kubectl get services -A`.", name)
	}
	d.add(SeverityError, ServiceNotFound, sentence, evidence...)
	return nil
}

// nearName says whether candidate is a likely misspelling of name (or the
// reverse): a small edit distance, or one containing the other.
func nearName(name, candidate string) (int, bool) {
	if candidate == name {
		return 0, false
	}
	dist := editDistance(name, candidate)
	limit := 1
	if len(name) > 4 {
		limit = 2
	}
	contains := min(len(name), len(candidate)) >= 3 && (strings.Contains(candidate, name) || strings.Contains(name, candidate))
	return dist, dist <= limit || contains
}

// editDistance is the optimal string alignment distance of a and b:
// insertions, deletions, substitutions and transpositions of adjacent
// bytes (ngnix → nginx is 1).
func editDistance(a, b string) int {
	prev2 := make([]int, len(b)+1)
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
			if i > 1 && j > 1 && a[i-1] == b[j-2] && a[i-2] == b[j-1] {
				cur[j] = min(cur[j], prev2[j-2]+1)
			}
		}
		prev2, prev, cur = prev, cur, prev2
	}
	return prev[len(b)]
}

// noSelector reports a Service without selector: its endpoints are
// whatever EndpointSlices name it.
func (d *diagnosis) noSelector() {
	svc := d.svc
	total, ready := 0, 0
	var evidence []Evidence
	for _, s := range d.slices {
		n, r := len(s.Endpoints), 0
		for _, e := range s.Endpoints {
			if endpointReady(e) {
				r++
			}
		}
		total, ready = total+n, ready+r
		evidence = append(evidence, ev("endpointslice "+s.Name, fmt.Sprintf("%d endpoints, %d ready, managed by %s", n, r, cmp.Or(s.Labels[discoveryv1.LabelManagedBy], "(no label)"))))
	}
	sentence := fmt.Sprintf("The Service has no selector, so its endpoints are managed by hand: EndpointSlices labelled %s=%s (or an Endpoints object named %s, which is mirrored into one).",
		discoveryv1.LabelServiceName, svc.Name, svc.Name)
	switch {
	case len(d.slices) == 0:
		sentence += " There is none, so connections to the Service are refused until you create one."
	case ready == 0:
		sentence += fmt.Sprintf(" %s %s no ready endpoint, so connections to the Service are refused.", plural(len(d.slices), "EndpointSlice", "EndpointSlices"), hasHave(len(d.slices)))
	default:
		sentence += fmt.Sprintf(" %s %s %d ready of %d endpoints.", plural(len(d.slices), "EndpointSlice", "EndpointSlices"), hasHave(len(d.slices)), ready, total)
	}
	d.add(SeverityInfo, NoSelector, sentence, evidence...)
}

// namespaceWord agrees "namespace" with a count.
func namespaceWord(n int) string {
	if n == 1 {
		return "namespace"
	}
	return "namespaces"
}

// hasHave agrees "has" with a count.
func hasHave(n int) string {
	if n == 1 {
		return "has"
	}
	return "have"
}

// nearMiss is a selector that pods of the namespace would match, differing
// from the Service's by one key or one value.
type nearMiss struct {
	selector string
	// has says what the pods have instead, e.g. "app=nginx".
	has  string
	cost int
	pods []*corev1.Pod
}

// podsElsewhere lists the pods that the Service's selector matches in
// every namespace (a page of them).
func (d *diagnosis) podsElsewhere() (*corev1.PodList, error) {
	selector := labels.Set(d.svc.Spec.Selector).String()
	list, err := d.client.CoreV1().Pods(metav1.NamespaceAll).List(d.ctx, metav1.ListOptions{LabelSelector: selector, Limit: listPage})
	if err != nil {
		return nil, fmt.Errorf("list pods with labels %s in all namespaces: %w", selector, err)
	}
	return list, nil
}

// selectorMatchesNoPods reports a selector that matches no pod of the
// namespace, with the near misses and the matching pods of other
// namespaces (elsewhere, podsElsewhere's).
func (d *diagnosis) selectorMatchesNoPods(elsewhere *corev1.PodList) {
	svc := d.svc
	selector := labels.Set(svc.Spec.Selector).String()
	byNS := map[string][]string{}
	match := labels.SelectorFromSet(svc.Spec.Selector)
	for _, p := range elsewhere.Items {
		if p.Namespace != svc.Namespace && match.Matches(labels.Set(p.Labels)) {
			byNS[p.Namespace] = append(byNS[p.Namespace], p.Name)
		}
	}
	namespaces := slices.Sorted(maps.Keys(byNS))
	misses := nearMisses(svc.Spec.Selector, d.pods)

	sentence := fmt.Sprintf("The selector %s matches no pod in namespace %s, so the Service has no endpoints and connections to it are refused.", selector, svc.Namespace)
	evidence := []Evidence{ev("selector", selector), ev("pods in namespace "+svc.Namespace, fmt.Sprint(len(d.pods)))}
	if len(misses) > 0 {
		best := misses[0]
		names := podNames(best.pods)
		sentence += fmt.Sprintf(" Did you mean %s? %s %s %s: correct the Service's selector, or the pods' labels.",
			best.selector, podsSubject(names), hasHave(len(names)), best.has)
		for _, m := range misses {
			for _, p := range m.pods {
				if len(evidence) >= maxEvidence+2 {
					break
				}
				evidence = append(evidence, ev("pod "+p.Name+" (would match "+m.selector+")", labels.Set(p.Labels).String()))
			}
		}
	}
	if len(namespaces) > 0 {
		sentence += fmt.Sprintf(" Pods that match it run in %s %s, but a Service selects pods of its own namespace only: create the Service there, or the pods here.", namespaceWord(len(namespaces)), nameList(namespaces))
		for _, ns := range namespaces {
			evidence = append(evidence, ev("matching pods in namespace "+ns, capped(byNS[ns])))
		}
	}
	if len(misses) == 0 && len(namespaces) == 0 {
		if len(d.pods) == 0 {
			sentence += fmt.Sprintf(" Namespace %s has no pod at all: create the workload, or check the namespace.", svc.Namespace)
		} else {
			sentence += fmt.Sprintf(" No pod has labels that differ from it by one key or value: compare it with `kubectl get pods -n %s --show-labels`.", svc.Namespace)
		}
	}
	d.add(SeverityError, SelectorMatchesNoPods, sentence, evidence...)
}

// nearMisses finds, for the pods whose labels differ from selector by
// exactly one key or one value, the selectors they would match, the
// likeliest (smallest edit) first. A different value counts only when it
// is a plausible typo (edits at most half its length); a different key
// when the value is the same; a missing key when the selector keeps
// another.
func nearMisses(selector map[string]string, pods []*corev1.Pod) []*nearMiss {
	byAlt := map[string]*nearMiss{}
	add := func(alt map[string]string, has string, cost int, p *corev1.Pod) {
		key := labels.Set(alt).String()
		m := byAlt[key]
		if m == nil {
			m = &nearMiss{selector: key, has: has, cost: cost}
			byAlt[key] = m
		}
		m.pods = append(m.pods, p)
	}
	for _, p := range pods {
		var off []string
		for k, v := range selector {
			if got, ok := p.Labels[k]; !ok || got != v {
				off = append(off, k)
			}
		}
		if len(off) != 1 {
			continue
		}
		k := off[0]
		v := selector[k]
		alt := maps.Clone(selector)
		if got, ok := p.Labels[k]; ok {
			if cost := editDistance(v, got); 2*cost <= max(len(v), len(got)) {
				alt[k] = got
				add(alt, k+"="+got, cost, p)
			}
			continue
		}
		delete(alt, k)
		found := false
		for pk, pv := range p.Labels {
			if _, inSelector := selector[pk]; pv == v && !inSelector {
				withKey := maps.Clone(alt)
				withKey[pk] = pv
				add(withKey, pk+"="+pv, editDistance(k, pk), p)
				found = true
			}
		}
		if !found && len(alt) > 0 {
			add(alt, "no label "+k+"="+v, len(k)+len(v)+1, p)
		}
	}
	misses := slices.Collect(maps.Values(byAlt))
	slices.SortFunc(misses, func(a, b *nearMiss) int {
		return cmp.Or(cmp.Compare(a.cost, b.cost), cmp.Compare(len(b.pods), len(a.pods)), cmp.Compare(a.selector, b.selector))
	})
	return misses
}

// podNames are the pods' names.
func podNames(pods []*corev1.Pod) []string {
	names := make([]string, len(pods))
	for i, p := range pods {
		names[i] = p.Name
	}
	return names
}

// podsSubject is "Pod a" or "Pods a, b and c".
func podsSubject(names []string) string {
	if len(names) == 1 {
		return "Pod " + names[0]
	}
	return "Pods " + nameList(names)
}
