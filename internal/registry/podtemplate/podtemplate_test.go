package podtemplate

import (
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/svcnet/svcnet/internal/registry/registrytest"
)

func valid() *corev1.PodTemplate {
	return &corev1.PodTemplate{
		ObjectMeta: metav1.ObjectMeta{Name: "t", Namespace: "default"},
		Template: corev1.PodTemplateSpec{
			ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "web"}},
			Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "web", Image: "nginx"}}},
		},
	}
}

func TestDefaultsAndValidation(t *testing.T) {
	s := strategy{}
	pt := registrytest.Created(s, valid())
	spec := pt.Template.Spec
	if spec.RestartPolicy != corev1.RestartPolicyAlways || spec.DNSPolicy != corev1.DNSClusterFirst ||
		spec.Containers[0].TerminationMessagePath != corev1.TerminationMessagePathDefault {
		t.Fatalf("template not defaulted as a pod spec: %+v", spec)
	}
	registrytest.ExpectErrors(t, s.Validate(pt))
	bad := pt.DeepCopy()
	bad.Template.Labels = map[string]string{"-bad": "x"}
	bad.Template.Spec.Containers[0].Image = ""
	errs := s.ValidateUpdate(bad, pt)
	if len(errs) != 2 || errs[0].Field != "template.labels" || errs[1].Field != "template.spec.containers[0].image" {
		t.Fatalf("errors %v, want one for template.labels and one for template.spec.containers[0].image", errs)
	}
}

func TestColumns(t *testing.T) {
	pt := valid()
	pt.Template.Spec.Containers = append(pt.Template.Spec.Containers, corev1.Container{Name: "log", Image: "busybox"})
	r := Resource()
	want := []string{"Name", "Containers", "Images", "Pod Labels"}
	if got := registrytest.Names(r.Columns); !slices.Equal(got, want) {
		t.Fatalf("columns %v, want %v", got, want)
	}
	cells := []interface{}{"t", "web,log", "nginx,busybox", "app=web"}
	for i, c := range r.Columns {
		if c.Priority != 0 {
			t.Errorf("column %s is wide only", c.Name)
		}
		if got := c.Cell(pt); got != cells[i] {
			t.Errorf("%s = %v, want %v", c.Name, got, cells[i])
		}
	}
}
