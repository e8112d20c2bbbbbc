package job

import (
	"math"
	"strconv"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/utils/ptr"
)

// An Indexed job with spec.backoffLimitPerIndex gives each index its own
// budget of failures, as upstream: each pod carries, in the
// batch.kubernetes.io/job-index-failure-count annotation (and
// job-index-ignored-failure-count for failures an Ignore rule matched),
// how often its index failed before it. A counted failure of a pod whose
// count has reached the limit, or one a FailIndex rule matches, fails the
// index: status.failedIndexes lists it and it gets no new pod. The job
// fails once more indexes failed than spec.maxFailedIndexes, or once every
// index has either succeeded or failed and some failed. An index's next
// pod waits out a back-off grown from its own failures (10s, doubling),
// not the job's; its last failed pod keeps its tracking finalizer, and is
// not counted yet, until that replacement exists, so that the count is
// read from it even after a restart of the controller.

// perIndex says whether the job limits failures per index.
func perIndex(job *batchv1.Job) bool {
	return indexed(job) && job.Spec.BackoffLimitPerIndex != nil
}

// indexFailed says whether a failed pod fails its index.
func indexFailed(job *batchv1.Job, p *corev1.Pod) bool {
	if !podFailed(job, p) {
		return false
	}
	action, _ := matchPodFailurePolicy(job.Spec.PodFailurePolicy, p)
	switch action {
	case batchv1.PodFailurePolicyActionFailIndex:
		return true
	case batchv1.PodFailurePolicyActionIgnore:
		return false
	}
	return annotationCount(p, batchv1.JobIndexFailureCountAnnotation) >= *job.Spec.BackoffLimitPerIndex
}

// failedIndexes are the indexes of status.failedIndexes and those that
// failed since, by pods still carrying the finalizer.
func failedIndexes(job *batchv1.Job, pods []*corev1.Pod) sets.Set[int] {
	completions := *job.Spec.Completions
	out := parseIndexes(ptr.Deref(job.Status.FailedIndexes, ""), completions)
	for _, p := range pods {
		if i := indexOf(p, completions); i != noIndex && hasFinalizer(p) && indexFailed(job, p) {
			out.Insert(i)
		}
	}
	return out
}

// lastFailedPods are, for each index that has neither succeeded, failed
// nor an active pod, its failed pod with the highest failure count (the
// latest finished of equals), which the index's next pod replaces.
func lastFailedPods(s *syncState) map[int]*corev1.Pod {
	completions := *s.job.Spec.Completions
	active := sets.New[int]()
	for _, p := range s.active {
		active.Insert(indexOf(p, completions))
	}
	out := map[int]*corev1.Pod{}
	for _, p := range s.pods {
		i := indexOf(p, completions)
		if i == noIndex || !hasFinalizer(p) || !podFailed(s.job, p) ||
			s.succeededIndexes.Has(i) || s.failedIndexes.Has(i) || active.Has(i) {
			continue
		}
		last, ok := out[i]
		if !ok {
			out[i] = p
			continue
		}
		n, lastN := absoluteFailureCount(p), absoluteFailureCount(last)
		if n > lastN || (n == lastN && !finishedAt(p, s.now).Before(finishedAt(last, s.now))) {
			out[i] = p
		}
	}
	return out
}

// awaitingReplacement says whether p is the last failed pod of an index
// whose next pod is not created yet.
func (s *syncState) awaitingReplacement(p *corev1.Pod) bool {
	last, ok := s.lastFailed[indexOf(p, ptr.Deref(s.job.Spec.Completions, 0))]
	return ok && last.UID == p.UID
}

// indexFailureCounts are the failure counts of the pod that replaces
// replaced (nil for an index's first pod): replaced's, plus its own
// failure.
func indexFailureCounts(job *batchv1.Job, replaced *corev1.Pod) (failures, ignored int32) {
	if replaced == nil {
		return 0, 0
	}
	failures = annotationCount(replaced, batchv1.JobIndexFailureCountAnnotation)
	ignored = annotationCount(replaced, batchv1.JobIndexIgnoredFailureCountAnnotation)
	if failureCounts(job, replaced) {
		failures++
	} else {
		ignored++
	}
	return failures, ignored
}

func absoluteFailureCount(p *corev1.Pod) int32 {
	return annotationCount(p, batchv1.JobIndexFailureCountAnnotation) + annotationCount(p, batchv1.JobIndexIgnoredFailureCountAnnotation)
}

// annotationCount reads a failure count annotation; 0 when it is absent
// or not a count, as upstream.
func annotationCount(p *corev1.Pod, key string) int32 {
	n, err := strconv.Atoi(p.Annotations[key])
	if err != nil || n < 0 || n > math.MaxInt32 {
		return 0
	}
	return int32(n)
}

// indexBackoff is how long an index still waits before the pod that
// replaces its last failed one.
func indexBackoff(last *corev1.Pod, now time.Time) time.Duration {
	if last == nil {
		return 0
	}
	delay := failureBackoff(int(absoluteFailureCount(last)) + 1)
	return max(0, finishedAt(last, now).Add(delay).Sub(now))
}

// failureBackoff is the delay after failures consecutive failures: 10s
// after the first, doubling per failure up to 10 minutes.
func failureBackoff(failures int) time.Duration {
	if failures <= 0 {
		return 0
	}
	if failures > 7 {
		return maxPodFailureBackoff
	}
	return min(podFailureBackoff<<(failures-1), maxPodFailureBackoff)
}

// indexesPastBackoff are those of indexes whose back-off has passed, and
// the shortest wait of the others.
func (s *syncState) indexesPastBackoff(indexes []int) ([]int, time.Duration) {
	var ready []int
	var wait time.Duration
	for _, i := range indexes {
		switch w := indexBackoff(s.lastFailed[i], s.now); {
		case w == 0:
			ready = append(ready, i)
		case wait == 0 || w < wait:
			wait = w
		}
	}
	return ready, wait
}

// setIndexFailureCounts annotates the pod that replaces replaced with its
// index's failure counts.
func setIndexFailureCounts(pod *corev1.Pod, job *batchv1.Job, replaced *corev1.Pod) {
	failures, ignored := indexFailureCounts(job, replaced)
	pod.Annotations[batchv1.JobIndexFailureCountAnnotation] = strconv.Itoa(int(failures))
	if ignored > 0 {
		pod.Annotations[batchv1.JobIndexIgnoredFailureCountAnnotation] = strconv.Itoa(int(ignored))
	}
}
