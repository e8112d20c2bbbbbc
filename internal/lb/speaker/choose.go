package speaker

import (
	"bytes"
	"crypto/sha256"
	"net/netip"
	"slices"

	nodeutil "k8s.io/component-helpers/node/util"

	"go.universe.tf/metallb/api/v1beta1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/svcnet/svcnet/internal/lb/metallb"
)

// The annotations that let Services share an IP, MetalLB's and its
// deprecated one.
const (
	annotationAllowSharedIP           = "metallb.io/allow-shared-ip"
	deprecatedAnnotationAllowSharedIP = "metallb.universe.tf/allow-shared-ip"
)

// World is what a choice is made from: the cluster as the informers hold
// it.
type World struct {
	Nodes  []*corev1.Node
	Pools  []*v1beta1.IPAddressPool
	L2Ads  []*v1beta1.L2Advertisement
	Slices []*discoveryv1.EndpointSlice // the Service's
}

// Choice is the outcome for one Service on one node.
type Choice struct {
	// IPs are the Service's load balancer IPs.
	IPs []netip.Addr
	// Node is the node that announces them, empty if none does.
	Node string
	// Reason says why this node does not announce them (MetalLB's
	// withdrawal reasons); empty when it does.
	Reason string
	// Interfaces limit where this node announces them; empty is every
	// eligible interface.
	Interfaces []string
}

// choose is MetalLB's layer 2 decision for svc on node me: the Service's
// IPs must lie in one pool, the pool be advertised by L2Advertisements
// that select the Service, and then the first of the candidate nodes
// (those the advertisements select, Ready, with the Service's ready
// endpoint for externalTrafficPolicy Local) in MetalLB's order announces.
func choose(svc *corev1.Service, w World, me string) Choice {
	var c Choice
	if svc.Spec.Type != corev1.ServiceTypeLoadBalancer {
		c.Reason = "notLoadBalancer"
		return c
	}
	// MetalLB run without --lb-class: Services of a load balancer class
	// are another implementation's.
	if svc.Spec.LoadBalancerClass != nil {
		c.Reason = "otherLoadBalancerClass"
		return c
	}
	if len(svc.Status.LoadBalancer.Ingress) == 0 {
		c.Reason = "noIPAllocated"
		return c
	}
	for _, in := range svc.Status.LoadBalancer.Ingress {
		ip, err := netip.ParseAddr(in.IP)
		if err != nil {
			c.IPs, c.Reason = nil, "invalidIP"
			return c
		}
		c.IPs = append(c.IPs, ip)
	}
	pool := poolFor(w.Pools, c.IPs)
	if pool == nil {
		c.Reason = "ipNotAllowed"
		return c
	}
	if !anyServing(w.Slices) {
		c.Reason = "notOwner"
		return c
	}
	ads := adsForService(adsForPool(pool, w.Pools, w.L2Ads), svc)
	if sharesIP(svc) && slices.ContainsFunc(ads, func(a *v1beta1.L2Advertisement) bool { return len(a.Spec.ServiceSelectors) > 0 }) {
		c.Reason = "sharedIPWithServiceSelector"
		return c
	}
	selected := make([]map[string]bool, len(ads))
	for i, ad := range ads {
		selected[i] = selectedNodes(ad, w.Nodes)
	}
	if !slices.ContainsFunc(selected, func(s map[string]bool) bool { return s[me] }) {
		c.Reason = "noMatchingAdvertisement"
		return c
	}
	var candidates []string
	for _, n := range w.Nodes {
		if usable(n) && slices.ContainsFunc(selected, func(s map[string]bool) bool { return s[n.Name] }) {
			candidates = append(candidates, n.Name)
		}
	}
	if svc.Spec.ExternalTrafficPolicy == corev1.ServiceExternalTrafficPolicyLocal {
		withEndpoint := servingNodes(w.Slices)
		candidates = slices.DeleteFunc(candidates, func(n string) bool { return !withEndpoint[n] })
	}
	if len(candidates) == 0 {
		c.Reason = "notOwner"
		return c
	}
	order(candidates, c.IPs[0].String(), preferenceScores(ads, selected, w.Nodes))
	c.Node = candidates[0]
	if c.Node != me {
		c.Reason = "notOwner"
		return c
	}
	c.Interfaces = interfacesOn(ads, selected, me)
	return c
}

// poolFor is the pool holding all of ips (by name, the first).
func poolFor(pools []*v1beta1.IPAddressPool, ips []netip.Addr) *v1beta1.IPAddressPool {
	for _, p := range pools {
		if !slices.ContainsFunc(ips, func(ip netip.Addr) bool { return !metallb.PoolContains(p, ip) }) {
			return p
		}
	}
	return nil
}

// adsForPool are the L2Advertisements of pool: those naming it or
// selecting its labels, and those naming and selecting no pool at all.
func adsForPool(pool *v1beta1.IPAddressPool, pools []*v1beta1.IPAddressPool, ads []*v1beta1.L2Advertisement) []*v1beta1.L2Advertisement {
	var out []*v1beta1.L2Advertisement
	for _, ad := range ads {
		s := ad.Spec
		if len(s.IPAddressPools) == 0 && len(s.IPAddressPoolSelectors) == 0 ||
			slices.Contains(s.IPAddressPools, pool.Name) || anySelects(s.IPAddressPoolSelectors, pool.Labels) {
			out = append(out, ad)
		}
	}
	return out
}

// adsForService are those of ads that select svc (no serviceSelectors
// selects every Service).
func adsForService(ads []*v1beta1.L2Advertisement, svc *corev1.Service) []*v1beta1.L2Advertisement {
	return slices.DeleteFunc(ads, func(ad *v1beta1.L2Advertisement) bool {
		return len(ad.Spec.ServiceSelectors) > 0 && !anySelects(ad.Spec.ServiceSelectors, svc.Labels)
	})
}

// anySelects says whether one of the selectors matches set; a selector
// that does not parse (the API server validated them) matches nothing.
func anySelects(selectors []metav1.LabelSelector, set map[string]string) bool {
	for i := range selectors {
		sel, err := metav1.LabelSelectorAsSelector(&selectors[i])
		if err == nil && sel.Matches(labels.Set(set)) {
			return true
		}
	}
	return false
}

// selectedNodes are the nodes ad's nodeSelectors select: every node
// without any.
func selectedNodes(ad *v1beta1.L2Advertisement, nodes []*corev1.Node) map[string]bool {
	out := map[string]bool{}
	for _, n := range nodes {
		if len(ad.Spec.NodeSelectors) == 0 || anySelects(ad.Spec.NodeSelectors, n.Labels) {
			out[n.Name] = true
		}
	}
	return out
}

// usable says whether a node's speaker may announce: MetalLB's speakers
// that are alive (memberlist's view; here the node's Ready condition,
// which the node lifecycle controller turns Unknown when the node stops
// reporting), whose network is available, not excluded from external
// load balancers by the node.kubernetes.io/exclude-from-external-load-balancers label.
func usable(n *corev1.Node) bool {
	if _, excluded := n.Labels[corev1.LabelNodeExcludeBalancers]; excluded {
		return false
	}
	_, ready := nodeutil.GetNodeCondition(&n.Status, corev1.NodeReady)
	_, unavailable := nodeutil.GetNodeCondition(&n.Status, corev1.NodeNetworkUnavailable)
	return ready != nil && ready.Status == corev1.ConditionTrue &&
		(unavailable == nil || unavailable.Status != corev1.ConditionTrue)
}

// canServe is MetalLB's test of an endpoint: ready (unset is ready), or
// serving while terminating.
func canServe(c discoveryv1.EndpointConditions) bool {
	return c.Ready == nil || *c.Ready || c.Serving != nil && *c.Serving
}

func anyServing(eps []*discoveryv1.EndpointSlice) bool {
	for _, s := range eps {
		for _, ep := range s.Endpoints {
			if canServe(ep.Conditions) {
				return true
			}
		}
	}
	return false
}

// servingNodes are the nodes with an endpoint that can serve.
func servingNodes(eps []*discoveryv1.EndpointSlice) map[string]bool {
	out := map[string]bool{}
	for _, s := range eps {
		for _, ep := range s.Endpoints {
			if ep.NodeName != nil && canServe(ep.Conditions) {
				out[*ep.NodeName] = true
			}
		}
	}
	return out
}

// preferenceScores sum, per node, the weights of the advertisements'
// preferredNodeSelectors that match it, among the nodes each
// advertisement selects.
func preferenceScores(ads []*v1beta1.L2Advertisement, selected []map[string]bool, nodes []*corev1.Node) map[string]int64 {
	scores := map[string]int64{}
	for i, ad := range ads {
		for _, p := range ad.Spec.PreferredNodeSelectors {
			sel, err := metav1.LabelSelectorAsSelector(&p.Preference)
			if err != nil {
				continue
			}
			for _, n := range nodes {
				if selected[i][n.Name] && sel.Matches(labels.Set(n.Labels)) {
					scores[n.Name] += int64(p.Weight)
				}
			}
		}
	}
	return scores
}

// order sorts candidate nodes as MetalLB does, so that every speaker
// agrees on the first: highest preference score, then sha256 of
// "node#ip".
func order(candidates []string, ip string, scores map[string]int64) {
	slices.SortFunc(candidates, func(a, b string) int {
		if scores[a] != scores[b] {
			if scores[a] > scores[b] {
				return -1
			}
			return 1
		}
		ha, hb := sha256.Sum256([]byte(a+"#"+ip)), sha256.Sum256([]byte(b+"#"+ip))
		return bytes.Compare(ha[:], hb[:])
	})
}

// interfacesOn are the interfaces node me announces on: the union of its
// advertisements' interfaces, or every interface (nil) when one of them
// names none.
func interfacesOn(ads []*v1beta1.L2Advertisement, selected []map[string]bool, me string) []string {
	var out []string
	for i, ad := range ads {
		if !selected[i][me] {
			continue
		}
		if len(ad.Spec.Interfaces) == 0 {
			return nil
		}
		for _, name := range ad.Spec.Interfaces {
			if !slices.Contains(out, name) {
				out = append(out, name)
			}
		}
	}
	slices.Sort(out)
	return out
}

// sharesIP says whether svc asks to share its IP.
func sharesIP(svc *corev1.Service) bool {
	_, a := svc.Annotations[annotationAllowSharedIP]
	_, b := svc.Annotations[deprecatedAnnotationAllowSharedIP]
	return a || b
}
