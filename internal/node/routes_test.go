package node

import (
	"net"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestNodeNetworks(t *testing.T) {
	node := func(name string, cidrs []string, ips ...string) *corev1.Node {
		n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: corev1.NodeSpec{PodCIDRs: cidrs}}
		if len(cidrs) > 0 {
			n.Spec.PodCIDR = cidrs[0]
		}
		for _, ip := range ips {
			n.Status.Addresses = append(n.Status.Addresses, corev1.NodeAddress{Type: corev1.NodeInternalIP, Address: ip})
		}
		return n
	}
	old := node("old", nil, "172.31.253.4")
	old.Spec.PodCIDR = "10.244.4.0/24" // set before podCIDRs existed
	routes, podCIDRs := nodeNetworks("self", []*corev1.Node{
		node("self", []string{"10.244.0.0/24"}, "172.31.253.1"),
		node("dual", []string{"10.244.1.0/24", "fd00:10:244:1::/64"}, "fd00::2", "172.31.253.2"),
		node("v6-only-ip", []string{"10.244.2.0/24"}, "fd00::3"),
		node("new", nil, "172.31.253.5"), // no pod CIDR yet
		old,
	})
	wantRoutes := map[string]net.IP{"10.244.1.0/24": net.ParseIP("172.31.253.2"), "10.244.4.0/24": net.ParseIP("172.31.253.4")}
	if diff := cmp.Diff(wantRoutes, routes); diff != "" {
		t.Errorf("routes (-want +got):\n%s", diff)
	}
	// Every node's pod CIDRs, this one's too: pods reach them without NAT,
	// also where there is no route (a node without an IPv4 InternalIP).
	var got []string
	for _, p := range podCIDRs {
		got = append(got, p.String())
	}
	want := []string{"10.244.0.0/24", "10.244.1.0/24", "fd00:10:244:1::/64", "10.244.2.0/24", "10.244.4.0/24"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("pod CIDRs (-want +got):\n%s", diff)
	}
}
