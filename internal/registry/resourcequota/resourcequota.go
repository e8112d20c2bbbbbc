// Package resourcequota is the core/v1 ResourceQuota strategy: upstream's
// defaults (every quantity rounded up to milli precision), its validation
// (resource names a quota tracks or fully qualified ones, quantities that
// are not negative and whole for counted resources, the scopes and the
// scope selector with the resources each scope may cover, scopes that
// never change), the status subresource the quota controller writes (a
// create starts without a status, an update of the quota keeps it, a
// status write keeps the spec) and the REQUEST/LIMIT columns of
// `kubectl get quota`. Counting usage and refusing what a quota does not
// allow are the controller's and admission's work, not this package's.
package resourcequota

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apivalidation "k8s.io/apimachinery/pkg/api/validation"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/svcnet/svcnet/internal/registry"
	"github.com/svcnet/svcnet/internal/registry/validate"
)

// Resource describes resourcequotas.
func Resource() *registry.Resource {
	type rq = *corev1.ResourceQuota
	return &registry.Resource{
		Kind:       corev1.SchemeGroupVersion.WithKind("ResourceQuota"),
		Resource:   "resourcequotas",
		Singular:   "resourcequota",
		ShortNames: []string{"quota"},
		Namespaced: true,
		// Upstream's strategy leaves metadata.generation alone.
		Status:              true,
		ReturnDeletedObject: true,
		Strategy:            strategy{},
		// Upstream's printer: the request and limit columns come before
		// the age. Their descriptions are its own words.
		Columns: []registry.Column{
			registry.NameColumn(),
			registry.TextColumn("Request", "Request represents a minimum amount of cpu/memory that a container may consume.",
				func(q rq) string { requests, _ := usage(q); return requests }),
			registry.TextColumn("Limit", "Limits control the maximum amount of cpu/memory that a container may use independent of contention on the node.",
				func(q rq) string { _, limits := usage(q); return limits }),
			registry.AgeColumn(),
		},
	}
}

// usage renders the quota's status as upstream's printer does: one
// "<resource>: <used>/<hard>" for each resource of status.hard, in name
// order, joined by ", "; those named "limits.<something>" go to the limits,
// all others to the requests.
func usage(q *corev1.ResourceQuota) (requests, limits string) {
	var req, lim []string
	for _, name := range slices.Sorted(maps.Keys(q.Status.Hard)) {
		used, hard := q.Status.Used[name], q.Status.Hard[name]
		pair := fmt.Sprintf("%s: %s/%s", name, used.String(), hard.String())
		if prefix, _, dotted := strings.Cut(string(name), "."); dotted && prefix == "limits" {
			lim = append(lim, pair)
		} else {
			req = append(req, pair)
		}
	}
	return strings.Join(req, ", "), strings.Join(lim, ", ")
}

type strategy struct{ registry.Base }

// Default is upstream's SetObjectDefaults_ResourceQuota: the quantities of
// spec.hard, status.hard and status.used rounded up to milli precision.
func (strategy) Default(obj runtime.Object) {
	q := obj.(*corev1.ResourceQuota)
	validate.RoundResources(q.Spec.Hard)
	validate.RoundResources(q.Status.Hard)
	validate.RoundResources(q.Status.Used)
}

// PrepareForCreate starts a quota without a status: the quota controller
// fills it.
func (strategy) PrepareForCreate(obj runtime.Object) {
	obj.(*corev1.ResourceQuota).Status = corev1.ResourceQuotaStatus{}
}

// PrepareForUpdate keeps the stored status: an update of the quota
// itself may change only its metadata and spec.
func (strategy) PrepareForUpdate(obj, old runtime.Object) {
	obj.(*corev1.ResourceQuota).Status = old.(*corev1.ResourceQuota).Status
}

// PrepareForStatusUpdate keeps the stored spec: a write of
// resourcequotas/status changes only the status and the metadata, as
// upstream's status strategy.
func (strategy) PrepareForStatusUpdate(obj, old runtime.Object) {
	obj.(*corev1.ResourceQuota).Spec = old.(*corev1.ResourceQuota).Spec
}

// Validate is upstream's ValidateResourceQuota without the object
// metadata, which the API server checks for every kind (a quota's name is
// a DNS-1123 subdomain).
func (strategy) Validate(obj runtime.Object) field.ErrorList {
	q := obj.(*corev1.ResourceQuota)
	errs := validateSpec(&q.Spec, field.NewPath("spec"))
	return append(errs, validateStatus(&q.Status, field.NewPath("status"))...)
}

// ValidateUpdate serves both writes: only a status write changes the
// status (an update of the quota keeps the stored one), and it is checked
// as upstream's ValidateResourceQuotaStatusUpdate; any other update as
// ValidateResourceQuotaUpdate. The API server checks the metadata.
func (strategy) ValidateUpdate(obj, old runtime.Object) field.ErrorList {
	q, prev := obj.(*corev1.ResourceQuota), old.(*corev1.ResourceQuota)
	if !apiequality.Semantic.DeepEqual(q.Status, prev.Status) {
		return validateStatusUpdate(q)
	}
	return validateUpdate(q, prev)
}

// validateUpdate is ValidateResourceQuotaUpdate: the new spec, whose
// scopes, taken as a set, may not change.
func validateUpdate(q, prev *corev1.ResourceQuota) field.ErrorList {
	errs := validateSpec(&q.Spec, field.NewPath("spec"))
	if !sameScopes(q.Spec.Scopes, prev.Spec.Scopes) {
		errs = append(errs, field.Invalid(field.NewPath("spec", "scopes"), q.Spec.Scopes, apivalidation.FieldImmutableErrorMsg))
	}
	return errs
}

func sameScopes(a, b []corev1.ResourceQuotaScope) bool {
	set := func(scopes []corev1.ResourceQuotaScope) map[corev1.ResourceQuotaScope]bool {
		out := map[corev1.ResourceQuotaScope]bool{}
		for _, s := range scopes {
			out[s] = true
		}
		return out
	}
	return maps.Equal(set(a), set(b))
}

// validateStatusUpdate is ValidateResourceQuotaStatusUpdate: a resource
// version (the API server always has set it by then) and the quantities
// of the status.
func validateStatusUpdate(q *corev1.ResourceQuota) field.ErrorList {
	var errs field.ErrorList
	if q.ResourceVersion == "" {
		errs = append(errs, field.Required(field.NewPath("resourceVersion"), ""))
	}
	return append(errs, validateStatus(&q.Status, field.NewPath("status"))...)
}

// validateStatus is ValidateResourceQuotaStatus.
func validateStatus(status *corev1.ResourceQuotaStatus, path *field.Path) field.ErrorList {
	errs := resourceList(status.Hard, path.Child("hard"))
	return append(errs, resourceList(status.Used, path.Child("used"))...)
}

// validateSpec is ValidateResourceQuotaSpec: spec.hard, then the scopes,
// then the scope selector.
func validateSpec(spec *corev1.ResourceQuotaSpec, path *field.Path) field.ErrorList {
	errs := resourceList(spec.Hard, path.Child("hard"))
	errs = append(errs, validateScopes(spec, path.Child("scopes"))...)
	if spec.ScopeSelector != nil {
		errs = append(errs, validateScopeSelector(spec, path.Child("scopeSelector", "matchExpressions"))...)
	}
	return errs
}

// resourceList checks each resource of a quota's list, in name order
// (upstream's follows map order): its name, then its quantity.
func resourceList(list corev1.ResourceList, path *field.Path) field.ErrorList {
	var errs field.ErrorList
	for _, name := range slices.Sorted(maps.Keys(list)) {
		p := path.Key(string(name))
		errs = append(errs, resourceName(name, p)...)
		errs = append(errs, validate.ResourceQuantity(name, list[name], p)...)
	}
	return errs
}

// quotaResources are the unprefixed resource names the quota system
// tracks (upstream's standardQuotaResources), huge pages aside.
var quotaResources = map[corev1.ResourceName]bool{
	corev1.ResourceCPU: true, corev1.ResourceMemory: true, corev1.ResourceEphemeralStorage: true,
	corev1.ResourceRequestsCPU: true, corev1.ResourceRequestsMemory: true, corev1.ResourceRequestsStorage: true,
	corev1.ResourceRequestsEphemeralStorage: true, corev1.ResourceLimitsCPU: true, corev1.ResourceLimitsMemory: true,
	corev1.ResourceLimitsEphemeralStorage: true, corev1.ResourcePods: true, corev1.ResourceQuotas: true,
	corev1.ResourceServices: true, corev1.ResourceReplicationControllers: true, corev1.ResourceSecrets: true,
	corev1.ResourcePersistentVolumeClaims: true, corev1.ResourceConfigMaps: true,
	corev1.ResourceServicesNodePorts: true, corev1.ResourceServicesLoadBalancers: true,
}

// isQuotaResource is upstream's IsStandardQuotaResourceName.
func isQuotaResource(name corev1.ResourceName) bool {
	return quotaResources[name] || strings.HasPrefix(string(name), corev1.ResourceHugePagesPrefix) ||
		strings.HasPrefix(string(name), corev1.ResourceRequestsHugePagesPrefix)
}

// resourceName is upstream's ValidateResourceQuotaResourceName: a resource
// name as in any list and, without a prefix, one the quota system tracks
// ("count/deployments.apps" and "gold.storageclass.storage.k8s.io/
// requests.storage" are qualified, so pass).
func resourceName(name corev1.ResourceName, path *field.Path) field.ErrorList {
	errs := validate.ResourceName(name, path)
	if !strings.Contains(string(name), "/") && !isQuotaResource(name) {
		errs = append(errs, field.Invalid(path, name, "must be a standard resource for quota"))
	}
	return errs
}

// isStandardScope is upstream's IsStandardResourceQuotaScope.
func isStandardScope(scope corev1.ResourceQuotaScope) bool {
	switch scope {
	case corev1.ResourceQuotaScopeTerminating, corev1.ResourceQuotaScopeNotTerminating,
		corev1.ResourceQuotaScopeBestEffort, corev1.ResourceQuotaScopeNotBestEffort,
		corev1.ResourceQuotaScopePriorityClass, corev1.ResourceQuotaScopeVolumeAttributesClass,
		corev1.ResourceQuotaScopeCrossNamespacePodAffinity:
		return true
	}
	return false
}

// scopeCovers is upstream's IsResourceQuotaScopeValidForResource: the pod
// scopes cover the pod count and pod compute resources (BestEffort only
// the count), VolumeAttributesClass the claim count and claimed storage;
// an unknown scope, every resource.
func scopeCovers(scope corev1.ResourceQuotaScope, name corev1.ResourceName) bool {
	podCount := name == corev1.ResourcePods
	switch scope {
	case corev1.ResourceQuotaScopeTerminating, corev1.ResourceQuotaScopeNotTerminating, corev1.ResourceQuotaScopeNotBestEffort,
		corev1.ResourceQuotaScopePriorityClass, corev1.ResourceQuotaScopeCrossNamespacePodAffinity:
		switch name {
		case corev1.ResourceCPU, corev1.ResourceMemory, corev1.ResourceLimitsCPU, corev1.ResourceLimitsMemory,
			corev1.ResourceRequestsCPU, corev1.ResourceRequestsMemory:
			return true
		}
		return podCount
	case corev1.ResourceQuotaScopeBestEffort:
		return podCount
	case corev1.ResourceQuotaScopeVolumeAttributesClass:
		return name == corev1.ResourcePersistentVolumeClaims || name == corev1.ResourceRequestsStorage
	}
	return true
}

// uncovered reports, for each of the spec's resources (in name order)
// that the quota system tracks but scope does not cover, an error at path
// showing value.
func uncovered(spec *corev1.ResourceQuotaSpec, scope corev1.ResourceQuotaScope, path *field.Path, value interface{}) field.ErrorList {
	var errs field.ErrorList
	for _, name := range slices.Sorted(maps.Keys(spec.Hard)) {
		if isQuotaResource(name) && !scopeCovers(scope, name) {
			errs = append(errs, field.Invalid(path, value, "unsupported scope applied to resource"))
		}
	}
	return errs
}

// conflicting reports each pair of opposite scopes that seen holds both
// of, BestEffort's first, as an error at path showing spec.scopes (also
// for the selector's scopes, as upstream).
func conflicting(seen map[corev1.ResourceQuotaScope]bool, spec *corev1.ResourceQuotaSpec, path *field.Path) field.ErrorList {
	var errs field.ErrorList
	for _, pair := range [][2]corev1.ResourceQuotaScope{
		{corev1.ResourceQuotaScopeBestEffort, corev1.ResourceQuotaScopeNotBestEffort},
		{corev1.ResourceQuotaScopeTerminating, corev1.ResourceQuotaScopeNotTerminating},
	} {
		if seen[pair[0]] && seen[pair[1]] {
			errs = append(errs, field.Invalid(path, spec.Scopes, "conflicting scopes"))
		}
	}
	return errs
}

// validateScopes is upstream's validateResourceQuotaScopes: each scope
// known and covering the spec's resources, and no opposite scopes. Every
// error shows the whole list.
func validateScopes(spec *corev1.ResourceQuotaSpec, path *field.Path) field.ErrorList {
	var errs field.ErrorList
	seen := map[corev1.ResourceQuotaScope]bool{}
	for _, scope := range spec.Scopes {
		if !isStandardScope(scope) {
			errs = append(errs, field.Invalid(path, spec.Scopes, "unsupported scope"))
		}
		errs = append(errs, uncovered(spec, scope, path, spec.Scopes)...)
		seen[scope] = true
	}
	return append(errs, conflicting(seen, spec, path)...)
}

// The messages of a scope selector's requirements.
const (
	existsOnly = "must be 'Exists' when scope is any of ResourceQuotaScopeTerminating, ResourceQuotaScopeNotTerminating, " +
		"ResourceQuotaScopeBestEffort, ResourceQuotaScopeNotBestEffort or ResourceQuotaScopeCrossNamespacePodAffinity"
	valuesRequired  = "must be at least one value when `operator` is 'In' or 'NotIn' for scope selector"
	valuesForbidden = "must be no value when `operator` is 'Exist' or 'DoesNotExist' for scope selector"
)

// validateScopeSelector is upstream's validateScopedResourceSelectorRequirement,
// path being spec.scopeSelector.matchExpressions. As upstream's, its
// errors name no index, and those on the resources show the selector as
// its internal type encodes, with untagged field names.
func validateScopeSelector(spec *corev1.ResourceQuotaSpec, path *field.Path) field.ErrorList {
	var errs field.ErrorList
	shown := internalSelectorOf(spec.ScopeSelector)
	seen := map[corev1.ResourceQuotaScope]bool{}
	for _, req := range spec.ScopeSelector.MatchExpressions {
		if !isStandardScope(req.ScopeName) {
			errs = append(errs, field.Invalid(path.Child("scopeName"), req.ScopeName, "unsupported scope"))
		}
		errs = append(errs, uncovered(spec, req.ScopeName, path, shown)...)
		switch req.ScopeName {
		case corev1.ResourceQuotaScopeBestEffort, corev1.ResourceQuotaScopeNotBestEffort, corev1.ResourceQuotaScopeTerminating,
			corev1.ResourceQuotaScopeNotTerminating, corev1.ResourceQuotaScopeCrossNamespacePodAffinity:
			if req.Operator != corev1.ScopeSelectorOpExists {
				errs = append(errs, field.Invalid(path.Child("operator"), req.Operator, existsOnly))
			}
		}
		switch req.Operator {
		case corev1.ScopeSelectorOpIn, corev1.ScopeSelectorOpNotIn:
			if len(req.Values) == 0 {
				errs = append(errs, field.Required(path.Child("values"), valuesRequired))
			}
		case corev1.ScopeSelectorOpExists, corev1.ScopeSelectorOpDoesNotExist:
			if len(req.Values) != 0 {
				errs = append(errs, field.Invalid(path.Child("values"), req.Values, valuesForbidden))
			}
		default:
			errs = append(errs, field.Invalid(path.Child("operator"), req.Operator, "not a valid selector operator"))
		}
		seen[req.ScopeName] = true
	}
	return append(errs, conflicting(seen, spec, path)...)
}

// internalSelector has the fields, and so the untagged JSON, of upstream's
// internal core.ScopeSelector:
// {"MatchExpressions":[{"ScopeName":"BestEffort","Operator":"Exists","Values":null}]}.
type internalSelector struct {
	MatchExpressions []internalRequirement
}

type internalRequirement struct {
	ScopeName corev1.ResourceQuotaScope
	Operator  corev1.ScopeSelectorOperator
	Values    []string
}

// internalSelectorOf converts a selector as upstream's conversion does:
// nil lists stay nil.
func internalSelectorOf(sel *corev1.ScopeSelector) *internalSelector {
	out := &internalSelector{}
	if sel.MatchExpressions != nil {
		out.MatchExpressions = make([]internalRequirement, len(sel.MatchExpressions))
		for i, req := range sel.MatchExpressions {
			out.MatchExpressions[i] = internalRequirement(req)
		}
	}
	return out
}
