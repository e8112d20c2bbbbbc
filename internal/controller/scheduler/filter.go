package scheduler

import (
	"fmt"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/selection"
	"k8s.io/apimachinery/pkg/types"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"

	"github.com/svcnet/svcnet/internal/podutil"
)

// Upstream's filter reasons, as `kubectl describe pod` shows them.
const (
	reasonUnschedulable = "node(s) were unschedulable"
	reasonTaint         = "node(s) had untolerated taint(s)"
	reasonAffinity      = "node(s) didn't match Pod's node affinity/selector"
	reasonPorts         = "node(s) didn't have free ports for the requested pod ports"
	reasonTooManyPods   = "Too many pods"

	// What preemption says of a node where evicting pods would not help,
	// and of one where it might but no pod may be evicted (svcnet does
	// not preempt: every running pod counts as too important to evict).
	preemptionNotHelpful = "Preemption is not helpful for scheduling"
	preemptionNoVictims  = "No preemption victims found for incoming pod"

	// errNoNodes is the message when the cluster has no nodes at all.
	errNoNodes = "no nodes available to schedule pods"
)

// candidate is a pod being placed, with what filtering and scoring ask of
// it worked out once rather than once per node.
type candidate struct {
	pod               *corev1.Pod
	requests, nonZero resources
	ports             []podutil.HostPort
	owner             types.UID
	// selector is the pod's nodeSelector, nil without one.
	selector labels.Selector
	// required are the required node affinity terms, ORed; nil without
	// required node affinity.
	required  []nodeTerm
	preferred []weightedTerm
	// affinityTerms are the pod (anti-)affinity terms: the required ones
	// filter, the preferred ones score.
	affinityTerms
	// spread are the DoNotSchedule topology spread constraints; nil
	// without any.
	spread []spreadConstraint
	// interPod and topology are what those need of the other pods,
	// counted once per attempt by prepare; nil when nothing needs it.
	interPod *interPod
	topology *spread

	// softSpread are the ScheduleAnyway spread constraints, for scoring;
	// nil without any.
	softSpread []spreadConstraint
	// volumes are the pod's claims as VolumeBinding and
	// VolumeRestrictions see them; nil without claims.
	volumes *volumeState
	// binder is the VolumeBinding plugin, nil where no claims are read.
	binder *volumeBinding
	// affinityScores and spreadScores are what scoring needs of the
	// other pods, counted by prescore; nil when nothing needs it.
	affinityScores topologyScores
	spreadScores   *softSpread
}

func newCandidate(pod *corev1.Pod) *candidate {
	c := &candidate{
		pod:      pod,
		requests: podRequests(pod, false),
		nonZero:  podRequests(pod, true),
		ports:    podutil.HostPorts(pod),
		owner:    controllerUID(pod),

		affinityTerms: compileAffinity(pod),
		spread:        spreadConstraints(pod, corev1.DoNotSchedule),
		softSpread:    spreadConstraints(pod, corev1.ScheduleAnyway),
	}
	if len(pod.Spec.NodeSelector) > 0 {
		c.selector = labels.SelectorFromSet(pod.Spec.NodeSelector)
	}
	if a := pod.Spec.Affinity; a != nil && a.NodeAffinity != nil {
		if req := a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution; req != nil {
			c.required = make([]nodeTerm, 0, len(req.NodeSelectorTerms))
			for _, t := range req.NodeSelectorTerms {
				c.required = append(c.required, compileTerm(t))
			}
		}
		for _, p := range a.NodeAffinity.PreferredDuringSchedulingIgnoredDuringExecution {
			if p.Weight != 0 {
				c.preferred = append(c.preferred, weightedTerm{nodeTerm: compileTerm(p.Preference), weight: int64(p.Weight)})
			}
		}
	}
	return c
}

// prepare counts what the pod (anti-)affinity and topology spread
// filters need of the pods in the cache, only when the pod has such terms
// or some existing pod has required anti-affinity: other pods cost
// nothing.
func (c *candidate) prepare(ca *cache, namespaces toolscache.Store) {
	c.interPod = newInterPod(ca, c, namespaces)
	c.topology = newSpread(ca, c)
}

// prescore counts what scoring the feasible nodes needs of the pods in
// the cache, again only for a pod with preferred terms or soft spread
// constraints, or when some existing pod has terms that score others.
func (c *candidate) prescore(ca *cache, namespaces toolscache.Store, nodes []feasible) {
	c.affinityScores = newTopologyScores(ca, c, namespaces)
	c.spreadScores = newSoftSpread(ca, c, nodes)
}

// info is what the pod takes once assumed onto node.
func (c *candidate) info(node string) *podInfo {
	return &podInfo{
		node: node, requests: c.requests, nonZero: c.nonZero, ports: c.ports, owner: c.owner, assumed: true,
		namespace: c.pod.Namespace, labels: c.pod.Labels, affinityTerms: c.affinityTerms,
		claims: podClaimKeys(c.pod),
	}
}

// nodeTerm is one compiled NodeSelectorTerm; a term that is empty or
// does not parse matches no node, as upstream's.
type nodeTerm struct {
	labels, fields labels.Selector
	never          bool
}

type weightedTerm struct {
	nodeTerm
	weight int64
}

var nodeSelectorOps = map[corev1.NodeSelectorOperator]selection.Operator{
	corev1.NodeSelectorOpIn:           selection.In,
	corev1.NodeSelectorOpNotIn:        selection.NotIn,
	corev1.NodeSelectorOpExists:       selection.Exists,
	corev1.NodeSelectorOpDoesNotExist: selection.DoesNotExist,
	corev1.NodeSelectorOpGt:           selection.GreaterThan,
	corev1.NodeSelectorOpLt:           selection.LessThan,
}

func compileTerm(t corev1.NodeSelectorTerm) nodeTerm {
	if len(t.MatchExpressions) == 0 && len(t.MatchFields) == 0 {
		return nodeTerm{never: true}
	}
	var term nodeTerm
	var err error
	if term.labels, err = requirements(t.MatchExpressions, false); err != nil {
		return nodeTerm{never: true}
	}
	if term.fields, err = requirements(t.MatchFields, true); err != nil {
		return nodeTerm{never: true}
	}
	return term
}

// requirements compiles node selector requirements; fields allows only
// metadata.name with In and NotIn, the one node field upstream matches.
func requirements(reqs []corev1.NodeSelectorRequirement, fields bool) (labels.Selector, error) {
	if len(reqs) == 0 {
		return nil, nil
	}
	sel := labels.NewSelector()
	for _, r := range reqs {
		op, ok := nodeSelectorOps[r.Operator]
		if fields && (r.Key != "metadata.name" || (op != selection.In && op != selection.NotIn)) {
			ok = false
		}
		if !ok {
			return nil, fmt.Errorf("unsupported node selector requirement %s %s", r.Key, r.Operator)
		}
		req, err := labels.NewRequirement(r.Key, op, r.Values)
		if err != nil {
			return nil, err
		}
		sel = sel.Add(*req)
	}
	return sel, nil
}

func (t nodeTerm) matches(node *corev1.Node) bool {
	if t.never {
		return false
	}
	if t.labels != nil && !t.labels.Matches(labels.Set(node.Labels)) {
		return false
	}
	return t.fields == nil || t.fields.Matches(labels.Set{"metadata.name": node.Name})
}

// matchesAffinity applies the nodeSelector and the required node affinity.
func (c *candidate) matchesAffinity(node *corev1.Node) bool {
	if c.selector != nil && !c.selector.Matches(labels.Set(node.Labels)) {
		return false
	}
	if c.required == nil {
		return true
	}
	for _, t := range c.required {
		if t.matches(node) {
			return true
		}
	}
	return false
}

// tolerates tells whether the pod tolerates taint.
func (c *candidate) tolerates(taint *corev1.Taint) bool {
	for i := range c.pod.Spec.Tolerations {
		if c.pod.Spec.Tolerations[i].ToleratesTaint(klog.Background(), taint, true) {
			return true
		}
	}
	return false
}

var unschedulableTaint = corev1.Taint{Key: corev1.TaintNodeUnschedulable, Effect: corev1.TaintEffectNoSchedule}

// untoleratedTaint tells whether the node has a NoSchedule or NoExecute
// taint the pod does not tolerate.
func (c *candidate) untoleratedTaint(n *nodeInfo) bool {
	for i := range n.taints {
		t := &n.taints[i]
		if (t.Effect == corev1.TaintEffectNoSchedule || t.Effect == corev1.TaintEffectNoExecute) && !c.tolerates(t) {
			return true
		}
	}
	return false
}

// fit runs upstream's filters in upstream's order (NodeUnschedulable,
// TaintToleration, NodeAffinity, NodePorts, NodeResourcesFit,
// VolumeRestrictions, VolumeBinding, PodTopologySpread, InterPodAffinity) and returns the first one's
// reasons, none when the node fits. resolvable tells whether evicting
// pods from the node could make room, which is what preemption's part of
// the message reports.
func (c *candidate) fit(n *nodeInfo) (reasons []string, resolvable bool) {
	node := n.node
	if node.Spec.Unschedulable && !c.tolerates(&unschedulableTaint) {
		return []string{reasonUnschedulable}, false
	}
	if c.untoleratedTaint(n) {
		return []string{reasonTaint}, false
	}
	if !c.matchesAffinity(node) {
		return []string{reasonAffinity}, false
	}
	if c.portsConflict(n) {
		return []string{reasonPorts}, true
	}
	if reasons, resolvable = c.fitResources(n); len(reasons) > 0 {
		return reasons, resolvable
	}
	if c.volumes != nil {
		if reason, resolvable := c.volumes.fitVolumeRestrictions(); reason != "" {
			return []string{reason}, resolvable
		}
		if reasons := c.binder.filter(c.volumes, node); len(reasons) > 0 {
			return reasons, false
		}
	}
	if c.topology != nil {
		if reason, resolvable := c.topology.fit(node); reason != "" {
			return []string{reason}, resolvable
		}
	}
	if c.interPod != nil {
		if reason, resolvable := c.interPod.fit(node); reason != "" {
			return []string{reason}, resolvable
		}
	}
	return nil, false
}

// portsConflict tells whether a host port of the pod is taken on the
// node: the same protocol and port on the same address, or on all
// addresses on either side.
func (c *candidate) portsConflict(n *nodeInfo) bool {
	for _, hp := range c.ports {
		used := n.ports[hostPort{hp.Protocol, hp.Port}]
		if len(used) == 0 {
			continue
		}
		if hp.IP == podutil.AllAddresses || used[podutil.AllAddresses] > 0 || used[hp.IP] > 0 {
			return true
		}
	}
	return false
}

// fitResources is NodeResourcesFit: the pod's requests against what the
// node's pods, assumed ones included, leave of its allocatable. A request
// larger than the whole node cannot be helped by preemption.
func (c *candidate) fitResources(n *nodeInfo) (reasons []string, resolvable bool) {
	resolvable = true
	insufficient := func(name string, want, used, alloc int64) {
		if want > 0 && want > alloc-used {
			reasons = append(reasons, "Insufficient "+name)
			if want > alloc {
				resolvable = false
			}
		}
	}
	if int64(len(n.pods))+1 > n.allowedPods {
		reasons = append(reasons, reasonTooManyPods)
	}
	insufficient(string(corev1.ResourceCPU), c.requests.milliCPU, n.requested.milliCPU, n.allocatable.milliCPU)
	insufficient(string(corev1.ResourceMemory), c.requests.memory, n.requested.memory, n.allocatable.memory)
	for _, name := range c.requests.scalarNames() {
		insufficient(string(name), c.requests.scalar[name], n.requested.scalar[name], n.allocatable.scalar[name])
	}
	return reasons, resolvable
}

// diagnosis counts why nodes did not fit, for upstream's message.
type diagnosis struct {
	nodes      int
	filter     map[string]int
	preemption map[string]int
	// preFilter is the message of a PreFilter plugin that rejected the
	// pod before any node was looked at.
	preFilter string
}

func newDiagnosis(nodes int) *diagnosis {
	return &diagnosis{nodes: nodes, filter: map[string]int{}, preemption: map[string]int{}}
}

func (d *diagnosis) add(reasons []string, resolvable bool) {
	for _, r := range reasons {
		d.filter[r]++
	}
	if resolvable {
		d.preemption[preemptionNoVictims]++
	} else {
		d.preemption[preemptionNotHelpful]++
	}
}

// rejectAll records a PreFilter's UnschedulableAndUnresolvable verdict,
// which is every node's.
func (d *diagnosis) rejectAll(msg string) {
	d.preFilter = msg
	d.preemption[preemptionNotHelpful] = d.nodes
}

// message is upstream's FitError text: the count of nodes, each reason
// with the number of nodes that gave it (sorted as strings) or the
// PreFilter's message, then what preemption found, e.g.
//
//	0/3 nodes are available: 1 Insufficient cpu, 2 node(s) had untolerated taint(s). preemption: 0/3 nodes are available: 1 No preemption victims found for incoming pod, 2 Preemption is not helpful for scheduling.
//	0/3 nodes are available: pod has unbound immediate PersistentVolumeClaims. preemption: 0/3 nodes are available: 3 Preemption is not helpful for scheduling.
func (d *diagnosis) message(pod *corev1.Pod) string {
	reasons := d.preFilter
	if reasons == "" {
		reasons = histogram(d.filter)
	}
	msg := fmt.Sprintf("0/%d nodes are available: %s.", d.nodes, reasons)
	if p := pod.Spec.PreemptionPolicy; p != nil && *p == corev1.PreemptNever {
		return msg + " preemption: not eligible due to preemptionPolicy=Never."
	}
	return msg + fmt.Sprintf(" preemption: 0/%d nodes are available: %s.", d.nodes, histogram(d.preemption))
}

func histogram(counts map[string]int) string {
	parts := make([]string, 0, len(counts))
	for reason, n := range counts {
		parts = append(parts, fmt.Sprintf("%d %s", n, reason))
	}
	sort.Strings(parts)
	return strings.Join(parts, ", ")
}
