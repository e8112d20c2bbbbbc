package controllerref

import (
	"maps"
	"reflect"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// PodEvents routes pod events to the objects of one kind that control
// pods, as upstream's pod-owning controllers do: a pod wakes the object its
// controller reference names, and an orphan wakes the objects whose
// selectors match it, which may adopt it.
type PodEvents[T metav1.Object] struct {
	Kind schema.GroupVersionKind
	// Get reads an object from the cache.
	Get func(namespace, name string) (T, error)
	// Selecting lists the objects whose selectors match a pod; an error
	// means none does.
	Selecting func(pod *corev1.Pod) ([]T, error)
	// Enqueue wakes an object.
	Enqueue func(T)
}

// Owner is the object pod's controller reference names; false when the
// pod has none, names another kind, or names an object the cache does not
// hold under the reference's UID.
func (e *PodEvents[T]) Owner(pod *corev1.Pod) (T, bool) {
	return e.resolve(pod.Namespace, metav1.GetControllerOfNoCopy(pod))
}

func (e *PodEvents[T]) resolve(namespace string, ref *metav1.OwnerReference) (T, bool) {
	return resolve(ref, e.Kind, func(name string) (T, error) { return e.Get(namespace, name) })
}

// Added returns the owner of a new pod, for the caller to wake (and note
// the creation); an orphan wakes the objects that might adopt it.
func (e *PodEvents[T]) Added(pod *corev1.Pod) (T, bool) {
	if metav1.GetControllerOfNoCopy(pod) == nil {
		e.Orphan(pod)
		var none T
		return none, false
	}
	return e.Owner(pod)
}

// Orphan wakes the objects that might adopt pod.
func (e *PodEvents[T]) Orphan(pod *corev1.Pod) {
	objs, err := e.Selecting(pod)
	if err != nil {
		return
	}
	for _, o := range objs {
		e.Enqueue(o)
	}
}

// Updated wakes, for a changed pod, its owner and, when its controller
// reference changed, the owner it had before; an orphan whose labels or
// reference changed wakes the objects that might adopt it. It returns the
// owner the pod has now.
func (e *PodEvents[T]) Updated(old, cur *corev1.Pod) (T, bool) {
	curRef, oldRef := metav1.GetControllerOfNoCopy(cur), metav1.GetControllerOfNoCopy(old)
	refChanged := !reflect.DeepEqual(curRef, oldRef)
	if refChanged && oldRef != nil {
		if o, ok := e.resolve(old.Namespace, oldRef); ok {
			e.Enqueue(o)
		}
	}
	if curRef != nil {
		o, ok := e.resolve(cur.Namespace, curRef)
		if ok {
			e.Enqueue(o)
		}
		return o, ok
	}
	if refChanged || !maps.Equal(old.Labels, cur.Labels) {
		e.Orphan(cur)
	}
	var none T
	return none, false
}
