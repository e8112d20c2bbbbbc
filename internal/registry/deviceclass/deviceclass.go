// Package deviceclass is the resource.k8s.io/v1 DeviceClass strategy,
// after upstream's pkg/registry/resource/deviceclass. A DeviceClass is a
// cluster-scoped set of device selectors and configuration that the
// requests of ResourceClaims name; it may also name the extended resource
// its devices stand for (DRAExtendedResource, on). A class starts at
// metadata.generation 1 and gains one with every spec change, and a
// delete answers with the deleted class. Upstream's v1 has no defaults
// for it and `kubectl get deviceclasses` shows NAME and AGE. The spec is
// checked by package dra.
package deviceclass

import (
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/svcnet/svcnet/internal/registry"
	"github.com/svcnet/svcnet/internal/registry/validate/dra"
)

// Resource describes deviceclasses.
func Resource() *registry.Resource {
	return &registry.Resource{
		Kind:                resourceapi.SchemeGroupVersion.WithKind("DeviceClass"),
		Resource:            "deviceclasses",
		Singular:            "deviceclass",
		Generation:          true,
		ReturnDeletedObject: true,
		Strategy:            strategy{},
		Columns:             registry.DefaultColumns(),
	}
}

type strategy struct{ registry.Base }

// Validate checks a new class.
func (strategy) Validate(obj runtime.Object) field.ErrorList {
	return dra.DeviceClass(obj.(*resourceapi.DeviceClass))
}

// ValidateUpdate checks a class against the stored one.
func (strategy) ValidateUpdate(obj, old runtime.Object) field.ErrorList {
	return dra.DeviceClassUpdate(obj.(*resourceapi.DeviceClass), old.(*resourceapi.DeviceClass))
}
