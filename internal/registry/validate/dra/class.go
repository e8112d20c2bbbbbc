package dra

import (
	"strings"

	corev1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// deviceClassSpec checks a class; old is the stored spec on update. Stored
// selectors and configs, unchanged down to their order, are not held to
// the rules for new ones again (CEL compilation, parameter size).
func deviceClassSpec(spec, old *resourceapi.DeviceClassSpec, path *field.Path) field.ErrorList {
	selectorsStored := old != nil && apiequality.Semantic.DeepEqual(spec.Selectors, old.Selectors)
	configStored := old != nil && apiequality.Semantic.DeepEqual(spec.Config, old.Config)
	errs := selectors(spec.Selectors, selectorsStored, path.Child("selectors"))
	errs = append(errs, boundedList(spec.Config, resourceapi.DeviceConfigMaxSize, path.Child("config"),
		func(config resourceapi.DeviceClassConfiguration, path *field.Path) field.ErrorList {
			return deviceConfiguration(config.DeviceConfiguration, configStored, path)
		})...)
	if name := spec.ExtendedResourceName; name != nil && !isExtendedResourceName(*name) {
		errs = append(errs, field.Invalid(path.Child("extendedResourceName"), *name, "must be a valid extended resource name").
			WithOrigin("format=k8s-extended-resource-name").MarkCoveredByDeclarative())
	}
	return errs
}

// isExtendedResourceName reports whether a class may stand in for the
// extended resource name: qualified, outside kubernetes.io, not a quota
// "requests." name, and valid with that prefix added.
func isExtendedResourceName(name string) bool {
	if !strings.Contains(name, "/") || strings.Contains(name, corev1.ResourceDefaultNamespacePrefix) ||
		strings.HasPrefix(name, corev1.DefaultResourceRequestsPrefix) {
		return false
	}
	return len(validation.IsQualifiedName(corev1.DefaultResourceRequestsPrefix+name)) == 0
}
