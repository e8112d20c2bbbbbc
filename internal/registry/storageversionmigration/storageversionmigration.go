// Package storageversionmigration is the storagemigration.k8s.io/v1
// StorageVersionMigration strategy, as kube-apiserver's
// (pkg/registry/storagemigration and pkg/apis/storagemigration/validation):
// the resource to migrate is required (a DNS-1035 label, its group a
// DNS-1123 subdomain) and the spec never changes; status is a subresource
// whose resourceVersion, once set, stays, and whose Succeeded and Failed
// conditions are exclusive and final. The columns are upstream's: NAME,
// RESOURCE ("resource.group") and STATUS (the last true Running, Succeeded
// or Failed condition, else "Unknown"), without an AGE.
//
// The objects are served only: no storage version migrator runs.
package storageversionmigration

import (
	"fmt"
	"strings"

	storagemigrationv1 "k8s.io/api/storagemigration/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	metavalidation "k8s.io/apimachinery/pkg/apis/meta/v1/validation"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/resourceversion"
	utilvalidation "k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/svcnet/svcnet/internal/registry"
)

// Resource describes storageversionmigrations.
func Resource() *registry.Resource {
	return &registry.Resource{
		Kind:     storagemigrationv1.SchemeGroupVersion.WithKind("StorageVersionMigration"),
		Resource: "storageversionmigrations",
		Singular: "storageversionmigration",
		Status:   true,
		Strategy: strategy{},
		Columns: []registry.Column{
			// Upstream's NAME column has no "name" format.
			{TableColumnDefinition: metav1.TableColumnDefinition{Name: "Name", Type: "string",
				Description: metav1.ObjectMeta{}.SwaggerDoc()["name"]},
				Cell: func(o runtime.Object) interface{} { return o.(*storagemigrationv1.StorageVersionMigration).Name }},
			{TableColumnDefinition: metav1.TableColumnDefinition{Name: "Resource", Type: "string",
				Description: "GroupResource to migrate"},
				Cell: func(o runtime.Object) interface{} {
					return o.(*storagemigrationv1.StorageVersionMigration).Spec.Resource.String()
				}},
			{TableColumnDefinition: metav1.TableColumnDefinition{Name: "Status", Type: "string",
				Description: "Status of the migration"},
				Cell: func(o runtime.Object) interface{} { return statusCell(o.(*storagemigrationv1.StorageVersionMigration)) }},
		},
	}
}

// statusCell is the type of the last true Running, Succeeded or Failed
// condition, "Unknown" without one.
func statusCell(svm *storagemigrationv1.StorageVersionMigration) string {
	out := "Unknown"
	for _, c := range svm.Status.Conditions {
		if c.Status != metav1.ConditionTrue {
			continue
		}
		switch storagemigrationv1.MigrationConditionType(c.Type) {
		case storagemigrationv1.MigrationRunning, storagemigrationv1.MigrationFailed, storagemigrationv1.MigrationSucceeded:
			out = c.Type
		}
	}
	return out
}

type strategy struct{ registry.Base }

// Validate is upstream's ValidateStorageVersionMigration without the
// object metadata, which the API server checks for every kind.
func (strategy) Validate(obj runtime.Object) field.ErrorList {
	return validateSpec(obj.(*storagemigrationv1.StorageVersionMigration))
}

// ValidateUpdate is upstream's ValidateStorageVersionMigrationUpdate (the
// spec is immutable) followed by its status update checks: a write of the
// main resource keeps the stored status, so those find nothing new there,
// and a status write keeps the stored spec.
func (strategy) ValidateUpdate(obj, old runtime.Object) field.ErrorList {
	svm, prev := obj.(*storagemigrationv1.StorageVersionMigration), old.(*storagemigrationv1.StorageVersionMigration)
	errs := validateSpec(svm)
	if !apiequality.Semantic.DeepEqual(svm.Spec, prev.Spec) {
		errs = append(errs, field.Invalid(field.NewPath("spec"), internalSpec{Resource: svm.Spec.Resource}, "field is immutable"))
	}
	return append(errs, validateStatusUpdate(svm, prev)...)
}

// internalSpec has the fields, and so the untagged JSON, of upstream's
// internal StorageVersionMigrationSpec, which its immutability error
// shows.
type internalSpec struct{ Resource metav1.GroupResource }

// PrepareForStatusUpdate keeps the stored labels, annotations, finalizers
// and owner references, as upstream's ResetObjectMetaForStatus.
func (strategy) PrepareForStatusUpdate(obj, old runtime.Object) {
	m, prev := &obj.(*storagemigrationv1.StorageVersionMigration).ObjectMeta, &old.(*storagemigrationv1.StorageVersionMigration).ObjectMeta
	m.Labels, m.Annotations, m.Finalizers, m.OwnerReferences = prev.Labels, prev.Annotations, prev.Finalizers, prev.OwnerReferences
}

func validateSpec(svm *storagemigrationv1.StorageVersionMigration) field.ErrorList {
	var errs field.ErrorList
	res := svm.Spec.Resource
	path := field.NewPath("spec", "resource")
	if res.Resource == "" {
		errs = append(errs, field.Required(path.Child("resource"), "resource is required to be set"))
	} else if msgs := utilvalidation.IsDNS1035Label(res.Resource); len(msgs) > 0 {
		errs = append(errs, field.Invalid(path.Child("resource"), res.Resource, strings.Join(msgs, ",")))
	}
	if res.Group != "" {
		if msgs := utilvalidation.IsDNS1123Subdomain(res.Group); len(msgs) > 0 {
			errs = append(errs, field.Invalid(path.Child("group"), res.Group, strings.Join(msgs, ",")))
		}
	}
	return errs
}

// validateStatusUpdate is upstream's
// ValidateStorageVersionMigrationStatusUpdate without the metadata.
func validateStatusUpdate(svm, old *storagemigrationv1.StorageVersionMigration) field.ErrorList {
	var errs field.ErrorList
	path := field.NewPath("status")
	if rv := svm.Status.ResourceVersion; rv != "" {
		cmp, err := resourceversion.CompareResourceVersion(rv, rv)
		if err != nil || cmp != 0 {
			if err == nil {
				err = fmt.Errorf("unable to compare resource versions, %s is not equal to %s", rv, rv)
			}
			errs = append(errs, field.Invalid(path.Child("resourceVersion"), rv, err.Error()))
		}
	}
	errs = append(errs, metavalidation.ValidateConditions(svm.Status.Conditions, path.Child("conditions"))...)
	if old.Status.ResourceVersion != "" && old.Status.ResourceVersion != svm.Status.ResourceVersion {
		errs = append(errs, field.Invalid(path.Child("resourceVersion"), svm.Status.ResourceVersion, "field is immutable"))
	}
	conds := path.Child("conditions")
	if isTrue(svm, storagemigrationv1.MigrationSucceeded) && isTrue(svm, storagemigrationv1.MigrationFailed) {
		errs = append(errs, field.Invalid(conds, svm.Status.Conditions, "Both success and failed conditions cannot be true at the same time"))
	}
	if isTrue(old, storagemigrationv1.MigrationSucceeded) && !isTrue(svm, storagemigrationv1.MigrationSucceeded) {
		errs = append(errs, field.Invalid(conds, svm.Status.Conditions, "Success condition cannot be set to false once it is true"))
	}
	if isTrue(old, storagemigrationv1.MigrationFailed) && !isTrue(svm, storagemigrationv1.MigrationFailed) {
		errs = append(errs, field.Invalid(conds, svm.Status.Conditions, "Failed condition cannot be set to false once it is true"))
	}
	return errs
}

func isTrue(svm *storagemigrationv1.StorageVersionMigration, t storagemigrationv1.MigrationConditionType) bool {
	return apimeta.IsStatusConditionTrue(svm.Status.Conditions, string(t))
}
