package apiserver

import (
	"fmt"
	"net/http"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// bindingResource names pods/binding in errors, as upstream does.
var bindingResource = schema.GroupResource{Resource: "pods/binding"}

// serveBinding assigns a pod to a node (POST pods/<name>/binding), the way
// a scheduler binds: it sets spec.nodeName once, marks the pod
// PodScheduled and takes the binding's annotations.
func (s *Server) serveBinding(w http.ResponseWriter, r *http.Request, ri *requestInfo) error {
	wr, err := readWrite(r, &metav1.CreateOptions{}, false)
	if err != nil {
		return err
	}
	obj, warnings, err := decodeObject(ri.res, corev1.SchemeGroupVersion.WithKind("Binding"), r.Header.Get("Content-Type"), wr.body, wr.directive)
	if err != nil {
		return err
	}
	b := obj.(*corev1.Binding)
	if b.Name != "" && b.Name != ri.name {
		return apierrors.NewBadRequest(fmt.Sprintf("the name of the object (%s) does not match the name on the URL (%s)", b.Name, ri.name))
	}
	if b.Target.Kind != "" && b.Target.Kind != "Node" {
		return apierrors.NewInvalid(corev1.SchemeGroupVersion.WithKind("Binding").GroupKind(), ri.name,
			fieldErrors("target.kind", b.Target.Kind, "must be empty or 'Node'"))
	}
	if b.Target.Name == "" {
		return apierrors.NewInvalid(corev1.SchemeGroupVersion.WithKind("Binding").GroupKind(), ri.name,
			fieldErrors("target.name", "", "must not be empty"))
	}
	_, _, err = s.update(r.Context(), ri.res, ri.namespace, ri.name, "binding", wr.o, false, func(cur runtime.Object) (runtime.Object, error) {
		pod := cur.(*corev1.Pod)
		if pod.DeletionTimestamp != nil {
			return nil, apierrors.NewConflict(bindingResource, ri.name, fmt.Errorf("pod %s is being deleted, cannot be assigned to a host", pod.Name))
		}
		if pod.Spec.NodeName != "" {
			return nil, apierrors.NewConflict(bindingResource, ri.name, fmt.Errorf("pod %s is already assigned to node %q", pod.Name, pod.Spec.NodeName))
		}
		pod.Spec.NodeName = b.Target.Name
		for k, v := range b.Annotations {
			if pod.Annotations == nil {
				pod.Annotations = map[string]string{}
			}
			pod.Annotations[k] = v
		}
		setPodScheduled(pod)
		return pod, nil
	})
	if err != nil {
		return err
	}
	addWarnings(w, warnings)
	writeObject(w, http.StatusCreated, wr.f, &metav1.Status{TypeMeta: metav1.TypeMeta{Kind: "Status", APIVersion: "v1"}, Status: metav1.StatusSuccess, Code: http.StatusCreated})
	return nil
}

// setPodScheduled sets the PodScheduled condition to True.
func setPodScheduled(pod *corev1.Pod) {
	now := metav1.NewTime(time.Now().Truncate(time.Second))
	for i, c := range pod.Status.Conditions {
		if c.Type == corev1.PodScheduled {
			if c.Status != corev1.ConditionTrue {
				pod.Status.Conditions[i] = corev1.PodCondition{Type: corev1.PodScheduled, Status: corev1.ConditionTrue, LastTransitionTime: now}
			}
			return
		}
	}
	pod.Status.Conditions = append(pod.Status.Conditions, corev1.PodCondition{Type: corev1.PodScheduled, Status: corev1.ConditionTrue, LastTransitionTime: now})
}
