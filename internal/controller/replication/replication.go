// Package replication is the ReplicationController controller, as
// upstream's replication manager (pkg/controller/replication): the
// ReplicaSet controller run over ReplicationControllers, each seen as the
// ReplicaSet it would be (its map selector as matchLabels) and its status
// written back, its pods owned by the ReplicationController and its
// Events naming it.
package replication

import (
	"context"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	appslisters "k8s.io/client-go/listers/apps/v1"
	corelisters "k8s.io/client-go/listers/core/v1"

	"github.com/svcnet/svcnet/internal/controller"
	"github.com/svcnet/svcnet/internal/controller/replicaset"
)

// ControllerName is the source of the controller's Events.
const ControllerName = "replication-controller"

// Options are the controller's flags.
type Options struct {
	// Workers is --concurrent-rc-syncs.
	Workers int
}

// New creates the controller and registers its informer handlers; its
// Events are recorded until ctx ends.
func New(ctx context.Context, d controller.Deps, opts Options) (*replicaset.Controller, error) {
	inf := d.Informers.Core().V1().ReplicationControllers()
	rcs := d.Client.CoreV1().ReplicationControllers
	return replicaset.NewFor(ctx, d, replicaset.Options{Workers: opts.Workers}, replicaset.Kind{
		GVK:            corev1.SchemeGroupVersion.WithKind("ReplicationController"),
		ControllerName: ControllerName, Queue: "replicationmanager",
		Informer:     inf.Informer(),
		AsReplicaSet: func(obj any) *appsv1.ReplicaSet { return asReplicaSet(obj.(*corev1.ReplicationController)) },
		Lister:       lister{inf.Lister()},
		Read: func(ctx context.Context, namespace, name string) (*appsv1.ReplicaSet, error) {
			rc, err := rcs(namespace).Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				return nil, err
			}
			return asReplicaSet(rc), nil
		},
		UpdateStatus: func(ctx context.Context, rs *appsv1.ReplicaSet) (*appsv1.ReplicaSet, error) {
			rc, err := rcs(rs.Namespace).UpdateStatus(ctx, withStatus(asController(rs), rs.Status), metav1.UpdateOptions{})
			if err != nil {
				return nil, err
			}
			return asReplicaSet(rc), nil
		},
		EventObject: func(rs *appsv1.ReplicaSet) runtime.Object { return asController(rs) },
	})
}

// asReplicaSet is the ReplicaSet rc would be.
func asReplicaSet(rc *corev1.ReplicationController) *appsv1.ReplicaSet {
	rs := &appsv1.ReplicaSet{ObjectMeta: *rc.ObjectMeta.DeepCopy()}
	rs.Spec.Replicas = rc.Spec.Replicas
	rs.Spec.MinReadySeconds = rc.Spec.MinReadySeconds
	rs.Spec.Selector = &metav1.LabelSelector{MatchLabels: rc.Spec.Selector}
	if rc.Spec.Template != nil {
		rs.Spec.Template = *rc.Spec.Template.DeepCopy()
	}
	s := rc.Status
	rs.Status = appsv1.ReplicaSetStatus{Replicas: s.Replicas, FullyLabeledReplicas: s.FullyLabeledReplicas,
		ReadyReplicas: s.ReadyReplicas, AvailableReplicas: s.AvailableReplicas, ObservedGeneration: s.ObservedGeneration}
	for _, c := range s.Conditions {
		rs.Status.Conditions = append(rs.Status.Conditions, appsv1.ReplicaSetCondition{Type: appsv1.ReplicaSetConditionType(c.Type),
			Status: c.Status, LastTransitionTime: c.LastTransitionTime, Reason: c.Reason, Message: c.Message})
	}
	return rs
}

// asController is the ReplicationController rs stands for, without its
// status.
func asController(rs *appsv1.ReplicaSet) *corev1.ReplicationController {
	rc := &corev1.ReplicationController{ObjectMeta: *rs.ObjectMeta.DeepCopy()}
	rc.Spec.Replicas = rs.Spec.Replicas
	rc.Spec.MinReadySeconds = rs.Spec.MinReadySeconds
	if rs.Spec.Selector != nil {
		rc.Spec.Selector = rs.Spec.Selector.MatchLabels
	}
	rc.Spec.Template = rs.Spec.Template.DeepCopy()
	return rc
}

// withStatus is rc with the ReplicaSet status s (the counts, the
// observed generation and the ReplicaFailure condition; a
// ReplicationController has no terminating count).
func withStatus(rc *corev1.ReplicationController, s appsv1.ReplicaSetStatus) *corev1.ReplicationController {
	rc.Status = corev1.ReplicationControllerStatus{Replicas: s.Replicas, FullyLabeledReplicas: s.FullyLabeledReplicas,
		ReadyReplicas: s.ReadyReplicas, AvailableReplicas: s.AvailableReplicas, ObservedGeneration: s.ObservedGeneration}
	for _, c := range s.Conditions {
		rc.Status.Conditions = append(rc.Status.Conditions, corev1.ReplicationControllerCondition{
			Type: corev1.ReplicationControllerConditionType(c.Type), Status: c.Status,
			LastTransitionTime: c.LastTransitionTime, Reason: c.Reason, Message: c.Message})
	}
	return rc
}

// lister reads the ReplicationControllers' cache as ReplicaSets.
type lister struct {
	rcs corelisters.ReplicationControllerLister
}

var _ appslisters.ReplicaSetLister = lister{}

func (l lister) List(selector labels.Selector) ([]*appsv1.ReplicaSet, error) {
	rcs, err := l.rcs.List(selector)
	return asReplicaSets(rcs), err
}

func (l lister) ReplicaSets(namespace string) appslisters.ReplicaSetNamespaceLister {
	return namespaceLister{l.rcs.ReplicationControllers(namespace)}
}

// GetPodReplicaSets are the ReplicationControllers whose selector
// selects the pod, as upstream's GetPodControllers.
func (l lister) GetPodReplicaSets(pod *corev1.Pod) ([]*appsv1.ReplicaSet, error) {
	rcs, err := l.rcs.GetPodControllers(pod)
	if err != nil {
		return nil, err
	}
	return asReplicaSets(rcs), nil
}

type namespaceLister struct {
	rcs corelisters.ReplicationControllerNamespaceLister
}

func (l namespaceLister) List(selector labels.Selector) ([]*appsv1.ReplicaSet, error) {
	rcs, err := l.rcs.List(selector)
	return asReplicaSets(rcs), err
}

func (l namespaceLister) Get(name string) (*appsv1.ReplicaSet, error) {
	rc, err := l.rcs.Get(name)
	if err != nil {
		return nil, err
	}
	return asReplicaSet(rc), nil
}

func asReplicaSets(rcs []*corev1.ReplicationController) []*appsv1.ReplicaSet {
	out := make([]*appsv1.ReplicaSet, 0, len(rcs))
	for _, rc := range rcs {
		out = append(out, asReplicaSet(rc))
	}
	return out
}
