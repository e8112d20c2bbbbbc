package replicaset

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestDeletionOrder(t *testing.T) {
	now := time.Now()
	created := func(p *corev1.Pod, ago time.Duration) *corev1.Pod {
		p.CreationTimestamp = metav1.NewTime(now.Add(-ago))
		return p
	}
	cost := func(p *corev1.Pod, v string) *corev1.Pod {
		p.Annotations = map[string]string{corev1.PodDeletionCost: v}
		return p
	}
	restarts := func(p *corev1.Pod, n int32) *corev1.Pod {
		p.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: "a", RestartCount: 1}, {Name: "b", RestartCount: n}}
		return p
	}
	phase := func(p *corev1.Pod, ph corev1.PodPhase) *corev1.Pod {
		p.Status.Phase = ph
		return p
	}
	hour := time.Hour
	for _, tc := range []struct {
		rule        string
		first, then *corev1.Pod
		// colocated counts the related pods on first's and then's nodes.
		colocated [2]int
	}{
		{rule: "unassigned before assigned", first: ready(pod("a", "", nil), now), then: pod("b", "node-1", nil)},
		{rule: "Pending before Unknown", first: pod("a", "node-1", nil), then: phase(pod("b", "node-1", nil), corev1.PodUnknown)},
		{rule: "Unknown before Running", first: phase(pod("a", "node-1", nil), corev1.PodUnknown), then: phase(pod("b", "node-1", nil), corev1.PodRunning)},
		{rule: "not Ready before Ready", first: phase(pod("a", "node-1", nil), corev1.PodRunning), then: ready(pod("b", "node-1", nil), now.Add(-hour))},
		{rule: "lower deletion cost first", first: cost(ready(pod("a", "node-1", nil), now.Add(-hour)), "-5"), then: ready(pod("b", "node-1", nil), now)},
		{rule: "an invalid deletion cost is 0", first: cost(ready(pod("a", "node-1", nil), now.Add(-hour)), "+7"), then: cost(ready(pod("b", "node-1", nil), now), "1")},
		{rule: "more colocated first", first: ready(pod("a", "node-1", nil), now.Add(-hour)), then: ready(pod("b", "node-2", nil), now), colocated: [2]int{3, 1}},
		{rule: "Ready for less time first", first: ready(pod("a", "node-1", nil), now.Add(-time.Minute)), then: ready(pod("b", "node-1", nil), now.Add(-hour))},
		{rule: "more restarts first", first: restarts(created(pod("a", "node-1", nil), 2*hour), 5), then: restarts(created(pod("b", "node-1", nil), time.Minute), 2)},
		{rule: "newer first", first: created(pod("a", "node-1", nil), time.Minute), then: created(pod("b", "node-1", nil), hour)},
		{rule: "no creation time first", first: pod("a", "node-1", nil), then: created(pod("b", "node-1", nil), time.Minute)},
		{rule: "same log2 age: by UID", first: created(pod("a", "node-1", nil), 70*time.Minute), then: created(pod("b", "node-1", nil), 65*time.Minute)},
	} {
		a := rankedPod{pod: tc.first, colocated: tc.colocated[0]}
		b := rankedPod{pod: tc.then, colocated: tc.colocated[1]}
		if !deleteFirst(a, b, now) || deleteFirst(b, a, now) {
			t.Errorf("%s: %s is not deleted before %s", tc.rule, tc.first.Name, tc.then.Name)
		}
	}
}

func TestPodsToDeleteCountsRelatedPodsPerNode(t *testing.T) {
	now := time.Now()
	since := now.Add(-time.Hour)
	mine := []*corev1.Pod{ready(pod("on-1", "node-1", nil), since), ready(pod("on-2", "node-2", nil), since)}
	// node-2 also runs two pods of a sibling ReplicaSet, one of them
	// finished.
	done := ready(pod("sibling-done", "node-2", nil), since)
	done.Status.Phase = corev1.PodSucceeded
	related := append([]*corev1.Pod{ready(pod("sibling", "node-2", nil), since), done}, mine...)
	if got := podsToDelete(mine, related, 1, now); len(got) != 1 || got[0].Name != "on-2" {
		t.Errorf("deleted %v, want on-2 (the node with more related active pods)", got)
	}
	if got := podsToDelete(mine, nil, 2, now); len(got) != 2 {
		t.Errorf("deleting all pods returned %d", len(got))
	}
}
