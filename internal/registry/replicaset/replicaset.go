// Package replicaset is the apps/v1 ReplicaSet strategy: one replica by
// default, upstream's spec validation, the immutable selector, the scale
// subresource, the status.replicas field selector and the
// DESIRED/CURRENT/READY columns.
package replicaset

import (
	"strconv"

	appsv1 "k8s.io/api/apps/v1"
	extensionsv1beta1 "k8s.io/api/extensions/v1beta1"
	"k8s.io/apimachinery/pkg/api/validation"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/svcnet/svcnet/internal/registry"
	"github.com/svcnet/svcnet/internal/registry/workload"
)

// Resource describes replicasets.
func Resource() *registry.Resource {
	rs := func(o runtime.Object) *appsv1.ReplicaSet { return o.(*appsv1.ReplicaSet) }
	columns := workload.Columns([]registry.Column{
		{TableColumnDefinition: metav1.TableColumnDefinition{Name: "Desired", Type: "integer",
			Description: extensionsv1beta1.ReplicaSetSpec{}.SwaggerDoc()["replicas"]},
			Cell: func(o runtime.Object) interface{} { return int64(workload.Replicas(o)) }},
		{TableColumnDefinition: metav1.TableColumnDefinition{Name: "Current", Type: "integer",
			Description: extensionsv1beta1.ReplicaSetStatus{}.SwaggerDoc()["replicas"]},
			Cell: func(o runtime.Object) interface{} { return int64(rs(o).Status.Replicas) }},
		{TableColumnDefinition: metav1.TableColumnDefinition{Name: "Ready", Type: "integer",
			Description: extensionsv1beta1.ReplicaSetStatus{}.SwaggerDoc()["readyReplicas"]},
			Cell: func(o runtime.Object) interface{} { return int64(rs(o).Status.ReadyReplicas) }},
	}, workload.SelectorColumn(extensionsv1beta1.ReplicaSetSpec{}.SwaggerDoc()["selector"], metav1.FormatLabelSelector))
	return workload.Resource(&registry.Resource{
		Kind:       appsv1.SchemeGroupVersion.WithKind("ReplicaSet"),
		Resource:   "replicasets",
		Singular:   "replicaset",
		ShortNames: []string{"rs"},
		Strategy:   strategy{},
		Columns:    columns,
		Fields: func(o runtime.Object) fields.Set {
			return fields.Set{"status.replicas": strconv.Itoa(int(rs(o).Status.Replicas))}
		},
	})
}

type strategy struct{ registry.Base }

// Default follows upstream's SetDefaults_ReplicaSet.
func (strategy) Default(obj runtime.Object) {
	rs := obj.(*appsv1.ReplicaSet)
	workload.DefaultInt32(&rs.Spec.Replicas, 1)
	workload.DefaultTemplate(&rs.Spec.Template)
}

func (strategy) Validate(obj runtime.Object) field.ErrorList {
	return validateSpec(&obj.(*appsv1.ReplicaSet).Spec, field.NewPath("spec"))
}

// ValidateUpdate adds the apps/v1 rule that the selector never changes.
func (s strategy) ValidateUpdate(obj, old runtime.Object) field.ErrorList {
	return append(s.Validate(obj), workload.ValidateSelectorUnchanged(obj, old)...)
}

// validateSpec follows upstream's ValidateReplicaSetSpec.
func validateSpec(spec *appsv1.ReplicaSetSpec, fldPath *field.Path) field.ErrorList {
	errs := workload.ValidateReplicas(spec.Replicas, fldPath.Child("replicas"))
	errs = append(errs, validation.ValidateNonnegativeField(int64(spec.MinReadySeconds), fldPath.Child("minReadySeconds"))...)
	return append(errs, workload.ValidateSelectorAndTemplate(spec.Selector, &spec.Template, workload.DeploymentRules, fldPath)...)
}
