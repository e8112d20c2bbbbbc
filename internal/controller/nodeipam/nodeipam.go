// Package nodeipam is the node IPAM controller of kube-controller-manager's
// range allocator: it gives each Node without one a pod CIDR, the lowest
// free block of the cluster CIDR (/24s of 10.244.0.0/16 by default), and
// takes it back when the Node is deleted. One worker syncs, and blocks it
// handed out are remembered until the informer shows them, so no block is
// given twice.
package nodeipam

import (
	"context"
	"errors"
	"fmt"
	"math/big"
	"net"
	"sync"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"

	"github.com/svcnet/svcnet/internal/controller"
	"github.com/svcnet/svcnet/internal/events"
	"github.com/svcnet/svcnet/internal/informer"
)

// Config sets the range the controller hands out.
type Config struct {
	// ClusterCIDR is split into blocks of NodeMaskSize bits.
	ClusterCIDR  *net.IPNet
	NodeMaskSize int
}

// Controller assigns pod CIDRs to nodes.
type Controller struct {
	cfg      Config
	client   kubernetes.Interface
	nodes    corelisters.NodeLister
	synced   cache.InformerSynced
	queue    *controller.Queue[string]
	recorder record.EventRecorder

	// mu guards given: blocks handed out by this controller, by node
	// name, until the Node is deleted.
	mu    sync.Mutex
	given map[string]string
}

// New builds the controller on a shared informer factory.
func New(ctx context.Context, cfg Config, client kubernetes.Interface, factory informers.SharedInformerFactory, m *controller.Metrics) (*Controller, error) {
	if cfg.ClusterCIDR == nil || cfg.ClusterCIDR.IP.To4() == nil {
		return nil, errors.New("node IPAM needs an IPv4 cluster CIDR")
	}
	if ones, _ := cfg.ClusterCIDR.Mask.Size(); cfg.NodeMaskSize < ones || cfg.NodeMaskSize > 30 {
		return nil, fmt.Errorf("node mask size %d does not fit cluster CIDR %s", cfg.NodeMaskSize, cfg.ClusterCIDR)
	}
	inf := factory.Core().V1().Nodes()
	c := &Controller{
		cfg:      cfg,
		client:   client,
		nodes:    inf.Lister(),
		recorder: events.NewRecorder(ctx, client, "node-ipam-controller"),
		given:    map[string]string{},
	}
	c.queue = controller.NewQueue(m, controller.QueueConfig[string]{Name: "nodeipam", Sync: c.sync})
	enqueue := func(obj any) {
		if n, ok := informer.Object[*corev1.Node](obj); ok {
			c.queue.Add(n.Name)
		}
	}
	synced, err := informer.Handle(inf.Informer(), cache.ResourceEventHandlerFuncs{
		AddFunc:    enqueue,
		UpdateFunc: func(_, obj any) { enqueue(obj) },
		DeleteFunc: enqueue,
	})
	if err != nil {
		return nil, err
	}
	c.synced = synced
	return c, nil
}

// Run syncs until ctx ends.
func (c *Controller) Run(ctx context.Context) {
	if !cache.WaitForCacheSync(ctx.Done(), c.synced) {
		return
	}
	c.queue.Run(ctx, 1)
}

func (c *Controller) sync(ctx context.Context, name string) error {
	node, err := c.nodes.Get(name)
	if apierrors.IsNotFound(err) {
		c.mu.Lock()
		delete(c.given, name)
		c.mu.Unlock()
		return nil
	}
	if err != nil {
		return err
	}
	if node.Spec.PodCIDR != "" {
		return nil
	}
	cidr, err := c.allocate(name)
	if err != nil {
		c.recorder.Eventf(node, corev1.EventTypeNormal, "CIDRNotAvailable", "Node %s status is now: CIDRNotAvailable", name)
		return err
	}
	n := node.DeepCopy()
	n.Spec.PodCIDR, n.Spec.PodCIDRs = cidr, []string{cidr}
	if _, err := c.client.CoreV1().Nodes().Update(ctx, n, metav1.UpdateOptions{}); err != nil {
		c.mu.Lock()
		delete(c.given, name)
		c.mu.Unlock()
		return fmt.Errorf("set pod CIDR of node %s: %w", name, err)
	}
	c.recorder.Eventf(node, corev1.EventTypeNormal, "CIDRAssignmentSucceeded", "Node %s status is now: CIDRAssignmentSucceeded", name)
	return nil
}

// allocate picks the lowest block used by no Node and not handed out.
func (c *Controller) allocate(name string) (string, error) {
	used := map[string]bool{}
	nodes, err := c.nodes.List(labels.Everything())
	if err != nil {
		return "", err
	}
	for _, n := range nodes {
		for _, p := range append([]string{n.Spec.PodCIDR}, n.Spec.PodCIDRs...) {
			used[p] = p != ""
		}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, p := range c.given {
		used[p] = true
	}
	ones, bits := c.cfg.ClusterCIDR.Mask.Size()
	count := 1 << (c.cfg.NodeMaskSize - ones)
	step := new(big.Int).Lsh(big.NewInt(1), uint(bits-c.cfg.NodeMaskSize))
	base := new(big.Int).SetBytes(c.cfg.ClusterCIDR.IP.To4())
	for i := range count {
		v := new(big.Int).Add(base, new(big.Int).Mul(step, big.NewInt(int64(i))))
		ip := make(net.IP, 4)
		v.FillBytes(ip)
		block := (&net.IPNet{IP: ip, Mask: net.CIDRMask(c.cfg.NodeMaskSize, bits)}).String()
		if !used[block] {
			c.given[name] = block
			return block, nil
		}
	}
	return "", fmt.Errorf("no pod CIDR left in %s for node %s", c.cfg.ClusterCIDR, name)
}
