// Package cronjob is the CronJob controller, as upstream's v2
// (pkg/controller/cronjob): at each time of a CronJob's schedule (a
// standard cron line, read in spec.timeZone) it creates the Job
// <cronjob>-<scheduled minutes since the epoch> from the job template,
// honouring suspend, startingDeadlineSeconds and the concurrency policy
// (Allow, Forbid, Replace), keeps status.active, lastScheduleTime and
// lastSuccessfulTime, and deletes finished Jobs beyond the history limits.
package cronjob

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"sort"
	"strconv"
	"time"

	"github.com/robfig/cron/v3"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	batchlisters "k8s.io/client-go/listers/batch/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/utils/clock"
	"k8s.io/utils/ptr"

	"github.com/svcnet/svcnet/internal/controller"
	"github.com/svcnet/svcnet/internal/events"
	"github.com/svcnet/svcnet/internal/informer"
	cronjobstrategy "github.com/svcnet/svcnet/internal/registry/cronjob"
)

// ControllerName is the source of the controller's Events.
const ControllerName = "cronjob-controller"

// nextScheduleDelta is how long after a scheduled time the CronJob is
// looked at, as upstream's, so that the time has surely come.
const nextScheduleDelta = 100 * time.Millisecond

// maxMissedTimes is how many missed start times upstream tolerates before
// it warns (and starts only the latest).
const maxMissedTimes = 100

var kind = batchv1.SchemeGroupVersion.WithKind("CronJob")

// Controller is the CronJob controller.
type Controller struct {
	client   kubernetes.Interface
	cronJobs batchlisters.CronJobLister
	jobs     batchlisters.JobLister
	synced   []cache.InformerSynced
	queue    *controller.Queue[string]
	recorder record.EventRecorder
	clock    clock.PassiveClock
}

// New creates the controller and registers its informer handlers.
func New(ctx context.Context, d controller.Deps) (*Controller, error) {
	cjInformer := d.Informers.Batch().V1().CronJobs()
	jobInformer := d.Informers.Batch().V1().Jobs()
	c := &Controller{
		client:   d.Client,
		cronJobs: cjInformer.Lister(),
		jobs:     jobInformer.Lister(),
		recorder: events.NewRecorder(ctx, d.Client, ControllerName),
		clock:    clock.RealClock{},
	}
	c.queue = controller.NewQueue(d.Metrics, controller.QueueConfig[string]{Name: "cronjob", Sync: c.sync})
	enqueue := func(obj any) {
		if key, ok := informer.Key(obj); ok {
			c.queue.Add(key)
		}
	}
	jobChanged := func(obj any) {
		j, ok := informer.Object[*batchv1.Job](obj)
		if !ok {
			return
		}
		if ref := metav1.GetControllerOfNoCopy(j); ref != nil && ref.Kind == kind.Kind && ref.APIVersion == kind.GroupVersion().String() {
			c.queue.Add(j.Namespace + "/" + ref.Name)
		}
	}
	synced, err := informer.Register(
		informer.Handler{Informer: cjInformer.Informer(), Handler: cache.ResourceEventHandlerFuncs{
			AddFunc: enqueue, UpdateFunc: func(_, cur any) { enqueue(cur) }, DeleteFunc: enqueue}},
		informer.Handler{Informer: jobInformer.Informer(), Handler: cache.ResourceEventHandlerFuncs{
			AddFunc: jobChanged, UpdateFunc: func(_, cur any) { jobChanged(cur) }, DeleteFunc: jobChanged}},
	)
	if err != nil {
		return nil, fmt.Errorf("cronjob controller: %w", err)
	}
	c.synced = synced
	return c, nil
}

// Run syncs CronJobs until ctx ends.
func (c *Controller) Run(ctx context.Context) { c.queue.Run(ctx, 5, c.synced...) }

func (c *Controller) sync(ctx context.Context, key string) error {
	namespace, name, err := cache.SplitMetaNamespaceKey(key)
	if err != nil {
		return fmt.Errorf("bad key %q: %w", key, err)
	}
	cj, err := c.cronJobs.CronJobs(namespace).Get(name)
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("get cronjob %s: %w", key, err)
	}
	all, err := c.jobs.Jobs(namespace).List(labels.Everything())
	if err != nil {
		return fmt.Errorf("list jobs of cronjob %s: %w", key, err)
	}
	var owned []*batchv1.Job
	for _, j := range all {
		if metav1.IsControlledBy(j, cj) {
			owned = append(owned, j)
		}
	}
	cj = cj.DeepCopy()
	now := c.clock.Now()
	statusChanged := c.reconcileActive(ctx, cj, owned)
	requeue, created, err := c.schedule(ctx, cj, owned, now)
	statusChanged = statusChanged || created
	if statusChanged {
		if _, uerr := c.client.BatchV1().CronJobs(namespace).UpdateStatus(ctx, cj, metav1.UpdateOptions{}); uerr != nil {
			if apierrors.IsConflict(uerr) {
				return fmt.Errorf("%w: update status of cronjob %s: %w", controller.ErrStale, key, uerr)
			}
			return fmt.Errorf("update status of cronjob %s: %w", key, uerr)
		}
	}
	if err != nil {
		return err
	}
	if cj.DeletionTimestamp == nil {
		c.cleanupHistory(ctx, cj, owned)
	}
	if requeue > 0 {
		c.queue.AddAfter(key, requeue)
	}
	return nil
}

// reconcileActive brings status.active in line with the Jobs: finished
// ones leave it (a Complete one sets lastSuccessfulTime), missing ones
// too, and unfinished ones the controller owns join it.
func (c *Controller) reconcileActive(ctx context.Context, cj *batchv1.CronJob, owned []*batchv1.Job) bool {
	changed := false
	byUID := map[types.UID]*batchv1.Job{}
	for _, j := range owned {
		byUID[j.UID] = j
		inActive := slices.ContainsFunc(cj.Status.Active, func(r corev1.ObjectReference) bool { return r.UID == j.UID })
		done, cond := finished(j)
		switch {
		case !inActive && !done:
			c.recorder.Eventf(cj, corev1.EventTypeWarning, "UnexpectedJob", "Saw a job that the controller did not create or forgot: %s", j.Name)
			cj.Status.Active = append(cj.Status.Active, ref(j))
			changed = true
		case inActive && done:
			c.recorder.Eventf(cj, corev1.EventTypeNormal, "SawCompletedJob", "Saw completed job: %s, condition: %v", j.Name, cond)
			cj.Status.Active = slices.DeleteFunc(cj.Status.Active, func(r corev1.ObjectReference) bool { return r.UID == j.UID })
			changed = true
		}
		if done && cond == batchv1.JobComplete && j.Status.CompletionTime != nil &&
			(cj.Status.LastSuccessfulTime == nil || j.Status.CompletionTime.After(cj.Status.LastSuccessfulTime.Time)) {
			cj.Status.LastSuccessfulTime = j.Status.CompletionTime.DeepCopy()
			changed = true
		}
	}
	var keep []corev1.ObjectReference
	for _, r := range cj.Status.Active {
		if _, ok := byUID[r.UID]; ok {
			keep = append(keep, r)
			continue
		}
		// Not in the cache: ask the API server before calling it gone.
		j, err := c.client.BatchV1().Jobs(r.Namespace).Get(ctx, r.Name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) || (err == nil && j.UID != r.UID) {
			c.recorder.Eventf(cj, corev1.EventTypeNormal, "MissingJob", "Active job went missing: %v", r.Name)
			changed = true
			continue
		}
		keep = append(keep, r)
	}
	cj.Status.Active = keep
	return changed
}

// schedule starts the Job of the most recent scheduled time, if due, and
// returns when to look again and whether the status changed.
func (c *Controller) schedule(ctx context.Context, cj *batchv1.CronJob, owned []*batchv1.Job, now time.Time) (time.Duration, bool, error) {
	if cj.DeletionTimestamp != nil {
		return 0, false, nil
	}
	loc := time.Local
	if tz := cj.Spec.TimeZone; tz != nil {
		var err error
		if loc, err = time.LoadLocation(*tz); err != nil {
			c.recorder.Eventf(cj, corev1.EventTypeWarning, "UnknownTimeZone", "invalid timeZone: %q: %s", *tz, err)
			return 0, false, nil
		}
	}
	sched, err := cronjobstrategy.ParseSchedule(cj.Spec.Schedule)
	if err != nil {
		c.recorder.Eventf(cj, corev1.EventTypeWarning, "UnparseableSchedule", "unparseable schedule: %q : %s", cj.Spec.Schedule, err)
		return 0, false, nil
	}
	if ptr.Deref(cj.Spec.Suspend, false) {
		return 0, false, nil
	}
	nowIn := now.In(loc)
	next := sched.Next(nowIn).Sub(nowIn) + nextScheduleDelta
	scheduled, missed := mostRecent(cj, nowIn, sched)
	if scheduled == nil {
		return next, false, nil
	}
	if missed > maxMissedTimes {
		c.recorder.Eventf(cj, corev1.EventTypeWarning, "TooManyMissedTimes", "too many missed start times. Set or decrease .spec.startingDeadlineSeconds or check clock skew")
	}
	if d := cj.Spec.StartingDeadlineSeconds; d != nil && scheduled.Add(time.Duration(*d)*time.Second).Before(now) {
		c.recorder.Eventf(cj, corev1.EventTypeWarning, "MissSchedule", "Missed scheduled time to start a job: %s", scheduled.UTC().Format(time.RFC1123Z))
		return next, false, nil
	}
	name := jobName(cj, *scheduled)
	if slices.ContainsFunc(owned, func(j *batchv1.Job) bool { return j.Name == name }) ||
		slices.ContainsFunc(cj.Status.Active, func(r corev1.ObjectReference) bool { return r.Name == name }) {
		return next, false, nil
	}
	changed := false
	switch {
	case cj.Spec.ConcurrencyPolicy == batchv1.ForbidConcurrent && len(cj.Status.Active) > 0:
		c.recorder.Eventf(cj, corev1.EventTypeNormal, "JobAlreadyActive", "Not starting job because prior execution is running and concurrency policy is Forbid")
		return next, false, nil
	case cj.Spec.ConcurrencyPolicy == batchv1.ReplaceConcurrent:
		for _, r := range cj.Status.Active {
			if err := c.deleteJob(ctx, cj, r.Name); err != nil {
				return 0, changed, fmt.Errorf("could not replace job %s/%s: %w", r.Namespace, r.Name, err)
			}
			changed = true
		}
		cj.Status.Active = nil
	}
	job := newJob(cj, *scheduled, loc)
	created, err := c.client.BatchV1().Jobs(cj.Namespace).Create(ctx, job, metav1.CreateOptions{})
	switch {
	case apierrors.HasStatusCause(err, corev1.NamespaceTerminatingCause):
		return 0, changed, nil
	case apierrors.IsAlreadyExists(err):
		// Created before, by us (then the status missed it) or another.
		existing, gerr := c.client.BatchV1().Jobs(cj.Namespace).Get(ctx, job.Name, metav1.GetOptions{})
		if gerr != nil {
			return 0, changed, fmt.Errorf("get job %s/%s: %w", cj.Namespace, job.Name, gerr)
		}
		if !metav1.IsControlledBy(existing, cj) {
			return next, changed, nil
		}
		created = existing
	case err != nil:
		c.recorder.Eventf(cj, corev1.EventTypeWarning, "FailedCreate", "Error creating job: %v", err)
		return 0, changed, fmt.Errorf("create job %s/%s: %w", cj.Namespace, job.Name, err)
	default:
		c.recorder.Eventf(cj, corev1.EventTypeNormal, "SuccessfulCreate", "Created job %v", created.Name)
	}
	if !slices.ContainsFunc(cj.Status.Active, func(r corev1.ObjectReference) bool { return r.UID == created.UID }) {
		cj.Status.Active = append(cj.Status.Active, ref(created))
	}
	cj.Status.LastScheduleTime = &metav1.Time{Time: *scheduled}
	return next, true, nil
}

// mostRecent is the latest scheduled time not after now since the last
// one started (or the CronJob's creation, or now less the starting
// deadline), with how many were missed; nil when none is due.
func mostRecent(cj *batchv1.CronJob, now time.Time, sched cron.Schedule) (*time.Time, int) {
	earliest := cj.CreationTimestamp.Time
	if t := cj.Status.LastScheduleTime; t != nil {
		earliest = t.Time
	}
	if d := cj.Spec.StartingDeadlineSeconds; d != nil {
		if deadline := now.Add(-time.Duration(*d) * time.Second); deadline.After(earliest) {
			earliest = deadline
		}
	}
	var latest *time.Time
	missed := 0
	for t := sched.Next(earliest.In(now.Location())); !t.After(now); t = sched.Next(t) {
		latest = &t
		if missed++; missed > maxMissedTimes+1 {
			// Jump ahead: only the latest time matters.
			for n := sched.Next(t); !n.After(now); n = sched.Next(n) {
				t = n
			}
			latest = &t
			break
		}
	}
	return latest, missed
}

// jobName is upstream's: the CronJob's name and the scheduled time in
// minutes since the epoch.
func jobName(cj *batchv1.CronJob, scheduled time.Time) string {
	return cj.Name + "-" + strconv.FormatInt(scheduled.Unix()/60, 10)
}

// newJob is the Job of one scheduled time, as upstream's
// getJobFromTemplate2.
func newJob(cj *batchv1.CronJob, scheduled time.Time, loc *time.Location) *batchv1.Job {
	annotations := maps.Clone(cj.Spec.JobTemplate.Annotations)
	if annotations == nil {
		annotations = map[string]string{}
	}
	annotations[batchv1.CronJobScheduledTimestampAnnotation] = scheduled.In(loc).Format(time.RFC3339)
	j := &batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{
			Name:            jobName(cj, scheduled),
			Namespace:       cj.Namespace,
			Labels:          maps.Clone(cj.Spec.JobTemplate.Labels),
			Annotations:     annotations,
			OwnerReferences: []metav1.OwnerReference{*metav1.NewControllerRef(cj, kind)},
		},
	}
	cj.Spec.JobTemplate.Spec.DeepCopyInto(&j.Spec)
	return j
}

func ref(j *batchv1.Job) corev1.ObjectReference {
	return corev1.ObjectReference{Kind: "Job", Namespace: j.Namespace, Name: j.Name, UID: j.UID,
		APIVersion: batchv1.SchemeGroupVersion.String(), ResourceVersion: j.ResourceVersion}
}

// finished says whether the job is Complete or Failed, and which.
func finished(j *batchv1.Job) (bool, batchv1.JobConditionType) {
	for _, c := range j.Status.Conditions {
		if (c.Type == batchv1.JobComplete || c.Type == batchv1.JobFailed) && c.Status == corev1.ConditionTrue {
			return true, c.Type
		}
	}
	return false, ""
}

// deleteJob deletes one of the CronJob's jobs with its pods.
func (c *Controller) deleteJob(ctx context.Context, cj *batchv1.CronJob, name string) error {
	policy := metav1.DeletePropagationBackground
	err := c.client.BatchV1().Jobs(cj.Namespace).Delete(ctx, name, metav1.DeleteOptions{PropagationPolicy: &policy})
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		c.recorder.Eventf(cj, corev1.EventTypeWarning, "FailedDelete", "Deleted job: %v", err)
		return err
	}
	c.recorder.Eventf(cj, corev1.EventTypeNormal, "SuccessfulDelete", "Deleted job %v", name)
	return nil
}

// cleanupHistory deletes the oldest finished jobs beyond the successful
// and failed history limits.
func (c *Controller) cleanupHistory(ctx context.Context, cj *batchv1.CronJob, owned []*batchv1.Job) {
	var succeeded, failed []*batchv1.Job
	for _, j := range owned {
		switch done, cond := finished(j); {
		case !done || j.DeletionTimestamp != nil:
		case cond == batchv1.JobComplete:
			succeeded = append(succeeded, j)
		default:
			failed = append(failed, j)
		}
	}
	prune := func(jobs []*batchv1.Job, limit *int32) {
		if limit == nil || len(jobs) <= int(*limit) {
			return
		}
		sort.Slice(jobs, func(a, b int) bool {
			ta, tb := jobs[a].Status.StartTime, jobs[b].Status.StartTime
			switch {
			case ta == nil || tb == nil || ta.Equal(tb):
				return jobs[a].Name < jobs[b].Name
			}
			return ta.Before(tb)
		})
		for _, j := range jobs[:len(jobs)-int(*limit)] {
			_ = c.deleteJob(ctx, cj, j.Name) // reported as an Event; retried on the next sync
		}
	}
	prune(succeeded, cj.Spec.SuccessfulJobsHistoryLimit)
	prune(failed, cj.Spec.FailedJobsHistoryLimit)
}
