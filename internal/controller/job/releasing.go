package job

import (
	"slices"
	"sync"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
)

// releasing remembers, per job, the pods whose tracking finalizer the
// controller removed (or is removing) and the pod informer does not show
// gone yet, as upstream's expectedRmFinalizers: a sync on a cached pod
// that still carries the finalizer would count the pod a second time,
// its UID having left status.uncountedTerminatedPods already.
type releasing struct {
	mu   sync.Mutex
	uids map[string]sets.Set[types.UID]
}

func newReleasing() *releasing { return &releasing{uids: map[string]sets.Set[types.UID]{}} }

// expect records pods whose finalizer removal is under way.
func (r *releasing) expect(key string, pods []*corev1.Pod) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.uids[key] == nil {
		r.uids[key] = sets.New[types.UID]()
	}
	for _, p := range pods {
		r.uids[key].Insert(p.UID)
	}
}

// forget drops pods (a failed removal) or, without pods, the whole job.
func (r *releasing) forget(key string, pods ...*corev1.Pod) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(pods) == 0 {
		delete(r.uids, key)
		return
	}
	for _, p := range pods {
		r.uids[key].Delete(p.UID)
	}
	if r.uids[key].Len() == 0 {
		delete(r.uids, key)
	}
}

// observed notes a pod the informer shows: without the finalizer, its
// removal has landed.
func (r *releasing) observed(key string, pod *corev1.Pod) {
	if !hasFinalizer(pod) {
		r.forget(key, pod)
	}
}

// apply returns pods as they are once the removals under way have
// landed: those pods without the finalizer.
func (r *releasing) apply(key string, pods []*corev1.Pod) []*corev1.Pod {
	r.mu.Lock()
	defer r.mu.Unlock()
	uids := r.uids[key]
	if uids.Len() == 0 {
		return pods
	}
	out := make([]*corev1.Pod, len(pods))
	for i, p := range pods {
		out[i] = p
		if uids.Has(p.UID) && hasFinalizer(p) {
			q := p.DeepCopy()
			q.Finalizers = slices.DeleteFunc(q.Finalizers, func(f string) bool { return f == batchv1.JobTrackingFinalizer })
			out[i] = q
		}
	}
	return out
}
