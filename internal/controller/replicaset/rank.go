package replicaset

import (
	"math"
	"slices"
	"strconv"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/svcnet/svcnet/internal/controller/podstate"
)

// podsToDelete picks the n pods of pods least worth keeping, as upstream's
// getPodsToDelete. related are the pods of every ReplicaSet with the same
// controller (the Deployment's old and new ReplicaSets): a pod whose node
// holds more of them goes first, which keeps a rollout spread.
func podsToDelete(pods, related []*corev1.Pod, n int, now time.Time) []*corev1.Pod {
	if n >= len(pods) {
		return pods
	}
	onNode := map[string]int{}
	for _, p := range related {
		if podstate.Active(p) {
			onNode[p.Spec.NodeName]++
		}
	}
	ranked := make([]rankedPod, len(pods))
	for i, p := range pods {
		ranked[i] = rankedPod{pod: p, colocated: onNode[p.Spec.NodeName]}
	}
	slices.SortStableFunc(ranked, func(a, b rankedPod) int {
		switch {
		case deleteFirst(a, b, now):
			return -1
		case deleteFirst(b, a, now):
			return 1
		}
		return 0
	})
	out := make([]*corev1.Pod, n)
	for i := range out {
		out[i] = ranked[i].pod
	}
	return out
}

type rankedPod struct {
	pod *corev1.Pod
	// colocated counts the related active pods on the pod's node.
	colocated int
}

// phaseOrder ranks phases: Pending before Unknown before Running.
var phaseOrder = map[corev1.PodPhase]int{corev1.PodPending: 0, corev1.PodUnknown: 1, corev1.PodRunning: 2}

// deleteFirst says whether a is to be deleted before b, as upstream's
// ActivePodsWithRanks with PodDeletionCost and LogarithmicScaleDown on:
// unassigned before assigned; Pending before Unknown before Running; not
// Ready before Ready; lower pod-deletion-cost first; more colocated pods
// first; Ready for less time first; more container restarts first; newer
// first. Times compare on a log2 scale of their age, with the UID breaking
// ties, so that pods of about the same age go in a random order.
func deleteFirst(ra, rb rankedPod, now time.Time) bool {
	a, b := ra.pod, rb.pod
	if a.Spec.NodeName != b.Spec.NodeName && (a.Spec.NodeName == "" || b.Spec.NodeName == "") {
		return a.Spec.NodeName == ""
	}
	if pa, pb := phaseOrder[a.Status.Phase], phaseOrder[b.Status.Phase]; pa != pb {
		return pa < pb
	}
	readyA, readyB := podstate.Ready(a), podstate.Ready(b)
	if readyA != readyB {
		return !readyA
	}
	if ca, cb := deletionCost(a), deletionCost(b); ca != cb {
		return ca < cb
	}
	if ra.colocated != rb.colocated {
		return ra.colocated > rb.colocated
	}
	if readyA && readyB {
		if ta, tb := podstate.ReadySince(a), podstate.ReadySince(b); !ta.Equal(tb) {
			return newerFirst(a, b, ta, tb, now)
		}
	}
	if ra, rb := maxRestarts(a), maxRestarts(b); ra != rb {
		return ra > rb
	}
	if ta, tb := a.CreationTimestamp.Time, b.CreationTimestamp.Time; !ta.Equal(tb) {
		return newerFirst(a, b, ta, tb, now)
	}
	return false
}

// newerFirst orders by time, the zero time first, then the later one;
// times whose ages have the same log2 are ordered by UID.
func newerFirst(a, b *corev1.Pod, ta, tb, now time.Time) bool {
	if ta.IsZero() || tb.IsZero() {
		return ta.IsZero()
	}
	ra, rb := logAge(ta, now), logAge(tb, now)
	if ra == rb {
		return a.UID < b.UID
	}
	return ra < rb
}

// logAge is the log2 of t's age in nanoseconds, -1 for the future.
func logAge(t, now time.Time) int64 {
	if d := now.Sub(t); d > 0 {
		return int64(math.Log2(float64(d)))
	}
	return -1
}

// deletionCost is the pod's controller.kubernetes.io/pod-deletion-cost,
// 0 when unset or not a canonical int32 (no sign "+", no leading zeros).
func deletionCost(pod *corev1.Pod) int32 {
	v, ok := pod.Annotations[corev1.PodDeletionCost]
	if !ok || v == "" || v[0] == '+' || (len(v) > 1 && v[0] == '0') {
		return 0
	}
	n, err := strconv.ParseInt(v, 10, 32)
	if err != nil {
		return 0
	}
	return int32(n)
}

func maxRestarts(pod *corev1.Pod) int32 {
	var n int32
	for _, c := range pod.Status.ContainerStatuses {
		n = max(n, c.RestartCount)
	}
	return n
}
