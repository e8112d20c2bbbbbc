package daemonset

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"sync"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/svcnet/svcnet/internal/controller/podstate"
	"github.com/svcnet/svcnet/internal/controller/slowstart"
)

// Event reasons, as upstream's.
const (
	reasonSuccessfulCreate = "SuccessfulCreate"
	reasonFailedCreate     = "FailedCreate"
	reasonSuccessfulDelete = "SuccessfulDelete"
	reasonFailedDelete     = "FailedDelete"
	reasonFailedDaemonPod  = "FailedDaemonPod"
)

// nodeState is one node as the DaemonSet sees it.
type nodeState struct {
	node      *corev1.Node
	run, keep bool
	// pods are the DaemonSet's active pods for the node, oldest first.
	pods []*corev1.Pod
	// failed are its finished pods there, to delete.
	failed []*corev1.Pod
}

// world is every node with the DaemonSet's pods, and pods for nodes that
// are gone.
type world struct {
	nodes    []*nodeState
	orphaned []*corev1.Pod
	hash     string
	ds       *appsv1.DaemonSet
}

func (c *Controller) world(ds *appsv1.DaemonSet, nodes []*corev1.Node, pods []*corev1.Pod, hash string) *world {
	w := &world{hash: hash, ds: ds}
	byName := map[string]*nodeState{}
	p := placementOf(ds)
	sort.Slice(nodes, func(i, j int) bool { return nodes[i].Name < nodes[j].Name })
	for _, n := range nodes {
		s := &nodeState{node: n}
		s.run, s.keep = p.shouldRun(n)
		byName[n.Name] = s
		w.nodes = append(w.nodes, s)
	}
	sort.Slice(pods, func(i, j int) bool {
		if !pods[i].CreationTimestamp.Equal(&pods[j].CreationTimestamp) {
			return pods[i].CreationTimestamp.Before(&pods[j].CreationTimestamp)
		}
		return pods[i].Name < pods[j].Name
	})
	for _, pod := range pods {
		if pod.DeletionTimestamp != nil {
			continue
		}
		s := byName[targetNode(pod)]
		switch {
		case s == nil:
			w.orphaned = append(w.orphaned, pod)
		case pod.Status.Phase == corev1.PodFailed || pod.Status.Phase == corev1.PodSucceeded:
			s.failed = append(s.failed, pod)
		default:
			s.pods = append(s.pods, pod)
		}
	}
	return w
}

// split is the node's pods of the current template and the others.
func (s *nodeState) split(w *world) (cur, old []*corev1.Pod) {
	for _, p := range s.pods {
		if updated(w.ds, p, w.hash) {
			cur = append(cur, p)
		} else {
			old = append(old, p)
		}
	}
	return cur, old
}

// plan is what one sync writes: pods to create (by node) and to delete.
type plan struct {
	create []string
	delete []*corev1.Pod
}

func (p *plan) empty() bool { return len(p.create) == 0 && len(p.delete) == 0 }

// manage creates the missing daemon pods and deletes those that should
// not run (upstream's manage); when that has nothing to do, it replaces
// old pods by the update strategy.
func (c *Controller) manage(ctx context.Context, ds *appsv1.DaemonSet, w *world, hash string) error {
	p := c.placePods(ds, w)
	if p.empty() && ds.Spec.UpdateStrategy.Type == appsv1.RollingUpdateDaemonSetStrategyType {
		p = c.rollingUpdate(ds, w)
	}
	return c.apply(ctx, ds, hash, p)
}

// placePods is upstream's podsShouldBeOnNode over every node: a pod where
// one should run and none does, none where none may stay, one (of each
// template while surging) where several are, and failed pods removed.
func (c *Controller) placePods(ds *appsv1.DaemonSet, w *world) *plan {
	p := &plan{delete: append([]*corev1.Pod(nil), w.orphaned...)}
	surging := ds.Spec.UpdateStrategy.Type == appsv1.RollingUpdateDaemonSetStrategyType && c.surge(ds, w) > 0
	for _, s := range w.nodes {
		for _, f := range s.failed {
			if s.run {
				c.recorder.Eventf(ds, corev1.EventTypeWarning, reasonFailedDaemonPod,
					"Found failed daemon pod %s/%s on node %s, will try to kill it", f.Namespace, f.Name, s.node.Name)
			}
			p.delete = append(p.delete, f)
		}
		switch {
		case !s.keep:
			p.delete = append(p.delete, s.pods...)
		case s.run && len(s.pods) == 0 && len(s.failed) == 0:
			p.create = append(p.create, s.node.Name)
		case !surging && len(s.pods) > 1:
			p.delete = append(p.delete, s.pods[1:]...)
		case surging:
			cur, old := s.split(w)
			if len(cur) > 1 {
				p.delete = append(p.delete, cur[1:]...)
			}
			if len(old) > 1 {
				p.delete = append(p.delete, old[1:]...)
			}
		}
	}
	return p
}

// limits are maxSurge and maxUnavailable scaled to the nodes that should
// run a pod, as upstream's updatedDesiredNodeCounts: one unavailable when
// both come to zero.
func limits(ds *appsv1.DaemonSet, desired int) (surge, unavailable int) {
	ru := ds.Spec.UpdateStrategy.RollingUpdate
	scaled := func(v *intstr.IntOrString) int {
		if v == nil {
			return 0
		}
		n, err := intstr.GetScaledValueFromIntOrPercent(v, desired, true)
		if err != nil {
			return 0
		}
		return n
	}
	if ru != nil {
		surge, unavailable = scaled(ru.MaxSurge), scaled(ru.MaxUnavailable)
	}
	if surge == 0 && unavailable == 0 {
		unavailable = 1
	}
	return surge, unavailable
}

func (c *Controller) surge(ds *appsv1.DaemonSet, w *world) int {
	s, _ := limits(ds, w.desired())
	return s
}

func (w *world) desired() int {
	n := 0
	for _, s := range w.nodes {
		if s.run {
			n++
		}
	}
	return n
}

// rollingUpdate replaces old pods node by node, as upstream's: without
// surge, an old pod is deleted (and replaced in a later sync) while fewer
// than maxUnavailable nodes lack an available pod, unavailable old pods
// first; with surge, a new pod starts beside an old one on up to maxSurge
// nodes, and the old one goes once the new one is available.
func (c *Controller) rollingUpdate(ds *appsv1.DaemonSet, w *world) *plan {
	surge, maxUnavailable := limits(ds, w.desired())
	now := c.clock.Now()
	available := func(p *corev1.Pod) bool {
		ok, _ := podstate.Available(p, ds.Spec.MinReadySeconds, now)
		return ok
	}
	p := &plan{}
	if surge == 0 {
		unavailable := 0
		var candidates []*corev1.Pod
		for _, s := range w.nodes {
			if !s.run {
				continue
			}
			cur, old := s.split(w)
			switch {
			case len(s.pods) == 0 || len(s.pods) > 1:
				unavailable++
			case len(cur) == 1:
				if !available(cur[0]) {
					unavailable++
				}
			case !available(old[0]):
				p.delete = append(p.delete, old[0])
				unavailable++
			default:
				candidates = append(candidates, old[0])
			}
		}
		n := min(max(maxUnavailable-unavailable, 0), len(candidates))
		p.delete = append(p.delete, candidates[:n]...)
		return p
	}
	surging := 0
	var candidates []string
	for _, s := range w.nodes {
		if !s.run {
			continue
		}
		cur, old := s.split(w)
		switch {
		case len(old) == 0:
		case len(cur) == 0 && !available(old[0]):
			p.create = append(p.create, s.node.Name)
		case len(cur) == 0:
			candidates = append(candidates, s.node.Name)
		case available(cur[0]):
			p.delete = append(p.delete, old...)
		default:
			surging++
		}
	}
	n := min(max(surge-surging, 0), len(candidates))
	p.create = append(p.create, candidates[:n]...)
	return p
}

// apply issues the plan's writes under expectations, creations in
// upstream's slow-start batches.
func (c *Controller) apply(ctx context.Context, ds *appsv1.DaemonSet, hash string, p *plan) error {
	key := ds.Namespace + "/" + ds.Name
	var errs []error
	if n := len(p.create); n > 0 {
		c.expectations.ExpectCreations(key, n)
		created, err := slowstart.Run(n, func(i int) error { return c.createPod(ctx, ds, hash, p.create[i]) })
		for range n - created {
			c.expectations.CreationObserved(key)
		}
		errs = append(errs, err)
	}
	if len(p.delete) > 0 {
		podKeys := make([]string, len(p.delete))
		for i, pod := range p.delete {
			podKeys[i] = pod.Namespace + "/" + pod.Name
		}
		c.expectations.ExpectDeletions(key, podKeys)
		results := make([]error, len(p.delete))
		var wg sync.WaitGroup
		for i, pod := range p.delete {
			wg.Go(func() {
				if err := c.deletePodOf(ctx, ds, pod); err != nil {
					c.expectations.DeletionObserved(key, podKeys[i])
					if !apierrors.IsNotFound(err) {
						results[i] = err
					}
				}
			})
		}
		wg.Wait()
		errs = append(errs, errors.Join(results...))
	}
	return errors.Join(errs...)
}

func (c *Controller) createPod(ctx context.Context, ds *appsv1.DaemonSet, hash, node string) error {
	pod, err := c.client.CoreV1().Pods(ds.Namespace).Create(ctx, newPod(ds, hash, node), metav1.CreateOptions{})
	switch {
	case apierrors.HasStatusCause(err, corev1.NamespaceTerminatingCause):
		return nil
	case err != nil:
		if !errors.Is(err, context.Canceled) {
			c.recorder.Eventf(ds, corev1.EventTypeWarning, reasonFailedCreate, "Error creating: %v", err)
		}
		return fmt.Errorf("create pod for node %s: %w", node, err)
	}
	c.recorder.Eventf(ds, corev1.EventTypeNormal, reasonSuccessfulCreate, "Created pod: %v", pod.Name)
	return nil
}

func (c *Controller) deletePodOf(ctx context.Context, ds *appsv1.DaemonSet, pod *corev1.Pod) error {
	uid := pod.UID
	err := c.client.CoreV1().Pods(pod.Namespace).Delete(ctx, pod.Name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &uid}})
	switch {
	case apierrors.IsNotFound(err):
		return err
	case err != nil:
		c.recorder.Eventf(ds, corev1.EventTypeWarning, reasonFailedDelete, "Error deleting: %v", err)
		return fmt.Errorf("delete pod %s: %w", pod.Name, err)
	}
	c.recorder.Eventf(ds, corev1.EventTypeNormal, reasonSuccessfulDelete, "Deleted pod: %v", pod.Name)
	return nil
}

// nextAvailable is when the first Ready but not yet available pod becomes
// available, for the status to count it.
func (w *world) nextAvailable(ds *appsv1.DaemonSet, now time.Time) (time.Duration, bool) {
	if ds.Spec.MinReadySeconds == 0 {
		return 0, false
	}
	var next time.Duration
	found := false
	for _, s := range w.nodes {
		for _, pod := range s.pods {
			if ok, wait := podstate.Available(pod, ds.Spec.MinReadySeconds, now); !ok && wait > 0 && (!found || wait < next) {
				next, found = wait, true
			}
		}
	}
	return next, found
}
