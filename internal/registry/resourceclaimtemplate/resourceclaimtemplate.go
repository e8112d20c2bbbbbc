// Package resourceclaimtemplate is the resource.k8s.io/v1
// ResourceClaimTemplate strategy, after upstream's
// pkg/registry/resource/resourceclaimtemplate. A template is the
// namespaced spec (and metadata) of the ResourceClaims made for the pods
// that name it; its claim spec is defaulted, and its disabled fields
// dropped, as a ResourceClaim's (package resourceclaim), and never changes
// (package dra refuses a change). It has no status and no generation, a
// delete answers with the deleted template, and `kubectl get
// resourceclaimtemplates` shows NAME and AGE.
package resourceclaimtemplate

import (
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/svcnet/svcnet/internal/registry"
	"github.com/svcnet/svcnet/internal/registry/resourceclaim"
	"github.com/svcnet/svcnet/internal/registry/validate/dra"
)

// Resource describes resourceclaimtemplates.
func Resource() *registry.Resource {
	return &registry.Resource{
		Kind:                resourceapi.SchemeGroupVersion.WithKind("ResourceClaimTemplate"),
		Resource:            "resourceclaimtemplates",
		Singular:            "resourceclaimtemplate",
		Namespaced:          true,
		ReturnDeletedObject: true,
		Strategy:            strategy{},
		Columns:             registry.DefaultColumns(),
	}
}

type strategy struct{ registry.Base }

// Default defaults the claim spec.
func (strategy) Default(obj runtime.Object) {
	resourceclaim.DefaultSpec(&obj.(*resourceapi.ResourceClaimTemplate).Spec.Spec)
}

// PrepareForCreate drops the claim spec's disabled fields.
func (strategy) PrepareForCreate(obj runtime.Object) {
	resourceclaim.DropDisabledSpecFields(&obj.(*resourceapi.ResourceClaimTemplate).Spec.Spec, nil)
}

// PrepareForUpdate drops them unless the stored template uses them.
func (strategy) PrepareForUpdate(obj, old runtime.Object) {
	resourceclaim.DropDisabledSpecFields(&obj.(*resourceapi.ResourceClaimTemplate).Spec.Spec,
		&old.(*resourceapi.ResourceClaimTemplate).Spec.Spec)
}

// Validate checks a new template.
func (strategy) Validate(obj runtime.Object) field.ErrorList {
	return dra.ResourceClaimTemplate(obj.(*resourceapi.ResourceClaimTemplate))
}

// ValidateUpdate checks the template as new and against the stored one
// (dra.ResourceClaimTemplateUpdate does both, as upstream's strategy).
func (strategy) ValidateUpdate(obj, old runtime.Object) field.ErrorList {
	return dra.ResourceClaimTemplateUpdate(obj.(*resourceapi.ResourceClaimTemplate), old.(*resourceapi.ResourceClaimTemplate))
}
