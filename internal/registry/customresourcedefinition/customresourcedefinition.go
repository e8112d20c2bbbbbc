// Package customresourcedefinition is the apiextensions.k8s.io/v1
// CustomResourceDefinition strategy: upstream's defaults, upstream's own
// validation of a definition (k8s.io/apiextensions-apiserver's, with its
// structural schema and CEL rules), the stored versions its status keeps,
// and the customresourcecleanup finalizer a delete adds, so that the
// definition's objects go before it does.
package customresourcedefinition

import (
	"context"
	"slices"

	"k8s.io/apiextensions-apiserver/pkg/apis/apiextensions"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/validation"
	"k8s.io/apiextensions-apiserver/pkg/client/applyconfiguration"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/svcnet/svcnet/internal/registry"
)

// CleanupFinalizer holds a definition being deleted until its objects are
// gone (upstream's apiextensions.CustomResourceCleanupFinalizer).
const CleanupFinalizer = apiextensions.CustomResourceCleanupFinalizer

// Resource describes customresourcedefinitions.
func Resource() *registry.Resource {
	return &registry.Resource{
		Kind:       apiextensionsv1.SchemeGroupVersion.WithKind("CustomResourceDefinition"),
		Resource:   "customresourcedefinitions",
		Singular:   "customresourcedefinition",
		ShortNames: []string{"crd", "crds"},
		Categories: []string{"api-extensions"},
		Status:     true,
		Generation: true,
		Strategy:   strategy{},
		// client-go's converter does not know apiextensions' types.
		TypeConverter: applyconfiguration.NewTypeConverter(registry.Scheme),
		Columns: []registry.Column{registry.NameColumn(), {
			TableColumnDefinition: metav1.TableColumnDefinition{Name: "Created At", Type: "date",
				Description: metav1.ObjectMeta{}.SwaggerDoc()["creationTimestamp"]},
			Cell: func(o runtime.Object) interface{} {
				return o.(*apiextensionsv1.CustomResourceDefinition).CreationTimestamp.UTC().Format("2006-01-02T15:04:05Z")
			},
		}},
	}
}

type strategy struct{ registry.Base }

// Default applies upstream's v1 defaults (conversion None, list of
// served versions' defaults, ...).
func (strategy) Default(obj runtime.Object) { registry.Scheme.Default(obj) }

// PrepareForCreate records the storage version as stored, as upstream.
func (strategy) PrepareForCreate(obj runtime.Object) {
	addStoredVersion(obj.(*apiextensionsv1.CustomResourceDefinition))
}

// PrepareForUpdate records a new storage version as stored.
func (strategy) PrepareForUpdate(obj, _ runtime.Object) {
	addStoredVersion(obj.(*apiextensionsv1.CustomResourceDefinition))
}

// addStoredVersion adds the storage version to status.storedVersions.
func addStoredVersion(crd *apiextensionsv1.CustomResourceDefinition) {
	for _, v := range crd.Spec.Versions {
		if v.Storage {
			if !slices.Contains(crd.Status.StoredVersions, v.Name) {
				crd.Status.StoredVersions = append(crd.Status.StoredVersions, v.Name)
			}
			return
		}
	}
}

// Validate runs upstream's ValidateCustomResourceDefinition.
func (strategy) Validate(obj runtime.Object) field.ErrorList {
	crd, err := Internal(obj.(*apiextensionsv1.CustomResourceDefinition))
	if err != nil {
		return field.ErrorList{field.InternalError(nil, err)}
	}
	return validation.ValidateCustomResourceDefinition(context.Background(), crd)
}

// ValidateUpdate runs upstream's ValidateCustomResourceDefinitionUpdate.
func (strategy) ValidateUpdate(obj, old runtime.Object) field.ErrorList {
	crd, err := Internal(obj.(*apiextensionsv1.CustomResourceDefinition))
	if err != nil {
		return field.ErrorList{field.InternalError(nil, err)}
	}
	oldCRD, err := Internal(old.(*apiextensionsv1.CustomResourceDefinition))
	if err != nil {
		return field.ErrorList{field.InternalError(nil, err)}
	}
	return validation.ValidateCustomResourceDefinitionUpdate(context.Background(), crd, oldCRD)
}

// PrepareForDelete adds the cleanup finalizer on the first delete: the
// definition stays, terminating, until its objects are removed.
func (strategy) PrepareForDelete(obj runtime.Object, _ *metav1.DeleteOptions) (bool, error) {
	crd := obj.(*apiextensionsv1.CustomResourceDefinition)
	if crd.DeletionTimestamp == nil && !slices.Contains(crd.Finalizers, CleanupFinalizer) {
		crd.Finalizers = append(crd.Finalizers, CleanupFinalizer)
	}
	return false, nil
}

// Internal converts a definition to the internal version upstream's
// validation and schema packages read.
func Internal(crd *apiextensionsv1.CustomResourceDefinition) (*apiextensions.CustomResourceDefinition, error) {
	out := &apiextensions.CustomResourceDefinition{}
	if err := apiextensionsv1.Convert_v1_CustomResourceDefinition_To_apiextensions_CustomResourceDefinition(crd, out, nil); err != nil {
		return nil, err
	}
	return out, nil
}
