// Package metallb reads MetalLB's configuration from the API as MetalLB's
// own Go types (go.universe.tf/metallb/api/v1beta1): the IPAddressPools
// and L2Advertisements in MetalLB's namespace, metallb-system, where
// MetalLB's controller and speakers read them (objects of those kinds in
// other namespaces are not configuration, as with MetalLB). svcnet's
// load balancer IPAM and its layer 2 announcement share it.
package metallb

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"time"

	"go.universe.tf/metallb/api/v1beta1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/dynamic/dynamicinformer"
	"k8s.io/client-go/tools/cache"

	"github.com/svcnet/svcnet/internal/informer"
)

// Namespace is where MetalLB's configuration lives.
const Namespace = "metallb-system"

// The resources of the configuration kinds.
var (
	IPAddressPools   = v1beta1.GroupVersion.WithResource("ipaddresspools")
	L2Advertisements = v1beta1.GroupVersion.WithResource("l2advertisements")
	// ConfigurationStates report whether the configuration is valid.
	ConfigurationStates = v1beta1.GroupVersion.WithResource("configurationstates")
)

// Config is the configuration as informers hold it.
type Config struct {
	factory dynamicinformer.DynamicSharedInformerFactory
	pools   cache.SharedIndexInformer
	l2      cache.SharedIndexInformer
}

// New makes the informers of the configuration in Namespace; Start runs
// them.
func New(client dynamic.Interface) (*Config, error) {
	f := dynamicinformer.NewFilteredDynamicSharedInformerFactory(client, 0, Namespace, nil)
	c := &Config{factory: f, pools: f.ForResource(IPAddressPools).Informer(), l2: f.ForResource(L2Advertisements).Informer()}
	if err := c.pools.SetTransform(informer.Typed[v1beta1.IPAddressPool]); err != nil {
		return nil, fmt.Errorf("IPAddressPool informer: %w", err)
	}
	if err := c.l2.SetTransform(informer.Typed[v1beta1.L2Advertisement]); err != nil {
		return nil, fmt.Errorf("L2Advertisement informer: %w", err)
	}
	return c, nil
}

// servedPoll is how often WaitServed asks whether MetalLB's API is served.
const servedPoll = 500 * time.Millisecond

// WaitServed returns once the API server serves the configuration's kinds
// (svcnet up installs MetalLB's definitions beside its components' start,
// and informers started earlier log failed watches), or ctx's error.
func (c *Config) WaitServed(ctx context.Context, d discovery.DiscoveryInterface) error {
	return wait.PollUntilContextCancel(ctx, servedPoll, true, func(context.Context) (bool, error) {
		rs, err := d.ServerResourcesForGroupVersion(v1beta1.GroupVersion.String())
		if err != nil {
			return false, nil //nolint:nilerr // not yet: asked again
		}
		for _, want := range []string{IPAddressPools.Resource, L2Advertisements.Resource} {
			if !slices.ContainsFunc(rs.APIResources, func(r metav1.APIResource) bool { return r.Name == want }) {
				return false, nil
			}
		}
		return true, nil
	})
}

// Start runs the informers until stop closes, Shutdown waits for them.
func (c *Config) Start(stop <-chan struct{}) { c.factory.Start(stop) }

// Shutdown waits for the informers Start ran once their stop has closed.
func (c *Config) Shutdown() { c.factory.Shutdown() }

// HasSynced says both informers hold what the API held at their start.
func (c *Config) HasSynced() bool { return c.pools.HasSynced() && c.l2.HasSynced() }

// AddEventHandler calls h on every change of either kind.
func (c *Config) AddEventHandler(h cache.ResourceEventHandler) error {
	for _, inf := range []cache.SharedIndexInformer{c.pools, c.l2} {
		if _, err := inf.AddEventHandler(h); err != nil {
			return fmt.Errorf("MetalLB configuration handler: %w", err)
		}
	}
	return nil
}

// Pools are the IPAddressPools, by name.
func (c *Config) Pools() []*v1beta1.IPAddressPool {
	return list[v1beta1.IPAddressPool](c.pools, func(p *v1beta1.IPAddressPool) string { return p.Name })
}

// L2Advertisements are the L2Advertisements, by name.
func (c *Config) L2Advertisements() []*v1beta1.L2Advertisement {
	return list[v1beta1.L2Advertisement](c.l2, func(a *v1beta1.L2Advertisement) string { return a.Name })
}

func list[T any](inf cache.SharedIndexInformer, name func(*T) string) []*T {
	out := informer.List[T](inf.GetStore())
	slices.SortFunc(out, func(a, b *T) int { return cmp.Compare(name(a), name(b)) })
	return out
}

// Pool is the IPAddressPool of that name, nil if there is none.
func (c *Config) Pool(name string) *v1beta1.IPAddressPool {
	obj, ok, err := c.pools.GetStore().GetByKey(Namespace + "/" + name)
	if err != nil || !ok {
		return nil
	}
	p, _ := obj.(*v1beta1.IPAddressPool)
	return p
}
