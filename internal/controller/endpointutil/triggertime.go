package endpointutil

import (
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/svcnet/svcnet/internal/controller/podstate"
)

// TriggerTimes computes the endpoints.kubernetes.io/last-change-trigger-time
// annotation as upstream does: the time of the oldest change that the
// coming write publishes. A pod's change time is its Ready condition's last
// transition; a Service's, its creation. Syncs of one key must not run
// concurrently, which the workqueue guarantees.
type TriggerTimes struct {
	mu       sync.Mutex
	services map[types.NamespacedName]triggerState
}

// triggerState is what the previous sync of a Service saw.
type triggerState struct {
	service time.Time
	pods    map[string]time.Time
}

// NewTriggerTimes returns an empty tracker.
func NewTriggerTimes() *TriggerTimes {
	return &TriggerTimes{services: map[types.NamespacedName]triggerState{}}
}

// Compute records the state seen by this sync of svc with its selected
// pods and returns the trigger time to annotate; zero means none (the
// annotation is removed).
func (t *TriggerTimes) Compute(svc *corev1.Service, pods []*corev1.Pod) time.Time {
	key := types.NamespacedName{Namespace: svc.Namespace, Name: svc.Name}
	t.mu.Lock()
	last, known := t.services[key]
	t.mu.Unlock()

	var oldest time.Time
	changed := func(at time.Time) {
		if oldest.IsZero() || at.Before(oldest) {
			oldest = at
		}
	}
	next := triggerState{service: svc.CreationTimestamp.Time, pods: make(map[string]time.Time, len(pods))}
	for _, pod := range pods {
		at := podstate.ReadySince(pod)
		if at.IsZero() {
			continue
		}
		next.pods[pod.Name] = at
		if at.After(last.pods[pod.Name]) {
			changed(at)
		}
	}
	if next.service.After(last.service) {
		changed(next.service)
	}
	t.mu.Lock()
	t.services[key] = next
	t.mu.Unlock()
	if !known {
		return svc.CreationTimestamp.Time
	}
	return oldest
}

// Forget drops the state of a deleted Service.
func (t *TriggerTimes) Forget(namespace, name string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	delete(t.services, types.NamespacedName{Namespace: namespace, Name: name})
}

// SetTriggerTime sets or, for a zero time, removes the annotation.
func SetTriggerTime(annotations map[string]string, at time.Time) {
	if at.IsZero() {
		delete(annotations, corev1.EndpointsLastChangeTriggerTime)
		return
	}
	annotations[corev1.EndpointsLastChangeTriggerTime] = at.UTC().Format(time.RFC3339Nano)
}
