package dra

import (
	"fmt"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

const testDriver = "test.example.com"

func testDevice(name string) resourceapi.Device {
	return resourceapi.Device{
		Name: name,
		Attributes: map[resourceapi.QualifiedName]resourceapi.DeviceAttribute{
			"int":     {IntValue: ptr.To(int64(42))},
			"string":  {StringValue: ptr.To("hello world")},
			"version": {VersionValue: ptr.To("1.2.3")},
			"bool":    {BoolValue: ptr.To(true)},
		},
		Capacity: map[resourceapi.QualifiedName]resourceapi.DeviceCapacity{
			"memory": {Value: resource.MustParse("1Gi")},
		},
	}
}

// sliceOf is a slice for one node with n test devices.
func sliceOf(n int) *resourceapi.ResourceSlice {
	slice := &resourceapi.ResourceSlice{
		ObjectMeta: metav1.ObjectMeta{Name: goodName},
		Spec: resourceapi.ResourceSliceSpec{
			Driver:   testDriver,
			NodeName: ptr.To(goodName),
			Pool:     resourceapi.ResourcePool{Name: goodName, ResourceSliceCount: 1},
		},
	}
	for i := range n {
		slice.Spec.Devices = append(slice.Spec.Devices, testDevice(fmt.Sprintf("device-%d", i)))
	}
	return slice
}

// withDevices changes every device of a slice.
func withDevices(slice *resourceapi.ResourceSlice, change func(*resourceapi.Device)) *resourceapi.ResourceSlice {
	for i := range slice.Spec.Devices {
		change(&slice.Spec.Devices[i])
	}
	return slice
}

// withDevice changes the device i of a slice of n devices.
func withDevice(n, i int, change func(*resourceapi.Device)) *resourceapi.ResourceSlice {
	slice := sliceOf(n)
	change(&slice.Spec.Devices[i])
	return slice
}

func withSpec(change func(*resourceapi.ResourceSliceSpec)) *resourceapi.ResourceSlice {
	slice := sliceOf(1)
	change(&slice.Spec)
	return slice
}

func counterMap(n int) map[string]resourceapi.Counter {
	counters := make(map[string]resourceapi.Counter, n)
	for i := range n {
		counters[fmt.Sprintf("memory-%d", i)] = resourceapi.Counter{Value: resource.MustParse("1Gi")}
	}
	return counters
}

func consumption(set string, counters int) resourceapi.DeviceCounterConsumption {
	return resourceapi.DeviceCounterConsumption{CounterSet: set, Counters: counterMap(counters)}
}

func counterSetsOf(n int) []resourceapi.CounterSet {
	var sets []resourceapi.CounterSet
	for i := range n {
		sets = append(sets, resourceapi.CounterSet{Name: fmt.Sprintf("counterset-%d", i), Counters: counterMap(1)})
	}
	return sets
}

// sharedCountersSlice has counter sets and no devices.
func sharedCountersSlice(sets ...resourceapi.CounterSet) *resourceapi.ResourceSlice {
	return withSpec(func(s *resourceapi.ResourceSliceSpec) {
		s.Devices = nil
		s.SharedCounters = sets
	})
}

func attributes(n int, value func(i int) resourceapi.DeviceAttribute) map[resourceapi.QualifiedName]resourceapi.DeviceAttribute {
	m := make(map[resourceapi.QualifiedName]resourceapi.DeviceAttribute, n)
	for i := range n {
		m[resourceapi.QualifiedName(fmt.Sprintf("attr_%d", i))] = value(i)
	}
	return m
}

func quantity(s string) *resource.Quantity {
	return ptr.To(resource.MustParse(s))
}

func mapped(key string, multiplier string) resourceapi.NodeAllocatableResource {
	return resourceapi.NodeAllocatableResource{Mapping: &resourceapi.NodeAllocatableMapping{
		CapacityKey:        ptr.To(resourceapi.QualifiedName(key)),
		CapacityMultiplier: quantity(multiplier),
	}}
}

func TestResourceSlice(t *testing.T) {
	dev := func(i int) string { return fmt.Sprintf("spec.devices[%d]", i) }
	nodeResources := dev(0) + ".nodeAllocatableResources"
	withNodeResources := func(resources map[corev1.ResourceName]resourceapi.NodeAllocatableResource) *resourceapi.ResourceSlice {
		return withDevice(1, 0, func(d *resourceapi.Device) {
			d.Capacity = map[resourceapi.QualifiedName]resourceapi.DeviceCapacity{"dra.example.com/cpu": {Value: resource.MustParse("100")}}
			d.NodeAllocatableResources = resources
		})
	}
	badLabel := []corev1.NodeSelectorTerm{{MatchExpressions: []corev1.NodeSelectorRequirement{{Key: "foo", Operator: corev1.NodeSelectorOpIn, Values: []string{"-1"}}}}}
	for name, tc := range map[string]struct {
		slice *resourceapi.ResourceSlice
		want  []want
	}{
		"most devices": {slice: sliceOf(resourceapi.ResourceSliceMaxDevices)},
		"too many devices": {
			slice: sliceOf(resourceapi.ResourceSliceMaxDevices + 1),
			want:  []want{tooMany("spec.devices")},
		},
		"most devices with taints": {slice: withDevices(sliceOf(resourceapi.ResourceSliceMaxDevicesWithAdvancedFeatures), func(d *resourceapi.Device) {
			d.Taints = []resourceapi.DeviceTaint{{Key: "example.com/taint", Effect: resourceapi.DeviceTaintEffectNoExecute}}
		})},
		"too many devices with a list attribute": {
			slice: withDevice(resourceapi.ResourceSliceMaxDevicesWithAdvancedFeatures+1, 0, func(d *resourceapi.Device) {
				d.Attributes["ints"] = resourceapi.DeviceAttribute{IntValues: []int64{1, 2, 3}}
			}),
			want: []want{tooMany("spec.devices")},
		},
		"too many devices consuming counters": {
			slice: withDevice(resourceapi.ResourceSliceMaxDevicesWithAdvancedFeatures+1, 0, func(d *resourceapi.Device) {
				d.ConsumesCounters = []resourceapi.DeviceCounterConsumption{consumption("counterset-0", 1)}
			}),
			want: []want{tooMany("spec.devices")},
		},
		"bad node and pool name": {
			slice: withSpec(func(s *resourceapi.ResourceSliceSpec) { s.NodeName, s.Pool.Name = ptr.To(badName), badName+"/"+badName }),
			// Both parts of the pool name give the same error, reported once.
			want: []want{
				invalid("spec.pool.name", "RFC 1123 subdomain"),
				invalid("spec.nodeName", "RFC 1123 subdomain"),
			},
		},
		"longest pool name": {slice: withSpec(func(s *resourceapi.ResourceSliceSpec) {
			s.Pool.Name = strings.Repeat("x", resourceapi.PoolNameMaxLength)
		})},
		"bad pool": {
			slice: withSpec(func(s *resourceapi.ResourceSliceSpec) {
				s.Pool = resourceapi.ResourcePool{Name: strings.Repeat("x/", resourceapi.PoolNameMaxLength/2) + "xy", Generation: -1}
			}),
			want: []want{
				tooLong("spec.pool.name"),
				invalid("spec.pool.resourceSliceCount", "must be greater than zero"),
				invalid("spec.pool.generation", "must be greater than or equal to zero"),
			},
		},
		"missing pool name": {
			slice: withSpec(func(s *resourceapi.ResourceSliceSpec) { s.Pool.Name = "" }),
			want:  []want{required("spec.pool.name")},
		},
		"bad driver name": {
			slice: withSpec(func(s *resourceapi.ResourceSliceSpec) { s.Driver = badName }),
			want:  []want{invalid("spec.driver", "RFC 1123 subdomain")},
		},
		"empty node selector": {
			slice: withSpec(func(s *resourceapi.ResourceSliceSpec) { s.NodeName, s.NodeSelector = nil, &corev1.NodeSelector{} }),
			want: []want{
				required("spec.nodeSelector.nodeSelectorTerms", "must have at least one node selector term"),
				invalid("spec.nodeSelector.nodeSelectorTerms", "must have exactly one node selector term"),
			},
		},
		"bad node selector label value": {
			slice: withSpec(func(s *resourceapi.ResourceSliceSpec) {
				s.NodeName, s.NodeSelector = nil, &corev1.NodeSelector{NodeSelectorTerms: badLabel}
			}),
			want: []want{invalid("spec.nodeSelector.nodeSelectorTerms[0].matchExpressions[0].values[0]", "a valid label must be an empty string")},
		},
		"node name and selector": {
			slice: withSpec(func(s *resourceapi.ResourceSliceSpec) {
				s.NodeSelector = &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{MatchFields: []corev1.NodeSelectorRequirement{{Key: "metadata.name", Operator: corev1.NodeSelectorOpIn, Values: []string{"worker"}}}}}}
			}),
			want: []want{invalid("spec", "exactly one of `nodeName`, `nodeSelector`, `allNodes`, `perDeviceNodeSelection` is required, but multiple fields are set")},
		},
		"node name and all nodes": {
			slice: withSpec(func(s *resourceapi.ResourceSliceSpec) { s.AllNodes = ptr.To(true) }),
			want:  []want{invalid("spec", "but multiple fields are set")},
		},
		"no node selection": {
			slice: withSpec(func(s *resourceapi.ResourceSliceSpec) { s.NodeName = nil }),
			want:  []want{required("spec", "exactly one of `nodeName`, `nodeSelector`, `allNodes`, `perDeviceNodeSelection` is required")},
		},
		"false flags and empty node name": {
			slice: withSpec(func(s *resourceapi.ResourceSliceSpec) {
				s.NodeName, s.AllNodes, s.PerDeviceNodeSelection = ptr.To(""), ptr.To(false), ptr.To(false)
			}),
			want: []want{
				invalid("spec.nodeName", "must be either unset or set to a non-empty string"),
				invalid("spec.allNodes", "must be either unset or set to true"),
				invalid("spec.perDeviceNodeSelection", "must be either unset or set to true"),
				required("spec", "exactly one of"),
			},
		},
		"node name and per-device selection": {
			slice: withSpec(func(s *resourceapi.ResourceSliceSpec) { s.PerDeviceNodeSelection = ptr.To(true) }),
			want: []want{
				invalid("spec", "but multiple fields are set"),
				required(dev(0), "exactly one of `nodeName`, `nodeSelector`, or `allNodes` is required when `perDeviceNodeSelection` is set to true in the ResourceSlice spec"),
			},
		},
		"per-device node selection": {
			slice: withSpec(func(s *resourceapi.ResourceSliceSpec) {
				s.NodeName, s.PerDeviceNodeSelection = nil, ptr.To(true)
				s.Devices = []resourceapi.Device{testDevice("a"), testDevice("b"), testDevice("c"), testDevice("d"), testDevice("e")}
				s.Devices[0].NodeName = ptr.To(goodName)
				s.Devices[1].AllNodes = ptr.To(true)
				s.Devices[2].NodeName, s.Devices[2].AllNodes = ptr.To(""), ptr.To(false)
				s.Devices[3].NodeName, s.Devices[3].AllNodes = ptr.To("worker"), ptr.To(true)
				s.Devices[4].NodeSelector = &corev1.NodeSelector{NodeSelectorTerms: badLabel}
			}),
			want: []want{
				invalid(dev(2)+".nodeName", "must not be empty"),
				invalid(dev(2)+".allNodes", "must be either unset or set to true"),
				required(dev(2), "when `perDeviceNodeSelection` is set to true"),
				invalid(dev(3), "exactly one of `nodeName`, `nodeSelector`, or `allNodes` is required"),
				invalid(dev(4)+".nodeSelector.nodeSelectorTerms[0].matchExpressions[0].values[0]", "a valid label"),
			},
		},
		"device node selection without per-device selection": {
			slice: withDevice(1, 0, func(d *resourceapi.Device) { d.AllNodes = ptr.To(true) }),
			want:  []want{invalid(dev(0), "`nodeName`, `nodeSelector` and `allNodes` can only be set if `perDeviceNodeSelection` is set to true")},
		},
		"shared counters and devices": {
			slice: withSpec(func(s *resourceapi.ResourceSliceSpec) { s.SharedCounters = counterSetsOf(1) }),
			want:  []want{invalid("spec", "only one of `sharedCounters` or `devices` is allowed")},
		},
		"bad and duplicate device names": {
			slice: withSpec(func(s *resourceapi.ResourceSliceSpec) {
				s.Devices = []resourceapi.Device{testDevice("a"), testDevice(badName), testDevice("a")}
			}),
			want: []want{invalid(dev(1)+".name", "RFC 1123 label"), duplicate(dev(2))},
		},
		"bad attributes": {
			slice: withSpec(func(s *resourceapi.ResourceSliceSpec) {
				s.Devices = []resourceapi.Device{testDevice("a"), testDevice("b"), testDevice("c"), testDevice("d")}
				s.Devices[0].Attributes = map[resourceapi.QualifiedName]resourceapi.DeviceAttribute{badName: {}}
				s.Devices[1].Attributes = map[resourceapi.QualifiedName]resourceapi.DeviceAttribute{goodName: {StringValue: ptr.To("x"), VersionValue: ptr.To("1.2.3")}}
				s.Devices[2].Attributes = map[resourceapi.QualifiedName]resourceapi.DeviceAttribute{goodName: {VersionValue: ptr.To(strings.Repeat("x", resourceapi.DeviceAttributeMaxValueLength+1))}}
				s.Devices[3].Attributes = map[resourceapi.QualifiedName]resourceapi.DeviceAttribute{goodName: {StringValue: ptr.To(strings.Repeat("x", resourceapi.DeviceAttributeMaxValueLength+1))}}
			}),
			want: []want{
				invalid(dev(0)+".attributes", "a valid C identifier must start with alphabetic character or '_'"),
				invalid(dev(0)+".attributes["+badName+"]", "must specify one of: `int`, `bool`, `string`, `version`, `ints`, `bools`, `strings`, `versions`"),
				invalid(dev(1)+".attributes[foo]", "must specify exactly one of: `int`, `bool`, `string`, `version`, `ints`, `bools`, `strings`, `versions`"),
				invalid(dev(2)+".attributes[foo].version", "must be a string compatible with semver.org spec 2.0.0"),
				tooLong(dev(2) + ".attributes[foo].version"),
				tooLong(dev(3) + ".attributes[foo].string"),
			},
		},
		"list attributes": {
			slice: withSpec(func(s *resourceapi.ResourceSliceSpec) {
				s.Devices = []resourceapi.Device{testDevice("a"), testDevice("b"), testDevice("c"), testDevice("d")}
				s.Devices[0].Attributes["list"] = resourceapi.DeviceAttribute{BoolValues: []bool{true}}
				s.Devices[1].Attributes["list"] = resourceapi.DeviceAttribute{IntValues: []int64{1}}
				s.Devices[2].Attributes["list"] = resourceapi.DeviceAttribute{StringValues: []string{"x"}}
				s.Devices[3].Attributes["list"] = resourceapi.DeviceAttribute{VersionValues: []string{"1.2.3", "2.0.0-rc.1+build.5"}}
			}),
		},
		"bad list attributes": {
			slice: withSpec(func(s *resourceapi.ResourceSliceSpec) {
				s.Devices = []resourceapi.Device{testDevice("a"), testDevice("b"), testDevice("c"), testDevice("d"), testDevice("e"), testDevice("f")}
				s.Devices[0].Attributes["list"] = resourceapi.DeviceAttribute{IntValues: []int64{1}, BoolValues: []bool{true}}
				s.Devices[1].Attributes["list"] = resourceapi.DeviceAttribute{IntValues: []int64{1}, StringValues: []string{}}
				s.Devices[2].Attributes["list"] = resourceapi.DeviceAttribute{StringValues: []string{strings.Repeat("x", resourceapi.DeviceAttributeMaxValueLength+1)}}
				s.Devices[3].Attributes["list"] = resourceapi.DeviceAttribute{VersionValues: []string{"1.2", "01.2.3"}}
				s.Devices[4].Attributes["list"] = resourceapi.DeviceAttribute{BoolValues: []bool{}}
				s.Devices[5].Attributes["list"] = resourceapi.DeviceAttribute{IntValues: []int64{}}
			}),
			// The declarative union check, which replaces the handwritten one,
			// does not count empty lists.
			want: []want{
				invalid(dev(0)+".attributes[list]", "must specify exactly one of"),
				invalid(dev(1)+".attributes[list].strings", "must not be empty if specified"),
				// Both lists count for the handwritten check, which stays.
				invalid(dev(1)+".attributes[list]", "exactly one value must be specified"),
				tooLong(dev(2) + ".attributes[list].strings[0]"),
				invalid(dev(3)+".attributes[list].versions[0]", "semver"),
				invalid(dev(3)+".attributes[list].versions[1]", "semver"),
				invalid(dev(4)+".attributes[list].bools", "must not be empty if specified"),
				invalid(dev(4)+".attributes[list]", "must specify one of"),
				invalid(dev(5)+".attributes[list].ints", "must not be empty if specified"),
				invalid(dev(5)+".attributes[list]", "must specify one of"),
			},
		},
		"attribute names": {
			slice: withSpec(func(s *resourceapi.ResourceSliceSpec) {
				s.Devices = []resourceapi.Device{testDevice("a"), testDevice("b"), testDevice("c"), testDevice("d"), testDevice("e")}
				s.Devices[0].Attributes = map[resourceapi.QualifiedName]resourceapi.DeviceAttribute{
					resourceapi.QualifiedName(strings.Repeat("x", resourceapi.DeviceMaxIDLength)):                                                                {StringValue: ptr.To("y")},
					resourceapi.QualifiedName(strings.Repeat("x", resourceapi.DeviceMaxDomainLength) + "/" + strings.Repeat("y", resourceapi.DeviceMaxIDLength)): {StringValue: ptr.To("z")},
					"a/b/c": {StringValue: ptr.To("not checked, as upstream")},
				}
				s.Devices[1].Attributes = map[resourceapi.QualifiedName]resourceapi.DeviceAttribute{
					resourceapi.QualifiedName(strings.Repeat(".", resourceapi.DeviceMaxIDLength+1)): {StringValue: ptr.To("y")},
				}
				s.Devices[2].Attributes = map[resourceapi.QualifiedName]resourceapi.DeviceAttribute{
					resourceapi.QualifiedName(strings.Repeat("_", resourceapi.DeviceMaxDomainLength+1) + "/y"): {StringValue: ptr.To("z")},
				}
				s.Devices[3].Attributes = map[resourceapi.QualifiedName]resourceapi.DeviceAttribute{
					resourceapi.QualifiedName(strings.Repeat("x", resourceapi.DeviceMaxDomainLength+1) + "/" + strings.Repeat("y", resourceapi.DeviceMaxIDLength+1)): {StringValue: ptr.To("z")},
				}
				s.Devices[4].Attributes = map[resourceapi.QualifiedName]resourceapi.DeviceAttribute{"/": {StringValue: ptr.To("z")}}
			}),
			want: []want{
				tooLong(dev(1) + ".attributes"),
				invalid(dev(1)+".attributes", "C identifier"),
				tooLong(dev(2) + ".attributes"),
				invalid(dev(2)+".attributes", "RFC 1123 subdomain"),
				tooLong(dev(3) + ".attributes"),
				tooLong(dev(3) + ".attributes"),
				invalid(dev(4)+".attributes", "the domain must not be empty"),
				invalid(dev(4)+".attributes", "the name must not be empty"),
			},
		},
		"too many attributes and capacities": {
			slice: withSpec(func(s *resourceapi.ResourceSliceSpec) {
				s.Devices = []resourceapi.Device{testDevice("a"), testDevice("b")}
				s.Devices[0].Capacity = nil
				s.Devices[0].Attributes = attributes(resourceapi.ResourceSliceMaxAttributesAndCapacitiesPerDevice, func(int) resourceapi.DeviceAttribute {
					return resourceapi.DeviceAttribute{StringValue: ptr.To("x")}
				})
				s.Devices[1].Attributes = s.Devices[0].Attributes
			}),
			want: []want{invalid(dev(1), fmt.Sprintf("the total number of attributes and capacities must not exceed %d", resourceapi.ResourceSliceMaxAttributesAndCapacitiesPerDevice))},
		},
		"too many attribute values": {
			slice: withSpec(func(s *resourceapi.ResourceSliceSpec) {
				s.Devices = []resourceapi.Device{testDevice("a"), testDevice("b"), testDevice("c")}
				for i, extra := range []int{0, 1, 2} {
					s.Devices[i].Capacity = nil
					s.Devices[i].Attributes = attributes(2, func(int) resourceapi.DeviceAttribute {
						return resourceapi.DeviceAttribute{StringValues: make([]string, resourceapi.ResourceSliceMaxAttributeValuesPerDevice/2)}
					})
					if extra > 0 {
						s.Devices[i].Attributes["extra"] = resourceapi.DeviceAttribute{BoolValues: make([]bool, extra)}
					}
				}
			}),
			want: []want{
				invalid(dev(1), fmt.Sprintf("the total number of attribute values must not exceed %d", resourceapi.ResourceSliceMaxAttributeValuesPerDevice)),
				invalid(dev(2), "the total number of attribute values must not exceed"),
			},
		},
		"capacity policy of a device allocated once": {
			slice: withDevice(1, 0, func(d *resourceapi.Device) {
				d.Capacity["memory"] = resourceapi.DeviceCapacity{Value: resource.MustParse("1Gi"), RequestPolicy: &resourceapi.CapacityRequestPolicy{
					Default: quantity("1Mi"), ValidRange: &resourceapi.CapacityRequestPolicyRange{Min: quantity("1Mi")},
				}}
			}),
			want: []want{forbidden(dev(0)+".capacity[memory].requestPolicy", "allowMultipleAllocations must be true")},
		},
		"capacity policy of a shared device": {
			slice: withDevice(1, 0, func(d *resourceapi.Device) {
				d.AllowMultipleAllocations = ptr.To(true)
				d.Capacity["memory"] = resourceapi.DeviceCapacity{Value: resource.MustParse("1Gi"), RequestPolicy: &resourceapi.CapacityRequestPolicy{
					Default: quantity("10Mi"), ValidRange: &resourceapi.CapacityRequestPolicyRange{Min: quantity("1Mi"), Max: quantity("100Mi"), Step: quantity("0")},
				}}
			}),
			want: []want{invalid(dev(0)+".capacity[memory].requestPolicy.validRange.step", "must be greater than zero")},
		},
		"taints": {
			slice: withDevice(1, 0, func(d *resourceapi.Device) {
				d.Taints = []resourceapi.DeviceTaint{
					{Key: "example.com/taint", Effect: resourceapi.DeviceTaintEffectNoExecute},
					{Key: "taint", Value: "tainted", Effect: resourceapi.DeviceTaintEffectNone, TimeAdded: ptr.To(metav1.Now())},
					{},
					{Key: badName, Value: badName, Effect: "some-other-effect"},
				}
			}),
			want: []want{
				invalid(dev(0)+".taints[2].key", "name part must be non-empty"),
				invalid(dev(0)+".taints[2].key", "name part must consist of alphanumeric characters"),
				required(dev(0) + ".taints[2].effect"),
				invalid(dev(0)+".taints[3].key", "name part must consist of alphanumeric characters"),
				invalid(dev(0)+".taints[3].value", "a valid label must be an empty string"),
				notSupported(dev(0)+".taints[3].effect", `"NoExecute", "NoSchedule", "None"`),
			},
		},
		"too many taints": {
			slice: withDevice(1, 0, func(d *resourceapi.Device) {
				for range resourceapi.DeviceTaintsMaxLength + 1 {
					d.Taints = append(d.Taints, resourceapi.DeviceTaint{Key: "example.com/taint", Effect: resourceapi.DeviceTaintEffectNoExecute})
				}
			}),
			want: []want{tooMany(dev(0) + ".taints")},
		},
		"most counter sets": {slice: sharedCountersSlice(counterSetsOf(resourceapi.ResourceSliceMaxCounterSets)...)},
		"too many counter sets": {
			slice: sharedCountersSlice(counterSetsOf(resourceapi.ResourceSliceMaxCounterSets + 1)...),
			want:  []want{tooMany("spec.sharedCounters")},
		},
		"bad counter sets": {
			slice: sharedCountersSlice(
				resourceapi.CounterSet{Counters: counterMap(1)},
				resourceapi.CounterSet{Name: badName, Counters: map[string]resourceapi.Counter{badName: {}}},
				resourceapi.CounterSet{Name: "empty"},
				resourceapi.CounterSet{Name: "big", Counters: counterMap(resourceapi.ResourceSliceMaxCountersPerCounterSet + 1)},
				resourceapi.CounterSet{Name: "empty", Counters: counterMap(resourceapi.ResourceSliceMaxCountersPerCounterSet)},
			),
			want: []want{
				required("spec.sharedCounters[0].name"),
				invalid("spec.sharedCounters[1].name", "RFC 1123 label"),
				invalid("spec.sharedCounters[1].counters", "RFC 1123 label"),
				required("spec.sharedCounters[2].counters"),
				tooMany("spec.sharedCounters[3].counters"),
				duplicate("spec.sharedCounters[4]"),
			},
		},
		"bad counter consumption": {
			slice: withSpec(func(s *resourceapi.ResourceSliceSpec) {
				s.Devices = []resourceapi.Device{testDevice("a"), testDevice("b"), testDevice("c"), testDevice("d")}
				s.Devices[0].ConsumesCounters = []resourceapi.DeviceCounterConsumption{consumption("", 1), consumption(badName, 1)}
				s.Devices[1].ConsumesCounters = []resourceapi.DeviceCounterConsumption{consumption(goodName, 1), consumption(goodName, 0)}
				s.Devices[2].ConsumesCounters = []resourceapi.DeviceCounterConsumption{consumption("a", 1), consumption("b", 1), consumption("c", 1)}
				s.Devices[3].ConsumesCounters = []resourceapi.DeviceCounterConsumption{consumption("a", resourceapi.ResourceSliceMaxCountersPerDeviceCounterConsumption+1)}
			}),
			want: []want{
				required(dev(0) + ".consumesCounters[0].counterSet"),
				invalid(dev(0)+".consumesCounters[1].counterSet", "RFC 1123 label"),
				required(dev(1) + ".consumesCounters[1].counters"),
				duplicate(dev(1) + ".consumesCounters[1]"),
				tooMany(dev(2) + ".consumesCounters"),
				tooMany(dev(3) + ".consumesCounters[0].counters"),
			},
		},
		"compatibility groups": {
			slice: withSpec(func(s *resourceapi.ResourceSliceSpec) {
				s.Devices = []resourceapi.Device{testDevice("a"), testDevice("b"), testDevice("c")}
				group := func(d int, groups ...string) {
					s.Devices[d].ConsumesCounters = []resourceapi.DeviceCounterConsumption{consumption("a", 1)}
					s.Devices[d].ConsumesCounters[0].CompatibilityGroups = groups
				}
				group(0, "g1", "g2")
				group(1, "g1", "g2", "g3")
				group(2, badName, badName)
			}),
			want: []want{
				tooMany(dev(1) + ".consumesCounters[0].compatibilityGroups"),
				invalid(dev(2)+".consumesCounters[0].compatibilityGroups[0]", "RFC 1123 label"),
				invalid(dev(2)+".consumesCounters[0].compatibilityGroups[1]", "RFC 1123 label"),
				duplicate(dev(2) + ".consumesCounters[0].compatibilityGroups[1]"),
			},
		},
		"binding conditions": {
			slice: withSpec(func(s *resourceapi.ResourceSliceSpec) {
				s.Devices = []resourceapi.Device{testDevice("a"), testDevice("b"), testDevice("c")}
				s.Devices[0].BindingConditions, s.Devices[0].BindingFailureConditions = []string{"example.com/c1", "c2"}, []string{"example.com/c3", "c4"}
				s.Devices[1].BindingConditions, s.Devices[1].BindingFailureConditions = []string{"c1", "c1", "c2", "c3", "c4"}, []string{"c1"}
				s.Devices[2].BindingConditions = []string{"c1"}
			}),
			want: []want{
				tooMany(dev(1) + ".bindingConditions"),
				duplicate(dev(1) + ".bindingConditions[1]"),
				invalid(dev(1)+".bindingFailureConditions[0]", "must not overlap"),
				invalid(dev(2)+".bindingFailureConditions", "bindingFailureConditions are required to use bindingConditions"),
			},
		},
		"node allocatable resources": {slice: withNodeResources(map[corev1.ResourceName]resourceapi.NodeAllocatableResource{
			corev1.ResourceCPU:    mapped("dra.example.com/cpu", "1"),
			corev1.ResourceMemory: {Mapping: &resourceapi.NodeAllocatableMapping{DeviceMultiplier: quantity("1Gi")}, Overhead: &resourceapi.NodeAllocatableOverhead{PerPod: quantity("1Gi")}},
			"hugepages-2Mi":       {Overhead: &resourceapi.NodeAllocatableOverhead{PerPod: quantity("2Mi"), PerContainer: quantity("0")}},
		})},
		"bad node allocatable resource names": {
			slice: withNodeResources(map[corev1.ResourceName]resourceapi.NodeAllocatableResource{
				"dra.example.com/gpu": mapped("dra.example.com/cpu", "1"),
				"abc":                 mapped("dra.example.com/cpu", "1"),
				"kubernetes.io/foo":   mapped("dra.example.com/cpu", "1"),
				"ephemeral-storage":   mapped("dra.example.com/cpu", "1"),
			}),
			want: []want{
				invalid(nodeResources+"[dra.example.com/gpu]", "must be a node allocatable resource name"),
				invalid(nodeResources+"[abc]", "must be a node allocatable resource name"),
				invalid(nodeResources+"[kubernetes.io/foo]", "must be a node allocatable resource name"),
				invalid(nodeResources+"[ephemeral-storage]", "must be a node allocatable resource name"),
			},
		},
		"bad node allocatable mappings": {
			slice: withNodeResources(map[corev1.ResourceName]resourceapi.NodeAllocatableResource{
				corev1.ResourceCPU:    mapped("", "0"),
				corev1.ResourceMemory: mapped("dra.example.com/memory", "-1"),
				"hugepages-1Gi":       {Mapping: &resourceapi.NodeAllocatableMapping{CapacityKey: ptr.To[resourceapi.QualifiedName]("dra.example.com/cpu")}},
				"hugepages-2Mi":       {Mapping: &resourceapi.NodeAllocatableMapping{CapacityMultiplier: quantity("1")}},
				"hugepages-4Mi":       {Mapping: &resourceapi.NodeAllocatableMapping{DeviceMultiplier: quantity("0")}},
				"hugepages-8Mi": {Mapping: &resourceapi.NodeAllocatableMapping{
					CapacityKey: ptr.To[resourceapi.QualifiedName]("dra.example.com/cpu"), CapacityMultiplier: quantity("1"), DeviceMultiplier: quantity("1"),
				}},
				"hugepages-16Mi": {},
			}),
			want: []want{
				invalid(nodeResources+"[cpu].mapping.capacityKey", "capacityKey must not be an empty string"),
				invalid(nodeResources+"[cpu].mapping.capacityMultiplier", "must be positive"),
				notFound(nodeResources + "[memory].mapping.capacityKey"),
				invalid(nodeResources+"[memory].mapping.capacityMultiplier", "must be positive"),
				required(nodeResources+"[hugepages-1Gi].mapping.capacityMultiplier", "capacityMultiplier is required when capacityKey is set"),
				required(nodeResources+"[hugepages-2Mi].mapping.capacityKey", "capacityKey is required when capacityMultiplier is set"),
				invalid(nodeResources+"[hugepages-2Mi].mapping", "must specify one of: `capacityKey`, `deviceMultiplier`"),
				invalid(nodeResources+"[hugepages-4Mi].mapping.deviceMultiplier", "must be positive"),
				invalid(nodeResources+"[hugepages-8Mi].mapping", "must specify exactly one of: `capacityKey`, `deviceMultiplier`"),
				required(nodeResources+"[hugepages-16Mi]", "at least one of mapping or overhead must be set"),
			},
		},
		"bad node allocatable overheads": {
			slice: withNodeResources(map[corev1.ResourceName]resourceapi.NodeAllocatableResource{
				corev1.ResourceCPU:    {Overhead: &resourceapi.NodeAllocatableOverhead{}},
				corev1.ResourceMemory: {Overhead: &resourceapi.NodeAllocatableOverhead{PerPod: quantity("-1Gi"), PerContainer: quantity("-500Mi")}},
			}),
			want: []want{
				invalid(nodeResources+"[cpu].overhead", "at least one of perPod or perContainer must be set"),
				invalid(nodeResources+"[memory].overhead.perPod", "must be non-negative"),
				invalid(nodeResources+"[memory].overhead.perContainer", "must be non-negative"),
			},
		},
		"skipped node operations": {slice: withSpec(func(s *resourceapi.ResourceSliceSpec) {
			s.SkipNodeOperations = []resourceapi.SkipNodeOperation{resourceapi.SkipNodeOperationAll, resourceapi.SkipNodeOperationNodePrepareResources}
		})},
		"bad skipped node operations": {
			slice: withSpec(func(s *resourceapi.ResourceSliceSpec) {
				s.SkipNodeOperations = []resourceapi.SkipNodeOperation{resourceapi.SkipNodeOperationNodePrepareResources, "", resourceapi.SkipNodeOperationNodePrepareResources}
			}),
			want: []want{
				invalid("spec.skipNodeOperations", "NodePrepareResources cannot be skipped unless NodeUnprepareResources is also skipped"),
				notSupported("spec.skipNodeOperations[1]"),
				duplicate("spec.skipNodeOperations[2]"),
			},
		},
	} {
		t.Run(name, func(t *testing.T) {
			assertErrors(t, ResourceSlice(tc.slice), tc.want)
		})
	}
}

func TestPartitionTypeAttribute(t *testing.T) {
	partitioned := func(attribute string, change func(*resourceapi.ResourceSliceSpec)) *resourceapi.ResourceSlice {
		return withSpec(func(s *resourceapi.ResourceSliceSpec) {
			s.Devices[0].ConsumesCounters = []resourceapi.DeviceCounterConsumption{consumption("counterset-0", 1)}
			s.PartitionTypeAttribute = ptr.To(resourceapi.FullyQualifiedName(attribute))
			change(s)
		})
	}
	nop := func(*resourceapi.ResourceSliceSpec) {}
	for name, tc := range map[string]struct {
		slice *resourceapi.ResourceSlice
		want  []want
	}{
		"bare attribute in the driver's domain": {slice: partitioned(testDriver+"/string", nop)},
		"device without counters need not have it": {slice: partitioned(testDriver+"/string", func(s *resourceapi.ResourceSliceSpec) {
			s.Devices = append(s.Devices, resourceapi.Device{Name: "exempt"})
		})},
		"explicit attribute": {slice: partitioned("gpu.example.com/profile", func(s *resourceapi.ResourceSliceSpec) {
			s.Devices[0].Attributes["gpu.example.com/profile"] = resourceapi.DeviceAttribute{StringValue: ptr.To("1g")}
		})},
		"no device consumes counters": {
			slice: partitioned(testDriver+"/string", func(s *resourceapi.ResourceSliceSpec) { s.Devices[0].ConsumesCounters = nil }),
			want:  []want{invalid("spec.partitionTypeAttribute", "may only be set on a slice which declares devices that consume counters")},
		},
		"shared counters only": {
			slice: partitioned(testDriver+"/string", func(s *resourceapi.ResourceSliceSpec) {
				s.Devices, s.SharedCounters = nil, counterSetsOf(1)
			}),
			want: []want{invalid("spec.partitionTypeAttribute", "may only be set on a slice which declares devices that consume counters")},
		},
		"missing on a device": {
			slice: partitioned("gpu.example.com/profile", nop),
			want:  []want{required("spec.devices[0].attributes[gpu.example.com/profile]", "device consumes counters and `partitionTypeAttribute` names this attribute, so it must be set")},
		},
		"not a string": {
			slice: partitioned(testDriver+"/int", nop),
			want:  []want{invalid("spec.devices[0].attributes["+testDriver+"/int]", "must be a string value because `partitionTypeAttribute` names this attribute")},
		},
		"explicit form wins": {
			slice: partitioned(testDriver+"/string", func(s *resourceapi.ResourceSliceSpec) {
				s.Devices[0].Attributes[resourceapi.QualifiedName(testDriver+"/string")] = resourceapi.DeviceAttribute{IntValue: ptr.To(int64(1))}
			}),
			want: []want{invalid("spec.devices[0].attributes["+testDriver+"/string]", "must be a string value")},
		},
		"bad format": {
			slice: partitioned("no_domain", nop),
			want:  []want{invalid("spec.partitionTypeAttribute", "a fully qualified name must be a domain and a name separated by a slash")},
		},
		"empty": {
			slice: partitioned("", nop),
			want: []want{
				invalid("spec.partitionTypeAttribute", "C identifier"),
				invalid("spec.partitionTypeAttribute", "a fully qualified name"),
			},
		},
	} {
		t.Run(name, func(t *testing.T) {
			assertErrors(t, ResourceSlice(tc.slice), tc.want)
		})
	}
}

func TestResourceSliceUpdate(t *testing.T) {
	stored := sliceOf(1)
	badEffects := []resourceapi.DeviceTaint{
		{Key: "unhealthy-power", Effect: resourceapi.DeviceTaintEffectNoExecute},
		{Key: "unhealthy-mem", Effect: "some-other-effect"},
	}
	storedBadEffect := withDevices(sliceOf(1), func(d *resourceapi.Device) { d.Taints = badEffects })
	badPolicy := &resourceapi.CapacityRequestPolicy{Default: quantity("0"), ValidRange: &resourceapi.CapacityRequestPolicyRange{Min: quantity("-1"), Step: quantity("1")}}
	storedBadPolicy := withDevices(sliceOf(1), func(d *resourceapi.Device) {
		d.AllowMultipleAllocations = ptr.To(true)
		d.Capacity["memory"] = resourceapi.DeviceCapacity{Value: resource.MustParse("1Gi"), RequestPolicy: badPolicy}
	})
	for name, tc := range map[string]struct {
		old    *resourceapi.ResourceSlice
		update func(*resourceapi.ResourceSlice)
		want   []want
	}{
		"no change": {old: stored, update: func(*resourceapi.ResourceSlice) {}},
		"node name change": {
			old:    stored,
			update: func(s *resourceapi.ResourceSlice) { s.Spec.NodeName = ptr.To("other") },
			want:   []want{invalid("spec.nodeName", "field is immutable")},
		},
		"driver change": {
			old:    stored,
			update: func(s *resourceapi.ResourceSlice) { s.Spec.Driver += "-updated" },
			want:   []want{invalid("spec.driver", "field is immutable")},
		},
		"pool change": {
			old:    stored,
			update: func(s *resourceapi.ResourceSlice) { s.Spec.Pool.Name += "-updated" },
			want:   []want{invalid("spec.pool.name", "field is immutable")},
		},
		"pool generation change": {
			old:    stored,
			update: func(s *resourceapi.ResourceSlice) { s.Spec.Pool.Generation++ },
		},
		"new unknown taint effect": {
			old:    stored,
			update: func(s *resourceapi.ResourceSlice) { s.Spec.Devices[0].Taints = badEffects },
			want:   []want{notSupported("spec.devices[0].taints[1].effect")},
		},
		"stored unknown taint effect, spec unchanged": {
			old:    storedBadEffect,
			update: func(s *resourceapi.ResourceSlice) { s.Labels = map[string]string{"a": "b"} },
		},
		// The handwritten rules keep a stored effect, but the declarative
		// ones check every device again once anything in the spec changes.
		"stored unknown taint effect, spec changed": {
			old: storedBadEffect,
			update: func(s *resourceapi.ResourceSlice) {
				s.Spec.Devices[0].Attributes["foo"] = resourceapi.DeviceAttribute{StringValue: ptr.To("bar")}
			},
			want: []want{notSupported("spec.devices[0].taints[1].effect")},
		},
		"new device with unknown taint effect": {
			old: storedBadEffect,
			update: func(s *resourceapi.ResourceSlice) {
				device := s.Spec.Devices[0].DeepCopy()
				device.Name += "-other"
				s.Spec.Devices = append(s.Spec.Devices, *device)
			},
			want: []want{notSupported("spec.devices[0].taints[1].effect"), notSupported("spec.devices[1].taints[1].effect")},
		},
		"stored request policy": {
			old:    storedBadPolicy,
			update: func(s *resourceapi.ResourceSlice) { s.Spec.Pool.Generation++ },
		},
		"new request policy": {
			old: stored,
			update: func(s *resourceapi.ResourceSlice) {
				s.Spec.Devices[0].AllowMultipleAllocations = ptr.To(true)
				s.Spec.Devices[0].Capacity["memory"] = resourceapi.DeviceCapacity{Value: resource.MustParse("1Gi"), RequestPolicy: badPolicy}
			},
			want: []want{invalid("spec.devices[0].capacity[memory].requestPolicy.validRange.min", "must be greater than or equal to 0")},
		},
	} {
		t.Run(name, func(t *testing.T) {
			slice := tc.old.DeepCopy()
			tc.update(slice)
			assertErrors(t, ResourceSliceUpdate(slice, tc.old), tc.want)
		})
	}
}
