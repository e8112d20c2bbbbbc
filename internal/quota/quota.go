// Package quota holds the resource quota evaluators: what a pod, a
// service, a persistent volume claim or a counted object (configmaps,
// secrets, replication controllers, resource quotas) uses of a
// ResourceQuota, which quotas it falls under (resources and scopes), what
// a pod must state when a quota limits its cpu or memory, and which
// updates give usage back. kube-apiserver's ResourceQuota admission
// charges writes with them (NewAdmissionConfiguration) and
// kube-controller-manager's resourcequota controller recomputes
// status.used with them from its informers (NewControllerConfiguration,
// UpdateFilter), both as upstream's pkg/quota/v1 core evaluators do.
//
// The evaluators follow upstream's with the feature gates of its release
// at their defaults (pod-level resources, in-place resize, volume
// attributes classes, recovery from failed volume expansion: all on).
// They plug into k8s.io/apiserver's quota framework
// (k8s.io/apiserver/pkg/quota/v1 and its generic package), which
// computes, compares and records usage; this package only knows the
// kinds. Objects are k8s.io/api core/v1 types, as svcnet stores them.
package quota

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	quotav1 "k8s.io/apiserver/pkg/quota/v1"
	"k8s.io/apiserver/pkg/quota/v1/generic"
	"k8s.io/utils/clock"
)

// countedObjects are the kinds quota counts and nothing more, each under
// its count/<resource> name and the bare name quotas used before object
// count quota existed (hard: {secrets: 10}).
var countedObjects = []struct {
	resource schema.GroupVersionResource
	alias    corev1.ResourceName
}{
	{corev1.SchemeGroupVersion.WithResource("configmaps"), corev1.ResourceConfigMaps},
	{corev1.SchemeGroupVersion.WithResource("resourcequotas"), corev1.ResourceQuotas},
	{corev1.SchemeGroupVersion.WithResource("replicationcontrollers"), corev1.ResourceReplicationControllers},
	{corev1.SchemeGroupVersion.WithResource("secrets"), corev1.ResourceSecrets},
}

// NewEvaluators are the evaluators of the kinds quota knows beyond
// count/<resource>: pods, services and persistent volume claims, and the
// object counts of configmaps, resourcequotas, replicationcontrollers and
// secrets. f lists a resource's objects for UsageStats; it may be nil
// where only Usage is needed (admission), and UsageStats then fails.
func NewEvaluators(f quotav1.ListerForResourceFunc) []quotav1.Evaluator {
	evaluators := []quotav1.Evaluator{
		NewPodEvaluator(f, clock.RealClock{}),
		NewServiceEvaluator(f),
		NewPersistentVolumeClaimEvaluator(f),
	}
	for _, c := range countedObjects {
		evaluators = append(evaluators,
			generic.NewObjectCountEvaluator(c.resource.GroupResource(), listFunc(f, c.resource), c.alias))
	}
	return evaluators
}

// NewAdmissionConfiguration is the quota configuration of the
// ResourceQuota admission plugin: the evaluators without listers, since
// admission only measures the object being written, and the ignored
// resources.
func NewAdmissionConfiguration() quotav1.Configuration {
	return generic.NewConfiguration(NewEvaluators(nil), IgnoredResources())
}

// NewControllerConfiguration is the quota configuration of the
// resourcequota controller: the evaluators listing objects through f
// (typically generic.ListerFuncForResourceFunc over the controller's
// informer factory), and the ignored resources.
func NewControllerConfiguration(f quotav1.ListerForResourceFunc) quotav1.Configuration {
	return generic.NewConfiguration(NewEvaluators(f), IgnoredResources())
}

// IgnoredResources are the resources quota never charges: the virtual
// ones that are never stored (bindings, component statuses, token and
// access reviews) and events, which were never under quota. A new map
// each call, for the caller to keep.
func IgnoredResources() map[schema.GroupResource]struct{} {
	ignored := map[schema.GroupResource]struct{}{}
	for _, gr := range []schema.GroupResource{
		{Resource: "bindings"},
		{Resource: "componentstatuses"},
		{Group: "authentication.k8s.io", Resource: "tokenreviews"},
		{Group: "authentication.k8s.io", Resource: "selfsubjectreviews"},
		{Group: "authorization.k8s.io", Resource: "subjectaccessreviews"},
		{Group: "authorization.k8s.io", Resource: "selfsubjectaccessreviews"},
		{Group: "authorization.k8s.io", Resource: "localsubjectaccessreviews"},
		{Group: "authorization.k8s.io", Resource: "selfsubjectrulesreviews"},
		{Resource: "events"},
		{Group: "events.k8s.io", Resource: "events"},
	} {
		ignored[gr] = struct{}{}
	}
	return ignored
}

// listFunc lists gvr's objects of a namespace through f. Without f (the
// admission configuration) listing is an error rather than a nil call.
func listFunc(f quotav1.ListerForResourceFunc, gvr schema.GroupVersionResource) generic.ListFuncByNamespace {
	if f == nil {
		return func(string) ([]runtime.Object, error) {
			return nil, fmt.Errorf("no lister for %s in this quota configuration", gvr.GroupResource())
		}
	}
	return generic.ListResourceUsingListerFunc(f, gvr)
}

// matchingScopes are the selectors of scopes that obj falls in.
func matchingScopes(obj runtime.Object, selectors []corev1.ScopedResourceSelectorRequirement, matches generic.MatchesScopeFunc) ([]corev1.ScopedResourceSelectorRequirement, error) {
	matched := []corev1.ScopedResourceSelectorRequirement{}
	for _, s := range selectors {
		ok, err := matches(s, obj)
		if err != nil {
			return []corev1.ScopedResourceSelectorRequirement{}, fmt.Errorf("error on matching scope %v: %w", s, err)
		}
		if ok {
			matched = append(matched, s)
		}
	}
	return matched, nil
}

// uncoveredScopes are the limited scopes (those the admission
// configuration says need a quota) for which no matched quota scope has
// the same scope name.
func uncoveredScopes(limited, matched []corev1.ScopedResourceSelectorRequirement) []corev1.ScopedResourceSelectorRequirement {
	uncovered := []corev1.ScopedResourceSelectorRequirement{}
	for _, l := range limited {
		covered := false
		for _, m := range matched {
			if m.ScopeName == l.ScopeName {
				covered = true
				break
			}
		}
		if !covered {
			uncovered = append(uncovered, l)
		}
	}
	return uncovered
}
