// Package expectations remembers, per owner key, the pod creations and
// deletions a controller issued and its informer has not yet seen, as
// upstream's UIDTrackingControllerExpectations: an owner with outstanding
// expectations does not act again, since its cache would still count too
// few or too many pods and it would act twice.
package expectations

import (
	"sync"
	"time"

	"k8s.io/utils/clock"
)

// Timeout is upstream's ExpectationsTimeout: writes not
// observed within it are presumed lost, and the owner acts again.
const Timeout = 5 * time.Minute

// Expectations remember, per owner key, the pod creations and deletions
// issued but not yet seen by the informer.
type Expectations struct {
	clock clock.PassiveClock

	mu sync.Mutex
	m  map[string]*expectation
}

// expectation is one owner's outstanding writes.
type expectation struct {
	// creates counts pods created and not yet observed.
	creates int
	// deletes holds the keys of pods deleted and not yet observed
	// deleted; a pod observed twice (deletionTimestamp, then gone)
	// counts once.
	deletes map[string]bool
	at      time.Time
}

// New returns empty expectations read against clock c.
func New(c clock.PassiveClock) *Expectations {
	return &Expectations{clock: c, m: map[string]*expectation{}}
}

// Satisfied says whether the owner may act; if not, wait is when its
// expectations expire.
func (e *Expectations) Satisfied(key string) (ok bool, wait time.Duration) {
	e.mu.Lock()
	defer e.mu.Unlock()
	exp := e.m[key]
	if exp == nil || (exp.creates <= 0 && len(exp.deletes) == 0) {
		return true, 0
	}
	wait = exp.at.Add(Timeout).Sub(e.clock.Now())
	return wait <= 0, wait
}

// ExpectCreations records n creations about to be issued.
func (e *Expectations) ExpectCreations(key string, n int) {
	e.set(key, &expectation{creates: n})
}

// ExpectDeletions records the deletions of the pods with these keys about
// to be issued.
func (e *Expectations) ExpectDeletions(key string, podKeys []string) {
	exp := &expectation{deletes: make(map[string]bool, len(podKeys))}
	for _, k := range podKeys {
		exp.deletes[k] = true
	}
	e.set(key, exp)
}

func (e *Expectations) set(key string, exp *expectation) {
	e.mu.Lock()
	defer e.mu.Unlock()
	exp.at = e.clock.Now()
	e.m[key] = exp
}

// CreationObserved lowers the creations expected, on seeing a new pod or
// on giving up a creation that was never issued or failed.
func (e *Expectations) CreationObserved(key string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if exp := e.m[key]; exp != nil {
		exp.creates--
	}
}

// DeletionObserved lowers the deletions expected, once per pod.
func (e *Expectations) DeletionObserved(key, podKey string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if exp := e.m[key]; exp != nil {
		delete(exp.deletes, podKey)
	}
}

// Forget drops a owner's expectations, when it is deleted, so that a
// new one of the same name starts clean.
func (e *Expectations) Forget(key string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	delete(e.m, key)
}
