package dns

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"os"
	"slices"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/svcnet/svcnet/internal/dns/corefile"
)

// reloadPeriod is how often the reload plugin looks at the Corefile
// (CoreDNS checks every 30 s; a ConfigMap edit shows in the pod's volume
// within the kubelet's sync period).
const reloadPeriod = 5 * time.Second

// ServeCorefile runs the cluster DNS the Corefile at path configures until
// ctx ends, as the coredns binary does with -conf. With the reload plugin,
// a change to the file restarts the server with the new configuration; a
// file that no longer parses is logged and the running server kept.
func ServeCorefile(ctx context.Context, path string) error {
	text, err := os.ReadFile(path)
	if err != nil {
		return fmt.Errorf("read Corefile: %w", err)
	}
	for {
		c, err := corefile.Parse(string(text), os.ReadFile)
		if err != nil {
			return fmt.Errorf("Corefile %s: %w", path, err)
		}
		runCtx, stop := context.WithCancel(ctx)
		done := make(chan error, 1)
		go func() { done <- runCorefile(runCtx, c) }()
		changes := make(chan []byte, 1)
		go func() { changes <- waitForChange(runCtx, path, text, c.Reload) }()
		select {
		case err := <-done: // the server ended by itself, or with ctx
			stop()
			<-changes
			return err
		case b := <-changes:
			stop()
			err := <-done
			if b == nil || ctx.Err() != nil {
				return err
			}
			slog.Info("Corefile changed: reloading", "path", path)
			text = b
		}
	}
}

// waitForChange returns the file's new content once it differs from text
// and parses (looking only when reload is set), or nil when ctx ends.
func waitForChange(ctx context.Context, path string, text []byte, reload bool) []byte {
	if !reload {
		<-ctx.Done()
		return nil
	}
	tick := time.NewTicker(reloadPeriod)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-tick.C:
		}
		b, err := os.ReadFile(path)
		if err != nil || bytes.Equal(b, text) {
			continue
		}
		if _, err := corefile.Parse(string(b), os.ReadFile); err != nil {
			slog.Error("Corefile changed but does not parse; keeping the running configuration", "path", path, "err", err)
			text = b
			continue
		}
		return b
	}
}

// runCorefile serves one configuration until ctx ends.
func runCorefile(ctx context.Context, c *corefile.Config) error {
	for _, p := range c.Ignored {
		slog.Warn("Corefile plugin not played by svcnet's cluster DNS; ignored", "plugin", p)
	}
	run := Config{
		Address: net.JoinHostPort("", fmt.Sprint(c.Port)), Upstreams: c.Forward, CacheTTL: c.CacheTTL, Hosts: c.Hosts,
		Health: c.Health, Ready: c.Ready, Metrics: c.Prometheus, Lameduck: c.Lameduck,
	}
	switch {
	case len(c.Zones) > 0:
		cfg, err := restConfig(c)
		if err != nil {
			return err
		}
		client, err := kubernetes.NewForConfig(cfg)
		if err != nil {
			return fmt.Errorf("API client: %w", err)
		}
		nameServers := kubeDNSAddresses(ctx, client)
		run.Client, run.Zone, run.TTL, run.NameServers = client, c.Zones[0], c.TTL, nameServers
		run.Upstreams = withoutLoops(c.Forward, nameServers)
	case c.Hosts == nil && len(c.Forward) == 0:
		return errors.New("Corefile: no kubernetes, hosts or forward plugin, nothing to serve")
	}
	return Run(ctx, run)
}

// withoutLoops drops the upstreams that are the cluster DNS itself (a
// node whose resolv.conf names it, given to the pods as their
// dnsPolicy Default's), which CoreDNS's loop plugin would find by its
// queries going round: forwarding there would never end.
func withoutLoops(upstreams []string, self []netip.Addr) []string {
	var out []string
	for _, u := range upstreams {
		host, _, err := net.SplitHostPort(u)
		if a, perr := netip.ParseAddr(host); err == nil && perr == nil && slices.Contains(self, a.Unmap()) {
			slog.Error("forward upstream is this cluster DNS: it would loop; not forwarding there", "upstream", u)
			continue
		}
		out = append(out, u)
	}
	return out
}

// restConfig is how the kubernetes plugin reaches the API: its kubeconfig,
// its endpoint, or the pod's service account (in-cluster).
func restConfig(c *corefile.Config) (*rest.Config, error) {
	switch {
	case c.Kubeconfig != "":
		rules := &clientcmd.ClientConfigLoadingRules{ExplicitPath: c.Kubeconfig}
		cfg, err := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, &clientcmd.ConfigOverrides{CurrentContext: c.Context}).ClientConfig()
		if err != nil {
			return nil, fmt.Errorf("kubeconfig %s: %w", c.Kubeconfig, err)
		}
		return cfg, nil
	case c.Endpoint != "":
		return &rest.Config{Host: c.Endpoint}, nil
	}
	cfg, err := rest.InClusterConfig()
	if err != nil {
		return nil, fmt.Errorf("in-cluster API access: %w", err)
	}
	return cfg, nil
}

// kubeDNSAddresses are the kube-dns Service's cluster IPs, the answer to
// ns.dns.<zone>; none when it cannot be read.
func kubeDNSAddresses(ctx context.Context, client kubernetes.Interface) []netip.Addr {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	svc, err := client.CoreV1().Services(metav1.NamespaceSystem).Get(ctx, "kube-dns", metav1.GetOptions{})
	if err != nil {
		slog.Warn("read the kube-dns Service for ns.dns answers", "err", err)
		return nil
	}
	var out []netip.Addr
	for _, ip := range svc.Spec.ClusterIPs {
		if a, err := netip.ParseAddr(ip); err == nil {
			out = append(out, a)
		}
	}
	return out
}
