package pvcprotection

import (
	"context"
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/svcnet/svcnet/internal/controller"
	"github.com/svcnet/svcnet/internal/controller/controllertest"
	"github.com/svcnet/svcnet/internal/registry/persistentvolumeclaim"
)

func TestProtection(t *testing.T) {
	now := metav1.Now()
	deleted := &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Name: "data", Namespace: "default",
		DeletionTimestamp: &now, Finalizers: []string{persistentvolumeclaim.Finalizer}}}
	fresh := &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Name: "new", Namespace: "default"}}
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "default"},
		Spec: corev1.PodSpec{NodeName: "n1", Volumes: []corev1.Volume{{Name: "d", VolumeSource: corev1.VolumeSource{
			PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: "data"}}}}},
		Status: corev1.PodStatus{Phase: corev1.PodRunning}}
	cs := controllertest.NewClient(deleted, fresh, pod)
	controllertest.Start(t, cs, func(_ context.Context, d controller.Deps) []func(context.Context) {
		c, err := New(d)
		if err != nil {
			t.Fatal(err)
		}
		return []func(context.Context){c.Run}
	})
	finalizers := func(name string) []string {
		c, err := cs.CoreV1().PersistentVolumeClaims("default").Get(context.Background(), name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return c.Finalizers
	}
	controllertest.Eventually(t, func() string {
		if !slices.Contains(finalizers("new"), persistentvolumeclaim.Finalizer) {
			return "new claim has no finalizer"
		}
		return ""
	})
	if !slices.Contains(finalizers("data"), persistentvolumeclaim.Finalizer) {
		t.Fatal("finalizer of a claim in use removed")
	}
	if err := cs.CoreV1().Pods("default").Delete(context.Background(), "web", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	controllertest.Eventually(t, func() string {
		if slices.Contains(finalizers("data"), persistentvolumeclaim.Finalizer) {
			return "finalizer kept after the pod went"
		}
		return ""
	})
}
