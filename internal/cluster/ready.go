package cluster

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"reflect"
	"strings"
	"sync"
	"time"

	"github.com/miekg/dns"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"

	"github.com/svcnet/svcnet/internal/netns"
	"github.com/svcnet/svcnet/internal/proxy"
	nodereg "github.com/svcnet/svcnet/internal/registry/node"
)

// readiness is what `svcnet up` waits for before it says the cluster is
// up: the default namespace's ServiceAccount "default" (which new pods
// run as), every node Ready, every node's proxy holding what the API holds
// (so that no Service with ready endpoints is rejected), and the cluster
// DNS answering through its Service address on every node.
type readiness struct {
	client kubernetes.Interface
	// serviceAccount is set when the serviceaccount controller runs.
	serviceAccount bool
	// controlPlane is the node that must carry the control plane's label.
	controlPlane string
	// dns is the cluster DNS address ("" without the DNS add-on); name a
	// name it must answer.
	dns, name string
	nodes     []*nodeProxy
}

// nodeProxy is one node's proxy as its syncs report it.
type nodeProxy struct {
	name, netns string

	mu      sync.Mutex
	applied map[types.NamespacedName]*proxy.Service
	// clusterIPs is set when the proxy carries cluster IPs, so that pods
	// reach DNS through its Service address.
	clusterIPs bool
}

func (p *nodeProxy) synced(s map[types.NamespacedName]*proxy.Service, clusterIPs bool) {
	p.mu.Lock()
	p.applied, p.clusterIPs = s, clusterIPs
	p.mu.Unlock()
}

// readyCheckPeriod spaces the checks (each lists every Service and
// EndpointSlice) for the first readyFastFor, readySlowPeriod after that;
// readyReportPeriod spaces the log lines that say what is still missing.
const (
	readyCheckPeriod  = 100 * time.Millisecond
	readyFastFor      = 10 * time.Second
	readySlowPeriod   = time.Second
	readyReportPeriod = 10 * time.Second
)

// wait returns once the cluster is up, or ctx's error.
func (r *readiness) wait(ctx context.Context) error {
	tick := time.NewTicker(readyCheckPeriod)
	defer tick.Stop()
	start, reported, slow := time.Now(), time.Now(), false
	for {
		missing := r.missing(ctx)
		if missing == "" {
			slog.Info("cluster up", "after", time.Since(start).Round(time.Millisecond))
			return nil
		}
		if !slow && time.Since(start) > readyFastFor {
			tick.Reset(readySlowPeriod)
			slow = true
		}
		if time.Since(reported) > readyReportPeriod {
			slog.Info("waiting for the cluster to come up", "missing", missing, "for", time.Since(start).Round(time.Second))
			reported = time.Now()
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-tick.C:
		}
	}
}

// missing says what is not up yet, "" when all is.
func (r *readiness) missing(ctx context.Context) string {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	if r.serviceAccount {
		if _, err := r.client.CoreV1().ServiceAccounts(metav1.NamespaceDefault).Get(ctx, "default", metav1.GetOptions{}); err != nil {
			return fmt.Sprintf("the default ServiceAccount: %v", err)
		}
	}
	if len(r.nodes) == 0 {
		return ""
	}
	for _, n := range r.nodes {
		node, err := r.client.CoreV1().Nodes().Get(ctx, n.name, metav1.GetOptions{})
		if err != nil {
			return fmt.Sprintf("node %s: %v", n.name, err)
		}
		if !nodereg.IsReady(node) {
			return "node " + n.name + " Ready"
		}
		if _, ok := node.Labels[controlPlaneLabel]; n.name == r.controlPlane && !ok {
			return "node " + n.name + " labelled " + controlPlaneLabel
		}
	}
	svcs, err := r.client.CoreV1().Services("").List(ctx, metav1.ListOptions{})
	if err != nil {
		return fmt.Sprintf("list Services: %v", err)
	}
	slices, err := r.client.DiscoveryV1().EndpointSlices("").List(ctx, metav1.ListOptions{})
	if err != nil {
		return fmt.Sprintf("list EndpointSlices: %v", err)
	}
	for _, n := range r.nodes {
		want := proxy.Desired(pointers(svcs.Items), pointers(slices.Items), n.name)
		n.mu.Lock()
		got := n.applied
		n.mu.Unlock()
		if !reflect.DeepEqual(got, want) {
			return "the Service proxy of node " + n.name + " applying " + differing(got, want)
		}
	}
	for _, n := range r.nodes {
		n.mu.Lock()
		clusterIPs := n.clusterIPs
		n.mu.Unlock()
		if !clusterIPs || r.dns == "" {
			continue
		}
		if err := r.resolve(ctx, n.netns); err != nil {
			return fmt.Sprintf("cluster DNS %s answering on node %s: %v", r.dns, n.name, err)
		}
	}
	return ""
}

// resolve asks the cluster DNS for r.name from the node's namespace.
func (r *readiness) resolve(ctx context.Context, nsPath string) error {
	var conn net.Conn
	err := netns.Do(nsPath, func() (err error) {
		conn, err = (&net.Dialer{}).DialContext(ctx, "udp", net.JoinHostPort(r.dns, "53"))
		return err
	})
	if err != nil {
		return err
	}
	defer conn.Close()
	c := &dns.Client{Timeout: time.Second}
	resp, _, err := c.ExchangeWithConnContext(ctx, new(dns.Msg).SetQuestion(dns.Fqdn(r.name), dns.TypeA), &dns.Conn{Conn: conn})
	if err != nil {
		return err
	}
	if resp.Rcode != dns.RcodeSuccess || len(resp.Answer) == 0 {
		return errors.New(dns.RcodeToString[resp.Rcode])
	}
	return nil
}

// differing names the Services where got and want differ.
func differing(got, want map[types.NamespacedName]*proxy.Service) string {
	var names []string
	for k, w := range want {
		if !reflect.DeepEqual(got[k], w) {
			names = append(names, k.String())
		}
	}
	for k := range got {
		if _, ok := want[k]; !ok {
			names = append(names, k.String()+" (gone)")
		}
	}
	return strings.Join(names, ", ")
}

func pointers[T any](items []T) []*T {
	out := make([]*T, len(items))
	for i := range items {
		out[i] = &items[i]
	}
	return out
}
