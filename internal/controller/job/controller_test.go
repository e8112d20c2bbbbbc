package job

import (
	"context"
	"fmt"
	"math"
	"slices"
	"strings"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/utils/ptr"

	"github.com/svcnet/svcnet/internal/controller"
	"github.com/svcnet/svcnet/internal/controller/controllertest"
)

// newJob is a job as the API server stores it: generated selector and
// labels, defaults.
func newJob(name string, completions, parallelism int32, mode batchv1.CompletionMode) *batchv1.Job {
	uid := types.UID("uid-" + name)
	l := map[string]string{batchv1.ControllerUidLabel: string(uid), batchv1.JobNameLabel: name}
	return &batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default", UID: uid},
		Spec: batchv1.JobSpec{
			Completions: ptr.To(completions), Parallelism: ptr.To(parallelism), BackoffLimit: ptr.To[int32](1),
			CompletionMode: ptr.To(mode), Suspend: ptr.To(false), PodReplacementPolicy: ptr.To(batchv1.TerminatingOrFailed),
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{batchv1.ControllerUidLabel: string(uid)}},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: l}, Spec: corev1.PodSpec{
				RestartPolicy: corev1.RestartPolicyNever, Containers: []corev1.Container{{Name: "c", Image: "busybox"}}}},
		},
	}
}

func run(t *testing.T, cs *fake.Clientset) *Controller {
	var c *Controller
	controllertest.Start(t, cs, func(ctx context.Context, d controller.Deps) []func(context.Context) {
		var err error
		if c, err = New(ctx, d, Options{Workers: 2}); err != nil {
			t.Fatal(err)
		}
		return []func(context.Context){c.Run}
	})
	return c
}

func pods(t *testing.T, cs *fake.Clientset) []corev1.Pod {
	list, err := cs.CoreV1().Pods("default").List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return list.Items
}

// finish ends the running pods with the given exit code, as a node would.
func finish(t *testing.T, cs *fake.Clientset, code int32) {
	for _, p := range pods(t, cs) {
		if p.Status.Phase != "" {
			continue
		}
		controllertest.RetryOnConflict(t, func() error {
			cur, err := cs.CoreV1().Pods("default").Get(context.Background(), p.Name, metav1.GetOptions{})
			if err != nil {
				return err
			}
			cur.Status.Phase = corev1.PodSucceeded
			if code != 0 {
				cur.Status.Phase = corev1.PodFailed
			}
			cur.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: "c", State: corev1.ContainerState{
				Terminated: &corev1.ContainerStateTerminated{ExitCode: code, FinishedAt: metav1.Now()}}}}
			_, err = cs.CoreV1().Pods("default").UpdateStatus(context.Background(), cur, metav1.UpdateOptions{})
			return err
		})
	}
}

func jobStatus(t *testing.T, cs *fake.Clientset, name string) batchv1.JobStatus {
	j, err := cs.BatchV1().Jobs("default").Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return j.Status
}

func waitPods(t *testing.T, cs *fake.Clientset, n int) {
	controllertest.Eventually(t, func() string {
		running := 0
		for _, p := range pods(t, cs) {
			if p.Status.Phase == "" {
				running++
			}
		}
		if running != n {
			return fmt.Sprintf("%d running pods, want %d", running, n)
		}
		return ""
	})
}

func TestCompletionsAndParallelism(t *testing.T) {
	cs := controllertest.NewClient(newJob("work", 3, 2, batchv1.NonIndexedCompletion))
	run(t, cs)
	waitPods(t, cs, 2)
	for _, p := range pods(t, cs) {
		if !slices.Contains(p.Finalizers, batchv1.JobTrackingFinalizer) || metav1.GetControllerOf(&p).Name != "work" {
			t.Errorf("pod %s: finalizers %v, owner %v", p.Name, p.Finalizers, p.OwnerReferences)
		}
	}
	finish(t, cs, 0)
	waitPods(t, cs, 1) // one completion left
	finish(t, cs, 0)
	controllertest.Eventually(t, func() string {
		st := jobStatus(t, cs, "work")
		if st.Succeeded != 3 || !hasCondition(st, batchv1.JobComplete) || !hasCondition(st, batchv1.JobSuccessCriteriaMet) || st.CompletionTime == nil {
			return fmt.Sprintf("status %+v", st)
		}
		return ""
	})
	for _, p := range pods(t, cs) {
		if len(p.Finalizers) != 0 {
			t.Errorf("pod %s kept finalizers %v", p.Name, p.Finalizers)
		}
	}
}

func TestBackoffLimitExceeded(t *testing.T) {
	cs := controllertest.NewClient(newJob("broken", 1, 1, batchv1.NonIndexedCompletion))
	c := run(t, cs)
	waitPods(t, cs, 1)
	finish(t, cs, 3)
	// The replacement waits out the back-off of the first failure, which
	// is counted (so that no later sync observes it again).
	controllertest.Eventually(t, func() string {
		if w := c.backoff.remaining("default/broken", time.Now()); w < 5*time.Second {
			return fmt.Sprintf("back-off %s after one failure, want about 10s", w)
		}
		if st := jobStatus(t, cs, "broken"); st.Failed != 1 {
			return fmt.Sprintf("failed %d, want 1", st.Failed)
		}
		return ""
	})
	c.backoff.forget("default/broken")
	c.queue.Add("default/broken")
	waitPods(t, cs, 1)
	finish(t, cs, 3)
	controllertest.Eventually(t, func() string {
		st := jobStatus(t, cs, "broken")
		for _, cond := range st.Conditions {
			if cond.Type == batchv1.JobFailed && cond.Reason == batchv1.JobReasonBackoffLimitExceeded && st.Failed == 2 && hasCondition(st, batchv1.JobFailureTarget) {
				return ""
			}
		}
		return fmt.Sprintf("status %+v", st)
	})
}

func TestIndexedPods(t *testing.T) {
	cs := controllertest.NewClient(newJob("idx", 3, 2, batchv1.IndexedCompletion))
	run(t, cs)
	waitPods(t, cs, 2)
	var got []string
	for _, p := range pods(t, cs) {
		env := p.Spec.Containers[0].Env
		if len(env) != 1 || env[0].Name != "JOB_COMPLETION_INDEX" ||
			env[0].ValueFrom.FieldRef.FieldPath != "metadata.annotations['batch.kubernetes.io/job-completion-index']" {
			t.Errorf("pod %s env %+v", p.Name, env)
		}
		got = append(got, p.Annotations[batchv1.JobCompletionIndexAnnotation]+"="+p.Spec.Hostname)
	}
	slices.Sort(got)
	if strings.Join(got, " ") != "0=idx-0 1=idx-1" {
		t.Errorf("indexes and hostnames %v", got)
	}
	finish(t, cs, 0)
	waitPods(t, cs, 1)
	finish(t, cs, 0)
	controllertest.Eventually(t, func() string {
		if st := jobStatus(t, cs, "idx"); st.CompletedIndexes != "0-2" || !hasCondition(st, batchv1.JobComplete) {
			return fmt.Sprintf("status %+v", st)
		}
		return ""
	})
}

func TestSuspendDeletesPods(t *testing.T) {
	j := newJob("later", 2, 2, batchv1.NonIndexedCompletion)
	j.Spec.Suspend = ptr.To(true)
	cs := controllertest.NewClient(j)
	run(t, cs)
	controllertest.Eventually(t, func() string {
		st := jobStatus(t, cs, "later")
		if !hasCondition(st, batchv1.JobSuspended) || len(pods(t, cs)) != 0 || st.StartTime != nil {
			return fmt.Sprintf("status %+v, %d pods", st, len(pods(t, cs)))
		}
		return ""
	})
}

func TestIndexes(t *testing.T) {
	s := parseIndexes("0,2-4,9", 5)
	if got := formatIndexes(s); got != "0,2-4" {
		t.Errorf("formatted %q", got)
	}
	if got := formatIndexes(sets.New(1, 2, 5, 6, 7)); got != "1,2,5-7" {
		t.Errorf("a pair formatted %q, want 1,2", got)
	}
	if got := missingIndexes(6, s, sets.New(1), 3); !slices.Equal(got, []int{5}) {
		t.Errorf("missing %v", got)
	}
	policy := &batchv1.SuccessPolicy{Rules: []batchv1.SuccessPolicyRule{{SucceededIndexes: ptr.To("0-1")}, {SucceededCount: ptr.To[int32](3)}}}
	if msg, ok := matchSuccessPolicy(policy, 5, s); !ok || msg != "Matched rules at index 1" {
		t.Errorf("success policy: %q %v", msg, ok)
	}
}

func TestPodFailurePolicy(t *testing.T) {
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "ns"}, Status: corev1.PodStatus{Phase: corev1.PodFailed,
		ContainerStatuses: []corev1.ContainerStatus{{Name: "main", State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 42}}}}}}
	policy := &batchv1.PodFailurePolicy{Rules: []batchv1.PodFailurePolicyRule{
		{Action: batchv1.PodFailurePolicyActionIgnore, OnExitCodes: &batchv1.PodFailurePolicyOnExitCodesRequirement{Operator: batchv1.PodFailurePolicyOnExitCodesOpIn, Values: []int32{1}}},
		{Action: batchv1.PodFailurePolicyActionFailJob, OnExitCodes: &batchv1.PodFailurePolicyOnExitCodesRequirement{Operator: batchv1.PodFailurePolicyOnExitCodesOpNotIn, Values: []int32{1}}},
	}}
	action, msg := matchPodFailurePolicy(policy, pod)
	if action != batchv1.PodFailurePolicyActionFailJob || msg != "Container main for pod ns/p failed with exit code 42 matching FailJob rule at index 1" {
		t.Errorf("FailJob: %v %q", action, msg)
	}
	pod.Status.ContainerStatuses[0].State.Terminated.ExitCode = 1
	if action, msg := matchPodFailurePolicy(policy, pod); action != batchv1.PodFailurePolicyActionIgnore || msg != "" {
		t.Errorf("Ignore: %v %q", action, msg)
	}
}

func hasCondition(st batchv1.JobStatus, t batchv1.JobConditionType) bool {
	for _, c := range st.Conditions {
		if c.Type == t && c.Status == corev1.ConditionTrue {
			return true
		}
	}
	return false
}

// TestBehindOwnWrite: a sync on a cached job older than the status the
// controller last wrote waits for the informer to show the write.
func TestBehindOwnWrite(t *testing.T) {
	c := &Controller{}
	job := newJob("w", 1, 1, batchv1.NonIndexedCompletion)
	job.ResourceVersion = "9"
	if c.behindOwnWrite("default/w", job) {
		t.Error("behind with no write of its own")
	}
	c.written.Store("default/w", int64(10))
	if !c.behindOwnWrite("default/w", job) {
		t.Error("a copy older than the controller's write is not behind")
	}
	job.ResourceVersion = "10"
	if c.behindOwnWrite("default/w", job) {
		t.Error("the copy of the write itself is behind")
	}
	if _, ok := c.written.Load("default/w"); ok {
		t.Error("the observed write is still remembered")
	}
}

// endIndex ends the running pod of an index with the given exit code, its
// container finished a minute ago (past the index's back-off).
func endIndex(t *testing.T, cs *fake.Clientset, index string, code int32) {
	t.Helper()
	for _, p := range pods(t, cs) {
		if p.Status.Phase != "" || p.Annotations[batchv1.JobCompletionIndexAnnotation] != index {
			continue
		}
		cur := p.DeepCopy()
		cur.Status.Phase = corev1.PodSucceeded
		if code != 0 {
			cur.Status.Phase = corev1.PodFailed
		}
		cur.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: "c", State: corev1.ContainerState{
			Terminated: &corev1.ContainerStateTerminated{ExitCode: code, FinishedAt: metav1.NewTime(time.Now().Add(-time.Minute))}}}}
		if _, err := cs.CoreV1().Pods("default").UpdateStatus(context.Background(), cur, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
		return
	}
	t.Fatalf("no running pod of index %s", index)
}

// failureCounts are the failure count annotations of the job's pods, by
// index, sorted.
func indexFailureAnnotations(t *testing.T, cs *fake.Clientset) string {
	var out []string
	for _, p := range pods(t, cs) {
		out = append(out, p.Annotations[batchv1.JobCompletionIndexAnnotation]+":"+p.Annotations[batchv1.JobIndexFailureCountAnnotation])
	}
	slices.Sort(out)
	return strings.Join(out, " ")
}

func TestBackoffLimitPerIndex(t *testing.T) {
	j := newJob("per-index", 3, 3, batchv1.IndexedCompletion)
	j.Spec.BackoffLimit = ptr.To[int32](math.MaxInt32)
	j.Spec.BackoffLimitPerIndex = ptr.To[int32](1)
	j.Spec.PodFailurePolicy = &batchv1.PodFailurePolicy{Rules: []batchv1.PodFailurePolicyRule{
		{Action: batchv1.PodFailurePolicyActionFailIndex, OnExitCodes: &batchv1.PodFailurePolicyOnExitCodesRequirement{Operator: batchv1.PodFailurePolicyOnExitCodesOpIn, Values: []int32{42}}},
	}}
	cs := controllertest.NewClient(j)
	run(t, cs)
	waitPods(t, cs, 3)
	// Index 2 fails for good at once (FailIndex); index 1 may fail once
	// more, with a replacement that carries the count; the failed pod
	// awaiting it is counted once the replacement exists.
	endIndex(t, cs, "2", 42)
	endIndex(t, cs, "1", 1)
	controllertest.Eventually(t, func() string {
		st := jobStatus(t, cs, "per-index")
		if got := indexFailureAnnotations(t, cs); got != "0:0 1:0 1:1 2:0" || ptr.Deref(st.FailedIndexes, "-") != "2" || st.Failed != 2 {
			return fmt.Sprintf("pods %s, failedIndexes %v, failed %d", got, ptr.Deref(st.FailedIndexes, "nil"), st.Failed)
		}
		return ""
	})
	endIndex(t, cs, "1", 1)
	endIndex(t, cs, "0", 0)
	controllertest.Eventually(t, func() string {
		st := jobStatus(t, cs, "per-index")
		c := condition(&batchv1.Job{Status: st}, batchv1.JobFailed)
		if c == nil || c.Reason != batchv1.JobReasonFailedIndexes || c.Message != "Job has failed indexes" ||
			*st.FailedIndexes != "1,2" || st.CompletedIndexes != "0" || st.Failed != 3 || st.Succeeded != 1 {
			return fmt.Sprintf("status %+v", st)
		}
		return ""
	})
	if got := indexFailureAnnotations(t, cs); got != "0:0 1:0 1:1 2:0" {
		t.Errorf("pods by index and failure count: %s", got)
	}
}

func TestMaxFailedIndexes(t *testing.T) {
	j := newJob("max-failed", 4, 1, batchv1.IndexedCompletion)
	j.Spec.BackoffLimit = ptr.To[int32](math.MaxInt32)
	j.Spec.BackoffLimitPerIndex = ptr.To[int32](0)
	j.Spec.MaxFailedIndexes = ptr.To[int32](0)
	cs := controllertest.NewClient(j)
	run(t, cs)
	waitPods(t, cs, 1)
	endIndex(t, cs, "0", 1)
	controllertest.Eventually(t, func() string {
		st := jobStatus(t, cs, "max-failed")
		c := condition(&batchv1.Job{Status: st}, batchv1.JobFailed)
		if c == nil || c.Reason != batchv1.JobReasonMaxFailedIndexesExceeded || *st.FailedIndexes != "0" || st.Failed != 1 || len(pods(t, cs)) != 1 {
			return fmt.Sprintf("status %+v, %d pods", st, len(pods(t, cs)))
		}
		return ""
	})
}

func TestIndexBackoff(t *testing.T) {
	now := time.Now()
	failed := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Annotations: map[string]string{batchv1.JobIndexFailureCountAnnotation: "1",
		batchv1.JobIndexIgnoredFailureCountAnnotation: "1"}}, Status: corev1.PodStatus{ContainerStatuses: []corev1.ContainerStatus{{
		State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 1, FinishedAt: metav1.NewTime(now.Add(-10 * time.Second))}}}}}}
	// The third failure of the index: 40s from its end.
	if got := indexBackoff(failed, now); got != 30*time.Second {
		t.Errorf("back-off after the third failure: %s, want 30s", got)
	}
	if got := indexBackoff(nil, now); got != 0 {
		t.Errorf("back-off of an index that never failed: %s", got)
	}
	failed.Annotations[batchv1.JobIndexFailureCountAnnotation] = "x"
	if got := indexBackoff(failed, now); got != 10*time.Second {
		t.Errorf("a count that does not parse counts 0: %s", got)
	}
}

// A pod whose finalizer removal is under way counts as let go until the
// informer shows it: a stale copy still carrying the finalizer is not
// counted twice.
func TestReleasingHidesTheFinalizerUntilObserved(t *testing.T) {
	r := newReleasing()
	stale := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", UID: "u1", Finalizers: []string{batchv1.JobTrackingFinalizer, "other"}}}
	other := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "q", UID: "u2", Finalizers: []string{batchv1.JobTrackingFinalizer}}}
	r.expect("ns/j", []*corev1.Pod{stale})
	got := r.apply("ns/j", []*corev1.Pod{stale, other})
	if hasFinalizer(got[0]) || !slices.Contains(got[0].Finalizers, "other") || !hasFinalizer(stale) || got[1] != other {
		t.Fatalf("applied: %v %v (stale %v)", got[0].Finalizers, got[1].Finalizers, stale.Finalizers)
	}
	// Still shown with the finalizer: still expected.
	r.observed("ns/j", stale)
	if got := r.apply("ns/j", []*corev1.Pod{stale}); hasFinalizer(got[0]) {
		t.Fatal("a stale update ended the expectation")
	}
	gone := stale.DeepCopy()
	gone.Finalizers = []string{"other"}
	r.observed("ns/j", gone)
	if got := r.apply("ns/j", []*corev1.Pod{stale}); !hasFinalizer(got[0]) {
		t.Fatal("the expectation outlived the update that showed the finalizer gone")
	}
}
