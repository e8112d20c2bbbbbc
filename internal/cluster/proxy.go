package cluster

import (
	"context"
	"fmt"
	"log/slog"
	"net/netip"
	"sync"
	"time"

	gnft "github.com/google/nftables"
	"github.com/prometheus/client_golang/prometheus"
	vnetns "github.com/vishvananda/netns"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/svcnet/svcnet/internal/netns"
	"github.com/svcnet/svcnet/internal/proxy"
	"github.com/svcnet/svcnet/internal/proxy/nftables"
	"github.com/svcnet/svcnet/internal/proxy/userspace"
)

// Proxy modes, kube-proxy's --proxy-mode values that svcnet has.
const (
	ProxyModeNFTables  = "nftables"
	ProxyModeUserspace = "userspace"
)

// runProxy runs the node's Service proxy until ctx ends, keeping health
// up to date and handing its backend's read-back to frontends. It starts
// once the Node has its pod CIDR, which tells the node's pods from other
// sources, and its addresses. Its records carry the node's name, which
// routes them to the node's kube-proxy log.
func runProxy(ctx context.Context, o NodeOptions, cfg *rest.Config, nodeName string, serviceCIDRs []netip.Prefix, health *proxy.Health, frontends *proxyFrontends) error {
	if o.ProxyMode != ProxyModeNFTables && o.ProxyMode != ProxyModeUserspace {
		return fmt.Errorf("--proxy-mode %q: svcnet has %q and %q", o.ProxyMode, ProxyModeNFTables, ProxyModeUserspace)
	}
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return fmt.Errorf("API client: %w", err)
	}
	var cidrs []netip.Prefix
	var nodeIPs []netip.Addr
	err = wait.PollUntilContextCancel(ctx, 250*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		n, err := client.CoreV1().Nodes().Get(ctx, nodeName, metav1.GetOptions{})
		if err != nil {
			return false, nil // not registered yet
		}
		cidrs, nodeIPs = nil, nil
		for _, c := range n.Spec.PodCIDRs {
			if p, err := netip.ParsePrefix(c); err == nil {
				cidrs = append(cidrs, p.Masked())
			}
		}
		for _, a := range n.Status.Addresses {
			if ip, err := netip.ParseAddr(a.Address); err == nil && (a.Type == corev1.NodeInternalIP || a.Type == corev1.NodeExternalIP) {
				nodeIPs = append(nodeIPs, ip)
			}
		}
		return len(cidrs) > 0 && len(nodeIPs) > 0, nil
	})
	if err != nil {
		return nil // stopped before the node had a pod CIDR and addresses
	}
	ns := netns.Path(o.NetNS)
	log := slog.Default().With("node", nodeName)
	backend, err := newProxyBackend(log, o.ProxyMode, ns, nftables.Config{NetNS: ns, PodCIDRs: cidrs, NodeIPs: nodeIPs, ServiceCIDRs: serviceCIDRs, Logger: log})
	if err != nil {
		return err
	}
	if r, ok := backend.(proxy.FrontendReader); ok {
		frontends.set(r)
	}
	us, userspaceMode := backend.(*userspace.Backend)
	if userspaceMode {
		defer us.Cleanup() // its sockets and connections end with the agent
	}
	var synced func(map[types.NamespacedName]*proxy.Service)
	if o.ProxySynced != nil {
		synced = func(s map[types.NamespacedName]*proxy.Service) { o.ProxySynced(s, !userspaceMode) }
	}
	reg := prometheus.NewRegistry()
	metrics := proxy.NewMetrics(reg)
	var wg sync.WaitGroup
	defer wg.Wait()
	mode := ProxyModeNFTables
	if userspaceMode {
		mode = ProxyModeUserspace
	}
	sctx, stop := context.WithCancel(ctx)
	defer stop()
	serveProxyHTTP(sctx, &wg, log, "metrics", o.ProxyMetrics, netns.ListenAt(ns), proxyMetricsHandler(reg, mode))
	serveProxyHTTP(sctx, &wg, log, "health", o.ProxyHealthz, netns.ListenAt(ns), proxyHealthHandler(health))
	return proxy.Run(ctx, proxy.Config{
		Client:        client,
		NodeName:      nodeName,
		Backend:       backend,
		Metrics:       metrics,
		Listen:        netns.ListenAt(ns),
		CleanupOnExit: o.StopPodsOnExit,
		Synced:        synced,
		Logger:        log,
		Health:        health,
	})
}

// proxyFrontends is the node agent's way to the proxy backend's read-back
// of its data plane (/proxy/frontends), which exists once runProxy has
// made the backend, and to the proxy's last sync.
type proxyFrontends struct {
	health *proxy.Health
	mu     sync.Mutex
	r      proxy.FrontendReader
}

func (p *proxyFrontends) set(r proxy.FrontendReader) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.r = r
}

// ListFrontends reads the backend's frontends back (the Service's, if
// service names one), with the proxy's last sync.
func (p *proxyFrontends) ListFrontends(ctx context.Context, service string) (proxy.FrontendList, error) {
	p.mu.Lock()
	r := p.r
	p.mu.Unlock()
	if r == nil {
		return proxy.FrontendList{}, apierrors.NewServiceUnavailable("the node's Service proxy has not started yet")
	}
	list, err := r.Frontends(ctx, service)
	return proxy.FrontendList{Frontends: list, LastSync: p.health.LastSync()}, err
}

// newProxyBackend makes mode's backend. Mode nftables falls back to the
// userspace proxy, saying so, where the node cannot use nftables (no
// CAP_NET_ADMIN, or a kernel without nf_tables), as kube-proxy once fell
// back from iptables to userspace.
func newProxyBackend(log *slog.Logger, mode, ns string, c nftables.Config) (proxy.Backend, error) {
	if mode == ProxyModeNFTables {
		err := nftablesUsable(ns)
		if err == nil {
			b, err := nftables.New(c)
			if err != nil {
				return nil, fmt.Errorf("nftables proxy: %w", err)
			}
			return b, nil
		}
		log.Warn("nftables cannot be used on this node, falling back to the userspace proxy", "err", err)
	}
	log.Info("userspace proxy: NodePorts are served; cluster, external and load balancer IPs only where they are local addresses of the node (docs/proxy.md)")
	return userspace.New(userspace.Config{NetNS: ns, Logger: log}), nil
}

// nftablesUsable asks the kernel for the node's nftables tables, which
// needs nf_tables and CAP_NET_ADMIN in the namespace.
func nftablesUsable(ns string) error {
	var opts []gnft.ConnOption
	if ns != "" {
		h, err := vnetns.GetFromPath(ns)
		if err != nil {
			return fmt.Errorf("open network namespace %s: %w", ns, err)
		}
		defer h.Close()
		opts = append(opts, gnft.WithNetNSFd(int(h)))
	}
	c, err := gnft.New(opts...)
	if err != nil {
		return err
	}
	_, err = c.ListTablesOfFamily(gnft.TableFamilyIPv4)
	return err
}

// CleanupProxy removes everything the proxy installed in the node's
// network namespace (svcnet node --cleanup).
func CleanupProxy(name string) error {
	return nftables.Cleanup(netns.Path(name))
}
