package pvprotection

import (
	"context"
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/svcnet/svcnet/internal/controller"
	"github.com/svcnet/svcnet/internal/controller/controllertest"
	"github.com/svcnet/svcnet/internal/registry/persistentvolume"
)

func TestProtection(t *testing.T) {
	now := metav1.Now()
	pv := func(name string, phase corev1.PersistentVolumePhase) *corev1.PersistentVolume {
		return &corev1.PersistentVolume{ObjectMeta: metav1.ObjectMeta{Name: name, DeletionTimestamp: &now,
			Finalizers: []string{persistentvolume.Finalizer}}, Status: corev1.PersistentVolumeStatus{Phase: phase}}
	}
	cs := controllertest.NewClient(pv("bound", corev1.VolumeBound), pv("released", corev1.VolumeReleased),
		&corev1.PersistentVolume{ObjectMeta: metav1.ObjectMeta{Name: "new"}})
	controllertest.Start(t, cs, func(_ context.Context, d controller.Deps) []func(context.Context) {
		c, err := New(d)
		if err != nil {
			t.Fatal(err)
		}
		return []func(context.Context){c.Run}
	})
	has := func(name string) bool {
		v, err := cs.CoreV1().PersistentVolumes().Get(context.Background(), name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return slices.Contains(v.Finalizers, persistentvolume.Finalizer)
	}
	controllertest.Eventually(t, func() string {
		if !has("new") || has("released") {
			return "finalizers not in line"
		}
		return ""
	})
	if !has("bound") {
		t.Error("finalizer of a bound volume removed")
	}
}
