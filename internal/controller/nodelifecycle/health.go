package nodelifecycle

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/util/workqueue"
)

// nodeHealth is what the controller last saw of a node, with its own
// clock's times: the time of the last sign of life (probe), and of the
// last change of the Ready condition.
type nodeHealth struct {
	probe, readyTransition time.Time
	status                 *corev1.NodeStatus
	lease                  *coordinationv1.Lease
}

// healthRetries bounds the status writes of one node in one pass.
const healthRetries = 5

// monitor is one pass over all nodes: silent nodes become Unknown, pods
// of nodes that stopped being Ready are marked not Ready, nodes are
// queued for or cleared of their NoExecute taints, and zone disruption
// sets the tainting rates.
func (c *Controller) monitor(ctx context.Context) error {
	nodes, err := c.nodes.List(labels.Everything())
	if err != nil {
		return fmt.Errorf("list nodes: %w", err)
	}
	seen := map[string]bool{}
	for _, n := range nodes {
		seen[n.Name] = true
		c.tainterOf(n) // a zone appears with its first node
		if !c.known[n.Name] {
			c.known[n.Name] = true
			c.nodeEvent(n, "RegisteredNode", fmt.Sprintf("Registered Node %s in Controller", n.Name))
			if _, err := c.markReachable(ctx, n); err != nil {
				slog.Warn("remove NoExecute taints of a new node", "node", n.Name, "err", err)
			}
		}
	}
	for name := range c.known {
		if !seen[name] {
			delete(c.known, name)
			c.nodeEvent(&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}}, "RemovingNode", fmt.Sprintf("Removing Node %s from Controller", name))
			c.healthMu.Lock()
			delete(c.health, name)
			delete(c.retry, name)
			c.healthMu.Unlock()
		}
	}

	var mu sync.Mutex
	zoneReady := map[string][]*corev1.NodeCondition{}
	workqueue.ParallelizeUntil(ctx, 8, len(nodes), func(i int) {
		node, ready := c.checkNode(ctx, nodes[i].DeepCopy())
		if node == nil {
			return
		}
		if _, excluded := node.Labels[labelExcludeDisruption]; !excluded {
			mu.Lock()
			zoneReady[zoneKey(node)] = append(zoneReady[zoneKey(node)], ready)
			mu.Unlock()
		}
	})
	c.handleDisruption(ctx, zoneReady, nodes)
	return nil
}

// checkNode updates one node's health and acts on it; it returns the
// node and its Ready condition now, or a nil node when its health could
// not be written.
func (c *Controller) checkNode(ctx context.Context, node *corev1.Node) (*corev1.Node, *corev1.NodeCondition) {
	var observed corev1.NodeCondition
	var current *corev1.NodeCondition
	var err error
	for i := range healthRetries {
		if observed, current, err = c.updateHealth(ctx, node); err == nil {
			break
		}
		if i == healthRetries-1 {
			slog.Error("update node health; no pods will be evicted", "node", node.Name, "err", err)
			return nil, nil
		}
		if node, err = c.client.CoreV1().Nodes().Get(ctx, node.Name, metav1.GetOptions{}); err != nil {
			slog.Error("get node to retry its health update", "node", node.Name, "err", err)
			return nil, nil
		}
	}
	if current == nil {
		return node, nil
	}
	stopped := current.Status != corev1.ConditionTrue && observed.Status == corev1.ConditionTrue
	pods, err := c.podsOn(node.Name)
	if err != nil {
		slog.Error("list pods of node", "node", node.Name, "err", err)
		if stopped {
			c.setRetry(node.Name, true)
		}
		return node, current
	}
	c.taintBasedEviction(ctx, node, observed.Status)
	c.healthMu.Lock()
	retry := c.retry[node.Name]
	c.healthMu.Unlock()
	if stopped {
		c.recorder.Eventf(nodeRef(node), corev1.EventTypeNormal, "NodeNotReady", "Node %s status is now: %s", node.Name, "NodeNotReady")
	}
	if stopped || (retry && observed.Status != corev1.ConditionTrue) {
		// The node went silent: its pods leave Services' endpoints.
		err := c.markPodsNotReady(ctx, pods, node.Name)
		if err != nil {
			slog.Warn("mark pods not Ready; retrying next pass", "node", node.Name, "err", err)
			c.setRetry(node.Name, true)
			return node, current
		}
	}
	c.setRetry(node.Name, false)
	return node, current
}

func (c *Controller) setRetry(node string, retry bool) {
	c.healthMu.Lock()
	defer c.healthMu.Unlock()
	if retry {
		c.retry[node] = true
	} else {
		delete(c.retry, node)
	}
}

// updateHealth compares a node with what was last seen of it, as
// upstream's tryUpdateNodeHealth: a new Ready heartbeat or Lease renewal
// is a sign of life; a node without one for longer than its grace period
// gets its Ready, MemoryPressure, DiskPressure and PIDPressure conditions
// set Unknown. It returns the Ready condition before and after.
func (c *Controller) updateHealth(ctx context.Context, node *corev1.Node) (corev1.NodeCondition, *corev1.NodeCondition, error) {
	c.healthMu.Lock()
	var h *nodeHealth
	if saved := c.health[node.Name]; saved != nil {
		cp := *saved
		h = &cp
	}
	c.healthMu.Unlock()
	now := c.clock.Now()

	var observed corev1.NodeCondition
	grace := c.opts.GracePeriod
	current := readyCondition(&node.Status)
	if current == nil {
		// Never reported: treated as Unknown since the node's creation,
		// with the longer startup grace period.
		observed = corev1.NodeCondition{Type: corev1.NodeReady, Status: corev1.ConditionUnknown,
			LastHeartbeatTime: node.CreationTimestamp, LastTransitionTime: node.CreationTimestamp}
		grace = c.opts.StartupGracePeriod
		if h != nil {
			h.status = &node.Status
		} else {
			h = &nodeHealth{status: &node.Status, probe: node.CreationTimestamp.Time, readyTransition: node.CreationTimestamp.Time}
		}
	} else {
		observed = *current
	}

	var saved *corev1.NodeCondition
	var savedLease *coordinationv1.Lease
	if h != nil {
		saved, savedLease = readyCondition(h.status), h.lease
	}
	switch {
	case h == nil, saved == nil && current != nil, saved != nil && current == nil:
		h = &nodeHealth{status: &node.Status, probe: now, readyTransition: now}
	case saved != nil && current != nil && !saved.LastHeartbeatTime.Equal(&current.LastHeartbeatTime):
		transition := h.readyTransition
		if !saved.LastTransitionTime.Equal(&current.LastTransitionTime) {
			transition = now
		}
		h = &nodeHealth{status: &node.Status, probe: now, readyTransition: transition}
	}
	// A renewed Lease is a sign of life, even from a node that never
	// posted its status.
	lease, _ := c.leases.Leases(corev1.NamespaceNodeLease).Get(node.Name)
	if lease != nil && lease.Spec.RenewTime != nil &&
		(savedLease == nil || savedLease.Spec.RenewTime == nil || savedLease.Spec.RenewTime.Before(lease.Spec.RenewTime)) {
		h.lease = lease
		h.probe = now
	}
	defer func() {
		c.healthMu.Lock()
		c.health[node.Name] = h
		c.healthMu.Unlock()
	}()

	if !now.After(h.probe.Add(grace)) {
		return observed, current, nil
	}
	for _, t := range []corev1.NodeConditionType{corev1.NodeReady, corev1.NodeMemoryPressure, corev1.NodeDiskPressure, corev1.NodePIDPressure} {
		cond := condition(&node.Status, t)
		switch {
		case cond == nil:
			node.Status.Conditions = append(node.Status.Conditions, corev1.NodeCondition{
				Type:               t,
				Status:             corev1.ConditionUnknown,
				Reason:             "NodeStatusNeverUpdated",
				Message:            "Kubelet never posted node status.",
				LastHeartbeatTime:  node.CreationTimestamp,
				LastTransitionTime: metav1.NewTime(now),
			})
		case cond.Status != corev1.ConditionUnknown:
			cond.Status = corev1.ConditionUnknown
			cond.Reason = "NodeStatusUnknown"
			cond.Message = "Kubelet stopped posting node status."
			cond.LastTransitionTime = metav1.NewTime(now)
		}
	}
	current = readyCondition(&node.Status)
	if apiequality.Semantic.DeepEqual(current, &observed) {
		return observed, current, nil
	}
	slog.Info("node stopped posting its status; marking it Unknown", "node", node.Name, "silentFor", now.Sub(h.probe).Round(time.Second))
	updated, err := c.client.CoreV1().Nodes().UpdateStatus(ctx, node, metav1.UpdateOptions{})
	if err != nil {
		return observed, current, fmt.Errorf("update status of node %s: %w", node.Name, err)
	}
	h = &nodeHealth{status: &updated.Status, probe: h.probe, readyTransition: now, lease: lease}
	return observed, readyCondition(&updated.Status), nil
}

// handleDisruption sets each zone's tainting rate from its health. When
// every node of every zone is down, the trouble is more likely the
// control plane's than the nodes': tainting stops and the NoExecute
// taints are removed, until some node is Ready again.
func (c *Controller) handleDisruption(ctx context.Context, zoneReady map[string][]*corev1.NodeCondition, nodes []*corev1.Node) {
	if !c.setZoneStates(zoneReady, nodes) {
		return
	}
	for _, n := range nodes {
		if _, err := c.markReachable(ctx, n); err != nil {
			slog.Warn("remove NoExecute taints", "node", n.Name, "err", err)
		}
	}
}

// setZoneStates records the zones' new states and sets their rates; it
// says whether every zone has just gone down.
func (c *Controller) setZoneStates(zoneReady map[string][]*corev1.NodeCondition, nodes []*corev1.Node) bool {
	c.zoneMu.Lock()
	defer c.zoneMu.Unlock()
	next := map[string]zoneState{}
	allDown := true
	for zone, ready := range zoneReady {
		_, state := computeZoneState(ready, c.opts.UnhealthyZone)
		if state != stateFullDisruption {
			allDown = false
		}
		next[zone] = state
		if _, ok := c.zones[zone]; !ok {
			c.zones[zone] = stateInitial
		}
	}
	allWereDown := true
	for zone, state := range c.zones {
		if _, ok := zoneReady[zone]; !ok {
			delete(c.zones, zone)
			continue
		}
		if state != stateFullDisruption {
			allWereDown = false
		}
	}
	switch {
	case allDown && allWereDown:
	case allDown:
		slog.Info("all nodes are not Ready: stopping taint-based eviction")
		for zone := range c.zones {
			c.tainterLocked(zone).setRate(0)
			c.zones[zone] = stateFullDisruption
		}
		return true
	case allWereDown:
		slog.Info("some nodes are Ready again: resuming taint-based eviction")
		now := c.clock.Now()
		c.healthMu.Lock()
		for _, n := range nodes {
			if h := c.health[n.Name]; h != nil {
				h.probe, h.readyTransition = now, now
			}
		}
		c.healthMu.Unlock()
		for zone := range c.zones {
			c.setZoneRate(zone, len(zoneReady[zone]), next[zone])
			c.zones[zone] = next[zone]
		}
	default:
		for zone, state := range c.zones {
			if state == next[zone] {
				continue
			}
			slog.Info("zone changed state", "zone", zone, "state", next[zone])
			c.setZoneRate(zone, len(zoneReady[zone]), next[zone])
			c.zones[zone] = next[zone]
		}
	}
	return false
}

// setZoneRate is upstream's rate for a zone's state: the eviction rate
// when normal or fully disrupted, the secondary rate when partially
// disrupted and large, else none.
func (c *Controller) setZoneRate(zone string, size int, state zoneState) {
	rate := c.opts.EvictionRate
	if state == statePartialDisruption {
		rate = 0
		if int32(size) > c.opts.LargeCluster {
			rate = c.opts.SecondaryRate
		}
	}
	c.tainterLocked(zone).setRate(rate)
}

// markPodsNotReady sets the Ready condition of a node's pods False, as
// upstream's MarkPodsNotReady, so that they leave Services' endpoints.
func (c *Controller) markPodsNotReady(ctx context.Context, pods []*corev1.Pod, nodeName string) error {
	var errs []error
	for _, p := range pods {
		if p.Spec.NodeName != nodeName {
			continue
		}
		pod := p.DeepCopy()
		i := podReadyIndex(pod)
		if i < 0 || pod.Status.Conditions[i].Status == corev1.ConditionFalse {
			continue
		}
		pod.Status.Conditions[i].Status = corev1.ConditionFalse
		pod.Status.Conditions[i].LastTransitionTime = metav1.NewTime(c.clock.Now())
		_, err := c.client.CoreV1().Pods(pod.Namespace).UpdateStatus(ctx, pod, metav1.UpdateOptions{})
		if apierrors.IsNotFound(err) {
			continue
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("mark pod %s/%s not Ready: %w", pod.Namespace, pod.Name, err))
			continue
		}
		c.recorder.Event(pod, corev1.EventTypeWarning, "NodeNotReady", "Node is not ready")
	}
	return errors.Join(errs...)
}

func podReadyIndex(pod *corev1.Pod) int {
	for i, c := range pod.Status.Conditions {
		if c.Type == corev1.PodReady {
			return i
		}
	}
	return -1
}
