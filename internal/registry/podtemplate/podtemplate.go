// Package podtemplate is the core/v1 PodTemplate strategy, after upstream's
// pkg/registry/core/podtemplate: a namespaced pod template, defaulted and
// validated as the templates of workloads are (template.spec with the pod
// spec defaults, template.metadata labels and annotations), with
// metadata.generation 1 on create and one more on each change of the
// template. `kubectl get podtemplates` shows NAME, CONTAINERS, IMAGES and
// POD LABELS.
package podtemplate

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/svcnet/svcnet/internal/registry"
	"github.com/svcnet/svcnet/internal/registry/validate"
	"github.com/svcnet/svcnet/internal/registry/workload"
)

// Resource describes podtemplates.
func Resource() *registry.Resource {
	template := func(o runtime.Object) *corev1.PodTemplateSpec { return &o.(*corev1.PodTemplate).Template }
	columns := []registry.Column{registry.NameColumn()}
	for _, c := range workload.ContainerColumns(template) {
		c.Priority = 0 // shown without -o wide, as upstream's
		columns = append(columns, c)
	}
	columns = append(columns, registry.TextColumn("Pod Labels", "The labels for the pod template.",
		func(t *corev1.PodTemplate) string { return labels.FormatLabels(t.Template.Labels) }))
	// Upstream has no short name and answers a delete with the object.
	return &registry.Resource{
		Kind:                corev1.SchemeGroupVersion.WithKind("PodTemplate"),
		Resource:            "podtemplates",
		Singular:            "podtemplate",
		Namespaced:          true,
		Generation:          true,
		ReturnDeletedObject: true,
		Strategy:            strategy{},
		Columns:             columns,
	}
}

type strategy struct{ registry.Base }

// Default applies the pod spec defaults to the template.
func (strategy) Default(obj runtime.Object) {
	validate.DefaultPodSpec(&obj.(*corev1.PodTemplate).Template.Spec)
}

func (strategy) Validate(obj runtime.Object) field.ErrorList {
	return validate.PodTemplateSpec(&obj.(*corev1.PodTemplate).Template, field.NewPath("template"))
}

func (strategy) ValidateUpdate(obj, _ runtime.Object) field.ErrorList {
	return validate.PodTemplateSpec(&obj.(*corev1.PodTemplate).Template, field.NewPath("template"))
}
