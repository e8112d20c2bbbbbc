package scheduler

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"

	"github.com/svcnet/svcnet/internal/podutil"
)

// hostPort is a port a pod takes on its node's addresses.
type hostPort struct {
	protocol corev1.Protocol
	port     int32
}

// podInfo is what the cache keeps of a pod on a node: what it takes there,
// and what other pods' affinity and spread constraints look at.
type podInfo struct {
	node     string
	requests resources // for fitting
	nonZero  resources // for scoring
	ports    []podutil.HostPort
	owner    types.UID // of its controller, "" without one
	// assumed pods are on their node only in the scheduler's mind: the
	// binding is under way and the informer has not seen it yet.
	assumed bool

	namespace string
	labels    labels.Set
	// terminating pods still count for pod affinity but not for topology
	// spread, as upstream's.
	terminating bool
	affinityTerms
	// claims are namespace/name of the claims the pod's volumes use.
	claims []string
}

// scoresOthers tells whether the pod's terms take part in scoring the
// pods placed after it.
func (p *podInfo) scoresOthers() bool {
	return len(p.affinity) > 0 || len(p.preferredAffinity) > 0 || len(p.preferredAntiAffinity) > 0
}

// nodeInfo is one node with the sums of the pods on it, kept up to date
// pod by pod so that fitting and scoring a pod is O(1) per node.
type nodeInfo struct {
	// node is nil once the Node is deleted while pods still name it.
	node *corev1.Node
	// taints are the node's, plus what node lifecycle would add for a node
	// that is not Ready.
	taints      []corev1.Taint
	allocatable resources
	allowedPods int64

	// pods are the pods on the node, assumed ones included, for the
	// filters that look at other pods (pod affinity, topology spread).
	pods               map[*podInfo]struct{}
	requested, nonZero resources
	ports              map[hostPort]map[string]int // ip -> pods using it
	owners             map[types.UID]int           // pods per controller
}

func (n *nodeInfo) addPod(p *podInfo) {
	if n.pods == nil {
		n.pods = map[*podInfo]struct{}{}
	}
	n.pods[p] = struct{}{}
	n.requested.add(p.requests)
	n.nonZero.add(p.nonZero)
	for _, hp := range p.ports {
		if n.ports == nil {
			n.ports = map[hostPort]map[string]int{}
		}
		key := hostPort{hp.Protocol, hp.Port}
		if n.ports[key] == nil {
			n.ports[key] = map[string]int{}
		}
		n.ports[key][hp.IP]++
	}
	if p.owner != "" {
		if n.owners == nil {
			n.owners = map[types.UID]int{}
		}
		n.owners[p.owner]++
	}
}

func (n *nodeInfo) removePod(p *podInfo) {
	delete(n.pods, p)
	n.requested.sub(p.requests)
	n.nonZero.sub(p.nonZero)
	for _, hp := range p.ports {
		key := hostPort{hp.Protocol, hp.Port}
		if n.ports[key][hp.IP]--; n.ports[key][hp.IP] == 0 {
			delete(n.ports[key], hp.IP)
			if len(n.ports[key]) == 0 {
				delete(n.ports, key)
			}
		}
	}
	if p.owner != "" {
		if n.owners[p.owner]--; n.owners[p.owner] == 0 {
			delete(n.owners, p.owner)
		}
	}
}

// cache is the scheduler's view of the nodes and what their pods take,
// assumed pods included. It is not safe for concurrent use; the scheduler
// guards it with its lock.
type cache struct {
	nodes map[string]*nodeInfo
	pods  map[types.UID]*podInfo
	// antiAffinity are the pods with required anti-affinity terms, which
	// every pod placed must be checked against (upstream keeps them per
	// node as PodsWithRequiredAntiAffinity); without any, that costs
	// nothing.
	antiAffinity map[*podInfo]struct{}
	// withAffinity are the pods whose terms score the pods placed after
	// them (upstream's PodsWithAffinity), walked for every pod placed.
	withAffinity map[*podInfo]struct{}
	// numNodes counts the nodes that exist, for "0/N nodes are available".
	numNodes int
	// claimUsers counts the placed pods using each claim (namespace/name),
	// for VolumeRestrictions.
	claimUsers map[string]int
}

func newCache() *cache {
	return &cache{nodes: map[string]*nodeInfo{}, pods: map[types.UID]*podInfo{},
		antiAffinity: map[*podInfo]struct{}{}, withAffinity: map[*podInfo]struct{}{}, claimUsers: map[string]int{}}
}

// setNode adds or updates a Node.
func (c *cache) setNode(node *corev1.Node) {
	n := c.nodes[node.Name]
	if n == nil {
		n = &nodeInfo{}
		c.nodes[node.Name] = n
	}
	if n.node == nil {
		c.numNodes++
	}
	n.node = node
	n.taints = effectiveTaints(node)
	n.allocatable, n.allowedPods = allocatable(node)
}

// deleteNode forgets a Node; its sums stay while pods still name it.
func (c *cache) deleteNode(name string) {
	n := c.nodes[name]
	if n == nil || n.node == nil {
		return
	}
	n.node = nil
	c.numNodes--
	if len(n.pods) == 0 {
		delete(c.nodes, name)
	}
}

// newPodInfo is what pod takes on node.
func newPodInfo(pod *corev1.Pod, node string, assumed bool) *podInfo {
	return &podInfo{
		node:          node,
		requests:      podRequests(pod, false),
		nonZero:       podRequests(pod, true),
		ports:         podutil.HostPorts(pod),
		owner:         controllerUID(pod),
		assumed:       assumed,
		namespace:     pod.Namespace,
		labels:        pod.Labels,
		terminating:   pod.DeletionTimestamp != nil,
		affinityTerms: compileAffinity(pod),
		claims:        podClaimKeys(pod),
	}
}

// addPod puts a pod on its node, replacing what the cache knew of it.
func (c *cache) addPod(uid types.UID, p *podInfo) {
	c.removePod(uid)
	n := c.nodes[p.node]
	if n == nil {
		n = &nodeInfo{}
		c.nodes[p.node] = n
	}
	n.addPod(p)
	c.pods[uid] = p
	if len(p.antiAffinity) > 0 {
		c.antiAffinity[p] = struct{}{}
	}
	if p.scoresOthers() {
		c.withAffinity[p] = struct{}{}
	}
	for _, k := range p.claims {
		c.claimUsers[k]++
	}
}

// removePod takes a pod off its node; it tells whether the pod was there.
func (c *cache) removePod(uid types.UID) bool {
	p := c.pods[uid]
	if p == nil {
		return false
	}
	delete(c.pods, uid)
	delete(c.antiAffinity, p)
	delete(c.withAffinity, p)
	for _, k := range p.claims {
		if c.claimUsers[k]--; c.claimUsers[k] <= 0 {
			delete(c.claimUsers, k)
		}
	}
	n := c.nodes[p.node]
	n.removePod(p)
	if n.node == nil && len(n.pods) == 0 {
		delete(c.nodes, p.node)
	}
	return true
}

// forget undoes an assumption that did not come true.
func (c *cache) forget(uid types.UID) {
	if p := c.pods[uid]; p != nil && p.assumed {
		c.removePod(uid)
	}
}

// effectiveTaints are a node's taints plus the NoSchedule taint node
// lifecycle puts on a node that is not Ready (not-ready when its Ready
// condition is False, unreachable when it is Unknown or missing), so that
// such a node is filtered, and explained, as upstream's would be.
func effectiveTaints(node *corev1.Node) []corev1.Taint {
	key := corev1.TaintNodeUnreachable
	for _, c := range node.Status.Conditions {
		if c.Type != corev1.NodeReady {
			continue
		}
		switch c.Status {
		case corev1.ConditionTrue:
			return node.Spec.Taints
		case corev1.ConditionFalse:
			key = corev1.TaintNodeNotReady
		}
	}
	for _, t := range node.Spec.Taints {
		if t.Key == key && t.Effect == corev1.TaintEffectNoSchedule {
			return node.Spec.Taints
		}
	}
	taints := make([]corev1.Taint, 0, len(node.Spec.Taints)+1)
	taints = append(taints, node.Spec.Taints...)
	return append(taints, corev1.Taint{Key: key, Effect: corev1.TaintEffectNoSchedule})
}

// controllerUID is the UID of the pod's controller, "" without one.
func controllerUID(pod *corev1.Pod) types.UID {
	if ref := metav1.GetControllerOfNoCopy(pod); ref != nil {
		return ref.UID
	}
	return ""
}
