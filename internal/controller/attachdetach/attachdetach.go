// Package attachdetach is svcnet's attach/detach controller, upstream's
// (pkg/controller/volume/attachdetach) cut to what svcnet's volumes need:
// a PersistentVolume is "attached" to each node that runs a pod using it,
// recorded in that node's status.volumesAttached, and the node agent
// mounts a claim's volume only once it is attached to its node. A PV that
// allows one node only (no ReadWriteMany or ReadOnlyMany access mode, as
// upstream's isMultiAttachAllowed) is attached to a second node only once
// no pod uses it on the first; meanwhile the waiting pods get upstream's
// FailedAttachVolume event, `Multi-Attach error for volume "<pv>" Volume
// is already used by pod(s) <pods>`. Any number of pods on one node share
// an attached volume.
//
// Upstream attaches only attachable volume plugins (CSI, cloud disks);
// svcnet's PVs are directories (hostPath, local, provisioned), which the
// kubelet alone would mount on any number of nodes. The check lives here,
// not in the node agent, because it is a decision about the whole
// cluster: which node holds a volume is known from all pods at once,
// decided by one writer (this controller has one worker), and survives a
// restart in the Nodes' status, as upstream keeps it; a node agent sees
// only its own pods, and two nodes starting pods at once would both see
// the volume free.
package attachdetach

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"

	"github.com/svcnet/svcnet/internal/controller"
	"github.com/svcnet/svcnet/internal/events"
	"github.com/svcnet/svcnet/internal/informer"
	"github.com/svcnet/svcnet/internal/podutil"
)

// ControllerName is the controller's name, and its events' source.
const ControllerName = "attachdetach-controller"

// UniqueVolumeName is the name a PV has in node.status.volumesAttached,
// upstream's <plugin>/<volume>: kubernetes.io/host-path/<pv>,
// kubernetes.io/local-volume/<pv>, else svcnet.io/pv/<pv> for a PV whose
// directory the node keeps.
func UniqueVolumeName(pv *corev1.PersistentVolume) corev1.UniqueVolumeName {
	switch {
	case pv.Spec.HostPath != nil:
		return corev1.UniqueVolumeName("kubernetes.io/host-path/" + pv.Name)
	case pv.Spec.Local != nil:
		return corev1.UniqueVolumeName("kubernetes.io/local-volume/" + pv.Name)
	}
	return corev1.UniqueVolumeName("svcnet.io/pv/" + pv.Name)
}

// multiAttachAllowed is upstream's isMultiAttachAllowed for a PV.
func multiAttachAllowed(pv *corev1.PersistentVolume) bool {
	if len(pv.Spec.AccessModes) == 0 {
		return true
	}
	return slices.ContainsFunc(pv.Spec.AccessModes, func(m corev1.PersistentVolumeAccessMode) bool {
		return m == corev1.ReadWriteMany || m == corev1.ReadOnlyMany
	})
}

// Controller attaches PVs to the nodes whose pods use them.
type Controller struct {
	client   kubernetes.Interface
	pods     corelisters.PodLister
	nodes    corelisters.NodeLister
	pvcs     corelisters.PersistentVolumeClaimLister
	pvs      corelisters.PersistentVolumeLister
	recorder record.EventRecorder
	queue    *controller.Queue[string]
	synced   []cache.InformerSynced

	// attached is the actual state, node by node: what this controller
	// attached, read back from the Nodes' status when it starts. Only the
	// one worker uses it.
	attached map[string]map[corev1.UniqueVolumeName]bool
}

// New creates the controller and registers its informer handlers.
func New(ctx context.Context, d controller.Deps) (*Controller, error) {
	core := d.Informers.Core().V1()
	c := &Controller{
		client:   d.Client,
		pods:     core.Pods().Lister(),
		nodes:    core.Nodes().Lister(),
		pvcs:     core.PersistentVolumeClaims().Lister(),
		pvs:      core.PersistentVolumes().Lister(),
		recorder: events.NewRecorder(ctx, d.Client, ControllerName),
	}
	c.queue = controller.NewQueue(d.Metrics, controller.QueueConfig[string]{Name: "attachdetach", Sync: c.sync})
	podChanged := func(obj any) {
		if p, ok := informer.Object[*corev1.Pod](obj); ok && p.Spec.NodeName != "" && len(podutil.Claims(p)) > 0 {
			c.queue.Add(p.Spec.NodeName)
		}
	}
	// A claim bound or a PV changed may let a pod's volume be attached;
	// there are few nodes, so every node is looked at again.
	allNodes := func(any) { c.enqueueAll() }
	synced, err := informer.Register(
		informer.Handler{Informer: core.Pods().Informer(), Handler: cache.ResourceEventHandlerFuncs{
			AddFunc: podChanged, UpdateFunc: func(_, obj any) { podChanged(obj) }, DeleteFunc: podChanged,
		}},
		informer.Handler{Informer: core.Nodes().Informer(), Handler: cache.ResourceEventHandlerFuncs{
			AddFunc: func(obj any) {
				if n, ok := obj.(*corev1.Node); ok {
					c.queue.Add(n.Name)
				}
			},
		}},
		informer.Handler{Informer: core.PersistentVolumeClaims().Informer(), Handler: cache.ResourceEventHandlerFuncs{
			AddFunc: allNodes, UpdateFunc: func(_, obj any) { allNodes(obj) },
		}},
		informer.Handler{Informer: core.PersistentVolumes().Informer(), Handler: cache.ResourceEventHandlerFuncs{
			AddFunc: allNodes, UpdateFunc: func(_, obj any) { allNodes(obj) },
		}},
	)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", ControllerName, err)
	}
	c.synced = synced
	return c, nil
}

// Run attaches and detaches until ctx ends, with one worker: the
// decisions about one volume on two nodes must not race.
func (c *Controller) Run(ctx context.Context) { c.queue.Run(ctx, 1, c.synced...) }

func (c *Controller) enqueueAll() {
	nodes, _ := c.nodes.List(labels.Everything())
	for _, n := range nodes {
		c.queue.Add(n.Name)
	}
}

// state is the actual state of every node, read from the Nodes' status
// the first time.
func (c *Controller) state() (map[string]map[corev1.UniqueVolumeName]bool, error) {
	if c.attached != nil {
		return c.attached, nil
	}
	nodes, err := c.nodes.List(labels.Everything())
	if err != nil {
		return nil, err
	}
	c.attached = map[string]map[corev1.UniqueVolumeName]bool{}
	for _, n := range nodes {
		for _, v := range n.Status.VolumesAttached {
			if c.attached[n.Name] == nil {
				c.attached[n.Name] = map[corev1.UniqueVolumeName]bool{}
			}
			c.attached[n.Name][v.Name] = true
		}
	}
	return c.attached, nil
}

// wanted is what a node's pods want attached: each PV by its unique
// name, with the PV and the pods that use it.
type wanted struct {
	pv   *corev1.PersistentVolume
	pods []*corev1.Pod
}

// desired is the volumes the pods on node use, upstream's desired state
// of the world: pods not finished, whose claims are bound.
func (c *Controller) desired(node string) (map[corev1.UniqueVolumeName]*wanted, error) {
	pods, err := c.pods.List(labels.Everything())
	if err != nil {
		return nil, err
	}
	out := map[corev1.UniqueVolumeName]*wanted{}
	for _, p := range pods {
		if p.Spec.NodeName != node || p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed {
			continue
		}
		for _, name := range podutil.Claims(p) {
			pvc, err := c.pvcs.PersistentVolumeClaims(p.Namespace).Get(name)
			if err != nil || pvc.Spec.VolumeName == "" || pvc.Status.Phase != corev1.ClaimBound {
				continue
			}
			pv, err := c.pvs.Get(pvc.Spec.VolumeName)
			if err != nil {
				continue
			}
			u := UniqueVolumeName(pv)
			if out[u] == nil {
				out[u] = &wanted{pv: pv}
			}
			out[u].pods = append(out[u].pods, p)
		}
	}
	return out, nil
}

// sync reconciles one node: volumes no pod there uses any more are
// detached (and the nodes waiting for them looked at again), the volumes
// its pods use attached, unless one that allows a single node is
// attached elsewhere.
func (c *Controller) sync(ctx context.Context, node string) error {
	attached, err := c.state()
	if err != nil {
		return err
	}
	want, err := c.desired(node)
	if err != nil {
		return err
	}
	n, err := c.nodes.Get(node)
	if apierrors.IsNotFound(err) {
		// A deleted node holds nothing.
		want = nil
	}
	mine := attached[node]
	if mine == nil {
		mine = map[corev1.UniqueVolumeName]bool{}
		attached[node] = mine
	}
	detached := false
	for v := range mine {
		if want[v] == nil {
			delete(mine, v)
			detached = true
		}
	}
	for v, w := range want {
		if mine[v] {
			continue
		}
		others := otherNodes(attached, node, v)
		if len(others) > 0 && !multiAttachAllowed(w.pv) {
			c.reportMultiAttach(w, others)
			continue
		}
		mine[v] = true
	}
	if len(mine) == 0 {
		delete(attached, node)
	}
	if detached {
		c.enqueueAll()
	}
	if n == nil {
		return nil
	}
	return c.writeStatus(ctx, n, mine)
}

// otherNodes are the nodes other than node that v is attached to.
func otherNodes(attached map[string]map[corev1.UniqueVolumeName]bool, node string, v corev1.UniqueVolumeName) []string {
	var out []string
	for n, vols := range attached {
		if n != node && vols[v] {
			out = append(out, n)
		}
	}
	slices.Sort(out)
	return out
}

// reportMultiAttach gives each pod waiting for w upstream's
// FailedAttachVolume event, naming the pods of its namespace that hold
// the volume on the other nodes.
func (c *Controller) reportMultiAttach(w *wanted, others []string) {
	var holders []*corev1.Pod
	for _, n := range others {
		on, err := c.desired(n)
		if err != nil {
			continue
		}
		if h := on[UniqueVolumeName(w.pv)]; h != nil {
			holders = append(holders, h.pods...)
		}
	}
	slices.SortFunc(holders, func(a, b *corev1.Pod) int { return strings.Compare(a.Name, b.Name) })
	prefix := fmt.Sprintf("Multi-Attach error for volume %q", w.pv.Name)
	for _, p := range w.pods {
		if len(holders) == 0 {
			c.recorder.Event(p, corev1.EventTypeWarning, "FailedAttachVolume", prefix+" Volume is already exclusively attached to one node and can't be attached to another")
			continue
		}
		var local []string
		elsewhere := 0
		for _, h := range holders {
			if h.Namespace == p.Namespace {
				local = append(local, h.Name)
			} else {
				elsewhere++
			}
		}
		var msg string
		switch {
		case len(local) > 0 && elsewhere > 0:
			msg = fmt.Sprintf("Volume is already used by pod(s) %s and %d pod(s) in different namespaces", strings.Join(local, ", "), elsewhere)
		case len(local) > 0:
			msg = "Volume is already used by pod(s) " + strings.Join(local, ", ")
		default:
			msg = fmt.Sprintf("Volume is already used by %d pod(s) in different namespaces", elsewhere)
		}
		c.recorder.Event(p, corev1.EventTypeWarning, "FailedAttachVolume", prefix+" "+msg)
	}
}

// writeStatus sets the node's status.volumesAttached to vols, as
// upstream's node status updater, unless it says so already: a merge
// patch that replaces the list and nothing else.
func (c *Controller) writeStatus(ctx context.Context, node *corev1.Node, vols map[corev1.UniqueVolumeName]bool) error {
	list := make([]corev1.AttachedVolume, 0, len(vols))
	for v := range vols {
		list = append(list, corev1.AttachedVolume{Name: v})
	}
	slices.SortFunc(list, func(a, b corev1.AttachedVolume) int { return strings.Compare(string(a.Name), string(b.Name)) })
	if slices.Equal(list, node.Status.VolumesAttached) {
		return nil
	}
	patch, err := json.Marshal(map[string]any{"status": map[string]any{"volumesAttached": list}})
	if err != nil {
		return fmt.Errorf("encode volumesAttached of node %s: %w", node.Name, err)
	}
	_, err = c.client.CoreV1().Nodes().Patch(ctx, node.Name, types.MergePatchType, patch, metav1.PatchOptions{}, "status")
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("update volumesAttached of node %s: %w", node.Name, err)
	}
	return nil
}
