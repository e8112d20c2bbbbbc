package validate

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// Resource names upstream knows (pkg/apis/core/helper).
var (
	standardContainerResources = map[corev1.ResourceName]bool{
		corev1.ResourceCPU: true, corev1.ResourceMemory: true, corev1.ResourceEphemeralStorage: true,
	}
	standardResources = map[corev1.ResourceName]bool{
		corev1.ResourceCPU: true, corev1.ResourceMemory: true, corev1.ResourceEphemeralStorage: true,
		corev1.ResourceRequestsCPU: true, corev1.ResourceRequestsMemory: true,
		corev1.ResourceRequestsEphemeralStorage: true, corev1.ResourceLimitsCPU: true,
		corev1.ResourceLimitsMemory: true, corev1.ResourceLimitsEphemeralStorage: true,
		corev1.ResourcePods: true, corev1.ResourceQuotas: true, corev1.ResourceServices: true,
		corev1.ResourceReplicationControllers: true, corev1.ResourceSecrets: true,
		corev1.ResourceConfigMaps: true, corev1.ResourcePersistentVolumeClaims: true,
		corev1.ResourceStorage: true, corev1.ResourceRequestsStorage: true,
		corev1.ResourceServicesNodePorts: true, corev1.ResourceServicesLoadBalancers: true,
	}
	integerResources = map[corev1.ResourceName]bool{
		corev1.ResourcePods: true, corev1.ResourceQuotas: true, corev1.ResourceServices: true,
		corev1.ResourceReplicationControllers: true, corev1.ResourceSecrets: true,
		corev1.ResourceConfigMaps: true, corev1.ResourcePersistentVolumeClaims: true,
		corev1.ResourceServicesNodePorts: true, corev1.ResourceServicesLoadBalancers: true,
	}
)

func isHugePages(name corev1.ResourceName) bool {
	return strings.HasPrefix(string(name), corev1.ResourceHugePagesPrefix)
}

// isNative is true for names in the kubernetes.io/ namespace, which
// unprefixed names are implicitly.
func isNative(name corev1.ResourceName) bool {
	return !strings.Contains(string(name), "/") || strings.Contains(string(name), corev1.ResourceDefaultNamespacePrefix)
}

func isExtended(name corev1.ResourceName) bool {
	if isNative(name) || strings.HasPrefix(string(name), corev1.DefaultResourceRequestsPrefix) {
		return false
	}
	return len(validation.IsQualifiedName(corev1.DefaultResourceRequestsPrefix+string(name))) == 0
}

// overcommitAllowed is false for extended resources and huge pages, whose
// requests must equal their limits.
func overcommitAllowed(name corev1.ResourceName) bool {
	return isNative(name) && !isHugePages(name)
}

func isStandardResource(name corev1.ResourceName) bool {
	return standardResources[name] || isHugePages(name) ||
		strings.HasPrefix(string(name), corev1.ResourceRequestsHugePagesPrefix)
}

// ResourceName checks the name of a resource in any resource list, as
// upstream's validateResourceName: a qualified name and, when it has no
// prefix, one of the standard resources. Containers and quotas add rules
// of their own after it.
func ResourceName(name corev1.ResourceName, path *field.Path) field.ErrorList {
	var errs field.ErrorList
	for _, msg := range validation.IsQualifiedName(string(name)) {
		errs = append(errs, field.Invalid(path, name, msg))
	}
	if len(errs) == 0 && !strings.Contains(string(name), "/") && !isStandardResource(name) {
		errs = append(errs, field.Invalid(path, name, "must be a standard resource type or fully qualified"))
	}
	return errs
}

// resourceName checks the name of a resource in a container's requests or
// limits.
func resourceName(name corev1.ResourceName, path *field.Path) field.ErrorList {
	errs := ResourceName(name, path)
	if !strings.Contains(string(name), "/") {
		if !standardContainerResources[name] && !isHugePages(name) {
			errs = append(errs, field.Invalid(path, name, "must be a standard resource for containers"))
		}
	} else if !isNative(name) && !isExtended(name) {
		errs = append(errs, field.Invalid(path, name, "doesn't follow extended resource name standard"))
	}
	return errs
}

// NonNegativeQuantity rejects a negative quantity.
func NonNegativeQuantity(q resource.Quantity, path *field.Path) field.ErrorList {
	if q.Cmp(resource.Quantity{}) < 0 {
		return field.ErrorList{field.Invalid(path, q.String(), "must be greater than or equal to 0")}
	}
	return nil
}

// PositiveQuantity rejects a quantity that is not above zero.
func PositiveQuantity(q resource.Quantity, path *field.Path) field.ErrorList {
	if q.Cmp(resource.Quantity{}) <= 0 {
		return field.ErrorList{field.Invalid(path, q.String(), "must be greater than zero")}
	}
	return nil
}

// ResourceQuantity checks a quantity for the named resource: not negative,
// and whole for resources counted in units (pods, extended resources).
func ResourceQuantity(name corev1.ResourceName, q resource.Quantity, path *field.Path) field.ErrorList {
	errs := NonNegativeQuantity(q, path)
	if (integerResources[name] || isExtended(name)) && q.MilliValue()%1000 != 0 {
		errs = append(errs, field.Invalid(path, q, "must be an integer"))
	}
	return errs
}

// ResourceRequirements checks a container's requests and limits.
func ResourceRequirements(req *corev1.ResourceRequirements, path *field.Path) field.ErrorList {
	var errs field.ErrorList
	limPath, reqPath := path.Child("limits"), path.Child("requests")
	hasCPUOrMemory, hasHugePages := false, false
	for _, name := range sortedNames(req.Limits) {
		q := req.Limits[name]
		p := limPath.Key(string(name))
		errs = append(errs, resourceName(name, p)...)
		errs = append(errs, ResourceQuantity(name, q, p)...)
		if isHugePages(name) {
			hasHugePages = true
			errs = append(errs, hugePagesValue(name, q, p)...)
		}
		if name == corev1.ResourceCPU || name == corev1.ResourceMemory {
			hasCPUOrMemory = true
		}
	}
	for _, name := range sortedNames(req.Requests) {
		q := req.Requests[name]
		p := reqPath.Key(string(name))
		errs = append(errs, resourceName(name, p)...)
		errs = append(errs, ResourceQuantity(name, q, p)...)
		if limit, ok := req.Limits[name]; ok {
			if q.Cmp(limit) != 0 && !overcommitAllowed(name) {
				errs = append(errs, field.Invalid(reqPath, q.String(), fmt.Sprintf("must be equal to %s limit of %s", name, limit.String())))
			} else if q.Cmp(limit) > 0 {
				errs = append(errs, field.Invalid(reqPath, q.String(), fmt.Sprintf("must be less than or equal to %s limit of %s", name, limit.String())))
			}
		} else if !overcommitAllowed(name) {
			errs = append(errs, field.Required(limPath, "Limit must be set for non overcommitable resources"))
		}
		if isHugePages(name) {
			hasHugePages = true
			errs = append(errs, hugePagesValue(name, q, p)...)
		}
		if name == corev1.ResourceCPU || name == corev1.ResourceMemory {
			hasCPUOrMemory = true
		}
	}
	if hasHugePages && !hasCPUOrMemory {
		errs = append(errs, field.Forbidden(path, "HugePages require cpu or memory"))
	}
	return errs
}

// hugePagesValue checks that a huge page amount is a whole number of pages.
func hugePagesValue(name corev1.ResourceName, q resource.Quantity, path *field.Path) field.ErrorList {
	size, err := resource.ParseQuantity(strings.TrimPrefix(string(name), corev1.ResourceHugePagesPrefix))
	if err != nil || size.Value() <= 0 || q.Value()%size.Value() != 0 {
		return field.ErrorList{field.Invalid(path, q.String(), fmt.Sprintf("%s is not positive integer multiple of %s", q.String(), name))}
	}
	return nil
}

func sortedNames(list corev1.ResourceList) []corev1.ResourceName {
	return slices.Sorted(maps.Keys(list))
}

// RoundResources rounds every quantity up to milli precision, as upstream's
// SetDefaults_ResourceList does for every resource list it stores.
func RoundResources(list corev1.ResourceList) {
	for name, q := range list {
		q.RoundUp(-3)
		list[name] = q
	}
}
