package node

import (
	"context"
	"log/slog"
	"net"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
)

// routeSync keeps the node's routes to the other nodes' pod CIDRs through
// their InternalIPs, so that pods on different nodes reach each other
// without NAT.
type routeSync struct {
	agent  *Agent
	lister corelisters.NodeLister
	wake   chan struct{}
}

func (r *routeSync) handler() cache.ResourceEventHandler {
	poke := func(any) {
		select {
		case r.wake <- struct{}{}:
		default:
		}
	}
	return cache.ResourceEventHandlerFuncs{AddFunc: poke, UpdateFunc: func(_, n any) { poke(n) }, DeleteFunc: poke}
}

func (r *routeSync) run(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-r.wake:
		}
		nodes, err := r.lister.List(labels.Everything())
		if err != nil {
			continue
		}
		routes := map[string]net.IP{}
		for _, n := range nodes {
			if n.Name == r.agent.cfg.NodeName || n.Spec.PodCIDR == "" {
				continue
			}
			for _, a := range n.Status.Addresses {
				if ip := net.ParseIP(a.Address); a.Type == corev1.NodeInternalIP && ip != nil && ip.To4() != nil {
					routes[n.Spec.PodCIDR] = ip
					break
				}
			}
		}
		if err := r.agent.net.SyncRoutes(routes); err != nil {
			slog.Warn("sync routes to other nodes' pods", "err", err)
		}
	}
}
