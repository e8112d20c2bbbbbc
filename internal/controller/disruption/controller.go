// Package disruption is the disruption controller, as upstream's
// (pkg/controller/disruption): for every PodDisruptionBudget it counts the
// healthy (Ready) pods its selector matches, the pods expected (the scale
// of their Deployments, ReplicaSets and StatefulSets, for percentages and
// maxUnavailable) and the healthy pods desired, and writes the disruptions
// allowed with the DisruptionAllowed condition (SufficientPods or
// InsufficientPods), dropping from disruptedPods the evicted pods that are
// gone or were not deleted in time.
package disruption

import (
	"context"
	"fmt"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes"
	appslisters "k8s.io/client-go/listers/apps/v1"
	corelisters "k8s.io/client-go/listers/core/v1"
	policylisters "k8s.io/client-go/listers/policy/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	pdbhelper "k8s.io/component-helpers/apps/poddisruptionbudget"
	"k8s.io/utils/clock"

	"github.com/svcnet/svcnet/internal/controller"
	"github.com/svcnet/svcnet/internal/controller/podstate"
	"github.com/svcnet/svcnet/internal/events"
	"github.com/svcnet/svcnet/internal/informer"
)

// ControllerName is the source of the controller's Events.
const ControllerName = "disruption-controller"

// DeletionTimeout is upstream's: an evicted pod not seen deleted within it
// is taken as not going, and leaves disruptedPods.
const DeletionTimeout = 2 * time.Minute

// Controller is the disruption controller.
type Controller struct {
	client      kubernetes.Interface
	budgets     policylisters.PodDisruptionBudgetLister
	pods        corelisters.PodLister
	replicaSets appslisters.ReplicaSetLister
	deployments appslisters.DeploymentLister
	sets        appslisters.StatefulSetLister
	synced      []cache.InformerSynced
	queue       *controller.Queue[string]
	recorder    record.EventRecorder
	clock       clock.PassiveClock
}

// New creates the controller and registers its informer handlers.
func New(ctx context.Context, d controller.Deps) (*Controller, error) {
	apps, core, policy := d.Informers.Apps().V1(), d.Informers.Core().V1(), d.Informers.Policy().V1()
	c := &Controller{
		client:      d.Client,
		budgets:     policy.PodDisruptionBudgets().Lister(),
		pods:        core.Pods().Lister(),
		replicaSets: apps.ReplicaSets().Lister(),
		deployments: apps.Deployments().Lister(),
		sets:        apps.StatefulSets().Lister(),
		recorder:    events.NewRecorder(ctx, d.Client, ControllerName),
		clock:       clock.RealClock{},
	}
	c.queue = controller.NewQueue(d.Metrics, controller.QueueConfig[string]{Name: "disruption", Sync: c.sync})
	budgetsChanged := cache.ResourceEventHandlerFuncs{
		AddFunc:    c.enqueue,
		UpdateFunc: func(_, cur any) { c.enqueue(cur) },
		DeleteFunc: c.enqueue,
	}
	podChanged := func(obj any) {
		if pod, ok := informer.Object[*corev1.Pod](obj); ok {
			c.enqueueFor(pod)
		}
	}
	// A workload's scale changes what its budgets expect.
	scaleChanged := func(obj any) {
		if m, err := apimeta.Accessor(obj); err == nil {
			c.enqueueNamespace(m.GetNamespace())
		} else if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
			if ns, _, err := cache.SplitMetaNamespaceKey(t.Key); err == nil {
				c.enqueueNamespace(ns)
			}
		}
	}
	scale := cache.ResourceEventHandlerFuncs{AddFunc: scaleChanged, UpdateFunc: func(_, cur any) { scaleChanged(cur) }, DeleteFunc: scaleChanged}
	synced, err := informer.Register(
		informer.Handler{Informer: policy.PodDisruptionBudgets().Informer(), Handler: budgetsChanged},
		informer.Handler{Informer: core.Pods().Informer(), Handler: cache.ResourceEventHandlerFuncs{
			AddFunc: podChanged,
			UpdateFunc: func(old, cur any) {
				podChanged(cur)
				if o, n := old.(*corev1.Pod), cur.(*corev1.Pod); !labels.Equals(o.Labels, n.Labels) {
					podChanged(old)
				}
			},
			DeleteFunc: podChanged,
		}},
		informer.Handler{Informer: apps.ReplicaSets().Informer(), Handler: scale},
		informer.Handler{Informer: apps.Deployments().Informer(), Handler: scale},
		informer.Handler{Informer: apps.StatefulSets().Informer(), Handler: scale},
	)
	if err != nil {
		return nil, fmt.Errorf("disruption controller: %w", err)
	}
	c.synced = synced
	return c, nil
}

// Run syncs budgets until ctx ends.
func (c *Controller) Run(ctx context.Context) {
	c.queue.Run(ctx, 1, c.synced...)
}

func (c *Controller) enqueue(obj any) {
	if key, ok := informer.Key(obj); ok {
		c.queue.Add(key)
	}
}

// enqueueFor wakes the budgets whose selector matches pod.
func (c *Controller) enqueueFor(pod *corev1.Pod) {
	budgets, err := c.budgets.PodDisruptionBudgets(pod.Namespace).List(labels.Everything())
	if err != nil {
		return
	}
	for _, pdb := range budgets {
		if s, err := metav1.LabelSelectorAsSelector(pdb.Spec.Selector); err == nil && s.Matches(labels.Set(pod.Labels)) {
			c.enqueue(pdb)
		}
	}
}

func (c *Controller) enqueueNamespace(ns string) {
	budgets, err := c.budgets.PodDisruptionBudgets(ns).List(labels.Everything())
	if err != nil {
		return
	}
	for _, pdb := range budgets {
		c.enqueue(pdb)
	}
}

func (c *Controller) sync(ctx context.Context, key string) error {
	namespace, name, err := cache.SplitMetaNamespaceKey(key)
	if err != nil {
		return fmt.Errorf("bad key %q: %w", key, err)
	}
	pdb, err := c.budgets.PodDisruptionBudgets(namespace).Get(name)
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("get poddisruptionbudget %s: %w", key, err)
	}
	if err := c.trySync(ctx, pdb); err != nil {
		// As upstream, a budget that cannot be computed allows nothing.
		if failErr := c.failSafe(ctx, pdb, err); failErr != nil {
			return fmt.Errorf("poddisruptionbudget %s: %w", key, failErr)
		}
		return fmt.Errorf("poddisruptionbudget %s: %w", key, err)
	}
	return nil
}

func (c *Controller) trySync(ctx context.Context, pdb *policyv1.PodDisruptionBudget) error {
	pods, err := c.podsOf(pdb)
	if err != nil {
		c.recorder.Eventf(pdb, corev1.EventTypeWarning, "NoPods", "Failed to get pods: %v", err)
		return err
	}
	if len(pods) == 0 {
		c.recorder.Eventf(pdb, corev1.EventTypeNormal, "NoPods", "No matching pods found")
	}
	expected, desired, unmanaged, err := c.expectedCount(pdb, pods)
	if err != nil {
		c.recorder.Eventf(pdb, corev1.EventTypeWarning, "CalculateExpectedPodCountFailed", "Failed to calculate the number of expected pods: %v", err)
		return err
	}
	if unmanaged {
		c.recorder.Eventf(pdb, corev1.EventTypeWarning, "UnmanagedPods", "Pods selected by this PodDisruptionBudget (selector: %v) were found "+
			"to be unmanaged. As a result, the status of the PDB cannot be calculated correctly, which may result in undefined behavior. "+
			"To account for these pods please set \".spec.minAvailable\" "+
			"field of the PDB to an integer value.", pdb.Spec.Selector)
	}
	now := c.clock.Now()
	disrupted, recheck := c.disruptedPods(pods, pdb, now)
	healthy := countHealthy(pods, disrupted, now)
	err = c.updateStatus(ctx, pdb, healthy, desired, expected, disrupted)
	if err == nil && recheck != nil {
		c.queue.AddAfter(pdb.Namespace+"/"+pdb.Name, recheck.Sub(now))
	}
	return err
}

// podsOf lists the pods the budget's selector matches (an empty selector
// matches all of the namespace's, a missing one none).
func (c *Controller) podsOf(pdb *policyv1.PodDisruptionBudget) ([]*corev1.Pod, error) {
	selector, err := metav1.LabelSelectorAsSelector(pdb.Spec.Selector)
	if err != nil {
		return nil, err
	}
	return c.pods.Pods(pdb.Namespace).List(selector)
}

// expectedCount is upstream's getExpectedPodCount: with maxUnavailable or a
// minAvailable percentage, the pods expected are the scale of the pods'
// controllers; with an integer minAvailable, the pods there are.
func (c *Controller) expectedCount(pdb *policyv1.PodDisruptionBudget, pods []*corev1.Pod) (expected, desired int32, unmanaged bool, err error) {
	switch {
	case pdb.Spec.MaxUnavailable != nil:
		if expected, unmanaged, err = c.expectedScale(pods); err != nil {
			return
		}
		var maxUnavailable int
		if maxUnavailable, err = intstr.GetScaledValueFromIntOrPercent(pdb.Spec.MaxUnavailable, int(expected), true); err != nil {
			return
		}
		desired = max(expected-int32(maxUnavailable), 0)
	case pdb.Spec.MinAvailable != nil && pdb.Spec.MinAvailable.Type == intstr.Int:
		desired, expected = pdb.Spec.MinAvailable.IntVal, int32(len(pods))
	case pdb.Spec.MinAvailable != nil:
		if expected, unmanaged, err = c.expectedScale(pods); err != nil {
			return
		}
		var minAvailable int
		if minAvailable, err = intstr.GetScaledValueFromIntOrPercent(pdb.Spec.MinAvailable, int(expected), true); err != nil {
			return
		}
		desired = int32(minAvailable)
	}
	return
}

// expectedScale sums the replicas of the pods' controllers, each once;
// pods without a controller are unmanaged and not counted.
func (c *Controller) expectedScale(pods []*corev1.Pod) (expected int32, unmanaged bool, err error) {
	scales := map[types.UID]int32{}
	for _, pod := range pods {
		ref := metav1.GetControllerOfNoCopy(pod)
		if ref == nil {
			unmanaged = true
			continue
		}
		if _, seen := scales[ref.UID]; seen {
			continue
		}
		uid, scale, found := c.scaleOf(ref, pod.Namespace)
		if !found {
			return 0, unmanaged, fmt.Errorf("found no controllers for pod %q", pod.Name)
		}
		scales[uid] = scale
	}
	for _, n := range scales {
		expected += n
	}
	return expected, unmanaged, nil
}

// scaleOf finds the controller a reference names, as upstream's finders: a
// ReplicaSet (or the Deployment controlling it) or a StatefulSet, with the
// UID it is counted under and its spec.replicas.
func (c *Controller) scaleOf(ref *metav1.OwnerReference, namespace string) (types.UID, int32, bool) {
	replicas := func(r *int32) int32 {
		if r == nil {
			return 1
		}
		return *r
	}
	gv := ref.APIVersion
	switch {
	case ref.Kind == "ReplicaSet" && gv == appsv1.SchemeGroupVersion.String():
		rs, err := c.replicaSets.ReplicaSets(namespace).Get(ref.Name)
		if err != nil || rs.UID != ref.UID {
			return "", 0, false
		}
		if dref := metav1.GetControllerOfNoCopy(rs); dref != nil && dref.Kind == "Deployment" {
			d, err := c.deployments.Deployments(namespace).Get(dref.Name)
			if err != nil || d.UID != dref.UID {
				return "", 0, false
			}
			return d.UID, replicas(d.Spec.Replicas), true
		}
		return rs.UID, replicas(rs.Spec.Replicas), true
	case ref.Kind == "StatefulSet" && gv == appsv1.SchemeGroupVersion.String():
		ss, err := c.sets.StatefulSets(namespace).Get(ref.Name)
		if err != nil || ss.UID != ref.UID {
			return "", 0, false
		}
		return ss.UID, replicas(ss.Spec.Replicas), true
	}
	return "", 0, false
}

// disruptedPods keeps the evicted pods that still exist, are not yet being
// deleted and were evicted less than DeletionTimeout ago; recheck is when
// the first of them times out.
func (c *Controller) disruptedPods(pods []*corev1.Pod, pdb *policyv1.PodDisruptionBudget, now time.Time) (map[string]metav1.Time, *time.Time) {
	out := map[string]metav1.Time{}
	var recheck *time.Time
	for _, pod := range pods {
		at, found := pdb.Status.DisruptedPods[pod.Name]
		if pod.DeletionTimestamp != nil || !found {
			continue
		}
		deadline := at.Add(DeletionTimeout)
		if deadline.Before(now) {
			c.recorder.Eventf(pod, corev1.EventTypeWarning, "NotDeleted", "Pod was expected by PDB %s/%s to be deleted but it wasn't",
				pdb.Namespace, pdb.Name)
			continue
		}
		if recheck == nil || deadline.Before(*recheck) {
			recheck = &deadline
		}
		out[pod.Name] = at
	}
	return out, recheck
}

// countHealthy counts the Ready pods not being deleted nor just evicted.
func countHealthy(pods []*corev1.Pod, disrupted map[string]metav1.Time, now time.Time) int32 {
	var n int32
	for _, pod := range pods {
		if pod.DeletionTimestamp != nil {
			continue
		}
		if at, found := disrupted[pod.Name]; found && at.Add(DeletionTimeout).After(now) {
			continue
		}
		if podstate.Ready(pod) {
			n++
		}
	}
	return n
}

func (c *Controller) updateStatus(ctx context.Context, pdb *policyv1.PodDisruptionBudget, healthy, desired, expected int32, disrupted map[string]metav1.Time) error {
	allowed := healthy - desired
	if expected <= 0 || allowed <= 0 {
		allowed = 0
	}
	s := pdb.Status
	if s.CurrentHealthy == healthy && s.DesiredHealthy == desired && s.ExpectedPods == expected &&
		s.DisruptionsAllowed == allowed && apiequality.Semantic.DeepEqual(s.DisruptedPods, disrupted) &&
		s.ObservedGeneration == pdb.Generation && pdbhelper.ConditionsAreUpToDate(pdb) {
		return nil
	}
	next := pdb.DeepCopy()
	next.Status = policyv1.PodDisruptionBudgetStatus{
		CurrentHealthy: healthy, DesiredHealthy: desired, ExpectedPods: expected, DisruptionsAllowed: allowed,
		DisruptedPods: disrupted, ObservedGeneration: pdb.Generation, Conditions: next.Status.Conditions,
	}
	pdbhelper.UpdateDisruptionAllowedCondition(next)
	return c.write(ctx, next)
}

// failSafe allows no disruption, with a SyncFailed condition.
func (c *Controller) failSafe(ctx context.Context, pdb *policyv1.PodDisruptionBudget, err error) error {
	next := pdb.DeepCopy()
	next.Status.DisruptionsAllowed = 0
	apimeta.SetStatusCondition(&next.Status.Conditions, metav1.Condition{
		Type: policyv1.DisruptionAllowedCondition, Status: metav1.ConditionFalse, Reason: policyv1.SyncFailedReason,
		Message: err.Error(), ObservedGeneration: next.Status.ObservedGeneration,
	})
	return c.write(ctx, next)
}

// write stores the status; a conflict (an eviction wrote first) is retried
// by the queue from a fresh cache.
func (c *Controller) write(ctx context.Context, pdb *policyv1.PodDisruptionBudget) error {
	_, err := c.client.PolicyV1().PodDisruptionBudgets(pdb.Namespace).UpdateStatus(ctx, pdb, metav1.UpdateOptions{})
	if err != nil {
		return fmt.Errorf("update status: %w", err)
	}
	return nil
}
