package speaker

import (
	"bytes"
	"crypto/sha256"
	"maps"
	"net/netip"
	"slices"
	"testing"

	"go.universe.tf/metallb/api/v1beta1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/svcnet/svcnet/internal/lb/layer2"
)

func node(name string, ready bool, labels map[string]string, extra ...corev1.NodeCondition) *corev1.Node {
	status := corev1.ConditionFalse
	if ready {
		status = corev1.ConditionTrue
	}
	l := map[string]string{corev1.LabelHostname: name}
	for k, v := range labels {
		l[k] = v
	}
	return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: l},
		Status: corev1.NodeStatus{Conditions: append([]corev1.NodeCondition{{Type: corev1.NodeReady, Status: status}}, extra...)}}
}

func lbService(policy corev1.ServiceExternalTrafficPolicy, ips ...string) *corev1.Service {
	svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "web", Labels: map[string]string{"tier": "front"}},
		Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeLoadBalancer, ExternalTrafficPolicy: policy}}
	for _, ip := range ips {
		svc.Status.LoadBalancer.Ingress = append(svc.Status.LoadBalancer.Ingress, corev1.LoadBalancerIngress{IP: ip})
	}
	return svc
}

// endpoints is an EndpointSlice with one endpoint on each of the nodes,
// ready or not.
func endpoints(nodes map[string]bool) []*discoveryv1.EndpointSlice {
	s := &discoveryv1.EndpointSlice{}
	for _, n := range slices.Sorted(maps.Keys(nodes)) {
		s.Endpoints = append(s.Endpoints, discoveryv1.Endpoint{NodeName: ptr.To(n),
			Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(nodes[n]), Serving: ptr.To(nodes[n])}})
	}
	return []*discoveryv1.EndpointSlice{s}
}

var pool = &v1beta1.IPAddressPool{ObjectMeta: metav1.ObjectMeta{Name: "homelab", Labels: map[string]string{"lan": "home"}},
	Spec: v1beta1.IPAddressPoolSpec{Addresses: []string{"10.0.0.200-10.0.0.215", "fd00::/120"}}}

func l2(spec v1beta1.L2AdvertisementSpec) *v1beta1.L2Advertisement {
	return &v1beta1.L2Advertisement{ObjectMeta: metav1.ObjectMeta{Name: "l2"}, Spec: spec}
}

// first is MetalLB's hash order's first of nodes for ip, worked out here
// on its own.
func first(ip string, nodes ...string) string {
	return slices.MinFunc(nodes, func(a, b string) int {
		ha, hb := sha256.Sum256([]byte(a+"#"+ip)), sha256.Sum256([]byte(b+"#"+ip))
		return bytes.Compare(ha[:], hb[:])
	})
}

func TestChoose(t *testing.T) {
	const ip = "10.0.0.200"
	ab := []*corev1.Node{node("a", true, nil), node("b", true, nil)}
	both := endpoints(map[string]bool{"a": true, "b": true})
	winner, loser := first(ip, "a", "b"), "b"
	if winner == "b" {
		loser = "a"
	}
	ready := func(names ...string) []*corev1.Node {
		var out []*corev1.Node
		for _, n := range []string{"a", "b"} {
			out = append(out, node(n, slices.Contains(names, n), nil))
		}
		return out
	}
	for _, tc := range []struct {
		name   string
		svc    *corev1.Service
		w      World
		node   string // the node that announces; "" none
		reason string // why winner does not (when node is not winner)
		ifaces []string
	}{
		{name: "cluster: first by hash", svc: lbService(corev1.ServiceExternalTrafficPolicyCluster, ip),
			w: World{Nodes: ab, L2Ads: []*v1beta1.L2Advertisement{l2(v1beta1.L2AdvertisementSpec{})}, Slices: both}, node: winner},
		{name: "first NotReady: the other", svc: lbService(corev1.ServiceExternalTrafficPolicyCluster, ip),
			w: World{Nodes: ready(loser), L2Ads: []*v1beta1.L2Advertisement{l2(v1beta1.L2AdvertisementSpec{})}, Slices: both}, node: loser},
		{name: "no node Ready", svc: lbService(corev1.ServiceExternalTrafficPolicyCluster, ip),
			w: World{Nodes: ready(), L2Ads: []*v1beta1.L2Advertisement{l2(v1beta1.L2AdvertisementSpec{})}, Slices: both}, reason: "notOwner"},
		{name: "first excluded from load balancers", svc: lbService(corev1.ServiceExternalTrafficPolicyCluster, ip),
			w: World{Nodes: []*corev1.Node{node(winner, true, map[string]string{corev1.LabelNodeExcludeBalancers: ""}), node(loser, true, nil)},
				L2Ads: []*v1beta1.L2Advertisement{l2(v1beta1.L2AdvertisementSpec{})}, Slices: both}, node: loser},
		{name: "first's network unavailable", svc: lbService(corev1.ServiceExternalTrafficPolicyCluster, ip),
			w: World{Nodes: []*corev1.Node{node(winner, true, nil, corev1.NodeCondition{Type: corev1.NodeNetworkUnavailable, Status: corev1.ConditionTrue}), node(loser, true, nil)},
				L2Ads: []*v1beta1.L2Advertisement{l2(v1beta1.L2AdvertisementSpec{})}, Slices: both}, node: loser},
		{name: "local: only the node with a ready endpoint", svc: lbService(corev1.ServiceExternalTrafficPolicyLocal, ip),
			w: World{Nodes: ab, L2Ads: []*v1beta1.L2Advertisement{l2(v1beta1.L2AdvertisementSpec{})}, Slices: endpoints(map[string]bool{winner: false, loser: true})}, node: loser},
		{name: "local: no ready endpoint anywhere", svc: lbService(corev1.ServiceExternalTrafficPolicyLocal, ip),
			w: World{Nodes: ab, L2Ads: []*v1beta1.L2Advertisement{l2(v1beta1.L2AdvertisementSpec{})}, Slices: endpoints(map[string]bool{winner: false})}, reason: "notOwner"},
		{name: "cluster: no endpoint is no announcement", svc: lbService(corev1.ServiceExternalTrafficPolicyCluster, ip),
			w: World{Nodes: ab, L2Ads: []*v1beta1.L2Advertisement{l2(v1beta1.L2AdvertisementSpec{})}}, reason: "notOwner"},
		{name: "nodeSelectors leave the first out", svc: lbService(corev1.ServiceExternalTrafficPolicyCluster, ip),
			w: World{Nodes: ab, L2Ads: []*v1beta1.L2Advertisement{l2(v1beta1.L2AdvertisementSpec{
				NodeSelectors: []metav1.LabelSelector{{MatchLabels: map[string]string{corev1.LabelHostname: loser}}}})}, Slices: both},
			node: loser, reason: "noMatchingAdvertisement"},
		{name: "preferredNodeSelectors win over the hash", svc: lbService(corev1.ServiceExternalTrafficPolicyCluster, ip),
			w: World{Nodes: ab, L2Ads: []*v1beta1.L2Advertisement{l2(v1beta1.L2AdvertisementSpec{PreferredNodeSelectors: []v1beta1.PreferredNodeSelector{
				{Weight: 10, Preference: metav1.LabelSelector{MatchLabels: map[string]string{corev1.LabelHostname: loser}}}}})}, Slices: both}, node: loser},
		{name: "pool named", svc: lbService(corev1.ServiceExternalTrafficPolicyCluster, ip),
			w: World{Nodes: ab, L2Ads: []*v1beta1.L2Advertisement{l2(v1beta1.L2AdvertisementSpec{IPAddressPools: []string{"homelab"}})}, Slices: both}, node: winner},
		{name: "pool selected", svc: lbService(corev1.ServiceExternalTrafficPolicyCluster, ip),
			w: World{Nodes: ab, L2Ads: []*v1beta1.L2Advertisement{l2(v1beta1.L2AdvertisementSpec{
				IPAddressPoolSelectors: []metav1.LabelSelector{{MatchLabels: map[string]string{"lan": "home"}}}})}, Slices: both}, node: winner},
		{name: "another pool's advertisement", svc: lbService(corev1.ServiceExternalTrafficPolicyCluster, ip),
			w: World{Nodes: ab, L2Ads: []*v1beta1.L2Advertisement{l2(v1beta1.L2AdvertisementSpec{IPAddressPools: []string{"office"},
				IPAddressPoolSelectors: []metav1.LabelSelector{{MatchLabels: map[string]string{"lan": "office"}}}})}, Slices: both}, reason: "noMatchingAdvertisement"},
		{name: "no L2Advertisement", svc: lbService(corev1.ServiceExternalTrafficPolicyCluster, ip),
			w: World{Nodes: ab, Slices: both}, reason: "noMatchingAdvertisement"},
		{name: "serviceSelectors match", svc: lbService(corev1.ServiceExternalTrafficPolicyCluster, ip),
			w: World{Nodes: ab, L2Ads: []*v1beta1.L2Advertisement{l2(v1beta1.L2AdvertisementSpec{
				ServiceSelectors: []metav1.LabelSelector{{MatchLabels: map[string]string{"tier": "back"}}, {MatchLabels: map[string]string{"tier": "front"}}}})}, Slices: both}, node: winner},
		{name: "serviceSelectors do not match", svc: lbService(corev1.ServiceExternalTrafficPolicyCluster, ip),
			w: World{Nodes: ab, L2Ads: []*v1beta1.L2Advertisement{l2(v1beta1.L2AdvertisementSpec{
				ServiceSelectors: []metav1.LabelSelector{{MatchLabels: map[string]string{"tier": "back"}}}})}, Slices: both}, reason: "noMatchingAdvertisement"},
		{name: "interfaces: the union of the node's advertisements", svc: lbService(corev1.ServiceExternalTrafficPolicyCluster, ip),
			w: World{Nodes: ab, L2Ads: []*v1beta1.L2Advertisement{l2(v1beta1.L2AdvertisementSpec{Interfaces: []string{"eth1", "eth0"}}),
				l2(v1beta1.L2AdvertisementSpec{Interfaces: []string{"eth2"}}),
				l2(v1beta1.L2AdvertisementSpec{Interfaces: []string{"eth9"}, NodeSelectors: []metav1.LabelSelector{{MatchLabels: map[string]string{"none": "x"}}}})},
				Slices: both}, node: winner, ifaces: []string{"eth0", "eth1", "eth2"}},
		{name: "interfaces: all when one advertisement names none", svc: lbService(corev1.ServiceExternalTrafficPolicyCluster, ip),
			w: World{Nodes: ab, L2Ads: []*v1beta1.L2Advertisement{l2(v1beta1.L2AdvertisementSpec{Interfaces: []string{"eth1"}}), l2(v1beta1.L2AdvertisementSpec{})},
				Slices: both}, node: winner},
		{name: "dual-stack in the pool", svc: lbService(corev1.ServiceExternalTrafficPolicyCluster, ip, "fd00::10"),
			w: World{Nodes: ab, L2Ads: []*v1beta1.L2Advertisement{l2(v1beta1.L2AdvertisementSpec{})}, Slices: both}, node: winner},
		{name: "an IP outside every pool", svc: lbService(corev1.ServiceExternalTrafficPolicyCluster, ip, "10.0.1.1"),
			w: World{Nodes: ab, L2Ads: []*v1beta1.L2Advertisement{l2(v1beta1.L2AdvertisementSpec{})}, Slices: both}, reason: "ipNotAllowed"},
		{name: "no IP yet", svc: lbService(corev1.ServiceExternalTrafficPolicyCluster),
			w: World{Nodes: ab, L2Ads: []*v1beta1.L2Advertisement{l2(v1beta1.L2AdvertisementSpec{})}, Slices: both}, reason: "noIPAllocated"},
		{name: "another load balancer class", svc: func() *corev1.Service {
			svc := lbService(corev1.ServiceExternalTrafficPolicyCluster, ip)
			svc.Spec.LoadBalancerClass = ptr.To("example.com/lb")
			return svc
		}(), w: World{Nodes: ab, L2Ads: []*v1beta1.L2Advertisement{l2(v1beta1.L2AdvertisementSpec{})}, Slices: both}, reason: "otherLoadBalancerClass"},
		{name: "not a LoadBalancer", svc: func() *corev1.Service {
			svc := lbService(corev1.ServiceExternalTrafficPolicyCluster, ip)
			svc.Spec.Type = corev1.ServiceTypeNodePort
			return svc
		}(), w: World{Nodes: ab, L2Ads: []*v1beta1.L2Advertisement{l2(v1beta1.L2AdvertisementSpec{})}, Slices: both}, reason: "notLoadBalancer"},
		{name: "invalid IP", svc: lbService(corev1.ServiceExternalTrafficPolicyCluster, "10.0.0.300"),
			w: World{Nodes: ab, L2Ads: []*v1beta1.L2Advertisement{l2(v1beta1.L2AdvertisementSpec{})}, Slices: both}, reason: "invalidIP"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.w.Pools = []*v1beta1.IPAddressPool{pool}
			announcers := 0
			for _, me := range []string{"a", "b"} {
				c := choose(tc.svc, tc.w, me)
				if c.Reason == "" {
					announcers++
					if me != tc.node {
						t.Errorf("%s announces, want %q", me, tc.node)
					}
					if !slices.Equal(c.Interfaces, tc.ifaces) {
						t.Errorf("interfaces %v, want %v", c.Interfaces, tc.ifaces)
					}
				} else if me == tc.node {
					t.Errorf("%s does not announce: %s", me, c.Reason)
				} else if want := tc.reason; want != "" && (me == winner || tc.node == "") && c.Reason != want {
					t.Errorf("%s: reason %q, want %q", me, c.Reason, want)
				}
			}
			if want := min(1, len(tc.node)); announcers != want {
				t.Errorf("%d nodes announce, want %d", announcers, want)
			}
		})
	}
}

func TestChooseSharedIPWithServiceSelectors(t *testing.T) {
	svc := lbService(corev1.ServiceExternalTrafficPolicyCluster, "10.0.0.200")
	svc.Annotations = map[string]string{"metallb.io/allow-shared-ip": "key"}
	w := World{Nodes: []*corev1.Node{node("a", true, nil)}, Pools: []*v1beta1.IPAddressPool{pool},
		L2Ads:  []*v1beta1.L2Advertisement{l2(v1beta1.L2AdvertisementSpec{ServiceSelectors: []metav1.LabelSelector{{MatchLabels: map[string]string{"tier": "front"}}}})},
		Slices: endpoints(map[string]bool{"a": true})}
	if c := choose(svc, w, "a"); c.Reason != "sharedIPWithServiceSelector" {
		t.Errorf("reason %q, want sharedIPWithServiceSelector", c.Reason)
	}
	w.L2Ads = []*v1beta1.L2Advertisement{l2(v1beta1.L2AdvertisementSpec{})}
	if c := choose(svc, w, "a"); c.Reason != "" {
		t.Errorf("shared IP without serviceSelectors: %q, want announced", c.Reason)
	}
}

func TestOrderIsMetalLBs(t *testing.T) {
	// Every speaker sorts the same candidates alike, whatever their
	// order, and the first is the smallest sha256("node#ip").
	for _, ip := range []string{"10.0.0.200", "10.0.0.201", "fd00::1"} {
		nodes := []string{"n1", "n2", "n3", "n4", "n5"}
		want := first(ip, nodes...)
		for range 5 {
			c := slices.Clone(nodes)
			order(c, ip, nil)
			if c[0] != want {
				t.Errorf("%s: first %s, want %s", ip, c[0], want)
			}
			nodes = append(nodes[1:], nodes[0])
		}
	}
}

func TestMerge(t *testing.T) {
	a := lbAd("10.0.0.200", "eth1")
	got := merge([]layer2Ad{a, lbAd("10.0.0.200", "eth0"), lbAd("10.0.0.201"), lbAd("10.0.0.201", "eth0"), lbAd("fd00::1", "eth2")})
	want := []layer2Ad{lbAd("10.0.0.200", "eth0", "eth1"), lbAd("10.0.0.201"), lbAd("fd00::1", "eth2")}
	if len(got) != len(want) {
		t.Fatalf("merge: %v, want %v", got, want)
	}
	for i := range want {
		if got[i].IP != want[i].IP || !slices.Equal(got[i].Interfaces, want[i].Interfaces) {
			t.Errorf("merge[%d]: %v, want %v", i, got[i], want[i])
		}
	}
}

type layer2Ad = layer2.Advertisement

func lbAd(ip string, interfaces ...string) layer2Ad {
	return layer2Ad{IP: netip.MustParseAddr(ip), Interfaces: interfaces}
}
