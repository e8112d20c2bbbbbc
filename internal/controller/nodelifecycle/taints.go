package nodelifecycle

import (
	"context"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/util/retry"
)

var (
	// unreachableTaint and notReadyTaint are the NoExecute taints of a
	// node whose Ready condition is Unknown or False (taint-based
	// eviction); they exclude each other.
	unreachableTaint = corev1.Taint{Key: corev1.TaintNodeUnreachable, Effect: corev1.TaintEffectNoExecute}
	notReadyTaint    = corev1.Taint{Key: corev1.TaintNodeNotReady, Effect: corev1.TaintEffectNoExecute}

	// conditionTaints maps a node condition in a status to the key of
	// its NoSchedule taint (TaintNodesByCondition).
	conditionTaints = map[corev1.NodeConditionType]map[corev1.ConditionStatus]string{
		corev1.NodeReady: {
			corev1.ConditionFalse:   corev1.TaintNodeNotReady,
			corev1.ConditionUnknown: corev1.TaintNodeUnreachable,
		},
		corev1.NodeMemoryPressure:     {corev1.ConditionTrue: corev1.TaintNodeMemoryPressure},
		corev1.NodeDiskPressure:       {corev1.ConditionTrue: corev1.TaintNodeDiskPressure},
		corev1.NodeNetworkUnavailable: {corev1.ConditionTrue: corev1.TaintNodeNetworkUnavailable},
		corev1.NodePIDPressure:        {corev1.ConditionTrue: corev1.TaintNodePIDPressure},
	}

	// conditionTaintKeys are the keys of conditionTaints' taints.
	conditionTaintKeys = map[string]bool{
		corev1.TaintNodeNotReady: true, corev1.TaintNodeUnreachable: true, corev1.TaintNodeMemoryPressure: true,
		corev1.TaintNodeDiskPressure: true, corev1.TaintNodeNetworkUnavailable: true, corev1.TaintNodePIDPressure: true,
	}

	// taintBackoff is upstream's retry of a taint update on conflicts.
	taintBackoff = wait.Backoff{Steps: 5, Duration: 100 * time.Millisecond, Jitter: 1.0}

	// betaLabels are the deprecated node labels kept equal to their
	// stable twins, as upstream.
	betaLabels = map[string]string{corev1.LabelOSStable: "beta.kubernetes.io/os", corev1.LabelArchStable: "beta.kubernetes.io/arch"}
)

// syncNode gives a node the NoSchedule taints of its conditions and of
// spec.unschedulable, removes those no longer due, and keeps the beta
// os/arch labels equal to the stable ones.
func (c *Controller) syncNode(ctx context.Context, name string) error {
	node, err := c.nodes.Get(name)
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("get node %s: %w", name, err)
	}
	if !reconcileNode(node.DeepCopy(), c.clock.Now()) {
		return nil
	}
	return c.updateNode(ctx, name, func(n *corev1.Node) bool { return reconcileNode(n, c.clock.Now()) })
}

// reconcileNode applies syncNode's changes to n and says whether there
// were any.
func reconcileNode(n *corev1.Node, now time.Time) bool {
	var want []corev1.Taint
	for _, cond := range n.Status.Conditions {
		if key, ok := conditionTaints[cond.Type][cond.Status]; ok {
			want = append(want, corev1.Taint{Key: key, Effect: corev1.TaintEffectNoSchedule})
		}
	}
	if n.Spec.Unschedulable {
		want = append(want, corev1.Taint{Key: corev1.TaintNodeUnschedulable, Effect: corev1.TaintEffectNoSchedule})
	}
	managed := func(t corev1.Taint) bool {
		return t.Effect == corev1.TaintEffectNoSchedule && (t.Key == corev1.TaintNodeUnschedulable || conditionTaintKeys[t.Key])
	}
	var stale []corev1.Taint
	for _, t := range n.Spec.Taints {
		if managed(t) && !hasTaint(want, t) {
			stale = append(stale, t)
		}
	}
	changed := swapTaints(n, want, stale, now)
	for stable, beta := range betaLabels {
		v, ok := n.Labels[stable]
		if ok && n.Labels[beta] != v {
			n.Labels[beta] = v
			changed = true
		}
	}
	return changed
}

// hasTaint says whether taints hold one with t's key and effect.
func hasTaint(taints []corev1.Taint, t corev1.Taint) bool {
	return slices.ContainsFunc(taints, func(x corev1.Taint) bool { return x.MatchTaint(&t) })
}

// swapTaints adds the taints of add that n lacks, stamped with now, and
// removes those of remove; it says whether n changed.
func swapTaints(n *corev1.Node, add, remove []corev1.Taint, now time.Time) bool {
	changed := false
	for _, t := range remove {
		if hasTaint(n.Spec.Taints, t) {
			n.Spec.Taints = slices.DeleteFunc(n.Spec.Taints, func(x corev1.Taint) bool { return x.MatchTaint(&t) })
			changed = true
		}
	}
	for _, t := range add {
		if !hasTaint(n.Spec.Taints, t) {
			t.TimeAdded = &metav1.Time{Time: now}
			n.Spec.Taints = append(n.Spec.Taints, t)
			changed = true
		}
	}
	return changed
}

// updateNode applies change to the node's latest version and writes it
// when change reports a difference, retrying on conflicts.
func (c *Controller) updateNode(ctx context.Context, name string, change func(*corev1.Node) bool) error {
	err := retry.RetryOnConflict(taintBackoff, func() error {
		n, err := c.client.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if !change(n) {
			return nil
		}
		_, err = c.client.CoreV1().Nodes().Update(ctx, n, metav1.UpdateOptions{})
		return err
	})
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("update node %s: %w", name, err)
	}
	return nil
}

// setNoExecuteTaint gives a node the NoExecute taint of its Ready status
// (not-ready for False, unreachable for Unknown) in place of the other.
func (c *Controller) setNoExecuteTaint(ctx context.Context, name string, ready corev1.ConditionStatus) error {
	add, remove := notReadyTaint, unreachableTaint
	if ready == corev1.ConditionUnknown {
		add, remove = unreachableTaint, notReadyTaint
	}
	return c.updateNode(ctx, name, func(n *corev1.Node) bool {
		return swapTaints(n, []corev1.Taint{add}, []corev1.Taint{remove}, c.clock.Now())
	})
}

// markReachable removes a node's NoExecute taints and its place in the
// tainting queue; it says whether it was queued or tainted.
func (c *Controller) markReachable(ctx context.Context, node *corev1.Node) (bool, error) {
	if hasTaint(node.Spec.Taints, unreachableTaint) || hasTaint(node.Spec.Taints, notReadyTaint) {
		err := c.updateNode(ctx, node.Name, func(n *corev1.Node) bool {
			return swapTaints(n, nil, []corev1.Taint{unreachableTaint, notReadyTaint}, c.clock.Now())
		})
		if err != nil {
			return false, err
		}
	}
	return c.tainterOf(node).remove(node.Name), nil
}

// markForTainting queues a node for its NoExecute taint; a node queued
// before but since untainted is queued anew. It says whether it was
// queued now.
func (c *Controller) markForTainting(node *corev1.Node, ready corev1.ConditionStatus) bool {
	t := c.tainterOf(node)
	switch {
	case ready == corev1.ConditionFalse && !hasTaint(node.Spec.Taints, notReadyTaint),
		ready == corev1.ConditionUnknown && !hasTaint(node.Spec.Taints, unreachableTaint):
		t.remove(node.Name)
	}
	return t.add(node.Name)
}

// taintBasedEviction acts on the Ready condition a node had before this
// pass: a not-ready or unreachable node is queued for its NoExecute taint
// (or has it swapped at once when it carries the other one), a Ready node
// loses both.
func (c *Controller) taintBasedEviction(ctx context.Context, node *corev1.Node, observed corev1.ConditionStatus) {
	switch observed {
	case corev1.ConditionFalse, corev1.ConditionUnknown:
		other := unreachableTaint
		if observed == corev1.ConditionUnknown {
			other = notReadyTaint
		}
		if hasTaint(node.Spec.Taints, other) {
			if err := c.setNoExecuteTaint(ctx, node.Name, observed); err != nil {
				slog.Warn("swap NoExecute taint; retrying next pass", "node", node.Name, "err", err)
			}
		} else if c.markForTainting(node, observed) {
			slog.Info("node queued for its NoExecute taint", "node", node.Name, "ready", observed)
		}
	case corev1.ConditionTrue:
		removed, err := c.markReachable(ctx, node)
		if err != nil {
			slog.Warn("remove NoExecute taints; retrying next pass", "node", node.Name, "err", err)
		}
		if removed {
			slog.Info("node is healthy again, NoExecute taints removed", "node", node.Name)
		}
	}
}

// noExecuteTaintingPass taints the queued nodes of every zone, as fast as
// each zone's rate allows.
func (c *Controller) noExecuteTaintingPass(ctx context.Context) {
	c.zoneMu.Lock()
	tainters := slices.Collect(maps.Values(c.tainters))
	c.zoneMu.Unlock()
	for _, t := range tainters {
		t.try(func(name string) (bool, time.Duration) {
			node, err := c.nodes.Get(name)
			if apierrors.IsNotFound(err) {
				return true, 0
			}
			if err != nil {
				return false, 50 * time.Millisecond
			}
			ready := readyCondition(&node.Status)
			if ready == nil {
				return false, 50 * time.Millisecond
			}
			if ready.Status == corev1.ConditionTrue {
				return true, 0 // Ready again: nothing to taint
			}
			if err := c.setNoExecuteTaint(ctx, name, ready.Status); err != nil {
				slog.Warn("taint node NoExecute", "node", name, "err", err)
				return false, 0
			}
			return true, 0
		})
	}
}
