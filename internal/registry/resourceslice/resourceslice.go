// Package resourceslice is the resource.k8s.io/v1 ResourceSlice strategy,
// after upstream's pkg/registry/resource/resourceslice. A slice is the
// cluster-scoped list of the devices of (part of) one pool of a driver,
// published by the driver, often for one node; a device's taints get
// timeAdded as a DeviceTaintRule's (package devicetaintrule). A slice
// starts at metadata.generation 1 and gains one with every spec change,
// and a delete answers with the deleted slice. Fields of features that are
// off by default in v1.37 (DRAPartitionableDevicesType,
// DRADeviceCompatibilityGroups, DRANodeAllocatableResources,
// DRAListTypeAttributes, DRAOptionalNodeOperations) are dropped unless the
// stored slice uses them. Lists select on spec.nodeName (empty for a slice
// without one), spec.driver and spec.pool.name, and `kubectl get
// resourceslices` shows NAME, NODE, DRIVER, POOL and AGE. The spec is
// checked by package dra.
package resourceslice

import (
	"time"

	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/svcnet/svcnet/internal/registry"
	"github.com/svcnet/svcnet/internal/registry/devicetaintrule"
	"github.com/svcnet/svcnet/internal/registry/validate/dra"
)

// Resource describes resourceslices.
func Resource() *registry.Resource {
	type slice = *resourceapi.ResourceSlice
	spec := resourceapi.ResourceSliceSpec{}.SwaggerDoc()
	return &registry.Resource{
		Kind:                resourceapi.SchemeGroupVersion.WithKind("ResourceSlice"),
		Resource:            "resourceslices",
		Singular:            "resourceslice",
		Generation:          true,
		ReturnDeletedObject: true,
		Strategy:            strategy{now: time.Now},
		Columns: []registry.Column{
			registry.NameColumn(),
			registry.TextColumn("Node", spec["nodeName"], nodeName),
			registry.TextColumn("Driver", spec["driver"], func(s slice) string { return s.Spec.Driver }),
			registry.TextColumn("Pool", resourceapi.ResourcePool{}.SwaggerDoc()["name"], func(s slice) string { return s.Spec.Pool.Name }),
			registry.AgeColumn(),
		},
		Fields: func(obj runtime.Object) fields.Set {
			s := obj.(slice)
			return fields.Set{
				resourceapi.ResourceSliceSelectorNodeName: nodeName(s),
				resourceapi.ResourceSliceSelectorDriver:   s.Spec.Driver,
				resourceapi.ResourceSliceSelectorPoolName: s.Spec.Pool.Name,
			}
		},
	}
}

// nodeName is the slice's node, "" when it has none.
func nodeName(s *resourceapi.ResourceSlice) string {
	if s.Spec.NodeName == nil {
		return ""
	}
	return *s.Spec.NodeName
}

type strategy struct {
	registry.Base
	// now is the clock of the taints' timeAdded.
	now func() time.Time
}

// Default gives every device taint its timeAdded.
func (s strategy) Default(obj runtime.Object) {
	devices := obj.(*resourceapi.ResourceSlice).Spec.Devices
	now := s.now()
	for i := range devices {
		for j := range devices[i].Taints {
			devicetaintrule.DefaultTaint(&devices[i].Taints[j], now)
		}
	}
}

// PrepareForCreate drops the fields of disabled features.
func (strategy) PrepareForCreate(obj runtime.Object) {
	dropDisabledFields(&obj.(*resourceapi.ResourceSlice).Spec, nil)
}

// PrepareForUpdate drops them unless the stored slice uses them.
func (strategy) PrepareForUpdate(obj, old runtime.Object) {
	dropDisabledFields(&obj.(*resourceapi.ResourceSlice).Spec, &old.(*resourceapi.ResourceSlice).Spec)
}

// Validate checks a new slice.
func (strategy) Validate(obj runtime.Object) field.ErrorList {
	return dra.ResourceSlice(obj.(*resourceapi.ResourceSlice))
}

// ValidateUpdate checks a slice against the stored one.
func (strategy) ValidateUpdate(obj, old runtime.Object) field.ErrorList {
	return dra.ResourceSliceUpdate(obj.(*resourceapi.ResourceSlice), old.(*resourceapi.ResourceSlice))
}

// disabledFeature is the part of a slice's spec that a feature gate, off
// by default in v1.37, guards.
type disabledFeature struct {
	inUse func(*resourceapi.ResourceSliceSpec) bool
	drop  func(*resourceapi.ResourceSliceSpec)
}

// disabledFeatures are upstream's dropDisabledFields of the gates that
// are off.
var disabledFeatures = []disabledFeature{
	{ // DRAPartitionableDevicesType
		inUse: func(s *resourceapi.ResourceSliceSpec) bool { return s.PartitionTypeAttribute != nil },
		drop:  func(s *resourceapi.ResourceSliceSpec) { s.PartitionTypeAttribute = nil },
	},
	{ // DRAOptionalNodeOperations
		inUse: func(s *resourceapi.ResourceSliceSpec) bool { return len(s.SkipNodeOperations) > 0 },
		drop:  func(s *resourceapi.ResourceSliceSpec) { s.SkipNodeOperations = nil },
	},
	{ // DRADeviceCompatibilityGroups
		inUse: anyDevice(func(d *resourceapi.Device) bool {
			for _, c := range d.ConsumesCounters {
				if len(c.CompatibilityGroups) > 0 {
					return true
				}
			}
			return false
		}),
		drop: eachDevice(func(d *resourceapi.Device) {
			for i := range d.ConsumesCounters {
				d.ConsumesCounters[i].CompatibilityGroups = nil
			}
		}),
	},
	{ // DRANodeAllocatableResources
		inUse: anyDevice(func(d *resourceapi.Device) bool { return len(d.NodeAllocatableResources) > 0 }),
		drop:  eachDevice(func(d *resourceapi.Device) { d.NodeAllocatableResources = nil }),
	},
	{ // DRAListTypeAttributes
		inUse: anyDevice(func(d *resourceapi.Device) bool {
			for _, a := range d.Attributes {
				if a.BoolValues != nil || a.IntValues != nil || a.StringValues != nil || a.VersionValues != nil {
					return true
				}
			}
			return false
		}),
		drop: eachDevice(func(d *resourceapi.Device) {
			for name, a := range d.Attributes {
				a.BoolValues, a.IntValues, a.StringValues, a.VersionValues = nil, nil, nil, nil
				d.Attributes[name] = a
			}
		}),
	},
}

func anyDevice(f func(*resourceapi.Device) bool) func(*resourceapi.ResourceSliceSpec) bool {
	return func(s *resourceapi.ResourceSliceSpec) bool {
		for i := range s.Devices {
			if f(&s.Devices[i]) {
				return true
			}
		}
		return false
	}
}

func eachDevice(f func(*resourceapi.Device)) func(*resourceapi.ResourceSliceSpec) {
	return func(s *resourceapi.ResourceSliceSpec) {
		for i := range s.Devices {
			f(&s.Devices[i])
		}
	}
}

// dropDisabledFields drops from spec what each disabled feature guards,
// unless old, the stored spec (nil on create), uses that feature.
func dropDisabledFields(spec, old *resourceapi.ResourceSliceSpec) {
	for _, f := range disabledFeatures {
		if old == nil || !f.inUse(old) {
			f.drop(spec)
		}
	}
}
