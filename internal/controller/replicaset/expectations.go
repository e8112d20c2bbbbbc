package replicaset

import (
	"sync"
	"time"

	"k8s.io/utils/clock"
)

// expectationsTimeout is upstream's ExpectationsTimeout: writes not
// observed within it are presumed lost, and the ReplicaSet acts again.
const expectationsTimeout = 5 * time.Minute

// expectations remember, per ReplicaSet key, the pod creations and
// deletions issued but not yet seen by the informer, as upstream's
// UIDTrackingControllerExpectations. A ReplicaSet with outstanding
// expectations does not create or delete again: its cache would still
// count too few or too many pods and it would act twice.
type expectations struct {
	clock clock.PassiveClock

	mu sync.Mutex
	m  map[string]*expectation
}

// expectation is one ReplicaSet's outstanding writes.
type expectation struct {
	// creates counts pods created and not yet observed.
	creates int
	// deletes holds the keys of pods deleted and not yet observed
	// deleted; a pod observed twice (deletionTimestamp, then gone)
	// counts once.
	deletes map[string]bool
	at      time.Time
}

func newExpectations(c clock.PassiveClock) *expectations {
	return &expectations{clock: c, m: map[string]*expectation{}}
}

// satisfied says whether the ReplicaSet may act; if not, wait is when its
// expectations expire.
func (e *expectations) satisfied(key string) (ok bool, wait time.Duration) {
	e.mu.Lock()
	defer e.mu.Unlock()
	exp := e.m[key]
	if exp == nil || (exp.creates <= 0 && len(exp.deletes) == 0) {
		return true, 0
	}
	wait = exp.at.Add(expectationsTimeout).Sub(e.clock.Now())
	return wait <= 0, wait
}

// expectCreations records n creations about to be issued.
func (e *expectations) expectCreations(key string, n int) {
	e.set(key, &expectation{creates: n})
}

// expectDeletions records the deletions of the pods with these keys about
// to be issued.
func (e *expectations) expectDeletions(key string, podKeys []string) {
	exp := &expectation{deletes: make(map[string]bool, len(podKeys))}
	for _, k := range podKeys {
		exp.deletes[k] = true
	}
	e.set(key, exp)
}

func (e *expectations) set(key string, exp *expectation) {
	e.mu.Lock()
	defer e.mu.Unlock()
	exp.at = e.clock.Now()
	e.m[key] = exp
}

// creationObserved lowers the creations expected, on seeing a new pod or
// on giving up a creation that was never issued or failed.
func (e *expectations) creationObserved(key string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if exp := e.m[key]; exp != nil {
		exp.creates--
	}
}

// deletionObserved lowers the deletions expected, once per pod.
func (e *expectations) deletionObserved(key, podKey string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if exp := e.m[key]; exp != nil {
		delete(exp.deletes, podKey)
	}
}

// forget drops a ReplicaSet's expectations, when it is deleted, so that a
// new one of the same name starts clean.
func (e *expectations) forget(key string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	delete(e.m, key)
}
