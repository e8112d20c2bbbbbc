// Package dra validates the objects of resource.k8s.io/v1, dynamic
// resource allocation: DeviceClasses, ResourceClaims and their templates,
// ResourceSlices and DeviceTaintRules, as kube-apiserver 1.37 does with
// its default feature gates. The hand-written rules follow upstream's
// pkg/apis/resource/validation over the v1 types; they are merged with the
// declarative rules of k8s.io/api's generated validators the way the API
// server merges them, so that messages and field paths are the ones it
// gives. CEL device selectors are compiled with
// k8s.io/dynamic-resource-allocation/cel. Object metadata (names,
// namespaces) is checked by the registry, not here; dropping fields of
// disabled features is the strategies' job.
package dra

import (
	resourceapi "k8s.io/api/resource/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apivalidation "k8s.io/apimachinery/pkg/api/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// DeviceClass checks a new DeviceClass.
func DeviceClass(c *resourceapi.DeviceClass) field.ErrorList {
	path := field.NewPath("spec")
	return merge(deviceClassSpec(&c.Spec, nil, path), declarative(resourceapi.Validate_DeviceClassSpec, &c.Spec, nil, path))
}

// DeviceClassUpdate checks an update of a DeviceClass against the stored one.
func DeviceClassUpdate(c, old *resourceapi.DeviceClass) field.ErrorList {
	path := field.NewPath("spec")
	return merge(deviceClassSpec(&c.Spec, &old.Spec, path), declarative(resourceapi.Validate_DeviceClassSpec, &c.Spec, &old.Spec, path))
}

// ResourceClaim checks a new ResourceClaim.
func ResourceClaim(c *resourceapi.ResourceClaim) field.ErrorList {
	path := field.NewPath("spec")
	return merge(deviceClaim(&c.Spec.Devices, path.Child("devices")), declarative(resourceapi.Validate_ResourceClaimSpec, &c.Spec, nil, path))
}

// ResourceClaimUpdate checks an update of a ResourceClaim's spec and
// metadata against the stored one.
func ResourceClaimUpdate(c, old *resourceapi.ResourceClaim) field.ErrorList {
	// The spec is immutable, so an update is only checked for changes: the
	// stored spec was valid when it was created.
	path := field.NewPath("spec")
	handwritten := apivalidation.ValidateImmutableField(c.Spec, old.Spec, path).WithOrigin("immutable").MarkCoveredByDeclarative()
	return merge(handwritten, immutableClaimSpec(&c.Spec, &old.Spec, path))
}

// ResourceClaimStatusUpdate checks a write of a ResourceClaim's status.
func ResourceClaimStatusUpdate(c, old *resourceapi.ResourceClaim) field.ErrorList {
	path := field.NewPath("status")
	return merge(claimStatus(c, &old.Status, path), declarative(resourceapi.Validate_ResourceClaimStatus, &c.Status, &old.Status, path))
}

// ResourceClaimTemplate checks a new ResourceClaimTemplate.
func ResourceClaimTemplate(t *resourceapi.ResourceClaimTemplate) field.ErrorList {
	path := field.NewPath("spec")
	return merge(templateSpec(&t.Spec, path), declarative(resourceapi.Validate_ResourceClaimTemplateSpec, &t.Spec, nil, path))
}

// ResourceClaimTemplateUpdate checks an update of a ResourceClaimTemplate.
// Like upstream's strategy it also checks the template as if it were new,
// so it is all an update needs.
func ResourceClaimTemplateUpdate(t, old *resourceapi.ResourceClaimTemplate) field.ErrorList {
	path := field.NewPath("spec")
	errs := templateSpec(&t.Spec, path)
	if !apiequality.Semantic.DeepEqual(t.Spec, old.Spec) {
		errs = append(errs, field.Invalid(path, upstreamValue{t.Spec}, apivalidation.FieldImmutableErrorMsg))
	}
	return merge(errs, declarative(resourceapi.Validate_ResourceClaimTemplateSpec, &t.Spec, &old.Spec, path))
}

// ResourceSlice checks a new ResourceSlice.
func ResourceSlice(s *resourceapi.ResourceSlice) field.ErrorList {
	path := field.NewPath("spec")
	return merge(sliceSpec(&s.Spec, nil, path), declarative(resourceapi.Validate_ResourceSliceSpec, &s.Spec, nil, path))
}

// ResourceSliceUpdate checks an update of a ResourceSlice.
func ResourceSliceUpdate(s, old *resourceapi.ResourceSlice) field.ErrorList {
	path := field.NewPath("spec")
	return merge(sliceSpec(&s.Spec, &old.Spec, path), declarative(resourceapi.Validate_ResourceSliceSpec, &s.Spec, &old.Spec, path))
}

// DeviceTaintRule checks a new DeviceTaintRule.
func DeviceTaintRule(r *resourceapi.DeviceTaintRule) field.ErrorList {
	path := field.NewPath("spec")
	return merge(taintRuleSpec(&r.Spec, nil, path), declarative(resourceapi.Validate_DeviceTaintRuleSpec, &r.Spec, nil, path))
}

// DeviceTaintRuleUpdate checks an update of a DeviceTaintRule's spec.
func DeviceTaintRuleUpdate(r, old *resourceapi.DeviceTaintRule) field.ErrorList {
	path := field.NewPath("spec")
	return merge(taintRuleSpec(&r.Spec, &old.Spec, path), declarative(resourceapi.Validate_DeviceTaintRuleSpec, &r.Spec, &old.Spec, path))
}

// DeviceTaintRuleStatusUpdate checks a write of a DeviceTaintRule's status.
func DeviceTaintRuleStatusUpdate(r, old *resourceapi.DeviceTaintRule) field.ErrorList {
	path := field.NewPath("status")
	return merge(taintRuleStatus(&r.Status, path), declarative(resourceapi.Validate_DeviceTaintRuleStatus, &r.Status, &old.Status, path))
}
