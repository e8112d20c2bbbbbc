package dra

import (
	"fmt"
	"regexp"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apivalidation "k8s.io/apimachinery/pkg/api/validation"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"

	svcvalidate "github.com/svcnet/svcnet/internal/registry/validate"
)

// sliceSpec checks a slice; old is the stored spec on update, whose
// driver, pool and node cannot change and whose unchanged device
// capacities and taints are not held to newer rules again.
func sliceSpec(spec, old *resourceapi.ResourceSliceSpec, path *field.Path) field.ErrorList {
	errs := driverName(spec.Driver, path.Child("driver"))
	errs = append(errs, pool(spec.Pool, path.Child("pool"))...)
	if old != nil {
		errs = append(errs, apivalidation.ValidateImmutableField(spec.Pool.Name, old.Pool.Name, path.Child("pool", "name"))...)
		errs = append(errs, apivalidation.ValidateImmutableField(spec.Driver, old.Driver, path.Child("driver"))...)
		errs = append(errs, apivalidation.ValidateImmutableField(spec.NodeName, old.NodeName, path.Child("nodeName"))...)
	}
	errs = append(errs, sliceNodeSelection(spec, path)...)
	if spec.SharedCounters != nil && spec.Devices != nil {
		errs = append(errs, field.Invalid(path, "", "only one of `sharedCounters` or `devices` is allowed"))
	}
	maxDevices := resourceapi.ResourceSliceMaxDevices
	if slices.ContainsFunc(spec.Devices, usesAdvancedFeatures) {
		maxDevices = resourceapi.ResourceSliceMaxDevicesWithAdvancedFeatures
	}
	errs = append(errs, uniqueList(spec.Devices, maxDevices, path.Child("devices"),
		func(d resourceapi.Device, path *field.Path) field.ErrorList {
			return device(d, storedDevice(old, d.Name), spec.PerDeviceNodeSelection, path)
		},
		func(d resourceapi.Device) string { return d.Name })...)
	errs = append(errs, uniqueList(spec.SharedCounters, resourceapi.ResourceSliceMaxCounterSets, path.Child("sharedCounters"), counterSet,
		func(set resourceapi.CounterSet) string { return set.Name })...)
	if spec.PartitionTypeAttribute != nil {
		errs = append(errs, partitionTypeAttribute(spec, path)...)
	}
	return append(errs, skipNodeOperations(spec.SkipNodeOperations, path.Child("skipNodeOperations"))...)
}

func pool(p resourceapi.ResourcePool, path *field.Path) field.ErrorList {
	errs := poolName(p.Name, path.Child("name"))
	if p.ResourceSliceCount <= 0 {
		errs = append(errs, field.Invalid(path.Child("resourceSliceCount"), p.ResourceSliceCount, "must be greater than zero"))
	}
	if p.Generation < 0 {
		errs = append(errs, field.Invalid(path.Child("generation"), p.Generation, "must be greater than or equal to zero"))
	}
	return errs
}

// nodeSelection collects which of the mutually exclusive ways to name the
// nodes of a slice, or of a device, are set.
type nodeSelection struct {
	set  []string
	errs field.ErrorList
}

func (s *nodeSelection) nodeName(name *string, emptyMessage string, path *field.Path) {
	path = path.Child("nodeName")
	switch {
	case name == nil:
	case *name == "":
		s.errs = append(s.errs, field.Invalid(path, "", emptyMessage))
	default:
		s.set = append(s.set, "`nodeName`")
		s.errs = append(s.errs, subdomain(*name, path)...)
	}
}

func (s *nodeSelection) nodeSelector(selector *corev1.NodeSelector, path *field.Path) {
	if selector != nil {
		s.set = append(s.set, "`nodeSelector`")
		s.errs = append(s.errs, svcvalidate.NodeSelector(selector, path.Child("nodeSelector"))...)
	}
}

// flag notes a field that may only be unset or true.
func (s *nodeSelection) flag(name string, value *bool, path *field.Path) {
	switch {
	case value == nil:
	case *value:
		s.set = append(s.set, "`"+name+"`")
	default:
		s.errs = append(s.errs, field.Invalid(path.Child(name), false, "must be either unset or set to true"))
	}
}

// exactlyOne returns the errors so far plus one if not exactly one way was
// set: none gets message, several get message and multiple.
func (s *nodeSelection) exactlyOne(path *field.Path, message, multiple string) field.ErrorList {
	switch len(s.set) {
	case 0:
		return append(s.errs, field.Required(path, message))
	case 1:
		return s.errs
	}
	return append(s.errs, field.Invalid(path, "{"+strings.Join(s.set, ", ")+"}", message+multiple))
}

func sliceNodeSelection(spec *resourceapi.ResourceSliceSpec, path *field.Path) field.ErrorList {
	var s nodeSelection
	s.nodeName(spec.NodeName, "must be either unset or set to a non-empty string", path)
	s.nodeSelector(spec.NodeSelector, path)
	if spec.NodeSelector != nil && len(spec.NodeSelector.NodeSelectorTerms) != 1 {
		// One term per slice keeps merging the selectors of devices from
		// several slices simple.
		s.errs = append(s.errs, field.Invalid(path.Child("nodeSelector", "nodeSelectorTerms"), upstreamValue{spec.NodeSelector.NodeSelectorTerms}, "must have exactly one node selector term"))
	}
	s.flag("allNodes", spec.AllNodes, path)
	s.flag("perDeviceNodeSelection", spec.PerDeviceNodeSelection, path)
	return s.exactlyOne(path, "exactly one of `nodeName`, `nodeSelector`, `allNodes`, `perDeviceNodeSelection` is required", ", but multiple fields are set")
}

// deviceNodeSelection checks the nodes of one device, which it names only
// when its slice selects nodes per device.
func deviceNodeSelection(d *resourceapi.Device, perDevice *bool, path *field.Path) field.ErrorList {
	if perDevice == nil || !*perDevice {
		if d.NodeName != nil || d.NodeSelector != nil || d.AllNodes != nil {
			return field.ErrorList{field.Invalid(path, nil, "`nodeName`, `nodeSelector` and `allNodes` can only be set if `perDeviceNodeSelection` is set to true in the ResourceSlice spec")}
		}
		return nil
	}
	var s nodeSelection
	s.nodeName(d.NodeName, "must not be empty", path)
	s.nodeSelector(d.NodeSelector, path)
	s.flag("allNodes", d.AllNodes, path)
	return s.exactlyOne(path, "exactly one of `nodeName`, `nodeSelector`, or `allNodes` is required when `perDeviceNodeSelection` is set to true in the ResourceSlice spec", "")
}

// usesAdvancedFeatures reports whether a device needs more room than a
// plain one, which lowers the number of devices a slice may hold.
func usesAdvancedFeatures(d resourceapi.Device) bool {
	return len(d.Taints) > 0 || len(d.ConsumesCounters) > 0 || hasListAttribute(d)
}

func hasListAttribute(d resourceapi.Device) bool {
	for _, a := range d.Attributes {
		if a.BoolValues != nil || a.IntValues != nil || a.StringValues != nil || a.VersionValues != nil {
			return true
		}
	}
	return false
}

func consumesCounters(d resourceapi.Device) bool {
	return len(d.ConsumesCounters) > 0
}

// storedDevice finds the stored version of a device by name.
func storedDevice(old *resourceapi.ResourceSliceSpec, name string) *resourceapi.Device {
	if old == nil {
		return nil
	}
	if i := slices.IndexFunc(old.Devices, func(d resourceapi.Device) bool { return d.Name == name }); i >= 0 {
		return &old.Devices[i]
	}
	return nil
}

func device(d resourceapi.Device, old *resourceapi.Device, perDevice *bool, path *field.Path) field.ErrorList {
	errs := label(d.Name, path.Child("name"))
	if n := len(d.Attributes) + len(d.Capacity); n > resourceapi.ResourceSliceMaxAttributesAndCapacitiesPerDevice {
		errs = append(errs, field.Invalid(path, n, fmt.Sprintf("the total number of attributes and capacities must not exceed %d", resourceapi.ResourceSliceMaxAttributesAndCapacitiesPerDevice)))
	}
	if n := attributeValueCount(d); n > resourceapi.ResourceSliceMaxAttributeValuesPerDevice {
		errs = append(errs, field.Invalid(path, n, fmt.Sprintf("the total number of attribute values must not exceed %d", resourceapi.ResourceSliceMaxAttributeValuesPerDevice)))
	}
	errs = append(errs, eachEntry(d.Attributes, -1, attributeKeyMaxLength, path.Child("attributes"), qualifiedName, attribute)...)
	if old == nil || !apiequality.Semantic.DeepEqual(old.Capacity, d.Capacity) {
		errs = append(errs, eachEntry(d.Capacity, -1, attributeKeyMaxLength, path.Child("capacity"), qualifiedName, capacityCheck(d))...)
	}
	if old == nil || !apiequality.Semantic.DeepEqual(old.Taints, d.Taints) {
		errs = append(errs, boundedList(d.Taints, resourceapi.DeviceTaintsMaxLength, path.Child("taints"),
			func(taint resourceapi.DeviceTaint, path *field.Path) field.ErrorList {
				return deviceTaint(taint, nil, path)
			})...)
	}
	errs = append(errs, uniqueList(d.ConsumesCounters, resourceapi.ResourceSliceMaxDeviceCounterConsumptionsPerDevice, path.Child("consumesCounters"), counterConsumption,
		func(c resourceapi.DeviceCounterConsumption) string { return c.CounterSet })...)
	errs = append(errs, deviceNodeSelection(&d, perDevice, path)...)
	errs = append(errs, bindingConditions(d.BindingConditions, d.BindingFailureConditions, path)...)
	return append(errs, nodeAllocatableResources(d.NodeAllocatableResources, d.Capacity, path.Child("nodeAllocatableResources"))...)
}

// attributeValueCount counts the values of a device's attributes, each
// item of a list on its own.
func attributeValueCount(d resourceapi.Device) int {
	n := 0
	for _, a := range d.Attributes {
		items := len(a.BoolValues) + len(a.IntValues) + len(a.StringValues) + len(a.VersionValues)
		n += max(items, 1)
	}
	return n
}

// attribute checks that exactly one kind of value is set, and that value.
func attribute(a resourceapi.DeviceAttribute, path *field.Path) field.ErrorList {
	var errs field.ErrorList
	set := 0
	value := func(present bool, valueErrs field.ErrorList) {
		if present {
			set++
		}
		errs = append(errs, valueErrs...)
	}
	value(a.BoolValue != nil, nil)
	value(a.IntValue != nil, nil)
	value(a.StringValue != nil, optional(a.StringValue, path.Child("string"), stringValue))
	value(a.VersionValue != nil, optional(a.VersionValue, path.Child("version"), versionValue))
	value(a.BoolValues != nil, listValue(a.BoolValues, path.Child("bools"), nil))
	value(a.IntValues != nil, listValue(a.IntValues, path.Child("ints"), nil))
	value(a.StringValues != nil, listValue(a.StringValues, path.Child("strings"), stringItem))
	value(a.VersionValues != nil, listValue(a.VersionValues, path.Child("versions"), versionValue))
	switch set {
	case 0:
		errs = append(errs, field.Invalid(path, "", "exactly one value must be specified").WithOrigin("union").MarkCoveredByDeclarative())
	case 1:
	default:
		errs = append(errs, field.Invalid(path, upstreamValue{a}, "exactly one value must be specified").WithOrigin("union").MarkCoveredByDeclarative())
	}
	return errs
}

func optional[T any](value *T, path *field.Path, check func(T, *field.Path) field.ErrorList) field.ErrorList {
	if value == nil {
		return nil
	}
	return check(*value, path)
}

// listValue checks a list attribute that is set: not empty, and each item
// (when check is given).
func listValue[T any](values []T, path *field.Path, check func(T, *field.Path) field.ErrorList) field.ErrorList {
	var errs field.ErrorList
	if values != nil && len(values) == 0 {
		errs = append(errs, field.Invalid(path, values, "must not be empty if specified"))
	}
	if check != nil {
		errs = append(errs, eachItem(values, path, check)...)
	}
	return errs
}

func stringValue(value string, path *field.Path) field.ErrorList {
	if len(value) > resourceapi.DeviceAttributeMaxValueLength {
		return field.ErrorList{field.TooLong(path, "", resourceapi.DeviceAttributeMaxValueLength)}
	}
	return nil
}

// stringItem checks an item of a list of strings, whose length upstream
// also declares.
func stringItem(value string, path *field.Path) field.ErrorList {
	return stringValue(value, path).WithOrigin("maxBytes").MarkCoveredByDeclarative()
}

// semver matches a version as semver.org 2.0.0 defines it: three numbers
// without leading zeros, then optional pre-release and build identifiers.
var semver = func() *regexp.Regexp {
	const (
		number     = `(0|[1-9]\d*)`
		prerelease = `(0|[1-9]\d*|\d*[a-zA-Z-][0-9a-zA-Z-]*)`
		build      = `[0-9a-zA-Z-]+`
	)
	return regexp.MustCompile(`^` + number + `\.` + number + `\.` + number +
		`(-` + prerelease + `(\.` + prerelease + `)*)?` +
		`(\+` + build + `(\.` + build + `)*)?$`)
}()

func versionValue(value string, path *field.Path) field.ErrorList {
	var errs field.ErrorList
	if !semver.MatchString(value) {
		errs = append(errs, field.Invalid(path, value, "must be a string compatible with semver.org spec 2.0.0"))
	}
	return append(errs, stringValue(value, path)...)
}

// capacityCheck picks the check of a device's capacities: only a device
// that can be allocated several times may say how its capacity is shared.
func capacityCheck(d resourceapi.Device) func(resourceapi.DeviceCapacity, *field.Path) field.ErrorList {
	if d.AllowMultipleAllocations != nil && *d.AllowMultipleAllocations {
		return func(c resourceapi.DeviceCapacity, path *field.Path) field.ErrorList {
			if c.RequestPolicy == nil {
				return nil
			}
			return requestPolicy(c.Value, c.RequestPolicy, path.Child("requestPolicy"))
		}
	}
	return func(c resourceapi.DeviceCapacity, path *field.Path) field.ErrorList {
		if c.RequestPolicy == nil {
			return nil
		}
		return field.ErrorList{field.Forbidden(path.Child("requestPolicy"), "allowMultipleAllocations must be true")}
	}
}

func counterSet(set resourceapi.CounterSet, path *field.Path) field.ErrorList {
	errs := requiredLabel(set.Name, path.Child("name")).MarkCoveredByDeclarative()
	return append(errs, counters(set.Counters, resourceapi.ResourceSliceMaxCountersPerCounterSet, path.Child("counters"))...)
}

// counterConsumption checks what a device takes from a counter set. The
// compatibility groups are checked by declarative rules only.
func counterConsumption(c resourceapi.DeviceCounterConsumption, path *field.Path) field.ErrorList {
	errs := requiredLabel(c.CounterSet, path.Child("counterSet")).MarkCoveredByDeclarative()
	return append(errs, counters(c.Counters, resourceapi.ResourceSliceMaxCountersPerDeviceCounterConsumption, path.Child("counters"))...)
}

// counters checks a required map of counters; any quantity is a valid
// counter, so only the names are checked. Upstream declares both rules,
// but not the size limit.
func counters(m map[string]resourceapi.Counter, limit int, path *field.Path) field.ErrorList {
	if len(m) == 0 {
		return field.ErrorList{field.Required(path, "").MarkCoveredByDeclarative()}
	}
	return eachEntry(m, limit, validation.DNS1123LabelMaxLength, path, counterName, nil)
}

func counterName(name string, path *field.Path) field.ErrorList {
	return label(name, path).MarkCoveredByDeclarative()
}

// partitionTypeAttribute checks the attribute that tells partitions of a
// device apart: only meaningful when devices consume counters, each of
// which must then carry it as a string. Its format is a declarative rule.
func partitionTypeAttribute(spec *resourceapi.ResourceSliceSpec, path *field.Path) field.ErrorList {
	attrPath := path.Child("partitionTypeAttribute")
	name := string(*spec.PartitionTypeAttribute)
	if !slices.ContainsFunc(spec.Devices, consumesCounters) {
		return field.ErrorList{field.Invalid(attrPath, name, "may only be set on a slice which declares devices that consume counters")}
	}
	if len(fullyQualifiedName(*spec.PartitionTypeAttribute, attrPath)) > 0 {
		// No device can carry a malformed name; the format error says it all.
		return nil
	}
	var errs field.ErrorList
	// An attribute in the driver's own domain may also be declared without
	// it; the explicit form wins when a device has both.
	bare, inDriverDomain := strings.CutPrefix(name, spec.Driver+"/")
	for i, d := range spec.Devices {
		if !consumesCounters(d) {
			continue
		}
		keyPath := path.Child("devices").Index(i).Child("attributes").Key(name)
		a, found := d.Attributes[resourceapi.QualifiedName(name)]
		if !found && inDriverDomain {
			a, found = d.Attributes[resourceapi.QualifiedName(bare)]
		}
		switch {
		case !found:
			errs = append(errs, field.Required(keyPath, "device consumes counters and `partitionTypeAttribute` names this attribute, so it must be set"))
		case a.StringValue == nil:
			errs = append(errs, field.Invalid(keyPath, upstreamValue{a}, "must be a string value because `partitionTypeAttribute` names this attribute"))
		}
	}
	return errs
}
