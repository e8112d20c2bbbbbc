// Package ttlafterfinished is upstream's TTL-after-finished controller
// (pkg/controller/ttlafterfinished): a finished Job with
// spec.ttlSecondsAfterFinished is deleted, with its pods (foreground), that
// many seconds after it finished.
package ttlafterfinished

import (
	"context"
	"fmt"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	batchlisters "k8s.io/client-go/listers/batch/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/clock"

	"github.com/svcnet/svcnet/internal/controller"
	"github.com/svcnet/svcnet/internal/informer"
)

// ControllerName is the controller's name.
const ControllerName = "ttl-after-finished-controller"

// Controller deletes finished Jobs whose TTL has passed.
type Controller struct {
	client kubernetes.Interface
	jobs   batchlisters.JobLister
	synced cache.InformerSynced
	queue  *controller.Queue[string]
	clock  clock.PassiveClock
}

// New creates the controller and registers its informer handler.
func New(d controller.Deps) (*Controller, error) {
	inf := d.Informers.Batch().V1().Jobs()
	c := &Controller{client: d.Client, jobs: inf.Lister(), clock: clock.RealClock{}}
	c.queue = controller.NewQueue(d.Metrics, controller.QueueConfig[string]{Name: "ttl_jobs_to_delete", Sync: c.sync})
	enqueue := func(obj any) {
		if j, ok := obj.(*batchv1.Job); ok && needsCleanup(j) {
			if key, ok := informer.Key(j); ok {
				c.queue.Add(key)
			}
		}
	}
	synced, err := informer.Handle(inf.Informer(), cache.ResourceEventHandlerFuncs{
		AddFunc:    enqueue,
		UpdateFunc: func(_, cur any) { enqueue(cur) },
	})
	if err != nil {
		return nil, fmt.Errorf("ttl-after-finished controller: %w", err)
	}
	c.synced = synced
	return c, nil
}

// Run deletes expired Jobs until ctx ends.
func (c *Controller) Run(ctx context.Context) { c.queue.Run(ctx, 5, c.synced) }

// needsCleanup: a finished job with a TTL, not being deleted.
func needsCleanup(j *batchv1.Job) bool {
	_, ok := finishedAt(j)
	return ok && j.Spec.TTLSecondsAfterFinished != nil && j.DeletionTimestamp == nil
}

// finishedAt is when the job's Complete or Failed condition turned True.
func finishedAt(j *batchv1.Job) (time.Time, bool) {
	for _, c := range j.Status.Conditions {
		if (c.Type == batchv1.JobComplete || c.Type == batchv1.JobFailed) && c.Status == corev1.ConditionTrue {
			return c.LastTransitionTime.Time, true
		}
	}
	return time.Time{}, false
}

// expiresIn is how long until the job's TTL passes (<= 0: it has).
func expiresIn(j *batchv1.Job, now time.Time) time.Duration {
	at, _ := finishedAt(j)
	return at.Add(time.Duration(*j.Spec.TTLSecondsAfterFinished) * time.Second).Sub(now)
}

func (c *Controller) sync(ctx context.Context, key string) error {
	namespace, name, err := cache.SplitMetaNamespaceKey(key)
	if err != nil {
		return fmt.Errorf("bad key %q: %w", key, err)
	}
	j, err := c.jobs.Jobs(namespace).Get(name)
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("get job %s: %w", key, err)
	}
	if !needsCleanup(j) {
		return nil
	}
	if wait := expiresIn(j, c.clock.Now()); wait > 0 {
		c.queue.AddAfter(key, wait)
		return nil
	}
	// The TTL may have changed since the cache saw the job: read it anew,
	// as upstream, and delete exactly that version.
	fresh, err := c.client.BatchV1().Jobs(namespace).Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("get job %s: %w", key, err)
	}
	if !needsCleanup(fresh) {
		return nil
	}
	if wait := expiresIn(fresh, c.clock.Now()); wait > 0 {
		c.queue.AddAfter(key, wait)
		return nil
	}
	policy := metav1.DeletePropagationForeground
	err = c.client.BatchV1().Jobs(namespace).Delete(ctx, name, metav1.DeleteOptions{
		PropagationPolicy: &policy,
		Preconditions:     &metav1.Preconditions{UID: &fresh.UID, ResourceVersion: &fresh.ResourceVersion},
	})
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("delete job %s: %w", key, err)
	}
	return nil
}
