// Package metricsserver is svcnet's metrics-server: every resolution it
// scrapes each node agent's /metrics/resource (the kubelet's resource
// metrics), keeps the last two samples of every node and container, and
// answers metrics.k8s.io's NodeMetrics and PodMetrics with the CPU rate
// between them (window and timestamp as metrics-server's) and the latest
// working set. It runs inside the API server, which serves its views
// (internal/registry/metrics) and lends it the client certificate it
// reaches node agents with.
package metricsserver

import (
	"context"
	"crypto/tls"
	"fmt"
	"log/slog"
	"math"
	"net/http"
	"sort"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	metricsv1beta1 "k8s.io/metrics/pkg/apis/metrics/v1beta1"

	nodereg "github.com/svcnet/svcnet/internal/registry/node"
)

// DefaultResolution is metrics-server's --metric-resolution.
const DefaultResolution = 15 * time.Second

// Server scrapes the nodes and keeps what they reported.
type Server struct {
	resolution time.Duration
	kubelet    *http.Client
	factory    informers.SharedInformerFactory
	nodes      corelisters.NodeLister
	pods       corelisters.PodLister

	mu         sync.RWMutex
	nodeSeries map[string]series
	// containers holds each node's containers, replaced by each scrape.
	containers map[string]map[containerKey]series
}

// New makes a server that lists nodes and pods with client and reaches
// the agents with a client certificate of kubeletTLS.
func New(client kubernetes.Interface, kubeletTLS *tls.Config, resolution time.Duration) *Server {
	cfg := kubeletTLS.Clone()
	// As metrics-server with --kubelet-insecure-tls, the default of
	// kubeadm-like clusters whose kubelets serve self-signed certificates.
	cfg.InsecureSkipVerify = true //nolint:gosec // agents' serving certificates are self-signed
	factory := informers.NewSharedInformerFactory(client, 0)
	return &Server{
		resolution: resolution,
		kubelet:    &http.Client{Transport: &http.Transport{TLSClientConfig: cfg}, Timeout: resolution},
		factory:    factory,
		nodes:      factory.Core().V1().Nodes().Lister(),
		pods:       factory.Core().V1().Pods().Lister(),
		nodeSeries: map[string]series{},
		containers: map[string]map[containerKey]series{},
	}
}

// Run scrapes every resolution until ctx ends.
func (s *Server) Run(ctx context.Context) {
	s.factory.Start(ctx.Done())
	defer s.factory.Shutdown()
	if !cache.WaitForCacheSync(ctx.Done(), s.factory.Core().V1().Nodes().Informer().HasSynced,
		s.factory.Core().V1().Pods().Informer().HasSynced) {
		return
	}
	t := time.NewTicker(s.resolution)
	defer t.Stop()
	for {
		s.scrapeAll(ctx)
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// scrapeAll scrapes the nodes at once, each within the resolution.
func (s *Server) scrapeAll(ctx context.Context) {
	nodes, _ := s.nodes.List(labels.Everything())
	var wg sync.WaitGroup
	for _, n := range nodes {
		wg.Go(func() {
			got, err := s.scrapeNode(ctx, n)
			if err != nil {
				slog.Debug("scrape node", "node", n.Name, "err", err)
				return
			}
			s.store(n.Name, got)
		})
	}
	wg.Wait()
	s.forget(nodes)
}

func (s *Server) scrapeNode(ctx context.Context, n *corev1.Node) (*scrape, error) {
	endpoint, err := nodereg.KubeletEndpoint(n)
	if err != nil {
		return nil, err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "https://"+endpoint+"/metrics/resource", nil)
	if err != nil {
		return nil, err
	}
	resp, err := s.kubelet.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("GET /metrics/resource: %s", resp.Status)
	}
	return decode(resp.Body)
}

// store records one node's scrape.
func (s *Server) store(node string, got *scrape) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if got.node != nil {
		s.nodeSeries[node] = s.nodeSeries[node].add(got.node, s.resolution)
	}
	old := s.containers[node]
	next := make(map[containerKey]series, len(got.containers))
	for k, p := range got.containers {
		next[k] = old[k].add(p, s.resolution)
	}
	s.containers[node] = next
}

// forget drops what nodes no longer there reported.
func (s *Server) forget(nodes []*corev1.Node) {
	present := map[string]bool{}
	for _, n := range nodes {
		present[n.Name] = true
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for name := range s.containers {
		if !present[name] {
			delete(s.containers, name)
			delete(s.nodeSeries, name)
		}
	}
}

// Nodes is the usage of every node with two samples.
func (s *Server) Nodes() []metricsv1beta1.NodeMetrics {
	s.mu.RLock()
	defer s.mu.RUnlock()
	var out []metricsv1beta1.NodeMetrics
	for name, ser := range s.nodeSeries {
		cores, window, ok := ser.rate()
		if !ok {
			continue
		}
		m := metricsv1beta1.NodeMetrics{
			ObjectMeta: metav1.ObjectMeta{Name: name, CreationTimestamp: metav1.Now()},
			Timestamp:  metav1.NewTime(ser.last.timestamp),
			Window:     metav1.Duration{Duration: window},
			Usage:      usage(cores, ser.last.memory),
		}
		if n, err := s.nodes.Get(name); err == nil {
			m.Labels = n.Labels
		}
		out = append(out, m)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// Pods is the usage of the pods of namespace ("" for all) whose every
// container has two samples, as metrics-server answers.
func (s *Server) Pods(namespace string) []metricsv1beta1.PodMetrics {
	s.mu.RLock()
	defer s.mu.RUnlock()
	type podKey struct{ namespace, name string }
	byPod := map[podKey]*metricsv1beta1.PodMetrics{}
	incomplete := map[podKey]bool{}
	for _, containers := range s.containers {
		for k, ser := range containers {
			if namespace != "" && k.namespace != namespace {
				continue
			}
			pk := podKey{k.namespace, k.pod}
			cores, window, ok := ser.rate()
			if !ok {
				incomplete[pk] = true
				continue
			}
			m := byPod[pk]
			if m == nil {
				pod, err := s.pods.Pods(k.namespace).Get(k.pod)
				if err != nil {
					continue // not (or no longer) known to the API
				}
				m = &metricsv1beta1.PodMetrics{ObjectMeta: metav1.ObjectMeta{Name: k.pod, Namespace: k.namespace,
					Labels: pod.Labels, CreationTimestamp: metav1.Now()}}
				byPod[pk] = m
			}
			if ts := metav1.NewTime(ser.last.timestamp); m.Timestamp.Before(&ts) {
				m.Timestamp, m.Window = ts, metav1.Duration{Duration: window}
			}
			m.Containers = append(m.Containers, metricsv1beta1.ContainerMetrics{Name: k.container, Usage: usage(cores, ser.last.memory)})
		}
	}
	out := make([]metricsv1beta1.PodMetrics, 0, len(byPod))
	for pk, m := range byPod {
		if incomplete[pk] {
			continue
		}
		sort.Slice(m.Containers, func(i, j int) bool { return m.Containers[i].Name < m.Containers[j].Name })
		out = append(out, *m)
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Namespace != out[j].Namespace {
			return out[i].Namespace < out[j].Namespace
		}
		return out[i].Name < out[j].Name
	})
	return out
}

// usage is CPU in nanocores and memory in bytes, metrics-server's units.
func usage(cores, memory float64) corev1.ResourceList {
	return corev1.ResourceList{
		corev1.ResourceCPU:    *resource.NewScaledQuantity(int64(math.Round(max(cores, 0)*1e9)), resource.Nano),
		corev1.ResourceMemory: *resource.NewQuantity(int64(memory), resource.BinarySI),
	}
}
