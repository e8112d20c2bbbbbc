package resourcequota

import (
	"reflect"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/svcnet/svcnet/internal/registry"
	"github.com/svcnet/svcnet/internal/registry/registrytest"
)

type rq = *corev1.ResourceQuota

// list makes a resource list from name, quantity pairs.
func list(pairs ...string) corev1.ResourceList {
	out := corev1.ResourceList{}
	for i := 0; i < len(pairs); i += 2 {
		out[corev1.ResourceName(pairs[i])] = resource.MustParse(pairs[i+1])
	}
	return out
}

func valid() rq {
	return &corev1.ResourceQuota{
		ObjectMeta: metav1.ObjectMeta{Name: "compute", Namespace: "default", ResourceVersion: "7"},
		Spec: corev1.ResourceQuotaSpec{Hard: list(
			"requests.cpu", "1", "limits.cpu", "2", "memory", "1Gi", "pods", "10", "services.loadbalancers", "2",
			"requests.hugepages-2Mi", "4Mi", "hugepages-1Gi", "2Gi", "requests.ephemeral-storage", "1Gi",
			"count/deployments.apps", "5", "gold.storageclass.storage.k8s.io/requests.storage", "10Gi",
			"requests.nvidia.com/gpu", "1500m",
		)},
	}
}

// podQuota is a valid quota that scopes may narrow.
func podQuota(q rq) { q.Spec.Hard = list("pods", "10", "requests.cpu", "1", "limits.memory", "1Gi") }

const qualifiedName = "name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')"

// The messages below are upstream's (ValidateResourceQuota and the helpers
// it calls); the map's entries are checked in name order.
func TestValidate(t *testing.T) {
	sel := func(reqs ...corev1.ScopedResourceSelectorRequirement) *corev1.ScopeSelector {
		return &corev1.ScopeSelector{MatchExpressions: reqs}
	}
	exists := func(scope corev1.ResourceQuotaScope) corev1.ScopedResourceSelectorRequirement {
		return corev1.ScopedResourceSelectorRequirement{ScopeName: scope, Operator: corev1.ScopeSelectorOpExists}
	}
	registrytest.RunValidate(t, strategy{}, valid, []registrytest.Case[rq]{
		{Name: "valid", Change: func(rq) {}},
		{Name: "empty", Change: func(q rq) { q.Spec = corev1.ResourceQuotaSpec{} }},
		{Name: "quantities", Change: func(q rq) {
			q.Spec.Hard = list("pods", "-1", "services", "1500m", "requests.memory", "-1Mi", "example.com/gpu", "500m", "requests.cpu", "500m")
		}, Want: []string{
			`spec.hard[example.com/gpu]: Invalid value: "500m": must be an integer`,
			`spec.hard[pods]: Invalid value: "-1": must be greater than or equal to 0`,
			`spec.hard[requests.memory]: Invalid value: "-1Mi": must be greater than or equal to 0`,
			`spec.hard[services]: Invalid value: "1500m": must be an integer`,
		}},
		{Name: "resource names", Change: func(q rq) {
			q.Spec.Hard = list("storage", "1Gi", "foo", "1", "bad name", "1", "example.com/bad name", "1", "count/pods", "3")
		}, Want: []string{
			`spec.hard[bad name]: Invalid value: "bad name": ` + qualifiedName,
			`spec.hard[bad name]: Invalid value: "bad name": must be a standard resource for quota`,
			`spec.hard[example.com/bad name]: Invalid value: "example.com/bad name": ` + qualifiedName,
			`spec.hard[foo]: Invalid value: "foo": must be a standard resource type or fully qualified`,
			`spec.hard[foo]: Invalid value: "foo": must be a standard resource for quota`,
			`spec.hard[storage]: Invalid value: "storage": must be a standard resource for quota`,
		}},
		{Name: "pod scopes", Change: func(q rq) {
			podQuota(q)
			q.Spec.Scopes = []corev1.ResourceQuotaScope{corev1.ResourceQuotaScopeNotTerminating, corev1.ResourceQuotaScopeNotBestEffort}
		}},
		{Name: "best effort counts only pods", Change: func(q rq) {
			podQuota(q)
			q.Spec.Hard["count/secrets"] = resource.MustParse("2") // not a standard name: any scope may have it
			q.Spec.Scopes = []corev1.ResourceQuotaScope{corev1.ResourceQuotaScopeBestEffort}
		}, Want: []string{
			`spec.scopes: Invalid value: ["BestEffort"]: unsupported scope applied to resource`,
			`spec.scopes: Invalid value: ["BestEffort"]: unsupported scope applied to resource`,
		}},
		{Name: "volume attributes class", Change: func(q rq) {
			q.Spec.Hard = list("persistentvolumeclaims", "3", "requests.storage", "1Gi", "pods", "1")
			q.Spec.Scopes = []corev1.ResourceQuotaScope{corev1.ResourceQuotaScopeVolumeAttributesClass}
		}, Want: []string{
			`spec.scopes: Invalid value: ["VolumeAttributesClass"]: unsupported scope applied to resource`,
		}},
		{Name: "conflicting and unknown scopes", Change: func(q rq) {
			q.Spec.Hard = list("pods", "1")
			q.Spec.Scopes = []corev1.ResourceQuotaScope{"Terminating", "NotTerminating", "Foo", "BestEffort", "NotBestEffort"}
		}, Want: []string{
			`spec.scopes: Invalid value: ["Terminating","NotTerminating","Foo","BestEffort","NotBestEffort"]: unsupported scope`,
			`spec.scopes: Invalid value: ["Terminating","NotTerminating","Foo","BestEffort","NotBestEffort"]: conflicting scopes`,
			`spec.scopes: Invalid value: ["Terminating","NotTerminating","Foo","BestEffort","NotBestEffort"]: conflicting scopes`,
		}},
		{Name: "priority class selector", Change: func(q rq) {
			podQuota(q)
			q.Spec.ScopeSelector = sel(
				corev1.ScopedResourceSelectorRequirement{ScopeName: "PriorityClass", Operator: "In", Values: []string{"high"}},
				corev1.ScopedResourceSelectorRequirement{ScopeName: "PriorityClass", Operator: "NotIn", Values: []string{"low"}},
				corev1.ScopedResourceSelectorRequirement{ScopeName: "PriorityClass", Operator: "DoesNotExist"},
				exists(corev1.ResourceQuotaScopeCrossNamespacePodAffinity),
			)
		}},
		{Name: "selector operators and values", Change: func(q rq) {
			podQuota(q)
			q.Spec.ScopeSelector = sel(
				corev1.ScopedResourceSelectorRequirement{ScopeName: "PriorityClass", Operator: "In"},
				corev1.ScopedResourceSelectorRequirement{ScopeName: "PriorityClass", Operator: "Exists", Values: []string{"a"}},
				corev1.ScopedResourceSelectorRequirement{ScopeName: "PriorityClass", Operator: "Gt", Values: []string{"1"}},
				corev1.ScopedResourceSelectorRequirement{ScopeName: "Terminating", Operator: "NotIn", Values: []string{"x"}},
				corev1.ScopedResourceSelectorRequirement{ScopeName: "Foo", Operator: "Exists"},
			)
		}, Want: []string{
			"spec.scopeSelector.matchExpressions.values: Required value: must be at least one value when `operator` is 'In' or 'NotIn' for scope selector",
			`spec.scopeSelector.matchExpressions.values: Invalid value: ["a"]: must be no value when ` + "`operator`" + ` is 'Exist' or 'DoesNotExist' for scope selector`,
			`spec.scopeSelector.matchExpressions.operator: Invalid value: "Gt": not a valid selector operator`,
			`spec.scopeSelector.matchExpressions.operator: Invalid value: "NotIn": must be 'Exists' when scope is any of ResourceQuotaScopeTerminating, ResourceQuotaScopeNotTerminating, ResourceQuotaScopeBestEffort, ResourceQuotaScopeNotBestEffort or ResourceQuotaScopeCrossNamespacePodAffinity`,
			`spec.scopeSelector.matchExpressions.scopeName: Invalid value: "Foo": unsupported scope`,
		}},
		{Name: "selector scope and resources", Change: func(q rq) {
			q.Spec.Hard = list("requests.cpu", "1")
			q.Spec.ScopeSelector = sel(exists(corev1.ResourceQuotaScopeBestEffort))
		}, Want: []string{
			`spec.scopeSelector.matchExpressions: Invalid value: {"MatchExpressions":[{"ScopeName":"BestEffort","Operator":"Exists","Values":null}]}: unsupported scope applied to resource`,
		}},
		// As upstream's, the selector's conflict shows spec.scopes.
		{Name: "conflicting selector scopes", Change: func(q rq) {
			q.Spec.Hard = list("pods", "1")
			q.Spec.ScopeSelector = sel(exists("BestEffort"), exists("NotBestEffort"), exists("NotTerminating"), exists("Terminating"))
		}, Want: []string{
			`spec.scopeSelector.matchExpressions: Invalid value: null: conflicting scopes`,
			`spec.scopeSelector.matchExpressions: Invalid value: null: conflicting scopes`,
		}},
		{Name: "empty selector", Change: func(q rq) { q.Spec.ScopeSelector = &corev1.ScopeSelector{} }},
		// A create has no status by then, but upstream checks it too.
		{Name: "status", Change: func(q rq) {
			q.Status = corev1.ResourceQuotaStatus{Hard: list("pods", "-1"), Used: list("foo", "1")}
		}, Want: []string{
			`status.hard[pods]: Invalid value: "-1": must be greater than or equal to 0`,
			`status.used[foo]: Invalid value: "foo": must be a standard resource type or fully qualified`,
			`status.used[foo]: Invalid value: "foo": must be a standard resource for quota`,
		}},
	})
}

func TestValidateUpdate(t *testing.T) {
	scoped := func(q rq) {
		podQuota(q)
		q.Spec.Scopes = []corev1.ResourceQuotaScope{corev1.ResourceQuotaScopeNotTerminating, corev1.ResourceQuotaScopePriorityClass}
	}
	registrytest.RunValidateUpdate(t, strategy{}, valid, []registrytest.Case[rq]{
		{Name: "hard changes", Change: func(q rq) { q.Spec.Hard = list("pods", "20") }},
		{Name: "bad hard", Change: func(q rq) { q.Spec.Hard = list("pods", "-2") }, Want: []string{
			`spec.hard[pods]: Invalid value: "-2": must be greater than or equal to 0`,
		}},
		{Name: "scopes reordered", Old: scoped, Change: func(q rq) {
			q.Spec.Scopes = []corev1.ResourceQuotaScope{corev1.ResourceQuotaScopePriorityClass, corev1.ResourceQuotaScopeNotTerminating, corev1.ResourceQuotaScopePriorityClass}
		}},
		{Name: "scope changed", Old: scoped, Change: func(q rq) {
			q.Spec.Scopes = []corev1.ResourceQuotaScope{corev1.ResourceQuotaScopeTerminating, corev1.ResourceQuotaScopePriorityClass}
		}, Want: []string{
			`spec.scopes: Invalid value: ["Terminating","PriorityClass"]: field is immutable`,
		}},
		{Name: "scopes removed", Old: scoped, Change: func(q rq) { q.Spec.Scopes = nil }, Want: []string{
			`spec.scopes: Invalid value: null: field is immutable`,
		}},
		{Name: "selector may change", Old: scoped, Change: func(q rq) {
			q.Spec.ScopeSelector = &corev1.ScopeSelector{MatchExpressions: []corev1.ScopedResourceSelectorRequirement{
				{ScopeName: "PriorityClass", Operator: "In", Values: []string{"high"}}}}
		}},
		// A status write (the status changes, the spec is the stored one)
		// is checked as upstream's ValidateResourceQuotaStatusUpdate.
		{Name: "status", Change: func(q rq) {
			q.Status = corev1.ResourceQuotaStatus{Hard: list("pods", "10", "count/deployments.apps", "5"), Used: list("pods", "3")}
		}},
		{Name: "bad status", Change: func(q rq) {
			q.Status = corev1.ResourceQuotaStatus{Hard: list("pods", "1500m", "storage", "1Gi"), Used: list("pods", "-1")}
		}, Want: []string{
			`status.hard[pods]: Invalid value: "1500m": must be an integer`,
			`status.hard[storage]: Invalid value: "storage": must be a standard resource for quota`,
			`status.used[pods]: Invalid value: "-1": must be greater than or equal to 0`,
		}},
		{Name: "status without resource version", Change: func(q rq) {
			q.ResourceVersion = ""
			q.Status.Used = list("pods", "1")
		}, Want: []string{"resourceVersion: Required value"}},
		{Name: "status write does not check the spec", Old: func(q rq) { q.Spec.Hard = list("foo", "1") },
			Change: func(q rq) { q.Status.Used = list("pods", "1") }},
	})
}

func TestDefault(t *testing.T) {
	q := &corev1.ResourceQuota{
		Spec:   corev1.ResourceQuotaSpec{Hard: list("requests.cpu", "100u", "pods", "10")},
		Status: corev1.ResourceQuotaStatus{Hard: list("limits.cpu", "0.0005"), Used: list("requests.memory", "1.5n")},
	}
	strategy{}.Default(q)
	for _, c := range []struct {
		list corev1.ResourceList
		name corev1.ResourceName
		want string
	}{
		{q.Spec.Hard, "requests.cpu", "1m"},
		{q.Spec.Hard, "pods", "10"},
		{q.Status.Hard, "limits.cpu", "1m"},
		{q.Status.Used, "requests.memory", "1m"},
	} {
		if got := c.list[c.name]; got.String() != c.want {
			t.Errorf("%s: %s, want %s", c.name, got.String(), c.want)
		}
	}
	// Nothing to round: nothing changes.
	empty := &corev1.ResourceQuota{}
	strategy{}.Default(empty)
	if !reflect.DeepEqual(empty, &corev1.ResourceQuota{}) {
		t.Errorf("defaulted an empty quota to %+v", empty)
	}
}

func TestStatusHandling(t *testing.T) {
	withStatus := func() rq {
		q := valid()
		q.Status = corev1.ResourceQuotaStatus{Hard: list("pods", "10"), Used: list("pods", "4")}
		return q
	}
	// A create starts without a status.
	if q := registrytest.Created(strategy{}, withStatus()); !reflect.DeepEqual(q.Status, corev1.ResourceQuotaStatus{}) {
		t.Errorf("create kept status %+v", q.Status)
	}

	// An update of the quota keeps the stored status and takes the spec.
	old := withStatus()
	next := valid()
	next.Spec.Hard = list("pods", "20")
	next.Status = corev1.ResourceQuotaStatus{Used: list("pods", "0")}
	strategy{}.PrepareForUpdate(next, old)
	if !reflect.DeepEqual(next.Status, old.Status) || !reflect.DeepEqual(next.Spec.Hard, list("pods", "20")) {
		t.Errorf("update: spec %v, status %+v", next.Spec.Hard, next.Status)
	}

	// A status write keeps the stored spec and takes the status.
	next = withStatus()
	next.Spec = corev1.ResourceQuotaSpec{Hard: list("pods", "1"), Scopes: []corev1.ResourceQuotaScope{"BestEffort"}}
	next.Status.Used = list("pods", "5")
	strategy{}.PrepareForStatusUpdate(next, old)
	if !reflect.DeepEqual(next.Spec, old.Spec) || !reflect.DeepEqual(next.Status.Used, list("pods", "5")) {
		t.Errorf("status write: spec %+v, status %+v", next.Spec, next.Status)
	}
	var _ registry.StatusUpdater = strategy{}
}

func TestResource(t *testing.T) {
	r := Resource()
	if r.Resource != "resourcequotas" || r.Singular != "resourcequota" || !reflect.DeepEqual(r.ShortNames, []string{"quota"}) ||
		r.Categories != nil || !r.Namespaced || !r.Status || r.Generation || r.KeepStatusOnCreate || !r.ReturnDeletedObject ||
		r.Scale != nil || r.Fields != nil || r.NameValidation != nil ||
		r.Kind != corev1.SchemeGroupVersion.WithKind("ResourceQuota") || !registry.Scheme.Recognizes(r.Kind) {
		t.Errorf("unexpected discovery data: %+v", r)
	}
}

func TestColumns(t *testing.T) {
	names := []string{"Name", "Request", "Limit", "Age"}
	q := valid()
	registrytest.ExpectRow(t, Resource().Columns, q, names, []interface{}{"compute", "", "", "<unknown>"})

	// Upstream's printer test: limits.* apart, the rest in name order.
	q.Status = corev1.ResourceQuotaStatus{
		Used: list("cpu", "1", "memory", "1Gi", "pods", "1", "services", "1", "replicationcontrollers", "1",
			"resourcequotas", "1", "limits.cpu", "2", "limits.memory", "2Gi"),
		Hard: list("cpu", "100", "memory", "4Gi", "pods", "10", "services", "10", "replicationcontrollers", "10",
			"resourcequotas", "1", "limits.cpu", "200", "limits.memory", "8Gi"),
	}
	registrytest.ExpectRow(t, Resource().Columns, q, names, []interface{}{"compute",
		"cpu: 1/100, memory: 1Gi/4Gi, pods: 1/10, replicationcontrollers: 1/10, resourcequotas: 1/1, services: 1/10",
		"limits.cpu: 2/200, limits.memory: 2Gi/8Gi", "<unknown>"})

	// Only status.hard is listed, a resource not yet counted as used 0;
	// a name is a limit only when "limits" comes before its first dot.
	q.Status = corev1.ResourceQuotaStatus{
		Hard: list("requests.cpu", "1", "count/deployments.apps", "5", "limits.nvidia.com/gpu", "2", "limits", "3",
			"gold.storageclass.storage.k8s.io/requests.storage", "10Gi"),
		Used: list("requests.cpu", "500m", "secrets", "4"),
	}
	registrytest.ExpectRow(t, Resource().Columns, q, names, []interface{}{"compute",
		"count/deployments.apps: 0/5, gold.storageclass.storage.k8s.io/requests.storage: 0/10Gi, limits: 0/3, requests.cpu: 500m/1",
		"limits.nvidia.com/gpu: 0/2", "<unknown>"})
}
