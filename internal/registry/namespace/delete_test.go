package namespace

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestPrepareForDelete(t *testing.T) {
	_, err := strategy{}.PrepareForDelete(&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "default"}}, &metav1.DeleteOptions{})
	if !apierrors.IsForbidden(err) || err.Error() != `namespaces "default" is forbidden: this namespace may not be deleted` {
		t.Fatalf("deleting default: %v", err)
	}
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "team"}, Spec: corev1.NamespaceSpec{Finalizers: []corev1.FinalizerName{"kubernetes"}}}
	pending, err := strategy{}.PrepareForDelete(ns, &metav1.DeleteOptions{})
	if err != nil || !pending || ns.Status.Phase != corev1.NamespaceTerminating {
		t.Fatalf("pending %v err %v phase %q", pending, err, ns.Status.Phase)
	}
	done := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "gone"}}
	if pending, err := (strategy{}).PrepareForDelete(done, &metav1.DeleteOptions{}); err != nil || pending {
		t.Fatalf("namespace without finalizers: pending %v err %v", pending, err)
	}
}
