package dra

import (
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/google/uuid"
	resourceapi "k8s.io/api/resource/v1"
	metav1validation "k8s.io/apimachinery/pkg/apis/meta/v1/validation"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"

	svcvalidate "github.com/svcnet/svcnet/internal/registry/validate"
)

// attributeKeyMaxLength bounds the name of a device attribute or capacity:
// a domain, a slash and an identifier. Longer keys are shortened in paths.
const attributeKeyMaxLength = resourceapi.DeviceMaxDomainLength + 1 + resourceapi.DeviceMaxIDLength

// itself is the key of a list item that is its own identity.
func itself[T comparable](item T) T { return item }

// overLimit reports a map or list of n items that is longer than limit; a
// negative limit is none. The map and list helpers check nothing else
// then, so that a huge input costs little.
func overLimit(n, limit int, path *field.Path) field.ErrorList {
	if limit >= 0 && n > limit {
		return field.ErrorList{field.TooMany(path, n, limit)}
	}
	return nil
}

// listOverLimit is overLimit for a list, marked as covered: where upstream
// declares the limit too (for every bounded list here but a slice's
// devices and their taints), the declarative error replaces this one (see
// merge); elsewhere the mark changes nothing.
func listOverLimit(n, limit int, path *field.Path) field.ErrorList {
	return overLimit(n, limit, path).WithOrigin("maxItems").MarkCoveredByDeclarative()
}

// eachItem checks every item of a list at its index.
func eachItem[T any](items []T, path *field.Path, check func(T, *field.Path) field.ErrorList) field.ErrorList {
	var errs field.ErrorList
	for i, item := range items {
		errs = append(errs, check(item, path.Index(i))...)
	}
	return errs
}

// boundedList checks a list of at most limit items and then each item.
func boundedList[T any](items []T, limit int, path *field.Path, check func(T, *field.Path) field.ErrorList) field.ErrorList {
	if errs := listOverLimit(len(items), limit, path); errs != nil {
		return errs
	}
	return eachItem(items, path, check)
}

// uniqueList is a boundedList whose items must also differ in their key;
// every repetition is reported at its own index.
func uniqueList[T any, K comparable](items []T, limit int, path *field.Path, check func(T, *field.Path) field.ErrorList, key func(T) K) field.ErrorList {
	if errs := listOverLimit(len(items), limit, path); errs != nil {
		return errs
	}
	return append(eachItem(items, path, check), duplicates(items, path, key)...)
}

// duplicates reports each item whose key an earlier item already has,
// marked as covered like listOverLimit: upstream declares uniqueness for
// every unique list here but a slice's devices, derived attributes and
// binding conditions.
func duplicates[T any, K comparable](items []T, path *field.Path, key func(T) K) field.ErrorList {
	var errs field.ErrorList
	seen := make(map[K]bool, len(items))
	for i, item := range items {
		k := key(item)
		if seen[k] {
			errs = append(errs, field.Duplicate(path.Index(i), k).MarkCoveredByDeclarative())
		}
		seen[k] = true
	}
	return errs
}

// eachEntry checks a map of at most limit entries: every key at the map's
// own path and every value (when checkValue is set) at its key, which is
// shortened beyond keyLimit characters. Keys are visited in order so that
// the errors come out the same on every request.
func eachEntry[K ~string, V any](m map[K]V, limit, keyLimit int, path *field.Path, checkKey func(K, *field.Path) field.ErrorList, checkValue func(V, *field.Path) field.ErrorList) field.ErrorList {
	if errs := overLimit(len(m), limit, path); errs != nil {
		return errs
	}
	var errs field.ErrorList
	for _, key := range slices.Sorted(maps.Keys(m)) {
		errs = append(errs, checkKey(key, path)...)
		if checkValue != nil {
			errs = append(errs, checkValue(m[key], path.Key(shortenKey(string(key), keyLimit)))...)
		}
	}
	return errs
}

// shortenKey cuts the middle out of a key longer than limit (at least 16)
// so that an overlong key does not blow up the error message.
func shortenKey(key string, limit int) string {
	limit = max(limit, 16)
	if len(key) <= limit {
		return key
	}
	const ellipsis = "..."
	keep := limit - len(ellipsis)
	return key[:(keep+1)/2] + ellipsis + key[len(key)-keep/2:]
}

// oneOf checks a required enumeration value against the values upstream
// lists in its error. Upstream declares every such enumeration too.
func oneOf[T ~string](value T, supported []T, path *field.Path) field.ErrorList {
	switch {
	case value == "":
		return field.ErrorList{field.Required(path, "").MarkCoveredByDeclarative()}
	case !slices.Contains(supported, value):
		return field.ErrorList{field.NotSupported(path, value, supported).MarkCoveredByDeclarative()}
	}
	return nil
}

// Origins name the format rule an error comes from; a handwritten error
// gives way to a declarative one only when their origins agree.
const (
	shortNameOrigin          = "format=k8s-short-name"
	longNameOrigin           = "format=k8s-long-name"
	poolNameOrigin           = "format=k8s-resource-pool-name"
	fullyQualifiedNameOrigin = "format=k8s-resource-fully-qualified-name"
)

// label checks an RFC 1123 label (names of devices, requests, counters).
func label(value string, path *field.Path) field.ErrorList {
	return svcvalidate.DNSLabel(value, path).WithOrigin(shortNameOrigin)
}

// subdomain checks an RFC 1123 subdomain (node and class names).
func subdomain(value string, path *field.Path) field.ErrorList {
	return svcvalidate.DNSSubdomain(value, path).WithOrigin(longNameOrigin)
}

// driverName checks the name of a driver, which follows the rules of a
// CSI driver name. Its errors carry the origins of the format upstream
// declares for driver names where it declares one.
func driverName(name string, path *field.Path) field.ErrorList {
	errs := svcvalidate.CSIDriverName(name, path)
	for _, err := range errs {
		switch err.Type {
		case field.ErrorTypeTooLong:
			err.Origin = "maxLength"
		case field.ErrorTypeInvalid:
			err.Origin = "format=k8s-long-name-caseless"
		}
	}
	return errs
}

// requiredLabel checks a required name that must be an RFC 1123 label
// (counter sets).
func requiredLabel(name string, path *field.Path) field.ErrorList {
	if name == "" {
		return field.ErrorList{field.Required(path, "")}
	}
	return label(name, path)
}

// deviceClassName checks the class a request asks for.
func deviceClassName(name string, path *field.Path) field.ErrorList {
	if name == "" {
		return field.ErrorList{field.Required(path, "")}
	}
	return subdomain(name, path)
}

// poolName checks the name of a resource pool: DNS subdomains joined by
// slashes, at most PoolNameMaxLength long.
func poolName(name string, path *field.Path) field.ErrorList {
	if name == "" {
		return field.ErrorList{field.Required(path, "")}
	}
	var errs field.ErrorList
	if len(name) > resourceapi.PoolNameMaxLength {
		errs = append(errs, field.TooLong(path, "", resourceapi.PoolNameMaxLength))
	}
	for _, part := range strings.Split(name, "/") {
		errs = append(errs, svcvalidate.DNSSubdomain(part, path)...)
	}
	return errs.WithOrigin(poolNameOrigin)
}

// shareID checks the identifier of one share of a device that allows
// multiple allocations: a UUID in its normalized, lowercase form. Upstream
// declares the format as well.
func shareID(id string, path *field.Path) field.ErrorList {
	var err *field.Error
	if invalid := uuid.Validate(id); invalid != nil {
		err = field.Invalid(path, id, fmt.Sprintf("error validating uid: %v", invalid))
	} else if len(id) != 36 || id != strings.ToLower(id) {
		err = field.Invalid(path, id, "uid must be in RFC 4122 normalized form, `xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx` with lowercase hexadecimal characters")
	} else {
		return nil
	}
	return field.ErrorList{err.WithOrigin("format=k8s-uuid").MarkCoveredByDeclarative()}
}

// qualifiedName checks the name of an attribute or capacity: a C
// identifier, optionally behind a domain and a slash. Like upstream it
// does not reject further slashes.
func qualifiedName(name resourceapi.QualifiedName, path *field.Path) field.ErrorList {
	domain, id, hasDomain := strings.Cut(string(name), "/")
	if !hasDomain {
		return cIdentifier(domain, path)
	}
	if strings.Contains(id, "/") {
		return nil
	}
	var errs field.ErrorList
	if domain == "" {
		errs = append(errs, field.Invalid(path, "", "the domain must not be empty"))
	} else {
		errs = append(errs, driverName(domain, path)...)
	}
	if id == "" {
		return append(errs, field.Invalid(path, "", "the name must not be empty"))
	}
	return append(errs, cIdentifier(id, path)...)
}

// fullyQualifiedName checks a qualified name that must have its domain.
func fullyQualifiedName(name resourceapi.FullyQualifiedName, path *field.Path) field.ErrorList {
	errs := qualifiedName(resourceapi.QualifiedName(name), path)
	if !strings.Contains(string(name), "/") {
		errs = append(errs, field.Invalid(path, name, "a fully qualified name must be a domain and a name separated by a slash"))
	}
	return errs.WithOrigin(fullyQualifiedNameOrigin)
}

// cIdentifier checks the identifier part of a qualified name.
func cIdentifier(id string, path *field.Path) field.ErrorList {
	var errs field.ErrorList
	if len(id) > resourceapi.DeviceMaxIDLength {
		errs = append(errs, field.TooLong(path, "", resourceapi.DeviceMaxIDLength))
	}
	return append(errs, svcvalidate.Invalid(path, id, validation.IsCIdentifier(id))...)
}

// labelValue checks a taint or toleration value.
func labelValue(value string, path *field.Path) field.ErrorList {
	return svcvalidate.Invalid(path, value, validation.IsValidLabelValue(value))
}

// rawJSONObject checks opaque data that must be a JSON object. Data that
// was stored already may exceed the size limit, which came later.
func rawJSONObject(raw runtime.RawExtension, stored bool, limit int, path *field.Path) field.ErrorList {
	if len(raw.Raw) == 0 {
		return field.ErrorList{field.Required(path, "")}
	}
	if !stored && len(raw.Raw) > limit {
		return field.ErrorList{field.TooLong(path, "", limit)}
	}
	var value any
	if err := json.Unmarshal(raw.Raw, &value); err != nil {
		return field.ErrorList{field.Invalid(path, "<value omitted>", fmt.Sprintf("error parsing data as JSON: %v", err))}
	}
	switch value.(type) {
	case nil:
		return field.ErrorList{field.Required(path, "")}
	case map[string]any:
		return nil
	}
	return field.ErrorList{field.Invalid(path, "<value omitted>", "must be a valid JSON object")}
}

// deviceConfiguration checks the configuration a class, claim or
// allocation passes to a driver; stored marks parameters that are not new.
func deviceConfiguration(config resourceapi.DeviceConfiguration, stored bool, path *field.Path) field.ErrorList {
	path = path.Child("opaque")
	if config.Opaque == nil {
		return field.ErrorList{field.Required(path, "")}
	}
	errs := driverName(config.Opaque.Driver, path.Child("driver")).MarkCoveredByDeclarative()
	return append(errs, rawJSONObject(config.Opaque.Parameters, stored, resourceapi.OpaqueParametersMaxLength, path.Child("parameters"))...)
}

// bindingConditions checks the conditions that gate binding a device and
// those that abort it: label-like names, bounded, unique, disjoint, and
// either both present or both absent.
func bindingConditions(conditions, failures []string, path *field.Path) field.ErrorList {
	conditionsPath, failuresPath := path.Child("bindingConditions"), path.Child("bindingFailureConditions")
	errs := boundedList(conditions, resourceapi.BindingConditionsMaxSize, conditionsPath, metav1validation.ValidateLabelName)
	errs = append(errs, boundedList(failures, resourceapi.BindingFailureConditionsMaxSize, failuresPath, metav1validation.ValidateLabelName)...)
	errs = append(errs, duplicates(conditions, conditionsPath, itself)...)
	errs = append(errs, duplicates(failures, failuresPath, itself)...)
	for i, failure := range failures {
		if slices.Contains(conditions, failure) {
			errs = append(errs, field.Invalid(failuresPath.Index(i), failure, "bindingFailureConditions must not overlap with bindingConditions"))
		}
	}
	switch {
	case len(conditions) == 0 && len(failures) > 0:
		errs = append(errs, field.Invalid(conditionsPath, conditions, "bindingConditions are required to use bindingFailureConditions"))
	case len(failures) == 0 && len(conditions) > 0:
		errs = append(errs, field.Invalid(failuresPath, failures, "bindingFailureConditions are required to use bindingConditions"))
	}
	return errs
}

// skipNodeOperations checks the node operations a slice or an allocated
// device skips: never preparing without also unpreparing. That the
// values are known and unique are declarative rules.
func skipNodeOperations(ops []resourceapi.SkipNodeOperation, path *field.Path) field.ErrorList {
	if slices.Contains(ops, resourceapi.SkipNodeOperationNodePrepareResources) &&
		!slices.Contains(ops, resourceapi.SkipNodeOperationNodeUnprepareResources) &&
		!slices.Contains(ops, resourceapi.SkipNodeOperationAll) {
		return field.ErrorList{field.Invalid(path, ops, "NodePrepareResources cannot be skipped unless NodeUnprepareResources is also skipped")}
	}
	return nil
}
