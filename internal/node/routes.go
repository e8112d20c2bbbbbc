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
	"k8s.io/client-go/tools/cache"
)

// syncLoop runs a sync of the node's network with what the API holds on
// every poke (an informer's event), and retries a failed one with a
// backoff from 1s to a minute.
type syncLoop struct {
	what string
	sync func() error
	wake chan struct{}
}

func newSyncLoop(what string, sync func() error) *syncLoop {
	return &syncLoop{what: what, sync: sync, wake: make(chan struct{}, 1)}
}

func (l *syncLoop) poke() {
	select {
	case l.wake <- struct{}{}:
	default:
	}
}

func (l *syncLoop) handler() cache.ResourceEventHandler {
	poke := func(any) { l.poke() }
	return cache.ResourceEventHandlerFuncs{AddFunc: poke, UpdateFunc: func(_, n any) { poke(n) }, DeleteFunc: poke}
}

// run syncs on every poke until ctx ends.
func (l *syncLoop) run(ctx context.Context) {
	const first, most = time.Second, time.Minute
	backoff := first
	var retry <-chan time.Time
	for {
		select {
		case <-ctx.Done():
			return
		case <-l.wake:
		case <-retry:
		}
		if err := l.sync(); err != nil {
			slog.Warn("sync "+l.what, "err", err, "retry", backoff)
			retry = time.After(backoff)
			backoff = min(2*backoff, most)
			continue
		}
		retry, backoff = nil, first
	}
}

// syncRoutes brings the node's routes to the other nodes' pod CIDRs
// through their InternalIPs (pods on different nodes reach each other
// without NAT) and the pod network's masquerade (pod traffic to anything
// but the nodes' pod CIDRs and the Service ranges leaves from the node's
// address) in line with the Nodes in the cache.
func (a *Agent) syncRoutes() error {
	nodes, err := a.nodeLister.List(labels.Everything())
	if err != nil {
		return err
	}
	routes, podCIDRs := nodeNetworks(a.cfg.NodeName, nodes)
	noMasquerade := append(podCIDRs, a.cfg.ServiceRanges...)
	return errors.Join(a.net.SyncRoutes(routes), a.net.SyncMasquerade(noMasquerade))
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
