// Package runtimeclass is the node.k8s.io/v1 RuntimeClass strategy:
// upstream's validation (a required handler that is a DNS-1123 label and
// never changes, pod overhead checked as container limits are, a valid
// scheduling.nodeSelector and pod tolerations without duplicates) and the
// HANDLER column. Applying a RuntimeClass to the pods that name it is the
// API server's RuntimeClass admission, not this package's.
package runtimeclass

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	nodev1 "k8s.io/api/node/v1"
	"k8s.io/apimachinery/pkg/api/validate"
	"k8s.io/apimachinery/pkg/api/validate/content"
	apivalidation "k8s.io/apimachinery/pkg/api/validation"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	metavalidation "k8s.io/apimachinery/pkg/apis/meta/v1/validation"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/svcnet/svcnet/internal/registry"
	podvalidate "github.com/svcnet/svcnet/internal/registry/validate"
)

// Resource describes runtimeclasses.
func Resource() *registry.Resource {
	return &registry.Resource{
		Kind:     nodev1.SchemeGroupVersion.WithKind("RuntimeClass"),
		Resource: "runtimeclasses",
		Singular: "runtimeclass",
		// Upstream's strategy leaves metadata.generation alone, so
		// RuntimeClasses have none.
		Strategy: strategy{},
		Columns: []registry.Column{
			registry.NameColumn(),
			// Upstream describes the column with ObjectMeta's (missing)
			// "handler" doc: an empty description.
			{TableColumnDefinition: metav1.TableColumnDefinition{Name: "Handler", Type: "string",
				Description: metav1.ObjectMeta{}.SwaggerDoc()["handler"]},
				Cell: func(o runtime.Object) interface{} { return o.(*nodev1.RuntimeClass).Handler }},
			registry.AgeColumn(),
		},
	}
}

// strategy has no defaults and nothing to prepare: upstream's node.k8s.io
// types have no defaulters and its PrepareForCreate and PrepareForUpdate
// do nothing.
type strategy struct{ registry.Base }

// Validate is upstream's ValidateRuntimeClass with its declarative
// validation of handler enforced, as kube-apiserver v1.37 does by default.
func (strategy) Validate(obj runtime.Object) field.ErrorList {
	rc := obj.(*nodev1.RuntimeClass)
	return merge(handwritten(rc), declarative(rc, nil))
}

// ValidateUpdate is ValidateRuntimeClass of the new object and the
// immutable handler, with the declarative validation of handler enforced.
func (strategy) ValidateUpdate(obj, old runtime.Object) field.ErrorList {
	rc, oldRC := obj.(*nodev1.RuntimeClass), old.(*nodev1.RuntimeClass)
	errs := handwritten(rc)
	if rc.Handler != oldRC.Handler {
		errs = append(errs, field.Invalid(field.NewPath("handler"), rc.Handler, "field is immutable").
			WithOrigin("immutable").MarkCoveredByDeclarative())
	}
	return merge(errs, declarative(rc, oldRC))
}

// handwritten is upstream's ValidateRuntimeClass without the object
// metadata, which the API server checks for every kind. The errors on
// handler are marked as covered by the declarative ones, which word a
// long handler differently ("bytes", not "characters").
func handwritten(rc *nodev1.RuntimeClass) field.ErrorList {
	var errs field.ErrorList
	handler := field.NewPath("handler")
	if rc.Handler == "" {
		errs = append(errs, field.Required(handler, "").MarkCoveredByDeclarative())
	} else {
		for _, msg := range apivalidation.NameIsDNSLabel(rc.Handler, false) {
			errs = append(errs, field.Invalid(handler, rc.Handler, msg).
				WithOrigin("format=k8s-short-name").MarkCoveredByDeclarative())
		}
	}
	if rc.Overhead != nil {
		// Upstream checks the overhead as the limits of a container.
		errs = append(errs, podvalidate.ResourceRequirements(&corev1.ResourceRequirements{Limits: rc.Overhead.PodFixed},
			field.NewPath("overhead"))...)
	}
	if s := rc.Scheduling; s != nil {
		path := field.NewPath("scheduling")
		errs = append(errs, metavalidation.ValidateLabels(s.NodeSelector, path.Child("nodeSelector"))...)
		errs = append(errs, tolerations(s.Tolerations, path.Child("tolerations"))...)
	}
	return errs
}

// tolerations checks tolerations as a pod's, and refuses one whose key,
// operator, value and effect an earlier one already has.
func tolerations(list []corev1.Toleration, path *field.Path) field.ErrorList {
	errs := podvalidate.Tolerations(list, path)
	seen := map[internalToleration]bool{}
	for i, t := range list {
		key := internalToleration{Key: t.Key, Operator: t.Operator, Value: t.Value, Effect: t.Effect}
		if seen[key] {
			dup := key
			dup.TolerationSeconds = t.TolerationSeconds
			errs = append(errs, field.Duplicate(path.Index(i), dup))
			continue
		}
		seen[key] = true
	}
	return errs
}

// internalToleration has the fields, and so the untagged JSON, of
// upstream's internal core.Toleration, which its duplicate error shows:
// {"Key":"k","Operator":"Exists","Value":"","Effect":"","TolerationSeconds":null}.
// Its TolerationSeconds is nil in map keys.
type internalToleration struct {
	Key               string
	Operator          corev1.TolerationOperator
	Value             string
	Effect            corev1.TaintEffect
	TolerationSeconds *int64
}

// declarative is upstream's generated Validate_RuntimeClass for handler,
// its beta rules enforced: on update nothing when handler is unchanged,
// else its immutability and, if empty, that it is required, stopping
// there; on create that it is required, else a DNS-1123 label. The rules
// on metadata and scheduling are alpha, shadowed by the handwritten ones.
func declarative(rc, old *nodev1.RuntimeClass) field.ErrorList {
	path := field.NewPath("handler")
	if old != nil {
		if rc.Handler == old.Handler {
			return nil
		}
		errs := field.ErrorList{field.Invalid(path, nil, "field is immutable").WithOrigin("immutable").MarkBeta()}
		if rc.Handler == "" {
			errs = append(errs, field.Required(path, "").MarkBeta())
		}
		return errs
	}
	if rc.Handler == "" {
		return field.ErrorList{field.Required(path, "").MarkBeta()}
	}
	var errs field.ErrorList
	for _, msg := range content.IsDNS1123Label(rc.Handler) {
		errs = append(errs, field.Invalid(path, rc.Handler, msg).WithOrigin("format=k8s-short-name").MarkBeta())
	}
	return errs
}

// merge is what upstream's ValidateDeclarativelyWithMigrationChecks does
// with the two lists when beta declarative validation is enforced: the
// handwritten errors a declarative one covers give way to it, and the
// declarative errors come last.
func merge(handwritten, declarativeErrs field.ErrorList) field.ErrorList {
	errs := validate.FilterCoveredHandwrittenErrors(context.Background(), handwritten, declarativeErrs, true)
	return append(errs, declarativeErrs...)
}
