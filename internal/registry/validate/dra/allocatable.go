package dra

import (
	"maps"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// nodeAllocatableResources checks how a device adds to or takes from the
// node's cpu, memory and huge pages.
func nodeAllocatableResources(resources map[corev1.ResourceName]resourceapi.NodeAllocatableResource, capacity map[resourceapi.QualifiedName]resourceapi.DeviceCapacity, path *field.Path) field.ErrorList {
	var errs field.ErrorList
	for _, name := range slices.Sorted(maps.Keys(resources)) {
		r, keyPath := resources[name], path.Key(string(name))
		if !isNodeAllocatable(name) {
			errs = append(errs, field.Invalid(keyPath, name, "must be a node allocatable resource name"))
		}
		if r.Mapping == nil && r.Overhead == nil {
			errs = append(errs, field.Required(keyPath, "at least one of mapping or overhead must be set"))
		}
		if r.Mapping != nil {
			errs = append(errs, nodeAllocatableMapping(r.Mapping, capacity, keyPath.Child("mapping"))...)
		}
		if r.Overhead != nil {
			errs = append(errs, nodeAllocatableOverhead(r.Overhead, keyPath.Child("overhead"))...)
		}
	}
	return errs
}

func isNodeAllocatable(name corev1.ResourceName) bool {
	return name == corev1.ResourceCPU || name == corev1.ResourceMemory || strings.HasPrefix(string(name), corev1.ResourceHugePagesPrefix)
}

// nodeAllocatableMapping checks a mapping: a capacity of the device times a
// positive multiplier, or a positive amount per device. That exactly one
// of the two is used is a declarative rule.
func nodeAllocatableMapping(m *resourceapi.NodeAllocatableMapping, capacity map[resourceapi.QualifiedName]resourceapi.DeviceCapacity, path *field.Path) field.ErrorList {
	var errs field.ErrorList
	keyPath, multiplierPath := path.Child("capacityKey"), path.Child("capacityMultiplier")
	if m.CapacityKey != nil {
		if _, found := capacity[*m.CapacityKey]; *m.CapacityKey == "" {
			errs = append(errs, field.Invalid(keyPath, "", "capacityKey must not be an empty string"))
		} else if !found {
			errs = append(errs, field.NotFound(keyPath, *m.CapacityKey))
		}
		if m.CapacityMultiplier == nil {
			errs = append(errs, dependentRequired(multiplierPath, "capacityMultiplier is required when capacityKey is set"))
		} else {
			errs = append(errs, positive(*m.CapacityMultiplier, multiplierPath)...)
		}
	}
	if m.DeviceMultiplier != nil {
		errs = append(errs, positive(*m.DeviceMultiplier, path.Child("deviceMultiplier"))...)
	}
	if m.CapacityMultiplier != nil && m.CapacityKey == nil {
		errs = append(errs, dependentRequired(keyPath, "capacityKey is required when capacityMultiplier is set"))
	}
	return errs
}

// dependentRequired reports a field that another one needs, which
// upstream also declares.
func dependentRequired(path *field.Path, message string) *field.Error {
	return field.Required(path, message).WithOrigin("dependentRequired").MarkCoveredByDeclarative()
}

// nodeAllocatableOverhead checks the fixed amounts a device costs per pod
// and per container: at least one, neither negative.
func nodeAllocatableOverhead(o *resourceapi.NodeAllocatableOverhead, path *field.Path) field.ErrorList {
	if o.PerPod == nil && o.PerContainer == nil {
		return field.ErrorList{field.Invalid(path, "", "at least one of perPod or perContainer must be set")}
	}
	return checkBounds([]bound{{"perPod", o.PerPod}, {"perContainer", o.PerContainer}}, path, nonNegative)
}

func positive(q resource.Quantity, path *field.Path) field.ErrorList {
	if q.Sign() <= 0 {
		return field.ErrorList{field.Invalid(path, q.String(), "must be positive")}
	}
	return nil
}

func nonNegative(q resource.Quantity, path *field.Path) field.ErrorList {
	if q.Sign() < 0 {
		return field.ErrorList{field.Invalid(path, q.String(), "must be non-negative")}
	}
	return nil
}
