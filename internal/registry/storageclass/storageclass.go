// Package storageclass is the storage.k8s.io/v1 StorageClass strategy:
// reclaimPolicy Delete and volumeBindingMode Immediate by default,
// upstream's validation, the fields that never change, and the table with
// its "(default)" marker.
package storageclass

import (
	"strings"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/validate/content"
	"k8s.io/apimachinery/pkg/api/validation"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	metavalidation "k8s.io/apimachinery/pkg/apis/meta/v1/validation"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/svcnet/svcnet/internal/registry"
)

// Upstream's limits on parameters.
const (
	maxParameters      = 512
	maxParametersBytes = 256 * (1 << 10)
)

// The annotations that mark the default class.
const (
	defaultAnnotation     = "storageclass.kubernetes.io/is-default-class"
	betaDefaultAnnotation = "storageclass.beta.kubernetes.io/is-default-class"
)

var (
	reclaimPolicies = []string{string(corev1.PersistentVolumeReclaimDelete), string(corev1.PersistentVolumeReclaimRetain)}
	bindingModes    = []string{string(storagev1.VolumeBindingImmediate), string(storagev1.VolumeBindingWaitForFirstConsumer)}
)

// Resource describes storageclasses.
func Resource() *registry.Resource {
	sc := func(o runtime.Object) *storagev1.StorageClass { return o.(*storagev1.StorageClass) }
	doc := storagev1.StorageClass{}.SwaggerDoc()
	name := registry.NameColumn()
	plainName := name.Cell
	name.Cell = func(o runtime.Object) interface{} {
		if isDefault(sc(o).Annotations) {
			return plainName(o).(string) + " (default)"
		}
		return plainName(o)
	}
	return &registry.Resource{
		Kind:       storagev1.SchemeGroupVersion.WithKind("StorageClass"),
		Resource:   "storageclasses",
		Singular:   "storageclass",
		ShortNames: []string{"sc"},
		// As upstream's storage: a delete answers with the object.
		ReturnDeletedObject: true,
		Strategy:            strategy{},
		Columns: []registry.Column{
			name,
			{TableColumnDefinition: metav1.TableColumnDefinition{Name: "Provisioner", Type: "string", Description: doc["provisioner"]},
				Cell: func(o runtime.Object) interface{} { return sc(o).Provisioner }},
			{TableColumnDefinition: metav1.TableColumnDefinition{Name: "ReclaimPolicy", Type: "string", Description: doc["reclaimPolicy"]},
				Cell: func(o runtime.Object) interface{} { return string(reclaimPolicy(sc(o))) }},
			{TableColumnDefinition: metav1.TableColumnDefinition{Name: "VolumeBindingMode", Type: "string", Description: doc["volumeBindingMode"]},
				Cell: func(o runtime.Object) interface{} { return string(bindingMode(sc(o))) }},
			{TableColumnDefinition: metav1.TableColumnDefinition{Name: "AllowVolumeExpansion", Type: "string", Description: doc["allowVolumeExpansion"]},
				Cell: func(o runtime.Object) interface{} {
					e := sc(o).AllowVolumeExpansion
					return e != nil && *e
				}},
			registry.AgeColumn(),
		},
	}
}

// isDefault follows upstream's IsDefaultAnnotation.
func isDefault(annotations map[string]string) bool {
	return annotations[defaultAnnotation] == "true" || annotations[betaDefaultAnnotation] == "true"
}

// reclaimPolicy is spec.reclaimPolicy with its default.
func reclaimPolicy(sc *storagev1.StorageClass) corev1.PersistentVolumeReclaimPolicy {
	if sc.ReclaimPolicy == nil {
		return corev1.PersistentVolumeReclaimDelete
	}
	return *sc.ReclaimPolicy
}

// bindingMode is spec.volumeBindingMode with its default.
func bindingMode(sc *storagev1.StorageClass) storagev1.VolumeBindingMode {
	if sc.VolumeBindingMode == nil {
		return storagev1.VolumeBindingImmediate
	}
	return *sc.VolumeBindingMode
}

type strategy struct{ registry.Base }

// Default follows upstream's SetDefaults_StorageClass.
func (strategy) Default(obj runtime.Object) {
	sc := obj.(*storagev1.StorageClass)
	policy, mode := reclaimPolicy(sc), bindingMode(sc)
	sc.ReclaimPolicy, sc.VolumeBindingMode = &policy, &mode
}

func (strategy) Validate(obj runtime.Object) field.ErrorList {
	return validate(obj.(*storagev1.StorageClass))
}

// ValidateUpdate adds upstream's rules that parameters, provisioner,
// reclaimPolicy and volumeBindingMode never change.
func (strategy) ValidateUpdate(obj, old runtime.Object) field.ErrorList {
	sc, oldSC := obj.(*storagev1.StorageClass), old.(*storagev1.StorageClass)
	errs := validate(sc)
	if !apiequality.Semantic.DeepEqual(sc.Parameters, oldSC.Parameters) {
		errs = append(errs, field.Forbidden(field.NewPath("parameters"), "updates to parameters are forbidden."))
	}
	if sc.Provisioner != oldSC.Provisioner {
		errs = append(errs, field.Forbidden(field.NewPath("provisioner"), "updates to provisioner are forbidden."))
	}
	if reclaimPolicy(sc) != reclaimPolicy(oldSC) {
		errs = append(errs, field.Forbidden(field.NewPath("reclaimPolicy"), "updates to reclaimPolicy are forbidden."))
	}
	return append(errs, validation.ValidateImmutableField(sc.VolumeBindingMode, oldSC.VolumeBindingMode, field.NewPath("volumeBindingMode"))...)
}

// validate follows upstream's ValidateStorageClass.
func validate(sc *storagev1.StorageClass) field.ErrorList {
	var errs field.ErrorList
	provisionerPath := field.NewPath("provisioner")
	if sc.Provisioner == "" {
		errs = append(errs, field.Required(provisionerPath, ""))
	} else {
		for _, msg := range content.IsLabelKey(strings.ToLower(sc.Provisioner)) {
			errs = append(errs, field.Invalid(provisionerPath, sc.Provisioner, msg))
		}
	}
	errs = append(errs, validateParameters(sc.Parameters, field.NewPath("parameters"))...)
	if p := reclaimPolicy(sc); p != "" && !sets.New(reclaimPolicies...).Has(string(p)) {
		errs = append(errs, field.NotSupported(field.NewPath("reclaimPolicy"), p, reclaimPolicies))
	}
	modePath := field.NewPath("volumeBindingMode")
	if sc.VolumeBindingMode == nil {
		errs = append(errs, field.Required(modePath, ""))
	} else if !sets.New(bindingModes...).Has(string(*sc.VolumeBindingMode)) {
		errs = append(errs, field.NotSupported(modePath, *sc.VolumeBindingMode, bindingModes))
	}
	return append(errs, validateTopologies(sc.AllowedTopologies, field.NewPath("allowedTopologies"))...)
}

func validateParameters(params map[string]string, fldPath *field.Path) field.ErrorList {
	if len(params) > maxParameters {
		return field.ErrorList{field.TooLong(fldPath, "Provisioner Parameters exceeded max allowed", maxParameters)}
	}
	var errs field.ErrorList
	size := 0
	for k, v := range params {
		if k == "" {
			errs = append(errs, field.Invalid(fldPath, k, "field can not be empty."))
		}
		size += len(k) + len(v)
	}
	if size > maxParametersBytes {
		errs = append(errs, field.TooLong(fldPath, "", maxParametersBytes))
	}
	return errs
}

// validateTopologies follows upstream's validateAllowedTopologies: every
// term is a valid selector term and no two terms are the same.
func validateTopologies(terms []corev1.TopologySelectorTerm, fldPath *field.Path) field.ErrorList {
	var errs field.ErrorList
	var seen []map[string]sets.Set[string]
	for i, term := range terms {
		termPath := fldPath.Index(i)
		expressions := map[string]sets.Set[string]{}
		for j, req := range term.MatchLabelExpressions {
			reqPath := termPath.Child("matchLabelExpressions").Index(j)
			values := sets.New[string]()
			valuesPath := reqPath.Child("values")
			if len(req.Values) == 0 {
				errs = append(errs, field.Required(valuesPath, ""))
			}
			for k, v := range req.Values {
				if values.Has(v) {
					errs = append(errs, field.Duplicate(valuesPath.Index(k), v))
				}
				values.Insert(v)
			}
			errs = append(errs, metavalidation.ValidateLabelName(req.Key, reqPath.Child("key"))...)
			if _, dup := expressions[req.Key]; dup {
				errs = append(errs, field.Duplicate(reqPath.Child("key"), req.Key))
			}
			expressions[req.Key] = values
		}
		for _, earlier := range seen {
			if apiequality.Semantic.DeepEqual(expressions, earlier) {
				errs = append(errs, field.Duplicate(termPath.Child("matchLabelExpressions"), ""))
			}
		}
		seen = append(seen, expressions)
	}
	return errs
}

// DefaultClass is upstream's GetDefaultClass: of the classes annotated as
// the default, the newest, then the first by name; nil when none is.
func DefaultClass(classes []*storagev1.StorageClass) *storagev1.StorageClass {
	var best *storagev1.StorageClass
	for _, c := range classes {
		if !isDefault(c.Annotations) {
			continue
		}
		if best == nil || c.CreationTimestamp.After(best.CreationTimestamp.Time) ||
			c.CreationTimestamp.Equal(&best.CreationTimestamp) && c.Name < best.Name {
			best = c
		}
	}
	return best
}
