// Package job is the Job controller, as upstream's (pkg/controller/job): it
// runs each Job's pods until spec.completions succeed (NonIndexed, or one
// pod per index in Indexed mode, with the JOB_COMPLETION_INDEX env and the
// <job>-<index> hostname), at most spec.parallelism at a time, with an
// exponential back-off after failures; it fails the Job past backoffLimit,
// activeDeadlineSeconds or a FailJob rule of its podFailurePolicy, meets a
// successPolicy, deletes the pods of a suspended Job, and counts finished
// pods exactly once through the batch.kubernetes.io/job-tracking finalizer
// and status.uncountedTerminatedPods.
package job

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	batchlisters "k8s.io/client-go/listers/batch/v1"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/utils/clock"

	"github.com/svcnet/svcnet/internal/controller"
	"github.com/svcnet/svcnet/internal/controller/controllerref"
	"github.com/svcnet/svcnet/internal/controller/expectations"
	"github.com/svcnet/svcnet/internal/events"
	"github.com/svcnet/svcnet/internal/informer"
)

// ControllerName is the source of the controller's Events.
const ControllerName = "job-controller"

// managedBy is the spec.managedBy value of Jobs this controller runs (also
// an unset one).
const managedBy = "kubernetes.io/job-controller"

// Upstream's pod failure back-off: 10s doubling to 10 minutes.
const (
	podFailureBackoff    = 10 * time.Second
	maxPodFailureBackoff = 10 * time.Minute
)

var kind = batchv1.SchemeGroupVersion.WithKind("Job")

// Options are the controller's flags.
type Options struct {
	// Workers is --concurrent-job-syncs.
	Workers int
}

// Controller is the Job controller.
type Controller struct {
	opts         Options
	client       kubernetes.Interface
	jobs         batchlisters.JobLister
	pods         corelisters.PodLister
	synced       []cache.InformerSynced
	queue        *controller.Queue[string]
	recorder     record.EventRecorder
	expectations *expectations.Expectations
	podEvents    controllerref.PodEvents[*batchv1.Job]
	clock        clock.PassiveClock
	backoff      *backoffStore
	releasing    *releasing
	// written holds, by job key, the resource version of the controller's
	// last status write until the informer shows it: a sync on an older
	// copy would count its pods against stale counts (and make pods that
	// later go as surplus).
	written sync.Map
}

// New creates the controller and registers its informer handlers; its
// Events are recorded until ctx ends.
func New(ctx context.Context, d controller.Deps, opts Options) (*Controller, error) {
	jobInformer := d.Informers.Batch().V1().Jobs()
	podInformer := d.Informers.Core().V1().Pods()
	c := &Controller{
		opts:         opts,
		client:       d.Client,
		jobs:         jobInformer.Lister(),
		pods:         podInformer.Lister(),
		recorder:     events.NewRecorder(ctx, d.Client, ControllerName),
		expectations: expectations.New(clock.RealClock{}),
		clock:        clock.RealClock{},
		backoff:      newBackoffStore(),
		releasing:    newReleasing(),
	}
	c.queue = controller.NewQueue(d.Metrics, controller.QueueConfig[string]{Name: "job", Sync: c.sync})
	c.podEvents = controllerref.PodEvents[*batchv1.Job]{
		Kind: kind,
		Get:  func(ns, name string) (*batchv1.Job, error) { return c.jobs.Jobs(ns).Get(name) },
		Selecting: func(pod *corev1.Pod) ([]*batchv1.Job, error) {
			jobs, err := c.jobs.GetPodJobs(pod)
			out := make([]*batchv1.Job, len(jobs))
			for i := range jobs {
				out[i] = &jobs[i]
			}
			return out, err
		},
		Enqueue: func(j *batchv1.Job) { c.enqueue(j) },
	}
	synced, err := informer.Register(
		informer.Handler{Informer: jobInformer.Informer(), Handler: cache.ResourceEventHandlerFuncs{
			AddFunc:    c.enqueue,
			UpdateFunc: func(_, cur any) { c.enqueue(cur) },
			DeleteFunc: func(obj any) {
				if key, ok := informer.Key(obj); ok {
					c.expectations.Forget(key)
					c.backoff.forget(key)
					c.releasing.forget(key)
					c.queue.Add(key)
				}
			},
		}},
		informer.Handler{Informer: podInformer.Informer(), Handler: cache.ResourceEventHandlerFuncs{
			AddFunc:    c.addPod,
			UpdateFunc: c.updatePod,
			DeleteFunc: c.deletePod,
		}},
	)
	if err != nil {
		return nil, fmt.Errorf("job controller: %w", err)
	}
	c.synced = synced
	return c, nil
}

// Run syncs Jobs until ctx ends.
func (c *Controller) Run(ctx context.Context) {
	c.queue.Run(ctx, c.opts.Workers, c.synced...)
}

func (c *Controller) enqueue(obj any) {
	if key, ok := informer.Key(obj); ok {
		c.queue.Add(key)
	}
}

// ownerKey is the key of the Job a pod's controller reference names, even
// when that Job is gone (its pods' finalizers must still go).
func ownerKey(pod *corev1.Pod) (string, bool) {
	ref := metav1.GetControllerOfNoCopy(pod)
	if ref == nil || ref.Kind != kind.Kind || ref.APIVersion != kind.GroupVersion().String() {
		return "", false
	}
	return pod.Namespace + "/" + ref.Name, true
}

func (c *Controller) addPod(obj any) {
	pod := obj.(*corev1.Pod)
	if j, ok := c.podEvents.Added(pod); ok {
		key := j.Namespace + "/" + j.Name
		if pod.DeletionTimestamp == nil {
			c.expectations.CreationObserved(key)
		}
		c.queue.Add(key)
	} else if key, ok := ownerKey(pod); ok && hasFinalizer(pod) {
		c.queue.Add(key)
	}
}

func (c *Controller) updatePod(old, cur any) {
	oldPod, curPod := old.(*corev1.Pod), cur.(*corev1.Pod)
	if oldPod.ResourceVersion == curPod.ResourceVersion {
		return
	}
	if key, ok := ownerKey(curPod); ok {
		c.releasing.observed(key, curPod)
		if curPod.DeletionTimestamp != nil && oldPod.DeletionTimestamp == nil {
			c.expectations.DeletionObserved(key, curPod.Namespace+"/"+curPod.Name)
		}
	}
	if _, ok := c.podEvents.Updated(oldPod, curPod); !ok {
		if key, ok := ownerKey(curPod); ok && hasFinalizer(curPod) {
			c.queue.Add(key)
		}
	}
}

func (c *Controller) deletePod(obj any) {
	pod, ok := informer.Object[*corev1.Pod](obj)
	if !ok {
		return
	}
	if key, ok := ownerKey(pod); ok {
		c.expectations.DeletionObserved(key, pod.Namespace+"/"+pod.Name)
		c.releasing.forget(key, pod)
		c.queue.Add(key)
	}
}

// sync brings one Job's pods and status in line with its spec.
func (c *Controller) sync(ctx context.Context, key string) error {
	namespace, name, err := cache.SplitMetaNamespaceKey(key)
	if err != nil {
		return fmt.Errorf("bad key %q: %w", key, err)
	}
	job, err := c.jobs.Jobs(namespace).Get(name)
	if apierrors.IsNotFound(err) {
		c.expectations.Forget(key)
		c.backoff.forget(key)
		c.written.Delete(key)
		return c.releaseOrphans(ctx, namespace, name)
	}
	if err != nil {
		return fmt.Errorf("get job %s: %w", key, err)
	}
	if m := job.Spec.ManagedBy; m != nil && *m != managedBy {
		return nil // another controller runs it
	}
	if c.behindOwnWrite(key, job) {
		return nil // the informer's event of the write queues the job again
	}
	selector, err := metav1.LabelSelectorAsSelector(job.Spec.Selector)
	if err != nil {
		return nil // validation forbids it
	}
	all, err := c.pods.Pods(namespace).List(labels.Everything())
	if err != nil {
		return fmt.Errorf("list pods of job %s: %w", key, err)
	}
	if finished(job) {
		// Pods still carrying the finalizer (deleted later, or missed)
		// are counted already: let them go.
		return c.removeFinalizers(ctx, ownedWithFinalizer(job, all))
	}
	owner := &controllerref.Owner{
		Object:   job,
		Kind:     kind,
		Selector: selector,
		Fresh: func(ctx context.Context) (metav1.Object, error) {
			return c.client.BatchV1().Jobs(namespace).Get(ctx, name, metav1.GetOptions{})
		},
		Patch: func(ctx context.Context, namespace, name string, patch []byte) error {
			_, err := c.client.CoreV1().Pods(namespace).Patch(ctx, name, types.StrategicMergePatchType, patch, metav1.PatchOptions{})
			return err
		},
	}
	pods, err := controllerref.Claim(ctx, owner, all)
	if err != nil {
		return err
	}
	pods = c.releasing.apply(key, pods)
	mayAct, wait := c.expectations.Satisfied(key)
	if !mayAct {
		c.queue.AddAfter(key, wait)
	}
	s := newSyncState(job.DeepCopy(), pods, c.clock.Now())
	return c.syncJob(ctx, key, s, mayAct)
}

// releaseOrphans removes the finalizers of the pods of a Job that is gone.
func (c *Controller) releaseOrphans(ctx context.Context, namespace, name string) error {
	pods, err := c.pods.Pods(namespace).List(labels.Everything())
	if err != nil {
		return fmt.Errorf("list pods of job %s/%s: %w", namespace, name, err)
	}
	var orphans []*corev1.Pod
	for _, p := range pods {
		if key, ok := ownerKey(p); ok && key == namespace+"/"+name && hasFinalizer(p) {
			orphans = append(orphans, p)
		}
	}
	return c.removeFinalizers(ctx, orphans)
}

// ownedWithFinalizer are the pods the job controls that still carry the
// tracking finalizer.
func ownedWithFinalizer(job *batchv1.Job, pods []*corev1.Pod) []*corev1.Pod {
	var out []*corev1.Pod
	for _, p := range pods {
		if ref := metav1.GetControllerOfNoCopy(p); ref != nil && ref.UID == job.UID && hasFinalizer(p) {
			out = append(out, p)
		}
	}
	return out
}

// updateStatus writes the job's status; a conflict means the cache was
// behind our own last write.
func (c *Controller) updateStatus(ctx context.Context, job *batchv1.Job) (*batchv1.Job, error) {
	out, err := c.client.BatchV1().Jobs(job.Namespace).UpdateStatus(ctx, job, metav1.UpdateOptions{})
	if apierrors.IsConflict(err) {
		return nil, fmt.Errorf("%w: update status of job %s/%s: %w", controller.ErrStale, job.Namespace, job.Name, err)
	}
	if err != nil {
		return nil, fmt.Errorf("update status of job %s/%s: %w", job.Namespace, job.Name, err)
	}
	if rv, err := strconv.ParseInt(out.ResourceVersion, 10, 64); err == nil {
		c.written.Store(job.Namespace+"/"+job.Name, rv)
	}
	return out, nil
}

// behindOwnWrite says whether the cached job is older than the status the
// controller last wrote for it.
func (c *Controller) behindOwnWrite(key string, job *batchv1.Job) bool {
	v, ok := c.written.Load(key)
	if !ok {
		return false
	}
	rv, err := strconv.ParseInt(job.ResourceVersion, 10, 64)
	if err != nil || rv >= v.(int64) {
		c.written.CompareAndDelete(key, v)
		return false
	}
	return true
}

// parallel runs f for each pod at once and returns the first error and how
// many succeeded, as upstream's pod deletions.
func parallel(pods []*corev1.Pod, f func(*corev1.Pod) error) (int, error) {
	errs := make([]error, len(pods))
	var wg sync.WaitGroup
	for i, p := range pods {
		wg.Go(func() { errs[i] = f(p) })
	}
	wg.Wait()
	done := 0
	for _, err := range errs {
		if err == nil {
			done++
		}
	}
	return done, errors.Join(errs...)
}
