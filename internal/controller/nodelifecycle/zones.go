package nodelifecycle

import (
	"slices"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/util/flowcontrol"
	"k8s.io/utils/clock"
)

// zoneState is upstream's health of a zone of nodes.
type zoneState string

const (
	stateInitial           zoneState = "Initial"
	stateNormal            zoneState = "Normal"
	stateFullDisruption    zoneState = "FullDisruption"
	statePartialDisruption zoneState = "PartialDisruption"
)

// labelExcludeDisruption keeps a node out of the zone health counts.
const labelExcludeDisruption = "node.kubernetes.io/exclude-disruption"

// zoneKey is upstream's key of a node's zone: its region and zone labels,
// empty for a node without them (the whole cluster then is one zone).
func zoneKey(node *corev1.Node) string {
	region := node.Labels[corev1.LabelTopologyRegion]
	if region == "" {
		region = node.Labels[corev1.LabelFailureDomainBetaRegion]
	}
	zone := node.Labels[corev1.LabelTopologyZone]
	if zone == "" {
		zone = node.Labels[corev1.LabelFailureDomainBetaZone]
	}
	if region == "" && zone == "" {
		return ""
	}
	return region + ":\x00:" + zone
}

// computeZoneState counts a zone's nodes that are not Ready and says
// whether the zone is fully disrupted (none Ready), partially (at least 3
// and at least the threshold's share not Ready), or normal.
func computeZoneState(ready []*corev1.NodeCondition, unhealthyThreshold float32) (int, zoneState) {
	readyNodes, notReady := 0, 0
	for _, c := range ready {
		if c != nil && c.Status == corev1.ConditionTrue {
			readyNodes++
		} else {
			notReady++
		}
	}
	switch {
	case readyNodes == 0 && notReady > 0:
		return notReady, stateFullDisruption
	case notReady > 2 && float32(notReady)/float32(notReady+readyNodes) >= unhealthyThreshold:
		return notReady, statePartialDisruption
	default:
		return notReady, stateNormal
	}
}

// tainter is one zone's rate-limited queue of nodes to taint NoExecute
// (upstream's RateLimitedTimedQueue): nodes are tried in the order they
// were added, as fast as the limiter allows. A node stays known after it
// was tainted, so that it is not queued again until it is removed.
type tainter struct {
	clock clock.Clock
	mu    sync.Mutex
	// limiter is nil while tainting is stopped (rate 0).
	limiter flowcontrol.RateLimiter
	qps     float32
	queue   []queuedNode
	known   map[string]bool
}

type queuedNode struct {
	name      string
	processAt time.Time
}

// evictionBurst is upstream's: one node at a time.
const evictionBurst = 1

// newTainter starts with a full bucket: the first node is tainted at
// once.
func newTainter(clk clock.Clock, qps float32) *tainter {
	t := &tainter{clock: clk, known: map[string]bool{}, qps: qps}
	if qps > 0 {
		t.limiter = flowcontrol.NewTokenBucketRateLimiterWithClock(qps, evictionBurst, clk)
	}
	return t
}

// setRate changes the tainting rate. As upstream, the new limiter starts
// empty when the old one was exhausted or stopped.
func (t *tainter) setRate(qps float32) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.qps == qps {
		return
	}
	var next flowcontrol.RateLimiter
	if qps > 0 {
		next = flowcontrol.NewTokenBucketRateLimiterWithClock(qps, evictionBurst, t.clock)
		if t.limiter == nil || !t.limiter.TryAccept() {
			next.TryAccept()
		}
	}
	if t.limiter != nil {
		t.limiter.Stop()
	}
	t.limiter, t.qps = next, qps
}

// add queues a node; false if it is already known.
func (t *tainter) add(name string) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.known[name] {
		return false
	}
	t.known[name] = true
	t.queue = append(t.queue, queuedNode{name: name, processAt: t.clock.Now()})
	return true
}

// remove forgets a node; false if it was not known.
func (t *tainter) remove(name string) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	if !t.known[name] {
		return false
	}
	delete(t.known, name)
	t.dequeue(name)
	return true
}

func (t *tainter) dequeue(name string) {
	t.queue = slices.DeleteFunc(t.queue, func(q queuedNode) bool { return q.name == name })
}

// try hands queued nodes to taint while the limiter allows; a node that
// taint reports as not done is tried again after the returned wait.
func (t *tainter) try(taint func(name string) (bool, time.Duration)) {
	for {
		t.mu.Lock()
		if len(t.queue) == 0 || t.limiter == nil || !t.limiter.TryAccept() {
			t.mu.Unlock()
			return
		}
		head, now := t.queue[0], t.clock.Now()
		t.mu.Unlock()
		if now.Before(head.processAt) {
			return
		}
		done, wait := taint(head.name)
		t.mu.Lock()
		if t.known[head.name] {
			t.dequeue(head.name)
			if !done {
				t.queue = append(t.queue, queuedNode{name: head.name, processAt: now.Add(wait)})
				slices.SortStableFunc(t.queue, func(a, b queuedNode) int { return a.processAt.Compare(b.processAt) })
			}
		}
		t.mu.Unlock()
	}
}
