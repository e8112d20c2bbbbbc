package quota

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apiserver/pkg/admission"
	quotav1 "k8s.io/apiserver/pkg/quota/v1"
	"k8s.io/apiserver/pkg/quota/v1/generic"
	"k8s.io/client-go/tools/cache"
)

// rl builds a resource list from name, quantity pairs.
func rl(pairs ...string) corev1.ResourceList {
	out := corev1.ResourceList{}
	for i := 0; i < len(pairs); i += 2 {
		out[corev1.ResourceName(pairs[i])] = resource.MustParse(pairs[i+1])
	}
	return out
}

// checkList fails unless got and want hold the same names with equal
// quantities.
func checkList(t *testing.T, what string, got, want corev1.ResourceList) {
	t.Helper()
	if !quotav1.Equals(got, want) {
		t.Errorf("%s:\n got  %s\n want %s", what, fmtList(got), fmtList(want))
	}
}

func fmtList(l corev1.ResourceList) string {
	var parts []string
	for _, name := range quotav1.ResourceNames(l) {
		q := l[name]
		parts = append(parts, fmt.Sprintf("%s=%s", name, q.String()))
	}
	slices.Sort(parts)
	return strings.Join(parts, " ")
}

// listers serves the objects given, by resource, as informers' listers
// would.
func listers(t *testing.T, objs map[schema.GroupVersionResource][]runtime.Object) quotav1.ListerForResourceFunc {
	t.Helper()
	indexers := map[schema.GroupVersionResource]cache.Indexer{}
	for gvr, list := range objs {
		idx := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc})
		for _, o := range list {
			if err := idx.Add(o); err != nil {
				t.Fatal(err)
			}
		}
		indexers[gvr] = idx
	}
	return func(gvr schema.GroupVersionResource) (cache.GenericLister, error) {
		idx, ok := indexers[gvr]
		if !ok {
			idx = cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc})
		}
		return cache.NewGenericLister(idx, gvr.GroupResource()), nil
	}
}

func attrs(obj, old runtime.Object, resource, subresource string, op admission.Operation) admission.Attributes {
	gvr := corev1.SchemeGroupVersion.WithResource(resource)
	return admission.NewAttributesRecord(obj, old, schema.GroupVersionKind{Version: "v1"}, "ns", "name", gvr, subresource, op, nil, false, nil)
}

func TestNewEvaluators(t *testing.T) {
	got := map[schema.GroupResource]bool{}
	for _, e := range NewEvaluators(nil) {
		if got[e.GroupResource()] {
			t.Errorf("two evaluators for %v", e.GroupResource())
		}
		got[e.GroupResource()] = true
	}
	for _, r := range []string{"pods", "services", "persistentvolumeclaims", "configmaps", "resourcequotas", "replicationcontrollers", "secrets"} {
		if !got[schema.GroupResource{Resource: r}] {
			t.Errorf("no evaluator for %s", r)
		}
	}
	if len(got) != 7 {
		t.Errorf("evaluators for %v, want 7 resources", got)
	}
}

func TestObjectCountEvaluators(t *testing.T) {
	ns := func(kind, name string) metav1.ObjectMeta {
		return metav1.ObjectMeta{Namespace: "team-a", Name: kind + "-" + name}
	}
	f := listers(t, map[schema.GroupVersionResource][]runtime.Object{
		corev1.SchemeGroupVersion.WithResource("secrets"): {
			&corev1.Secret{ObjectMeta: ns("s", "db-password")},
			&corev1.Secret{ObjectMeta: ns("s", "tls")},
			&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "team-b", Name: "other"}},
		},
		corev1.SchemeGroupVersion.WithResource("configmaps"): {
			&corev1.ConfigMap{ObjectMeta: ns("cm", "nginx-conf")},
		},
	})
	registry := generic.NewRegistry(NewControllerConfiguration(f).Evaluators())
	for _, tc := range []struct {
		resource string
		obj      runtime.Object
		want     corev1.ResourceList
	}{
		{"configmaps", &corev1.ConfigMap{}, rl("configmaps", "1", "count/configmaps", "1")},
		{"secrets", &corev1.Secret{}, rl("secrets", "1", "count/secrets", "1")},
		{"resourcequotas", &corev1.ResourceQuota{}, rl("resourcequotas", "1", "count/resourcequotas", "1")},
		{"replicationcontrollers", &corev1.ReplicationController{}, rl("replicationcontrollers", "1", "count/replicationcontrollers", "1")},
	} {
		e := registry.Get(schema.GroupResource{Resource: tc.resource})
		usage, err := e.Usage(tc.obj)
		if err != nil {
			t.Fatal(err)
		}
		checkList(t, tc.resource, usage, tc.want)
		if !e.Handles(attrs(tc.obj, nil, tc.resource, "", admission.Create)) || e.Handles(attrs(tc.obj, tc.obj, tc.resource, "", admission.Update)) {
			t.Errorf("%s: object counts handle creates only", tc.resource)
		}
	}

	used, err := quotav1.CalculateUsage("team-a", nil, rl("secrets", "10", "count/configmaps", "5", "count/secrets", "10"), registry, nil)
	if err != nil {
		t.Fatal(err)
	}
	checkList(t, "team-a usage", used, rl("secrets", "2", "count/secrets", "2", "count/configmaps", "1"))
}

func TestConfigurations(t *testing.T) {
	admissionConfig := NewAdmissionConfiguration()
	if len(admissionConfig.Evaluators()) != 7 {
		t.Errorf("admission evaluators: %d", len(admissionConfig.Evaluators()))
	}
	ignored := admissionConfig.IgnoredResources()
	for _, gr := range []schema.GroupResource{
		{Resource: "events"},
		{Group: "events.k8s.io", Resource: "events"},
		{Resource: "bindings"},
		{Resource: "componentstatuses"},
		{Group: "authentication.k8s.io", Resource: "tokenreviews"},
		{Group: "authentication.k8s.io", Resource: "selfsubjectreviews"},
		{Group: "authorization.k8s.io", Resource: "subjectaccessreviews"},
		{Group: "authorization.k8s.io", Resource: "selfsubjectaccessreviews"},
		{Group: "authorization.k8s.io", Resource: "localsubjectaccessreviews"},
		{Group: "authorization.k8s.io", Resource: "selfsubjectrulesreviews"},
	} {
		if _, ok := ignored[gr]; !ok {
			t.Errorf("%v not ignored", gr)
		}
	}
	if len(ignored) != 10 {
		t.Errorf("%d ignored resources, want 10", len(ignored))
	}
	if _, ok := ignored[schema.GroupResource{Resource: "pods"}]; ok {
		t.Error("pods ignored")
	}
	// Each call is a map of its own.
	delete(IgnoredResources(), schema.GroupResource{Resource: "events"})
	if _, ok := IgnoredResources()[schema.GroupResource{Resource: "events"}]; !ok {
		t.Error("IgnoredResources shares its map")
	}

	// Admission measures objects but cannot list them.
	registry := generic.NewRegistry(admissionConfig.Evaluators())
	pods := registry.Get(schema.GroupResource{Resource: "pods"})
	if _, err := pods.Usage(webPod()); err != nil {
		t.Error(err)
	}
	if _, err := pods.UsageStats(quotav1.UsageStatsOptions{Namespace: "ns", Resources: []corev1.ResourceName{"pods"}}); err == nil {
		t.Error("UsageStats without listers: no error")
	}

	// The controller's lists.
	f := listers(t, map[schema.GroupVersionResource][]runtime.Object{
		podsResource: {withMeta(webPod(), "team-a", "web-1"), withMeta(webPod(), "team-a", "web-2"), withMeta(webPod(), "team-b", "web-1")},
	})
	stats, err := NewControllerConfiguration(f).Evaluators()[0].UsageStats(quotav1.UsageStatsOptions{
		Namespace: "team-a", Resources: []corev1.ResourceName{"pods", "requests.cpu", "limits.memory"},
	})
	if err != nil {
		t.Fatal(err)
	}
	checkList(t, "controller stats", stats.Used, rl("pods", "2", "requests.cpu", "200m", "limits.memory", "512Mi", "memory", "256Mi", "cpu", "200m", "requests.memory", "256Mi", "limits.cpu", "1", "count/pods", "2"))
}

func TestUncoveredQuotaScopes(t *testing.T) {
	limited := []corev1.ScopedResourceSelectorRequirement{
		{ScopeName: corev1.ResourceQuotaScopePriorityClass, Operator: corev1.ScopeSelectorOpIn, Values: []string{"cluster-services"}},
		{ScopeName: corev1.ResourceQuotaScopeCrossNamespacePodAffinity, Operator: corev1.ScopeSelectorOpExists},
	}
	matched := []corev1.ScopedResourceSelectorRequirement{
		{ScopeName: corev1.ResourceQuotaScopePriorityClass, Operator: corev1.ScopeSelectorOpExists},
	}
	for _, e := range []quotav1.Evaluator{NewPodEvaluator(nil, nil), NewPersistentVolumeClaimEvaluator(nil)} {
		got, err := e.UncoveredQuotaScopes(limited, matched)
		if err != nil {
			t.Fatal(err)
		}
		if len(got) != 1 || got[0].ScopeName != corev1.ResourceQuotaScopeCrossNamespacePodAffinity {
			t.Errorf("%v: uncovered %v", e.GroupResource(), got)
		}
	}
	got, _ := NewServiceEvaluator(nil).UncoveredQuotaScopes(limited, nil)
	if len(got) != 0 {
		t.Errorf("services: uncovered %v", got)
	}
}
