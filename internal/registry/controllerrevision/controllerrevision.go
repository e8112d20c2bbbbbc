// Package controllerrevision is the apps/v1 ControllerRevision strategy: the
// immutable snapshots of a workload's template that StatefulSets (and
// DaemonSets) keep as their history. It follows upstream's validation (data
// is required and never changes, revision is not negative) and its
// NAME/CONTROLLER/REVISION/AGE table.
package controllerrevision

import (
	"bytes"
	"encoding/json"
	"reflect"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	apivalidation "k8s.io/apimachinery/pkg/api/validation"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/svcnet/svcnet/internal/registry"
)

// Resource describes controllerrevisions.
func Resource() *registry.Resource {
	return &registry.Resource{
		Kind:       appsv1.SchemeGroupVersion.WithKind("ControllerRevision"),
		Resource:   "controllerrevisions",
		Singular:   "controllerrevision",
		Namespaced: true,
		Strategy:   strategy{},
		Columns: []registry.Column{
			registry.NameColumn(),
			registry.TextColumn("Controller", "Controller of the object", controllerName),
			// Upstream declares the column a string and fills it with the
			// revision number.
			{TableColumnDefinition: metav1.TableColumnDefinition{Name: "Revision", Type: "string",
				Description: appsv1.ControllerRevision{}.SwaggerDoc()["revision"]},
				Cell: func(o runtime.Object) interface{} { return o.(*appsv1.ControllerRevision).Revision }},
			registry.AgeColumn(),
		},
	}
}

// controllerName is the CONTROLLER cell: "statefulset.apps/web" for a
// revision a StatefulSet controls, "<none>" for an orphan.
func controllerName(cr *appsv1.ControllerRevision) string {
	ref := metav1.GetControllerOfNoCopy(cr)
	if ref == nil {
		return "<none>"
	}
	gv, err := schema.ParseGroupVersion(ref.APIVersion)
	if err != nil {
		return ref.Name
	}
	return strings.ToLower(gv.WithKind(ref.Kind).GroupKind().String()) + "/" + ref.Name
}

type strategy struct{ registry.Base }

// Validate follows upstream's ValidateControllerRevision.
func (strategy) Validate(obj runtime.Object) field.ErrorList {
	cr := obj.(*appsv1.ControllerRevision)
	var errs field.ErrorList
	if cr.Data.Raw == nil && cr.Data.Object == nil {
		errs = append(errs, field.Required(field.NewPath("data"), "data is mandatory"))
	}
	return append(errs, apivalidation.ValidateNonnegativeField(cr.Revision, field.NewPath("revision"))...)
}

// ValidateUpdate adds upstream's rule that data never changes; only the
// revision number (a rollback renumbers a revision) and metadata may.
func (s strategy) ValidateUpdate(obj, old runtime.Object) field.ErrorList {
	errs := s.Validate(obj)
	cr, oldCR := obj.(*appsv1.ControllerRevision), old.(*appsv1.ControllerRevision)
	if !sameData(cr.Data, oldCR.Data) {
		errs = append(errs, field.Invalid(field.NewPath("data"), string(cr.Data.Raw), "field is immutable"))
	}
	return errs
}

// sameData compares two revisions' data as JSON documents, so that a
// client re-encoding the same data with other spacing or key order is not
// refused.
func sameData(a, b runtime.RawExtension) bool {
	if bytes.Equal(a.Raw, b.Raw) {
		return true
	}
	var da, db interface{}
	if json.Unmarshal(a.Raw, &da) != nil || json.Unmarshal(b.Raw, &db) != nil {
		return false
	}
	return reflect.DeepEqual(da, db)
}
