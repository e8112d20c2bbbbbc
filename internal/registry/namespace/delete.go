package namespace

import (
	"errors"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

// immortal are the namespaces upstream refuses to delete.
var immortal = map[string]bool{metav1.NamespaceDefault: true, metav1.NamespaceSystem: true, metav1.NamespacePublic: true}

// PrepareForDelete refuses the system namespaces and turns the deletion of
// a namespace with spec.finalizers into the Terminating phase; the
// namespace controller empties it and clears the finalizers through
// /finalize, after which it is removed.
func (strategy) PrepareForDelete(obj runtime.Object, _ *metav1.DeleteOptions) (bool, error) {
	ns := obj.(*corev1.Namespace)
	if immortal[ns.Name] {
		return false, apierrors.NewForbidden(corev1.Resource("namespaces"), ns.Name, errors.New("this namespace may not be deleted"))
	}
	if len(ns.Spec.Finalizers) == 0 {
		return false, nil
	}
	ns.Status.Phase = corev1.NamespaceTerminating
	return true, nil
}
