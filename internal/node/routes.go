package node

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"net/netip"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
)

// routeSync keeps the node's routes to the other nodes' pod CIDRs through
// their InternalIPs, so that pods on different nodes reach each other
// without NAT, and the pod network's masquerade, which sends pod traffic
// to anything but the nodes' pod CIDRs and the Service ranges out from
// the node's address.
type routeSync struct {
	agent  *Agent
	lister corelisters.NodeLister
	wake   chan struct{}
}

func (r *routeSync) poke() {
	select {
	case r.wake <- struct{}{}:
	default:
	}
}

func (r *routeSync) handler() cache.ResourceEventHandler {
	poke := func(any) { r.poke() }
	return cache.ResourceEventHandlerFuncs{AddFunc: poke, UpdateFunc: func(_, n any) { poke(n) }, DeleteFunc: poke}
}

// run syncs on every change of the Nodes, and retries a failed sync with
// a backoff from 1s to a minute.
func (r *routeSync) run(ctx context.Context) {
	const first, most = time.Second, time.Minute
	backoff := first
	var retry <-chan time.Time
	for {
		select {
		case <-ctx.Done():
			return
		case <-r.wake:
		case <-retry:
		}
		if err := r.sync(); err != nil {
			slog.Warn("sync the pod network with the nodes", "err", err, "retry", backoff)
			retry = time.After(backoff)
			backoff = min(2*backoff, most)
			continue
		}
		retry, backoff = nil, first
	}
}

// sync brings the routes and the masquerade in line with the Nodes in the
// cache.
func (r *routeSync) sync() error {
	nodes, err := r.lister.List(labels.Everything())
	if err != nil {
		return err
	}
	routes, podCIDRs := nodeNetworks(r.agent.cfg.NodeName, nodes)
	noMasquerade := append(podCIDRs, r.agent.cfg.ServiceRanges...)
	return errors.Join(r.agent.net.SyncRoutes(routes), r.agent.net.SyncMasquerade(noMasquerade))
}

// nodeNetworks reads the Nodes: the routes to the other nodes' IPv4 pod
// CIDRs through their InternalIPs, and the pod CIDRs of every node (this
// one's too, of each family), which pods reach without NAT.
func nodeNetworks(self string, nodes []*corev1.Node) (map[string]net.IP, []netip.Prefix) {
	routes := map[string]net.IP{}
	var podCIDRs []netip.Prefix
	for _, n := range nodes {
		cidrs := n.Spec.PodCIDRs
		if len(cidrs) == 0 && n.Spec.PodCIDR != "" {
			cidrs = []string{n.Spec.PodCIDR}
		}
		for _, c := range cidrs {
			if p, err := netip.ParsePrefix(c); err == nil {
				podCIDRs = append(podCIDRs, p.Masked())
			}
		}
		if n.Name == self || n.Spec.PodCIDR == "" {
			continue
		}
		for _, a := range n.Status.Addresses {
			if ip := net.ParseIP(a.Address); a.Type == corev1.NodeInternalIP && ip != nil && ip.To4() != nil {
				routes[n.Spec.PodCIDR] = ip
				break
			}
		}
	}
	return routes, podCIDRs
}
