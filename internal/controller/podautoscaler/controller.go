// Package podautoscaler is the horizontal-pod-autoscaler controller, as
// upstream's: every sync period it reads each autoscaler's target through
// the scale subresource, measures the target's pods through
// metrics.k8s.io (resource metrics: Utilization of the requests, or an
// AverageValue), computes the replica count with upstream's replica
// calculator (tolerance, unready and missing pods), stabilizes and limits
// it (the downscale window, or the autoscaler's behavior policies),
// rescales the target and reports status, conditions (AbleToScale,
// ScalingActive, ScalingLimited) and events.
package podautoscaler

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	autoscalingv1 "k8s.io/api/autoscaling/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes"
	autoscalinglisters "k8s.io/client-go/listers/autoscaling/v2"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/scale"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/utils/ptr"

	"github.com/svcnet/svcnet/internal/controller"
	"github.com/svcnet/svcnet/internal/events"
	"github.com/svcnet/svcnet/internal/informer"
	"github.com/svcnet/svcnet/internal/registry/horizontalpodautoscaler"
)

// ControllerName is upstream's name of the controller.
const ControllerName = "horizontal-pod-autoscaler"

// Options are upstream's --horizontal-pod-autoscaler-* flags.
type Options struct {
	// Workers is --concurrent-horizontal-pod-autoscaler-syncs.
	Workers int
	// SyncPeriod is --horizontal-pod-autoscaler-sync-period.
	SyncPeriod time.Duration
	// Tolerance is --horizontal-pod-autoscaler-tolerance, for rules
	// without a tolerance of their own.
	Tolerance float64
	// DownscaleStabilization is
	// --horizontal-pod-autoscaler-downscale-stabilization.
	DownscaleStabilization time.Duration
	// CPUInitialization is --horizontal-pod-autoscaler-cpu-initialization-period.
	CPUInitialization time.Duration
	// InitialReadinessDelay is --horizontal-pod-autoscaler-initial-readiness-delay.
	InitialReadinessDelay time.Duration
}

// DefaultOptions are upstream's defaults.
func DefaultOptions() Options {
	return Options{Workers: 5, SyncPeriod: 15 * time.Second, Tolerance: 0.1, DownscaleStabilization: 5 * time.Minute,
		CPUInitialization: 5 * time.Minute, InitialReadinessDelay: 30 * time.Second}
}

// Controller is the horizontal-pod-autoscaler controller.
type Controller struct {
	opts     Options
	client   kubernetes.Interface
	scales   scale.ScalesGetter
	mapper   meta.RESTMapper
	metrics  metricsSource
	hpas     autoscalinglisters.HorizontalPodAutoscalerLister
	pods     corelisters.PodLister
	synced   []cache.InformerSynced
	queue    *controller.Queue[string]
	recorder record.EventRecorder
	history  *history
	now      func() time.Time
}

// New creates the controller: scales reads and writes targets found
// through mapper, metrics lists pods' metrics.
func New(ctx context.Context, d controller.Deps, scales scale.ScalesGetter, mapper meta.RESTMapper, metrics metricsSource, opts Options) (*Controller, error) {
	hpas := d.Informers.Autoscaling().V2().HorizontalPodAutoscalers()
	c := &Controller{
		opts: opts, client: d.Client, scales: scales, mapper: mapper, metrics: metrics,
		hpas: hpas.Lister(), pods: d.Informers.Core().V1().Pods().Lister(),
		recorder: events.NewRecorder(ctx, d.Client, ControllerName),
		history:  newHistory(), now: time.Now,
	}
	c.queue = controller.NewQueue(d.Metrics, controller.QueueConfig[string]{Name: "horizontalpodautoscaler", Sync: c.sync})
	synced, err := informer.Register(informer.Handler{Informer: hpas.Informer(), Handler: cache.ResourceEventHandlerFuncs{
		AddFunc: c.enqueue,
		// Status writes come back as updates; only a spec change
		// (a new generation) is worth a sync before the period ends.
		UpdateFunc: func(old, cur any) {
			o, ok1 := old.(*autoscalingv2.HorizontalPodAutoscaler)
			n, ok2 := cur.(*autoscalingv2.HorizontalPodAutoscaler)
			if ok1 && ok2 && !apiequality.Semantic.DeepEqual(o.Spec, n.Spec) {
				c.enqueue(cur)
			}
		},
		DeleteFunc: c.enqueue,
	}})
	if err != nil {
		return nil, fmt.Errorf("horizontal pod autoscaler controller: %w", err)
	}
	c.synced = append(synced, d.Informers.Core().V1().Pods().Informer().HasSynced)
	return c, nil
}

// Run syncs autoscalers until ctx ends.
func (c *Controller) Run(ctx context.Context) { c.queue.Run(ctx, c.opts.Workers, c.synced...) }

func (c *Controller) enqueue(obj any) {
	if key, ok := informer.Key(obj); ok {
		c.queue.Add(key)
	}
}

// sync reconciles one autoscaler and comes back after the sync period,
// also after a failure (as upstream's fixed-interval queue): what failed
// is in the autoscaler's conditions and events.
func (c *Controller) sync(ctx context.Context, key string) error {
	ns, name, err := cache.SplitMetaNamespaceKey(key)
	if err != nil {
		return nil
	}
	stored, err := c.hpas.HorizontalPodAutoscalers(ns).Get(name)
	if apierrors.IsNotFound(err) {
		c.history.forget(key)
		return nil
	}
	if err != nil {
		return err
	}
	if err := c.reconcile(ctx, key, stored); err != nil {
		slog.Info("horizontal pod autoscaler sync failed", "key", key, "err", err)
	}
	c.queue.AddAfter(key, c.opts.SyncPeriod)
	return nil
}

// reconcile is upstream's reconcileAutoscaler.
func (c *Controller) reconcile(ctx context.Context, key string, stored *autoscalingv2.HorizontalPodAutoscaler) error {
	hpa := stored.DeepCopy()
	now := c.now()
	ref := hpa.Spec.ScaleTargetRef
	targetGV, err := schema.ParseGroupVersion(ref.APIVersion)
	if err != nil {
		return c.failScale(ctx, hpa, stored, "FailedGetScale", fmt.Errorf("invalid API version in scale target reference: %w", err))
	}
	mappings, err := c.mapper.RESTMappings(schema.GroupKind{Group: targetGV.Group, Kind: ref.Kind})
	if err != nil {
		return c.failScale(ctx, hpa, stored, "FailedGetScale", fmt.Errorf("unable to determine resource for scale target reference: %w", err))
	}
	sc, gr, err := c.scaleOf(ctx, hpa.Namespace, ref.Name, mappings)
	if err != nil {
		return c.failScale(ctx, hpa, stored, "FailedGetScale", fmt.Errorf("the HPA controller was unable to get the target's current scale: %w", err))
	}
	setCondition(hpa, autoscalingv2.AbleToScale, corev1.ConditionTrue, "SucceededGetScale", "the HPA controller was able to get the target's current scale", now)
	current := sc.Spec.Replicas
	c.history.recordInitial(key, current, now)
	minReplicas := ptr.Deref(hpa.Spec.MinReplicas, 1)

	var desired int32
	var reason string
	var statuses []autoscalingv2.MetricStatus
	rescale := true
	switch {
	case current == 0 && minReplicas != 0:
		rescale = false
		setCondition(hpa, autoscalingv2.ScalingActive, corev1.ConditionFalse, "ScalingDisabled", "scaling is disabled since the replica count of the target is zero", now)
	case current > hpa.Spec.MaxReplicas:
		desired, reason = hpa.Spec.MaxReplicas, "Current number of replicas above Spec.MaxReplicas"
	case current < minReplicas:
		desired, reason = minReplicas, "Current number of replicas below Spec.MinReplicas"
	default:
		var metricName string
		var recommended int32
		recommended, metricName, statuses, err = c.replicasForMetrics(ctx, hpa, sc, now)
		if err != nil && recommended == -1 {
			c.setStatus(hpa, current, hpa.Status.DesiredReplicas, statuses, false, now)
			if uerr := c.updateStatus(ctx, hpa, stored); uerr != nil {
				return uerr
			}
			c.recorder.Event(hpa, corev1.EventTypeWarning, "FailedComputeMetricsReplicas", err.Error())
			return fmt.Errorf("failed to compute desired number of replicas based on listed metrics for %s/%s/%s: %w", ref.Kind, hpa.Namespace, ref.Name, err)
		}
		desired = recommended
		switch {
		case desired > current:
			reason = metricName + " above target"
		case desired < current:
			reason = "All metrics below target"
		}
		if hpa.Spec.Behavior == nil {
			desired = c.normalize(hpa, key, current, desired, minReplicas, now)
		} else {
			desired = c.normalizeWithBehavior(hpa, key, current, desired, minReplicas, now)
		}
		rescale = desired != current
	}

	if rescale {
		sc.Spec.Replicas = desired
		if _, err := c.scales.Scales(hpa.Namespace).Update(ctx, gr, sc, metav1.UpdateOptions{}); err != nil {
			c.recorder.Eventf(hpa, corev1.EventTypeWarning, "FailedRescale", "New size: %d; reason: %s; error: %v", desired, reason, err)
			setCondition(hpa, autoscalingv2.AbleToScale, corev1.ConditionFalse, "FailedUpdateScale",
				fmt.Sprintf("the HPA controller was unable to update the target scale: %v", err), now)
			c.setStatus(hpa, current, hpa.Status.DesiredReplicas, statuses, false, now)
			if uerr := c.updateStatus(ctx, hpa, stored); uerr != nil {
				return uerr
			}
			return fmt.Errorf("failed to rescale %s: %w", key, err)
		}
		setCondition(hpa, autoscalingv2.AbleToScale, corev1.ConditionTrue, "SucceededRescale",
			fmt.Sprintf("the HPA controller was able to update the target scale to %d", desired), now)
		c.recorder.Eventf(hpa, corev1.EventTypeNormal, "SuccessfulRescale", "New size: %d; reason: %s", desired, reason)
		c.history.recordScale(key, hpa.Spec.Behavior, current, desired, now)
	} else {
		desired = current
	}
	c.setStatus(hpa, current, desired, statuses, rescale, now)
	return c.updateStatus(ctx, hpa, stored)
}

// failScale reports a target that cannot be read.
func (c *Controller) failScale(ctx context.Context, hpa, stored *autoscalingv2.HorizontalPodAutoscaler, reason string, err error) error {
	c.recorder.Event(hpa, corev1.EventTypeWarning, reason, err.Error())
	setCondition(hpa, autoscalingv2.AbleToScale, corev1.ConditionFalse, reason, err.Error(), c.now())
	if uerr := c.updateStatus(ctx, hpa, stored); uerr != nil {
		return uerr
	}
	return err
}

// scaleOf reads the target's scale through the first mapping that serves it.
func (c *Controller) scaleOf(ctx context.Context, ns, name string, mappings []*meta.RESTMapping) (*autoscalingv1.Scale, schema.GroupResource, error) {
	var firstErr error
	for i, m := range mappings {
		gr := m.Resource.GroupResource()
		sc, err := c.scales.Scales(ns).Get(ctx, gr, name, metav1.GetOptions{})
		if err == nil {
			return sc, gr, nil
		}
		if i == 0 {
			firstErr = err
		}
	}
	if firstErr == nil {
		firstErr = fmt.Errorf("unrecognized resource")
	}
	return nil, schema.GroupResource{}, firstErr
}

// replicasForMetrics is upstream's computeReplicasForMetrics: the highest
// recommendation of the metrics that could be computed; -1 when too few
// could.
func (c *Controller) replicasForMetrics(ctx context.Context, hpa *autoscalingv2.HorizontalPodAutoscaler, sc *autoscalingv1.Scale, now time.Time) (int32, string, []autoscalingv2.MetricStatus, error) {
	if sc.Status.Selector == "" {
		msg := "selector is required"
		c.recorder.Event(hpa, corev1.EventTypeWarning, "SelectorRequired", msg)
		setCondition(hpa, autoscalingv2.ScalingActive, corev1.ConditionFalse, "InvalidSelector", "the HPA target's scale is missing a selector", now)
		return -1, "", nil, fmt.Errorf("%s", msg)
	}
	sel, err := labels.Parse(sc.Status.Selector)
	if err != nil {
		msg := fmt.Sprintf("couldn't convert selector into a corresponding internal selector object: %v", err)
		c.recorder.Event(hpa, corev1.EventTypeWarning, "InvalidSelector", msg)
		setCondition(hpa, autoscalingv2.ScalingActive, corev1.ConditionFalse, "InvalidSelector", msg, now)
		return -1, "", nil, fmt.Errorf("%s", msg)
	}
	statuses := make([]autoscalingv2.MetricStatus, len(hpa.Spec.Metrics))
	var replicas int32
	var metricName string
	var invalid int
	var firstErr error
	for i, spec := range hpa.Spec.Metrics {
		n, status, name, err := c.replicasForMetric(ctx, hpa, spec, sc.Spec.Replicas, sel, now)
		if err != nil {
			if invalid == 0 {
				firstErr = err
			}
			invalid++
			continue
		}
		statuses[i] = status
		if replicas == 0 || n > replicas {
			replicas, metricName = n, name
		}
	}
	if invalid >= len(hpa.Spec.Metrics) || (invalid > 0 && replicas < sc.Spec.Replicas) {
		return -1, "", statuses, fmt.Errorf("invalid metrics (%v invalid out of %v), first error is: %w", invalid, len(hpa.Spec.Metrics), firstErr)
	}
	setCondition(hpa, autoscalingv2.ScalingActive, corev1.ConditionTrue, "ValidMetricFound",
		fmt.Sprintf("the HPA was able to successfully calculate a replica count from %s", metricName), now)
	return replicas, metricName, statuses, nil
}

// replicasForMetric computes one metric; only resource metrics are
// measured (svcnet has no custom or external metrics API).
func (c *Controller) replicasForMetric(ctx context.Context, hpa *autoscalingv2.HorizontalPodAutoscaler, spec autoscalingv2.MetricSpec,
	current int32, sel labels.Selector, now time.Time) (int32, autoscalingv2.MetricStatus, string, error) {
	fail := func(reason string, err error) (int32, autoscalingv2.MetricStatus, string, error) {
		c.recorder.Event(hpa, corev1.EventTypeWarning, reason, err.Error())
		setCondition(hpa, autoscalingv2.ScalingActive, corev1.ConditionFalse, reason,
			fmt.Sprintf("the HPA was unable to compute the replica count: %v", err), now)
		return 0, autoscalingv2.MetricStatus{}, "", err
	}
	if spec.Type != autoscalingv2.ResourceMetricSourceType || spec.Resource == nil {
		return fail("InvalidMetricSourceType", fmt.Errorf("unknown metric source type %q", spec.Type))
	}
	res := spec.Resource
	list, err := c.metrics(ctx, hpa.Namespace, sel)
	if err != nil {
		return fail("FailedGetResourceMetric", fmt.Errorf("unable to get metrics for resource %s: %w", res.Name, err))
	}
	metrics, ts := resourceMetrics(list, res.Name)
	if len(metrics) == 0 {
		return fail("FailedGetResourceMetric", fmt.Errorf("unable to get metrics for resource %s: %w", res.Name, errNoMetrics))
	}
	pods, err := c.pods.Pods(hpa.Namespace).List(sel)
	if err != nil {
		return fail("FailedGetResourceMetric", err)
	}
	calc := calculator{tolerances: c.tolerances(hpa), cpuInitialization: c.opts.CPUInitialization,
		readinessDelay: c.opts.InitialReadinessDelay, now: now}
	var utilization int32
	var average int64
	switch {
	case res.Target.AverageValue != nil:
		average = res.Target.AverageValue.MilliValue()
	case res.Target.AverageUtilization != nil:
		utilization = *res.Target.AverageUtilization
	default:
		return fail("FailedGetResourceMetric", fmt.Errorf("invalid resource metric source: neither a utilization target nor a value target was set"))
	}
	r, err := calc.replicas(current, metrics, ts, pods, res.Name, utilization, average)
	if err != nil {
		return fail("FailedGetResourceMetric", fmt.Errorf("failed to get %s utilization: %w", res.Name, err))
	}
	status := autoscalingv2.MetricStatus{Type: autoscalingv2.ResourceMetricSourceType, Resource: &autoscalingv2.ResourceMetricStatus{
		Name: res.Name, Current: autoscalingv2.MetricValueStatus{AverageValue: resource.NewMilliQuantity(r.average, resource.DecimalSI)}}}
	if utilization > 0 {
		status.Resource.Current.AverageUtilization = ptr.To(r.utilization)
		return r.replicas, status, fmt.Sprintf("%s resource utilization (percentage of request)", res.Name), nil
	}
	return r.replicas, status, fmt.Sprintf("%s resource", res.Name), nil
}

// tolerances are the behavior's, else the controller's.
func (c *Controller) tolerances(hpa *autoscalingv2.HorizontalPodAutoscaler) tolerances {
	t := tolerances{down: c.opts.Tolerance, up: c.opts.Tolerance}
	if b := hpa.Spec.Behavior; b != nil {
		if b.ScaleDown != nil && b.ScaleDown.Tolerance != nil {
			t.down = b.ScaleDown.Tolerance.AsApproximateFloat64()
		}
		if b.ScaleUp != nil && b.ScaleUp.Tolerance != nil {
			t.up = b.ScaleUp.Tolerance.AsApproximateFloat64()
		}
	}
	return t
}

// normalize is upstream's normalizeDesiredReplicas.
func (c *Controller) normalize(hpa *autoscalingv2.HorizontalPodAutoscaler, key string, current, desired, minReplicas int32, now time.Time) int32 {
	stabilized := c.history.stabilize(key, desired, c.opts.DownscaleStabilization, now)
	if stabilized != desired {
		setCondition(hpa, autoscalingv2.AbleToScale, corev1.ConditionTrue, "ScaleDownStabilized", "recent recommendations were higher than current one, applying the highest recent recommendation", now)
	} else {
		setCondition(hpa, autoscalingv2.AbleToScale, corev1.ConditionTrue, "ReadyForNewScale", "recommended size matches current size", now)
	}
	out, reason, msg := limit(current, stabilized, minReplicas, hpa.Spec.MaxReplicas)
	setCondition(hpa, autoscalingv2.ScalingLimited, limited(out != stabilized), reason, msg, now)
	return out
}

// normalizeWithBehavior is upstream's normalizeDesiredReplicasWithBehaviors;
// a scale-down without a window of its own takes the controller's.
func (c *Controller) normalizeWithBehavior(hpa *autoscalingv2.HorizontalPodAutoscaler, key string, current, desired, minReplicas int32, now time.Time) int32 {
	b := hpa.Spec.Behavior
	up := b.ScaleUp
	if up == nil {
		up = horizontalpodautoscaler.ScaleUpDefaults()
	}
	down := b.ScaleDown
	if down == nil {
		down = horizontalpodautoscaler.ScaleDownDefaults()
	}
	if down.StabilizationWindowSeconds == nil {
		down = down.DeepCopy()
		down.StabilizationWindowSeconds = ptr.To(int32(c.opts.DownscaleStabilization.Seconds()))
	}
	n := normalization{key: key, up: up, down: down, min: minReplicas, max: hpa.Spec.MaxReplicas, current: current, desire: desired}
	stabilized, reason, msg := c.history.stabilizeWithBehavior(n, now)
	if stabilized != desired {
		setCondition(hpa, autoscalingv2.AbleToScale, corev1.ConditionTrue, reason, msg, now)
	} else {
		setCondition(hpa, autoscalingv2.AbleToScale, corev1.ConditionTrue, "ReadyForNewScale", "recommended size matches current size", now)
	}
	n.desire = stabilized
	out, reason, msg := c.history.limitWithBehavior(n, now)
	setCondition(hpa, autoscalingv2.ScalingLimited, limited(out != stabilized), reason, msg, now)
	return out
}

func limited(b bool) corev1.ConditionStatus {
	if b {
		return corev1.ConditionTrue
	}
	return corev1.ConditionFalse
}

// setStatus is upstream's setStatus, with the observed generation.
func (c *Controller) setStatus(hpa *autoscalingv2.HorizontalPodAutoscaler, current, desired int32, metrics []autoscalingv2.MetricStatus, rescaled bool, now time.Time) {
	var measured []autoscalingv2.MetricStatus
	for _, m := range metrics {
		if m.Type != "" {
			measured = append(measured, m)
		}
	}
	hpa.Status.CurrentReplicas, hpa.Status.DesiredReplicas, hpa.Status.CurrentMetrics = current, desired, measured
	hpa.Status.ObservedGeneration = ptr.To(hpa.Generation)
	if rescaled {
		hpa.Status.LastScaleTime = &metav1.Time{Time: now}
	}
}

// updateStatus writes the status if it changed.
func (c *Controller) updateStatus(ctx context.Context, hpa, stored *autoscalingv2.HorizontalPodAutoscaler) error {
	if apiequality.Semantic.DeepEqual(hpa.Status, stored.Status) {
		return nil
	}
	if _, err := c.client.AutoscalingV2().HorizontalPodAutoscalers(hpa.Namespace).UpdateStatus(ctx, hpa, metav1.UpdateOptions{}); err != nil {
		c.recorder.Event(hpa, corev1.EventTypeWarning, "FailedUpdateStatus", err.Error())
		return fmt.Errorf("failed to update status for %s: %w", hpa.Name, err)
	}
	return nil
}

// setCondition sets a condition, its transition time moving only when
// its status does.
func setCondition(hpa *autoscalingv2.HorizontalPodAutoscaler, t autoscalingv2.HorizontalPodAutoscalerConditionType,
	status corev1.ConditionStatus, reason, message string, now time.Time) {
	for i := range hpa.Status.Conditions {
		cond := &hpa.Status.Conditions[i]
		if cond.Type != t {
			continue
		}
		if cond.Status != status {
			cond.LastTransitionTime = metav1.Time{Time: now}
		}
		cond.Status, cond.Reason, cond.Message = status, reason, message
		return
	}
	hpa.Status.Conditions = append(hpa.Status.Conditions, autoscalingv2.HorizontalPodAutoscalerCondition{
		Type: t, Status: status, Reason: reason, Message: message, LastTransitionTime: metav1.Time{Time: now}})
}
