package namespace

import (
	"reflect"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/svcnet/svcnet/internal/registry/registrytest"
)

func TestCreate(t *testing.T) {
	tests := []struct {
		name       string
		finalizers []corev1.FinalizerName
		want       []corev1.FinalizerName
	}{
		{"none", nil, []corev1.FinalizerName{"kubernetes"}},
		{"other", []corev1.FinalizerName{"example.com/cleanup"}, []corev1.FinalizerName{"example.com/cleanup", "kubernetes"}},
		{"already", []corev1.FinalizerName{"kubernetes"}, []corev1.FinalizerName{"kubernetes"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "team-a"}, Spec: corev1.NamespaceSpec{Finalizers: tt.finalizers}}
			registrytest.Created(strategy{}, ns)
			if !reflect.DeepEqual(ns.Spec.Finalizers, tt.want) {
				t.Errorf("finalizers = %v, want %v", ns.Spec.Finalizers, tt.want)
			}
			if ns.Status.Phase != corev1.NamespaceActive {
				t.Errorf("phase = %q", ns.Status.Phase)
			}
			if ns.Labels["kubernetes.io/metadata.name"] != "team-a" {
				t.Errorf("labels = %v", ns.Labels)
			}
			if cell := Resource().Columns[1].Cell(ns); cell != "Active" {
				t.Errorf("STATUS = %v", cell)
			}
		})
	}
}

func TestUpdateKeepsFinalizers(t *testing.T) {
	old := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "a"}, Spec: corev1.NamespaceSpec{Finalizers: []corev1.FinalizerName{"kubernetes"}}}
	updated := old.DeepCopy()
	updated.Spec.Finalizers = nil
	updated.Labels = map[string]string{"kubernetes.io/metadata.name": "b"}
	s := strategy{}
	s.Default(updated)
	s.PrepareForUpdate(updated, old)
	if len(updated.Spec.Finalizers) != 1 || updated.Labels["kubernetes.io/metadata.name"] != "a" {
		t.Fatalf("got finalizers %v labels %v", updated.Spec.Finalizers, updated.Labels)
	}
}

func TestValidate(t *testing.T) {
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "a"}, Spec: corev1.NamespaceSpec{Finalizers: []corev1.FinalizerName{"cleanup"}}}
	registrytest.ExpectErrors(t, strategy{}.Validate(ns),
		`spec.finalizers: Invalid value: "cleanup": name is neither a standard finalizer name nor is it fully qualified`)
	if msgs := Resource().NameValidation("Team_A", false); len(msgs) == 0 {
		t.Error("namespace names must be DNS labels")
	}
	f := Resource().Fields(ns)
	if f["name"] != "a" || f["status.phase"] != "" {
		t.Errorf("fields = %v", f)
	}
}
