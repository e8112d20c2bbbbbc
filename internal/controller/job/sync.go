package job

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strconv"
	"sync"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/utils/ptr"

	"github.com/svcnet/svcnet/internal/controller/controllerref"
	"github.com/svcnet/svcnet/internal/controller/podstate"
	"github.com/svcnet/svcnet/internal/controller/slowstart"
)

// Event reasons, as upstream's.
const (
	reasonSuccessfulCreate = "SuccessfulCreate"
	reasonFailedCreate     = "FailedCreate"
	reasonSuccessfulDelete = "SuccessfulDelete"
	reasonFailedDelete     = "FailedDelete"
)

// syncState is what one sync reads of a job and its pods.
type syncState struct {
	job  *batchv1.Job
	pods []*corev1.Pod
	now  time.Time
	// active are the pods running or about to; terminating the pods being
	// deleted that have not finished.
	active      []*corev1.Pod
	terminating int32
	// newSucceeded and newFailed finished and still carry the finalizer,
	// uncounted so far; ignored failed by an Ignore rule.
	newSucceeded, newFailed, ignored []*corev1.Pod
	uncountedSucceeded               sets.Set[types.UID]
	uncountedFailed                  sets.Set[types.UID]
	// succeededIndexes of an Indexed job, counted and new.
	succeededIndexes sets.Set[int]
	// failedIndexes and lastFailed of a job with backoffLimitPerIndex
	// (perindex.go).
	failedIndexes sets.Set[int]
	lastFailed    map[int]*corev1.Pod
}

func newSyncState(job *batchv1.Job, pods []*corev1.Pod, now time.Time) *syncState {
	s := &syncState{job: job, pods: pods, now: now,
		uncountedSucceeded: sets.New[types.UID](), uncountedFailed: sets.New[types.UID]()}
	if u := job.Status.UncountedTerminatedPods; u != nil {
		s.uncountedSucceeded.Insert(u.Succeeded...)
		s.uncountedFailed.Insert(u.Failed...)
	}
	for _, p := range pods {
		uncounted := s.uncountedSucceeded.Has(p.UID) || s.uncountedFailed.Has(p.UID)
		switch {
		case p.Status.Phase == corev1.PodSucceeded:
			if hasFinalizer(p) && !uncounted {
				s.newSucceeded = append(s.newSucceeded, p)
			}
		case podFailed(job, p):
			if hasFinalizer(p) && !uncounted {
				if failureCounts(job, p) {
					s.newFailed = append(s.newFailed, p)
				} else {
					s.ignored = append(s.ignored, p)
				}
			}
			if p.DeletionTimestamp != nil && p.Status.Phase != corev1.PodFailed {
				s.terminating++
			}
		case p.DeletionTimestamp != nil:
			s.terminating++
		default:
			s.active = append(s.active, p)
		}
	}
	if indexed(job) {
		completions := ptr.Deref(job.Spec.Completions, 0)
		s.succeededIndexes = parseIndexes(job.Status.CompletedIndexes, completions)
		for _, p := range pods {
			if i := indexOf(p, completions); i != noIndex && p.Status.Phase == corev1.PodSucceeded {
				s.succeededIndexes.Insert(i)
			}
		}
	}
	if perIndex(job) {
		s.failedIndexes = failedIndexes(job, pods)
		s.lastFailed = lastFailedPods(s)
	}
	return s
}

// podFailed says whether a pod counts as failed: Failed, or, unless the
// job replaces only Failed pods, being deleted before it succeeded (an
// orphan may never reach Failed).
func podFailed(job *batchv1.Job, p *corev1.Pod) bool {
	if p.Status.Phase == corev1.PodFailed {
		return true
	}
	if ptr.Deref(job.Spec.PodReplacementPolicy, batchv1.TerminatingOrFailed) == batchv1.Failed {
		return false
	}
	return p.DeletionTimestamp != nil && p.Status.Phase != corev1.PodSucceeded
}

func hasFinalizer(p *corev1.Pod) bool {
	return slices.Contains(p.Finalizers, batchv1.JobTrackingFinalizer)
}

func indexed(job *batchv1.Job) bool {
	return ptr.Deref(job.Spec.CompletionMode, batchv1.NonIndexedCompletion) == batchv1.IndexedCompletion
}

func suspended(job *batchv1.Job) bool { return ptr.Deref(job.Spec.Suspend, false) }

func finished(job *batchv1.Job) bool {
	return conditionTrue(job, batchv1.JobComplete) || conditionTrue(job, batchv1.JobFailed)
}

func conditionTrue(job *batchv1.Job, t batchv1.JobConditionType) bool {
	c := condition(job, t)
	return c != nil && c.Status == corev1.ConditionTrue
}

func condition(job *batchv1.Job, t batchv1.JobConditionType) *batchv1.JobCondition {
	for i := range job.Status.Conditions {
		if job.Status.Conditions[i].Type == t {
			return &job.Status.Conditions[i]
		}
	}
	return nil
}

// setCondition sets a condition's status, reason and message, and says
// whether that changed anything; the transition time moves with the
// status, as upstream's ensureJobConditionStatus.
func setCondition(job *batchv1.Job, t batchv1.JobConditionType, status corev1.ConditionStatus, reason, message string, now time.Time) bool {
	if c := condition(job, t); c != nil {
		if c.Status == status && c.Reason == reason && c.Message == message {
			return false
		}
		if c.Status != status {
			c.LastTransitionTime = metav1.NewTime(now)
		}
		c.Status, c.Reason, c.Message, c.LastProbeTime = status, reason, message, metav1.NewTime(now)
		return true
	}
	if status == corev1.ConditionFalse {
		return false // no condition is as good as a False one
	}
	job.Status.Conditions = append(job.Status.Conditions, batchv1.JobCondition{Type: t, Status: status, Reason: reason,
		Message: message, LastProbeTime: metav1.NewTime(now), LastTransitionTime: metav1.NewTime(now)})
	return true
}

// finishing is the interim condition of a job on its way to finish, and
// the terminal one it becomes once its pods are counted.
type finishing struct {
	interim  batchv1.JobConditionType // FailureTarget or SuccessCriteriaMet
	terminal batchv1.JobConditionType // Failed or Complete
	reason   string
	message  string
}

func failing(reason, message string) *finishing {
	return &finishing{batchv1.JobFailureTarget, batchv1.JobFailed, reason, message}
}

func succeeding(reason, message string) *finishing {
	return &finishing{batchv1.JobSuccessCriteriaMet, batchv1.JobComplete, reason, message}
}

// syncJob is upstream's syncJob: judge whether the job is finishing,
// manage its pods, then track the finished ones into the status.
func (c *Controller) syncJob(ctx context.Context, key string, s *syncState, mayAct bool) error {
	job := s.job
	st := &job.Status
	old := st.DeepCopy()
	if st.StartTime == nil && !suspended(job) {
		st.StartTime = ptr.To(metav1.NewTime(s.now))
	}
	c.backoff.observe(key, s.newSucceeded, s.newFailed, s.now)
	failed := st.Failed + int32(s.uncountedFailed.Len()+len(s.newFailed))
	succeeded := st.Succeeded + int32(s.uncountedSucceeded.Len()+len(s.newSucceeded))
	if indexed(job) {
		succeeded = int32(s.succeededIndexes.Len())
	}

	var fin *finishing
	switch c := condition(job, batchv1.JobSuccessCriteriaMet); {
	case c != nil && c.Status == corev1.ConditionTrue:
		fin = succeeding(c.Reason, c.Message)
	default:
		if t := condition(job, batchv1.JobFailureTarget); t != nil && t.Status == corev1.ConditionTrue {
			fin = failing(t.Reason, t.Message)
		} else if msg := failJobMessage(job, s.pods); msg != nil {
			fin = failing(batchv1.JobReasonPodFailurePolicy, *msg)
		}
	}
	if fin == nil {
		switch {
		case failed > *job.Spec.BackoffLimit || pastBackoffLimitOnFailure(job, s.pods):
			fin = failing(batchv1.JobReasonBackoffLimitExceeded, "Job has reached the specified backoff limit")
		case pastActiveDeadline(job, s.now):
			fin = failing(batchv1.JobReasonDeadlineExceeded, "Job was active longer than specified deadline")
		case job.Spec.ActiveDeadlineSeconds != nil && !suspended(job):
			c.queue.AddAfter(key, time.Duration(*job.Spec.ActiveDeadlineSeconds)*time.Second-s.now.Sub(st.StartTime.Time))
		}
	}
	if fin == nil && perIndex(job) {
		switch failed := s.failedIndexes.Len(); {
		case job.Spec.MaxFailedIndexes != nil && failed > int(*job.Spec.MaxFailedIndexes):
			fin = failing(batchv1.JobReasonMaxFailedIndexesExceeded, "Job has exceeded the specified maximal number of failed indexes")
		case failed > 0 && failed+s.succeededIndexes.Len() >= int(*job.Spec.Completions):
			fin = failing(batchv1.JobReasonFailedIndexes, "Job has failed indexes")
		}
	}
	if fin == nil && indexed(job) {
		if msg, met := matchSuccessPolicy(job.Spec.SuccessPolicy, *job.Spec.Completions, s.succeededIndexes); met {
			fin = succeeding(batchv1.JobReasonSuccessPolicy, msg)
		}
	}

	active := int32(len(s.active))
	var manageErr error
	if fin != nil {
		deleted, err := c.deletePods(ctx, job, s.active)
		if int(deleted) != len(s.active) || !mayAct {
			fin = nil // pods may remain: finish in a later sync
		}
		active -= deleted
		s.terminating += deleted
		manageErr = err
	} else {
		managed := false
		if mayAct && job.DeletionTimestamp == nil {
			active, manageErr = c.manage(ctx, key, s, succeeded)
			managed = true
		}
		var complete bool
		if job.Spec.Completions == nil {
			complete = succeeded > 0 && active == 0
		} else {
			complete = succeeded >= *job.Spec.Completions && active == 0
		}
		switch {
		case complete:
			fin = succeeding(batchv1.JobReasonCompletionsReached, "Reached expected number of succeeded pods")
		case managed && suspended(job):
			if setCondition(job, batchv1.JobSuspended, corev1.ConditionTrue, "JobSuspended", "Job suspended", s.now) {
				c.recorder.Event(job, corev1.EventTypeNormal, "Suspended", "Job suspended")
				st.StartTime = nil
			}
		case managed:
			if setCondition(job, batchv1.JobSuspended, corev1.ConditionFalse, "JobResumed", "Job resumed", s.now) {
				c.recorder.Event(job, corev1.EventTypeNormal, "Resumed", "Job resumed")
				st.StartTime = ptr.To(metav1.NewTime(s.now))
			}
		}
	}
	st.Active = active
	st.Ready = ptr.To(readyCount(s.active, active))
	st.Terminating = ptr.To(s.terminating)
	if err := c.track(ctx, s, fin, old); err != nil {
		return fmt.Errorf("tracking status of job %s: %w", key, err)
	}
	return manageErr
}

// readyCount is how many of the active pods are Ready, at most active
// (pods just deleted are no longer counted).
func readyCount(pods []*corev1.Pod, active int32) int32 {
	var n int32
	for _, p := range pods {
		if p.DeletionTimestamp == nil && podstate.Ready(p) {
			n++
		}
	}
	return min(n, active)
}

// failJobMessage is the message of the first FailJob rule a failed pod
// still carrying its finalizer matches.
func failJobMessage(job *batchv1.Job, pods []*corev1.Pod) *string {
	if job.Spec.PodFailurePolicy == nil {
		return nil
	}
	for _, p := range pods {
		if !podFailed(job, p) || !hasFinalizer(p) {
			continue
		}
		if action, msg := matchPodFailurePolicy(job.Spec.PodFailurePolicy, p); action == batchv1.PodFailurePolicyActionFailJob {
			return &msg
		}
	}
	return nil
}

// pastBackoffLimitOnFailure counts the container restarts of running
// pods of an OnFailure job against backoffLimit, as upstream.
func pastBackoffLimitOnFailure(job *batchv1.Job, pods []*corev1.Pod) bool {
	if job.Spec.Template.Spec.RestartPolicy != corev1.RestartPolicyOnFailure {
		return false
	}
	var restarts int32
	for _, p := range pods {
		if p.Status.Phase != corev1.PodRunning && p.Status.Phase != corev1.PodPending {
			continue
		}
		for _, cs := range slices.Concat(p.Status.InitContainerStatuses, p.Status.ContainerStatuses) {
			restarts += cs.RestartCount
		}
	}
	if *job.Spec.BackoffLimit == 0 {
		return restarts > 0
	}
	return restarts >= *job.Spec.BackoffLimit
}

func pastActiveDeadline(job *batchv1.Job, now time.Time) bool {
	if job.Spec.ActiveDeadlineSeconds == nil || job.Status.StartTime == nil || suspended(job) {
		return false
	}
	return now.Sub(job.Status.StartTime.Time) >= time.Duration(*job.Spec.ActiveDeadlineSeconds)*time.Second
}

// manage creates and deletes pods towards the wanted number of active
// ones and returns how many are active then.
func (c *Controller) manage(ctx context.Context, key string, s *syncState, succeeded int32) (int32, error) {
	job := s.job
	active := int32(len(s.active))
	if suspended(job) {
		deleted, err := c.deletePods(ctx, job, s.active)
		return active - deleted, err
	}
	parallelism := ptr.Deref(job.Spec.Parallelism, 1)
	var surplus []*corev1.Pod
	var indexes []int
	var want int32
	if indexed(job) {
		completions := *job.Spec.Completions
		held := sets.New[int]()
		var keep []*corev1.Pod
		for _, p := range s.active {
			i := indexOf(p, completions)
			if i == noIndex || s.succeededIndexes.Has(i) || held.Has(i) {
				surplus = append(surplus, p)
				continue
			}
			held.Insert(i)
			keep = append(keep, p)
		}
		if extra := len(keep) - int(parallelism); extra > 0 {
			sortForDeletion(keep)
			surplus = append(surplus, keep[:extra]...)
			keep = keep[extra:]
		}
		for _, p := range surplus {
			held.Delete(indexOf(p, completions))
		}
		indexes = missingIndexes(completions, s.succeededIndexes.Union(s.failedIndexes), held, int(parallelism)-len(keep))
		if perIndex(job) {
			var wait time.Duration
			indexes, wait = s.indexesPastBackoff(indexes)
			if wait > 0 {
				c.queue.AddAfter(key, wait)
			}
		}
		want = int32(len(keep) + len(indexes))
	} else {
		switch {
		case job.Spec.Completions == nil && succeeded > 0:
			want = active
		case job.Spec.Completions == nil:
			want = parallelism
		default:
			want = max(0, min(*job.Spec.Completions-succeeded, parallelism))
		}
		if extra := int(active - want); extra > 0 {
			sorted := slices.Clone(s.active)
			sortForDeletion(sorted)
			surplus = sorted[:extra]
		}
	}
	if len(surplus) > 0 {
		deleted, err := c.deletePods(ctx, job, surplus)
		return active - deleted, err
	}
	create := int(want - active)
	if !indexed(job) && ptr.Deref(job.Spec.PodReplacementPolicy, batchv1.TerminatingOrFailed) == batchv1.Failed {
		create -= int(s.terminating)
	}
	if create <= 0 {
		return active, nil
	}
	if wait := c.backoff.remaining(key, s.now); wait > 0 && !perIndex(job) {
		c.queue.AddAfter(key, wait)
		return active, nil
	}
	c.expectations.ExpectCreations(key, create)
	created, err := slowstart.Run(create, func(i int) error {
		if indexes == nil {
			return c.createPod(ctx, job, newPod(job, noIndex))
		}
		pod := newPod(job, indexes[i])
		if perIndex(job) {
			setIndexFailureCounts(pod, job, s.lastFailed[indexes[i]])
		}
		return c.createPod(ctx, job, pod)
	})
	for range create - created {
		c.expectations.CreationObserved(key)
	}
	return active + int32(created), err
}

// sortForDeletion puts first the pods least worth keeping: unscheduled,
// then pending, then not ready, then the newest.
func sortForDeletion(pods []*corev1.Pod) {
	rank := func(p *corev1.Pod) int {
		switch {
		case p.Spec.NodeName == "":
			return 0
		case p.Status.Phase == corev1.PodPending:
			return 1
		case !podstate.Ready(p):
			return 2
		}
		return 3
	}
	sort.SliceStable(pods, func(i, j int) bool {
		if ri, rj := rank(pods[i]), rank(pods[j]); ri != rj {
			return ri < rj
		}
		return pods[j].CreationTimestamp.Before(&pods[i].CreationTimestamp)
	})
}

// createPod creates a pod of the job (newPod).
func (c *Controller) createPod(ctx context.Context, job *batchv1.Job, pod *corev1.Pod) error {
	created, err := c.client.CoreV1().Pods(job.Namespace).Create(ctx, pod, metav1.CreateOptions{})
	switch {
	case apierrors.HasStatusCause(err, corev1.NamespaceTerminatingCause):
		return nil
	case err != nil:
		if !errors.Is(err, context.Canceled) {
			c.recorder.Eventf(job, corev1.EventTypeWarning, reasonFailedCreate, "Error creating: %v", err)
		}
		return err
	}
	c.recorder.Eventf(job, corev1.EventTypeNormal, reasonSuccessfulCreate, "Created pod: %v", created.Name)
	return nil
}

// deletePods deletes pods (keeping their finalizers, which tracking
// removes once they are counted) and returns how many it deleted.
func (c *Controller) deletePods(ctx context.Context, job *batchv1.Job, pods []*corev1.Pod) (int32, error) {
	if len(pods) == 0 {
		return 0, nil
	}
	key := job.Namespace + "/" + job.Name
	podKeys := make([]string, len(pods))
	for i, p := range pods {
		podKeys[i] = p.Namespace + "/" + p.Name
	}
	c.expectations.ExpectDeletions(key, podKeys)
	n, err := parallel(pods, func(p *corev1.Pod) error {
		err := c.client.CoreV1().Pods(p.Namespace).Delete(ctx, p.Name, metav1.DeleteOptions{})
		if err != nil {
			c.expectations.DeletionObserved(key, p.Namespace+"/"+p.Name)
		}
		switch {
		case apierrors.IsNotFound(err):
			return nil
		case err != nil:
			if !errors.Is(err, context.Canceled) {
				c.recorder.Eventf(job, corev1.EventTypeWarning, reasonFailedDelete, "Error deleting: %v", err)
			}
			return err
		}
		c.recorder.Eventf(job, corev1.EventTypeNormal, reasonSuccessfulDelete, "Deleted pod: %v", p.Name)
		return nil
	})
	return int32(n), err
}

// removeFinalizers takes the tracking finalizer off pods; a pod gone
// already is no error.
func (c *Controller) removeFinalizers(ctx context.Context, pods []*corev1.Pod) error {
	if len(pods) == 0 {
		return nil
	}
	patch := []byte(fmt.Sprintf(`{"metadata":{"$deleteFromPrimitiveList/finalizers":[%q]}}`, batchv1.JobTrackingFinalizer))
	_, err := parallel(pods, func(p *corev1.Pod) error {
		_, err := c.client.CoreV1().Pods(p.Namespace).Patch(ctx, p.Name, types.StrategicMergePatchType, patch, metav1.PatchOptions{})
		if err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("remove tracking finalizer of pod %s/%s: %w", p.Namespace, p.Name, err)
		}
		return nil
	})
	return err
}

// track counts finished pods exactly once, as upstream's
// trackJobStatusAndRemoveFinalizers: their UIDs are first written to
// status.uncountedTerminatedPods, then their finalizers removed, then
// they move to the succeeded and failed counters. A finishing job gets
// its interim condition first and its terminal one once no pod is left
// uncounted or terminating.
func (c *Controller) track(ctx context.Context, s *syncState, fin *finishing, old *batchv1.JobStatus) error {
	job := s.job
	st := &job.Status
	for _, p := range s.newSucceeded {
		s.uncountedSucceeded.Insert(p.UID)
	}
	for _, p := range s.newFailed {
		if fin == nil && s.awaitingReplacement(p) {
			continue
		}
		s.uncountedFailed.Insert(p.UID)
	}
	setUncounted(st, s.uncountedSucceeded, s.uncountedFailed)
	if indexed(job) {
		st.CompletedIndexes = formatIndexes(s.succeededIndexes)
	}
	if perIndex(job) {
		st.FailedIndexes = ptr.To(formatIndexes(s.failedIndexes))
	}
	if fin != nil {
		// Recorded before the pods are let go, so that the reason
		// survives a crash in between.
		setCondition(job, fin.interim, corev1.ConditionTrue, fin.reason, fin.message, s.now)
	}
	if !statusEqual(st, old) {
		updated, err := c.updateStatus(ctx, job)
		if err != nil {
			return err
		}
		job = updated
		s.job = updated
		st = &job.Status
	}

	// Let go of the pods counted (or being counted) and those the policy
	// ignores; a finishing job lets go of all it has.
	var release []*corev1.Pod
	byUID := map[types.UID]*corev1.Pod{}
	for _, p := range s.pods {
		byUID[p.UID] = p
		if !hasFinalizer(p) {
			continue
		}
		if s.uncountedSucceeded.Has(p.UID) || s.uncountedFailed.Has(p.UID) ||
			(slices.Contains(s.ignored, p) && (fin != nil || !s.awaitingReplacement(p))) ||
			(fin != nil && !slices.Contains(s.active, p)) || job.DeletionTimestamp != nil {
			release = append(release, p)
		}
	}
	key := job.Namespace + "/" + job.Name
	c.releasing.expect(key, release)
	removeErr := c.removeFinalizers(ctx, release)
	if removeErr != nil {
		c.releasing.forget(key, release...)
		// Count only what is known to be let go: the rest next time.
		release = nil
	}
	released := sets.New[types.UID]()
	for _, p := range release {
		released.Insert(p.UID)
	}
	let := func(uid types.UID) bool {
		p, ok := byUID[uid]
		return !ok || !hasFinalizer(p) || released.Has(uid)
	}
	changed := false
	for _, uid := range sets.List(s.uncountedSucceeded) {
		if let(uid) {
			s.uncountedSucceeded.Delete(uid)
			st.Succeeded++
			changed = true
		}
	}
	for _, uid := range sets.List(s.uncountedFailed) {
		if let(uid) {
			s.uncountedFailed.Delete(uid)
			st.Failed++
			changed = true
		}
	}
	setUncounted(st, s.uncountedSucceeded, s.uncountedFailed)
	if indexed(job) {
		st.Succeeded = int32(s.succeededIndexes.Len())
	}
	done := fin != nil && s.uncountedSucceeded.Len()+s.uncountedFailed.Len() == 0 && ptr.Deref(st.Terminating, 0) == 0
	if done {
		setCondition(job, fin.terminal, corev1.ConditionTrue, fin.reason, fin.message, s.now)
		if fin.terminal == batchv1.JobComplete {
			st.CompletionTime = ptr.To(metav1.NewTime(s.now))
		}
		changed = true
	}
	if changed {
		updated, err := c.updateStatus(ctx, job)
		if err != nil {
			return err
		}
		if done {
			c.recordFinished(updated, fin)
		}
	}
	return removeErr
}

func (c *Controller) recordFinished(job *batchv1.Job, fin *finishing) {
	if fin.terminal == batchv1.JobComplete {
		if job.Spec.Completions != nil && job.Status.Succeeded > *job.Spec.Completions {
			c.recorder.Event(job, corev1.EventTypeWarning, "TooManySucceededPods", "Too many succeeded pods running after completion count reached")
		}
		c.recorder.Event(job, corev1.EventTypeNormal, "Completed", "Job completed")
		return
	}
	c.recorder.Event(job, corev1.EventTypeWarning, fin.reason, fin.message)
}

func setUncounted(st *batchv1.JobStatus, succeeded, failed sets.Set[types.UID]) {
	st.UncountedTerminatedPods = &batchv1.UncountedTerminatedPods{Succeeded: sets.List(succeeded), Failed: sets.List(failed)}
}

// statusEqual compares statuses, an empty uncounted list as none.
func statusEqual(a, b *batchv1.JobStatus) bool {
	norm := func(s *batchv1.JobStatus) batchv1.JobStatus {
		out := *s.DeepCopy()
		if u := out.UncountedTerminatedPods; u == nil || len(u.Succeeded)+len(u.Failed) == 0 {
			out.UncountedTerminatedPods = nil
		}
		return out
	}
	return apiequality.Semantic.DeepEqual(norm(a), norm(b))
}

// newPod is a pod of the job's template, owned by the job and carrying
// the tracking finalizer; an Indexed job's pod has its index (annotation,
// label, JOB_COMPLETION_INDEX) and the <job>-<index> hostname.
func newPod(job *batchv1.Job, index int) *corev1.Pod {
	pod := controllerref.NewPod(job, kind, &job.Spec.Template)
	pod.Finalizers = append(pod.Finalizers, batchv1.JobTrackingFinalizer)
	if index == noIndex {
		pod.GenerateName = job.Name + "-"
		return pod
	}
	i := strconv.Itoa(index)
	pod.GenerateName = job.Name + "-" + i + "-"
	if pod.Annotations == nil {
		pod.Annotations = map[string]string{}
	}
	pod.Annotations[batchv1.JobCompletionIndexAnnotation] = i
	if pod.Labels == nil {
		pod.Labels = map[string]string{}
	}
	pod.Labels[batchv1.JobCompletionIndexAnnotation] = i
	if pod.Spec.Hostname == "" {
		pod.Spec.Hostname = job.Name + "-" + i
	}
	env := corev1.EnvVar{Name: "JOB_COMPLETION_INDEX", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{
		FieldPath: fmt.Sprintf("metadata.annotations['%s']", batchv1.JobCompletionIndexAnnotation)}}}
	for _, list := range [][]corev1.Container{pod.Spec.InitContainers, pod.Spec.Containers} {
		for k := range list {
			if !slices.ContainsFunc(list[k].Env, func(e corev1.EnvVar) bool { return e.Name == env.Name }) {
				list[k].Env = append(list[k].Env, env)
			}
		}
	}
	return pod
}

// backoffStore remembers, per job, the failures since the last success,
// for the delay before the next pod (upstream's backoffRecord).
type backoffStore struct {
	mu sync.Mutex
	m  map[string]backoffRecord
}

type backoffRecord struct {
	failures    int
	lastFailure time.Time
}

func newBackoffStore() *backoffStore { return &backoffStore{m: map[string]backoffRecord{}} }

// observe records the pods that newly finished.
func (b *backoffStore) observe(key string, succeeded, failed []*corev1.Pod, now time.Time) {
	if len(succeeded) == 0 && len(failed) == 0 {
		return
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	r := b.m[key]
	if len(failed) == 0 {
		delete(b.m, key)
		return
	}
	r.failures += len(failed)
	for _, p := range failed {
		if t := finishedAt(p, now); t.After(r.lastFailure) {
			r.lastFailure = t
		}
	}
	b.m[key] = r
}

// remaining is how long the job still waits before its next pod
// (failureBackoff).
func (b *backoffStore) remaining(key string, now time.Time) time.Duration {
	b.mu.Lock()
	defer b.mu.Unlock()
	r, ok := b.m[key]
	if !ok || r.failures == 0 {
		return 0
	}
	return max(0, r.lastFailure.Add(failureBackoff(r.failures)).Sub(now))
}

func (b *backoffStore) forget(key string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	delete(b.m, key)
}

// finishedAt is when a failed pod's last container ended, now if unknown.
func finishedAt(p *corev1.Pod, now time.Time) time.Time {
	var t time.Time
	for _, cs := range slices.Concat(p.Status.InitContainerStatuses, p.Status.ContainerStatuses) {
		if term := cs.State.Terminated; term != nil && term.FinishedAt.After(t) {
			t = term.FinishedAt.Time
		}
	}
	if t.IsZero() || t.After(now) {
		return now
	}
	return t
}
