// Package configmap is the ConfigMap strategy: validation of keys and size as
// upstream, and the DATA column.
package configmap

import (
	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/svcnet/svcnet/internal/registry"
)

// maxSize is upstream's limit on data plus binaryData (corev1.MaxSecretSize).
const maxSize = 1 * 1024 * 1024

// Resource describes configmaps.
func Resource() *registry.Resource {
	return &registry.Resource{
		Kind:       corev1.SchemeGroupVersion.WithKind("ConfigMap"),
		Resource:   "configmaps",
		Singular:   "configmap",
		ShortNames: []string{"cm"},
		Namespaced: true,
		Strategy:   strategy{},
		Columns: []registry.Column{
			registry.NameColumn(),
			{TableColumnDefinition: metav1.TableColumnDefinition{Name: "Data", Type: "string", Description: "Number of data entries"},
				Cell: func(o runtime.Object) interface{} {
					cm := o.(*corev1.ConfigMap)
					return int64(len(cm.Data) + len(cm.BinaryData))
				}},
			registry.AgeColumn(),
		},
	}
}

type strategy struct{ registry.Base }

func (strategy) Validate(obj runtime.Object) field.ErrorList {
	return validate(obj.(*corev1.ConfigMap))
}

func (strategy) ValidateUpdate(obj, old runtime.Object) field.ErrorList {
	cm, oldCM := obj.(*corev1.ConfigMap), old.(*corev1.ConfigMap)
	errs := validate(cm)
	if oldCM.Immutable != nil && *oldCM.Immutable {
		if cm.Immutable == nil || !*cm.Immutable {
			errs = append(errs, field.Forbidden(field.NewPath("immutable"), "field is immutable when `immutable` is set"))
		}
		if !apiequality.Semantic.DeepEqual(cm.Data, oldCM.Data) {
			errs = append(errs, field.Forbidden(field.NewPath("data"), "field is immutable when `immutable` is set"))
		}
		if !apiequality.Semantic.DeepEqual(cm.BinaryData, oldCM.BinaryData) {
			errs = append(errs, field.Forbidden(field.NewPath("binaryData"), "field is immutable when `immutable` is set"))
		}
	}
	return errs
}

// validate follows upstream's ValidateConfigMap.
func validate(cm *corev1.ConfigMap) field.ErrorList {
	var errs field.ErrorList
	total := 0
	for key, value := range cm.Data {
		for _, msg := range validation.IsConfigMapKey(key) {
			errs = append(errs, field.Invalid(field.NewPath("data").Key(key), key, msg))
		}
		if _, dup := cm.BinaryData[key]; dup {
			errs = append(errs, field.Invalid(field.NewPath("data").Key(key), key,
				"duplicate of key present in binaryData"))
		}
		total += len(value)
	}
	for key, value := range cm.BinaryData {
		for _, msg := range validation.IsConfigMapKey(key) {
			errs = append(errs, field.Invalid(field.NewPath("binaryData").Key(key), key, msg))
		}
		total += len(value)
	}
	if total > maxSize {
		errs = append(errs, field.TooLong(field.NewPath(""), "", maxSize))
	}
	return errs
}
