package addons

import (
	"context"
	"fmt"
	"net/netip"

	"go.universe.tf/metallb/api/v1beta1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"

	"github.com/svcnet/svcnet/internal/lb/metallb"
)

// DefaultPool names the IPAddressPool (and its L2Advertisement) up makes.
const DefaultPool = "default"

// managedBy labels the pool and advertisement up makes, so that a pool of
// the user's is told apart from it.
var managedBy = map[string]string{managedByLabel: FieldManager}

const managedByLabel = "app.kubernetes.io/managed-by"

// LoadBalancer is the load balancer add-on: MetalLB's namespace, and a
// pool with its L2Advertisement.
type LoadBalancer struct {
	// Addresses are the pool's spec.addresses (--lb-pool); none makes no
	// pool.
	Addresses []string
	// OnlyIfNone makes the pool only while metallb-system holds no pool
	// of the user's (the default pool of --nodes N, which a pool of one's
	// own replaces).
	OnlyIfNone bool
}

// ApplyLoadBalancer creates namespace metallb-system and, as lb says, the
// pool DefaultPool with an L2Advertisement of it. Pools of the user's are
// left alone.
func ApplyLoadBalancer(ctx context.Context, client kubernetes.Interface, dyn dynamic.Interface, lb LoadBalancer) error {
	ns := &corev1.Namespace{TypeMeta: metav1.TypeMeta{Kind: "Namespace", APIVersion: "v1"}, ObjectMeta: metav1.ObjectMeta{Name: metallb.Namespace}}
	if err := apply(ctx, client.CoreV1().Namespaces(), ns); err != nil {
		return err
	}
	if len(lb.Addresses) == 0 {
		return nil
	}
	pools := dyn.Resource(metallb.IPAddressPools).Namespace(metallb.Namespace)
	if lb.OnlyIfNone {
		own, err := pools.List(ctx, metav1.ListOptions{LabelSelector: managedByLabel + "!=" + FieldManager})
		if err != nil {
			return fmt.Errorf("list IPAddressPools: %w", err)
		}
		if len(own.Items) > 0 {
			return nil
		}
	}
	om := metav1.ObjectMeta{Name: DefaultPool, Namespace: metallb.Namespace, Labels: managedBy}
	pool := &v1beta1.IPAddressPool{TypeMeta: metav1.TypeMeta{Kind: "IPAddressPool", APIVersion: v1beta1.GroupVersion.String()},
		ObjectMeta: om, Spec: v1beta1.IPAddressPoolSpec{Addresses: lb.Addresses}}
	if err := apply(ctx, pools, pool); err != nil {
		return err
	}
	adv := &v1beta1.L2Advertisement{TypeMeta: metav1.TypeMeta{Kind: "L2Advertisement", APIVersion: v1beta1.GroupVersion.String()},
		ObjectMeta: om, Spec: v1beta1.L2AdvertisementSpec{IPAddressPools: []string{DefaultPool}}}
	return apply(ctx, dyn.Resource(metallb.L2Advertisements).Namespace(metallb.Namespace), adv)
}

// ParsePools checks --lb-pool's ranges as MetalLB reads a pool's
// addresses.
func ParsePools(ranges []string) error {
	for _, r := range ranges {
		if _, err := metallb.ParseAddresses(r); err != nil {
			return fmt.Errorf("--lb-pool: %w", err)
		}
	}
	return nil
}

// NodesPool is the default pool on the nodes' network network: the 200th
// to 250th addresses of a /24 or larger (10.250.0.200-10.250.0.250 on
// the default 10.250.0.0/24), the upper half but the last address of a
// smaller one; empty when the nodes (which count up from the network's
// second address) reach into it.
func NodesPool(network netip.Prefix, nodes int) string {
	network = network.Masked()
	size := 1 << (network.Addr().BitLen() - network.Bits())
	from, to := 200, 250
	if network.Bits() > 24 {
		from, to = size/2, size-2
	}
	if nodes+1 >= from || from > to {
		return ""
	}
	return fmt.Sprintf("%s-%s", nth(network.Addr(), from), nth(network.Addr(), to))
}

func nth(a netip.Addr, n int) netip.Addr {
	for range n {
		a = a.Next()
	}
	return a
}
