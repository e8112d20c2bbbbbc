// Package scheduler is svcnet's kube-scheduler, run inside the controller
// manager: it assigns each pod of the default scheduler that has no node
// to a node, through the pods/binding subresource, as upstream's default
// profile would choose it. Nodes are filtered (cordoned, untolerated
// taints, node selector and required node affinity, host ports, resource
// requests against allocatable, ReadWriteOncePod claims in use, the
// pod's claims and their volumes (VolumeBinding, see volumebinding.go),
// DoNotSchedule topology spread constraints, required pod affinity and
// anti-affinity, the pod's own and that of the pods already placed) and
// the rest scored (PreferNoSchedule
// taints, preferred node affinity, preferred pod affinity and
// anti-affinity, ScheduleAnyway spread constraints or, for a pod without
// spread constraints, spreading its controller's pods, least allocated).
// A pod that fits nowhere gets upstream's PodScheduled=False condition and
// FailedScheduling event, and is tried again with backoff when a node, a
// pod, a claim, a PV or a StorageClass changes in a way that may make
// room. A pod whose claims wait for their first consumer is bound in a
// binding cycle of its own, once the claims are bound.
//
// The scheduler keeps per-node sums of what the pods on each node
// request, updated pod by pod from the informers, so that placing a pod
// costs O(nodes), not O(pods). Only a pod with pod (anti-)affinity or
// spread constraints walks the other pods, once per attempt, as upstream's
// PreFilter and PreScore do; the pods with required anti-affinity, and
// those whose terms score others, are kept apart, so that any other pod is
// checked against them alone. A pod chosen for a node is assumed onto it
// before its binding is sent, so that a burst of pods spreads out, does
// not overcommit a node and honours the burst's own affinity while the
// informer catches up.
package scheduler

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"maps"
	"math/rand/v2"
	"slices"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"

	"github.com/svcnet/svcnet/internal/controller"
	"github.com/svcnet/svcnet/internal/events"
	"github.com/svcnet/svcnet/internal/informer"
)

// Name is the scheduler's name: pods whose spec.schedulerName is Name are
// its to place, and its events come from Name.
const Name = corev1.DefaultSchedulerName

// maxUnschedulable is how long a pod that did not fit waits at most for
// its next attempt when nothing in the cluster seems to change, as
// upstream's podMaxInUnschedulablePodsDuration.
const maxUnschedulable = 5 * time.Minute

// Options are the scheduler's settings.
type Options struct {
	// Parallelism is how many pods are placed and bound at once.
	Parallelism int
	// QPS and Burst limit each of the scheduler's API clients (one for
	// bindings and status, one for events), kube-scheduler's
	// --kube-api-qps and --kube-api-burst.
	QPS   float32
	Burst int
	// InitialBackoff and MaxBackoff space out the attempts of a pod that
	// did not fit: the wait doubles per attempt up to MaxBackoff
	// (podInitialBackoffSeconds and podMaxBackoffSeconds).
	InitialBackoff, MaxBackoff time.Duration
	// NoNodesReason, when set, says why the cluster has no nodes; it ends
	// the FailedScheduling message of pods that wait for one.
	NoNodesReason string
	// BindTimeout bounds the wait of a placed pod for its claims to be
	// bound (VolumeBindingArgs' bindTimeoutSeconds).
	BindTimeout time.Duration
}

// DefaultOptions are kube-scheduler's defaults.
func DefaultOptions() Options {
	return Options{Parallelism: 16, QPS: 50, Burst: 100, InitialBackoff: time.Second, MaxBackoff: 10 * time.Second, BindTimeout: DefaultBindTimeout}
}

// Scheduler places pods on nodes.
type Scheduler struct {
	opts   Options
	client kubernetes.Interface
	pods   corelisters.PodLister
	// namespaces are the Namespaces, whose labels namespaceSelectors of
	// pod affinity terms select.
	namespaces toolscache.Store
	recorder   record.EventRecorder
	queue      *controller.Queue[string]
	synced     []toolscache.InformerSynced
	// volumes is the VolumeBinding plugin; nil in tests that place pods
	// without claims.
	volumes *volumeBinding
	// bindings are the binding cycles that wait for a pod's claims, each
	// in a goroutine of its own as upstream's binding cycle.
	bindings sync.WaitGroup

	mu    sync.Mutex
	cache *cache
	rng   *rand.Rand
	// attempts are the failed attempts of pods that fit nowhere, by key.
	attempts map[string]*attempts
}

// attempts count a pod's failed attempts, for its backoff.
type attempts struct {
	count int
	last  time.Time
	// waitsOnPods tells that another pod's arrival may let the pod fit.
	waitsOnPods bool
}

// New creates the scheduler and registers its informer handlers. It binds
// pods and writes their status through d.Client and records events
// through eventClient until ctx ends.
func New(ctx context.Context, d controller.Deps, eventClient kubernetes.Interface, opts Options) (*Scheduler, error) {
	core := d.Informers.Core().V1()
	namespaces := core.Namespaces().Informer()
	s := &Scheduler{
		opts:       opts,
		client:     d.Client,
		pods:       core.Pods().Lister(),
		namespaces: namespaces.GetStore(),
		recorder:   events.NewRecorder(ctx, eventClient, Name),
		cache:      newCache(),
		rng:        rand.New(rand.NewPCG(rand.Uint64(), rand.Uint64())),
		attempts:   map[string]*attempts{},
	}
	s.queue = controller.NewQueue(d.Metrics, controller.QueueConfig[string]{Name: "scheduler", Sync: s.sync})
	pvcs, pvs := core.PersistentVolumeClaims(), core.PersistentVolumes()
	classes := d.Informers.Storage().V1().StorageClasses()
	s.volumes = &volumeBinding{
		client: d.Client, pvcs: pvcs.Lister(), pvs: pvs.Lister(), classes: classes.Lister(),
		pods: s.pods, timeout: opts.BindTimeout,
	}
	volumesChanged := toolscache.ResourceEventHandlerFuncs{
		AddFunc:    func(any) { s.volumeChanged() },
		UpdateFunc: func(any, any) { s.volumeChanged() },
	}
	synced, err := informer.Register(
		informer.Handler{Informer: pvcs.Informer(), Handler: volumesChanged},
		informer.Handler{Informer: pvs.Informer(), Handler: volumesChanged},
		informer.Handler{Informer: classes.Informer(), Handler: toolscache.ResourceEventHandlerFuncs{
			AddFunc: func(any) { s.retryUnschedulable() },
			UpdateFunc: func(oldObj, obj any) {
				old, _ := oldObj.(*storagev1.StorageClass)
				if cur, ok := obj.(*storagev1.StorageClass); ok && storageClassChanged(old, cur) {
					s.retryUnschedulable()
				}
			},
		}},
		informer.Handler{Informer: core.Pods().Informer(), Handler: toolscache.ResourceEventHandlerFuncs{
			AddFunc:    func(obj any) { s.podChanged(nil, obj) },
			UpdateFunc: s.podChanged,
			DeleteFunc: s.podDeleted,
		}},
		informer.Handler{Informer: core.Nodes().Informer(), Handler: toolscache.ResourceEventHandlerFuncs{
			AddFunc:    func(obj any) { s.nodeChanged(nil, obj) },
			UpdateFunc: s.nodeChanged,
			DeleteFunc: s.nodeDeleted,
		}},
	)
	if err != nil {
		return nil, fmt.Errorf("scheduler: %w", err)
	}
	s.synced = append(synced, namespaces.HasSynced)
	return s, nil
}

// Run places pods until ctx ends, then waits for the binding cycles.
func (s *Scheduler) Run(ctx context.Context) {
	s.queue.Run(ctx, s.opts.Parallelism, s.synced...)
	s.bindings.Wait()
}

// volumeChanged wakes the pods that wait for their claims to be bound,
// and retries those that found no volume: a claim or a PV may fit now.
func (s *Scheduler) volumeChanged() {
	s.volumes.changed.notify()
	s.retryUnschedulable()
}

// podChanged keeps the sums of assigned pods and queues pods to place.
func (s *Scheduler) podChanged(oldObj, obj any) {
	pod, ok := obj.(*corev1.Pod)
	if !ok {
		return
	}
	switch {
	case pod.Spec.NodeName != "" && !terminal(pod):
		s.mu.Lock()
		prev := s.cache.pods[pod.UID]
		s.cache.addPod(pod.UID, newPodInfo(pod, pod.Spec.NodeName, false))
		delete(s.attempts, cacheKey(pod))
		s.mu.Unlock()
		switch {
		case prev != nil && prev.node == pod.Spec.NodeName && !maps.Equal(prev.labels, pod.Labels):
			// New labels may match a pending pod's affinity, or no
			// longer match an anti-affinity that kept one out.
			s.retryUnschedulable()
		case prev == nil || prev.node != pod.Spec.NodeName:
			// A pod new on a node may be what a pending pod's affinity or
			// spread constraints wait for; one we assumed there was
			// counted already.
			s.retryWaitingOnPods()
		}
	case pod.Spec.NodeName != "":
		// A finished pod no longer takes anything from its node.
		s.mu.Lock()
		freed := s.cache.removePod(pod.UID)
		s.mu.Unlock()
		if freed {
			s.retryUnschedulable()
		}
	case ours(pod):
		old, _ := oldObj.(*corev1.Pod)
		// Our own status writes come back as updates; only a change of
		// what the pod asks for is worth another attempt.
		if old == nil || !equality.Semantic.DeepEqual(old.Spec, pod.Spec) || !equality.Semantic.DeepEqual(old.Labels, pod.Labels) {
			s.enqueue(cacheKey(pod))
		}
	}
}

// podDeleted frees what a pod took; that may make room for others.
func (s *Scheduler) podDeleted(obj any) {
	pod, ok := informer.Object[*corev1.Pod](obj)
	if !ok {
		return
	}
	s.mu.Lock()
	freed := s.cache.removePod(pod.UID)
	delete(s.attempts, cacheKey(pod))
	s.mu.Unlock()
	if freed {
		s.retryUnschedulable()
	}
}

func (s *Scheduler) nodeChanged(oldObj, obj any) {
	node, ok := obj.(*corev1.Node)
	if !ok {
		return
	}
	s.mu.Lock()
	s.cache.setNode(node)
	s.mu.Unlock()
	if old, _ := oldObj.(*corev1.Node); old == nil || mayHelp(old, node) {
		s.retryUnschedulable()
	}
}

func (s *Scheduler) nodeDeleted(obj any) {
	node, ok := informer.Object[*corev1.Node](obj)
	if !ok {
		return
	}
	s.mu.Lock()
	s.cache.deleteNode(node.Name)
	s.mu.Unlock()
}

// mayHelp tells whether a node update may let a pod fit that did not:
// its labels, taints, readiness, cordon or allocatable changed (not, say,
// a heartbeat).
func mayHelp(old, cur *corev1.Node) bool {
	return !equality.Semantic.DeepEqual(old.Labels, cur.Labels) ||
		old.Spec.Unschedulable != cur.Spec.Unschedulable ||
		!equality.Semantic.DeepEqual(effectiveTaints(old), effectiveTaints(cur)) ||
		!equality.Semantic.DeepEqual(old.Status.Allocatable, cur.Status.Allocatable)
}

// enqueue queues a pod for an attempt, after what remains of its backoff
// if it failed before.
func (s *Scheduler) enqueue(key string) {
	s.mu.Lock()
	a := s.attempts[key]
	var wait time.Duration
	if a != nil {
		wait = s.remainingBackoff(a)
	}
	s.mu.Unlock()
	s.queue.AddAfter(key, wait)
}

// retryUnschedulable queues every pod that fit nowhere, each once its
// backoff has passed, as upstream moves them when the cluster changes.
func (s *Scheduler) retryUnschedulable() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for key, a := range s.attempts {
		s.queue.AddAfter(key, s.remainingBackoff(a))
	}
}

// retryWaitingOnPods queues the pods that fit nowhere for want of other
// pods (required pod affinity, topology spread), each once its backoff has
// passed, as upstream's queueing hints move them when a pod is added.
func (s *Scheduler) retryWaitingOnPods() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for key, a := range s.attempts {
		if a.waitsOnPods {
			s.queue.AddAfter(key, s.remainingBackoff(a))
		}
	}
}

// remainingBackoff is how long a pod still waits: the initial backoff
// doubled per failed attempt, at most the maximum, from the last attempt.
func (s *Scheduler) remainingBackoff(a *attempts) time.Duration {
	d := s.opts.InitialBackoff
	for i := 1; i < a.count && d < s.opts.MaxBackoff; i++ {
		d *= 2
	}
	return time.Until(a.last.Add(min(d, s.opts.MaxBackoff)))
}

// sync makes one attempt to place a pod.
func (s *Scheduler) sync(ctx context.Context, key string) error {
	namespace, name, err := toolscache.SplitMetaNamespaceKey(key)
	if err != nil {
		return fmt.Errorf("bad key %q: %w", key, err)
	}
	pod, err := s.pods.Pods(namespace).Get(name)
	if apierrors.IsNotFound(err) {
		s.forgetAttempts(key)
		return nil
	}
	if err != nil {
		return fmt.Errorf("get pod %s: %w", key, err)
	}
	if pod.Spec.NodeName != "" || pod.DeletionTimestamp != nil || !ours(pod) {
		s.forgetAttempts(key)
		return nil
	}
	node, vols, unschedulable, busy := s.schedule(pod)
	switch {
	case busy:
		return nil
	case unschedulable != "":
		return s.failed(ctx, key, pod, corev1.PodReasonUnschedulable, unschedulable)
	case vols != nil:
		s.bindings.Go(func() { s.bindVolumesAndPod(ctx, key, pod, node, vols) })
		return nil
	}
	return s.bind(ctx, key, pod, node)
}

// bindVolumesAndPod is the binding cycle of a pod whose claims need
// binding: VolumeBinding's PreBind, then the pod's binding. A failure
// gives the pod back to the queue, after its backoff, as upstream's
// binding cycle does.
func (s *Scheduler) bindVolumesAndPod(ctx context.Context, key string, pod *corev1.Pod, node string, vols *podVolumes) {
	err := s.volumes.preBind(ctx, pod, node, vols, func() *corev1.Node {
		s.mu.Lock()
		defer s.mu.Unlock()
		if n := s.cache.nodes[node]; n != nil {
			return n.node
		}
		return nil
	})
	s.mu.Lock()
	s.volumes.forget(vols)
	if err != nil {
		s.cache.forget(pod.UID)
	}
	s.mu.Unlock()
	if err != nil {
		if _, gone := s.pods.Pods(pod.Namespace).Get(pod.Name); ctx.Err() != nil || apierrors.IsNotFound(gone) {
			return
		}
		msg := fmt.Sprintf("running PreBind plugin %q: %v", volumeBindingName, err)
		if err := s.failed(ctx, key, pod, corev1.PodReasonSchedulerError, msg); err != nil {
			slog.Error("Error scheduling pod", "pod", key, "err", err)
		}
		return
	}
	if err := s.bind(ctx, key, pod, node); err != nil {
		slog.Error("Error scheduling pod", "pod", key, "err", err)
		s.enqueue(key)
	}
}

// schedule chooses a node for pod and assumes the pod onto it, with the
// claims it needs bound there (nil when they all are), or says why no
// node fits. busy means the pod is already assumed: its binding is under
// way.
func (s *Scheduler) schedule(pod *corev1.Pod) (node string, vols *podVolumes, unschedulable string, busy bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.cache.pods[pod.UID]; ok {
		return "", nil, "", true
	}
	if s.cache.numNodes == 0 {
		if s.opts.NoNodesReason != "" {
			return "", nil, errNoNodes + ": " + s.opts.NoNodesReason, false
		}
		return "", nil, errNoNodes, false
	}
	c := newCandidate(pod)
	d := newDiagnosis(s.cache.numNodes)
	if s.volumes != nil {
		var rejected string
		if c.volumes, rejected = s.volumes.preFilter(pod, s.cache); rejected != "" {
			d.rejectAll(rejected)
			return "", nil, d.message(pod), false
		}
		c.binder = s.volumes
	}
	c.prepare(s.cache, s.namespaces)
	nodes := make([]feasible, 0, s.cache.numNodes)
	for name, n := range s.cache.nodes {
		if n.node == nil {
			continue
		}
		if reasons, resolvable := c.fit(n); len(reasons) > 0 {
			d.add(reasons, resolvable)
			continue
		}
		nodes = append(nodes, feasible{name: name, info: n})
	}
	if len(nodes) == 0 {
		return "", nil, d.message(pod), false
	}
	c.prescore(s.cache, s.namespaces, nodes)
	node = c.pick(nodes, s.rng)
	s.cache.addPod(pod.UID, c.info(node))
	if c.volumes != nil {
		vols = s.volumes.assume(c.volumes, node)
	}
	return node, vols, "", false
}

// bind assigns the pod to its chosen node, as upstream's DefaultBinder.
func (s *Scheduler) bind(ctx context.Context, key string, pod *corev1.Pod, node string) error {
	err := s.client.CoreV1().Pods(pod.Namespace).Bind(ctx, &corev1.Binding{
		ObjectMeta: metav1.ObjectMeta{Namespace: pod.Namespace, Name: pod.Name, UID: pod.UID},
		Target:     corev1.ObjectReference{Kind: "Node", Name: node},
	}, metav1.CreateOptions{})
	if err != nil {
		s.mu.Lock()
		s.cache.forget(pod.UID)
		s.mu.Unlock()
		if apierrors.IsNotFound(err) || apierrors.IsConflict(err) || ctx.Err() != nil {
			// Deleted or bound by someone else meanwhile, which the
			// informer will tell, or shutting down.
			return nil
		}
		s.recorder.Eventf(pod, corev1.EventTypeWarning, "FailedScheduling", "binding rejected: running Bind plugin %q: %v", "DefaultBinder", err)
		return fmt.Errorf("bind pod %s to node %s: %w", key, node, err)
	}
	s.forgetAttempts(key)
	s.recorder.Eventf(pod, corev1.EventTypeNormal, "Scheduled", "Successfully assigned %s/%s to %s", pod.Namespace, pod.Name, node)
	return nil
}

// failed records an attempt that found no node, or (reason
// SchedulerError) whose binding failed: the FailedScheduling event, the
// PodScheduled condition, and a retry after at most maxUnschedulable, or
// after the backoff for an error.
func (s *Scheduler) failed(ctx context.Context, key string, pod *corev1.Pod, reason, msg string) error {
	s.mu.Lock()
	a := s.attempts[key]
	if a == nil {
		a = &attempts{}
		s.attempts[key] = a
	}
	a.count++
	a.last = time.Now()
	a.waitsOnPods = waitsOnPods(pod)
	s.mu.Unlock()
	if reason == corev1.PodReasonSchedulerError {
		s.enqueue(key)
	} else {
		s.queue.AddAfter(key, maxUnschedulable)
	}
	s.recorder.Event(pod, corev1.EventTypeWarning, "FailedScheduling", msg)
	return s.setUnschedulable(ctx, pod, reason, msg)
}

// setUnschedulable sets PodScheduled=False with reason and msg, unless
// the pod says so already.
func (s *Scheduler) setUnschedulable(ctx context.Context, pod *corev1.Pod, reason, msg string) error {
	cond := corev1.PodCondition{
		Type: corev1.PodScheduled, Status: corev1.ConditionFalse,
		Reason: reason, Message: msg,
		ObservedGeneration: pod.Generation,
		LastTransitionTime: metav1.NewTime(time.Now().Truncate(time.Second)),
	}
	for _, c := range pod.Status.Conditions {
		if c.Type != corev1.PodScheduled || c.Status != cond.Status {
			continue
		}
		if c.Reason == cond.Reason && c.Message == cond.Message && c.ObservedGeneration == cond.ObservedGeneration {
			return nil
		}
		cond.LastTransitionTime = c.LastTransitionTime
	}
	patch, err := json.Marshal(map[string]any{"status": map[string]any{"conditions": []corev1.PodCondition{cond}}})
	if err != nil {
		return fmt.Errorf("encode status of pod %s/%s: %w", pod.Namespace, pod.Name, err)
	}
	_, err = s.client.CoreV1().Pods(pod.Namespace).Patch(ctx, pod.Name, types.StrategicMergePatchType, patch, metav1.PatchOptions{}, "status")
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("set pod %s/%s unschedulable: %w", pod.Namespace, pod.Name, err)
	}
	return nil
}

func (s *Scheduler) forgetAttempts(key string) {
	s.mu.Lock()
	delete(s.attempts, key)
	s.mu.Unlock()
}

// waitsOnPods tells whether the pod has constraints that a pod added
// somewhere may satisfy: required pod affinity, or DoNotSchedule spread
// constraints (a pod added to the emptiest domain raises the minimum).
func waitsOnPods(pod *corev1.Pod) bool {
	a := pod.Spec.Affinity
	return a != nil && a.PodAffinity != nil && len(a.PodAffinity.RequiredDuringSchedulingIgnoredDuringExecution) > 0 || slices.ContainsFunc(pod.Spec.TopologySpreadConstraints, func(tc corev1.TopologySpreadConstraint) bool {
		return tc.WhenUnsatisfiable == corev1.DoNotSchedule
	})
}

// ours tells whether the pod is the default scheduler's to place.
func ours(pod *corev1.Pod) bool { return pod.Spec.SchedulerName == Name }

func terminal(pod *corev1.Pod) bool {
	return pod.Status.Phase == corev1.PodSucceeded || pod.Status.Phase == corev1.PodFailed
}

func cacheKey(pod *corev1.Pod) string { return pod.Namespace + "/" + pod.Name }
