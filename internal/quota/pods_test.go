package quota

import (
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apiserver/pkg/admission"
	quotav1 "k8s.io/apiserver/pkg/quota/v1"
	testingclock "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"
)

var now = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

func container(name string, requests, limits corev1.ResourceList) corev1.Container {
	return corev1.Container{Name: name, Image: "nginx", Resources: corev1.ResourceRequirements{Requests: requests, Limits: limits}}
}

// webPod is a Burstable nginx pod.
func webPod() *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "web"},
		Spec: corev1.PodSpec{Containers: []corev1.Container{
			container("nginx", rl("cpu", "100m", "memory", "128Mi"), rl("cpu", "500m", "memory", "256Mi")),
		}},
		Status: corev1.PodStatus{Phase: corev1.PodRunning},
	}
}

func withMeta(pod *corev1.Pod, namespace, name string) *corev1.Pod {
	pod.Namespace, pod.Name = namespace, name
	return pod
}

func podWith(change func(*corev1.Pod)) *corev1.Pod {
	pod := webPod()
	change(pod)
	return pod
}

func TestPodUsage(t *testing.T) {
	e := NewPodEvaluator(nil, testingclock.NewFakePassiveClock(now))
	webUsage := rl("count/pods", "1", "pods", "1",
		"cpu", "100m", "requests.cpu", "100m", "limits.cpu", "500m",
		"memory", "128Mi", "requests.memory", "128Mi", "limits.memory", "256Mi")
	for _, tc := range []struct {
		name string
		pod  *corev1.Pod
		want corev1.ResourceList
	}{
		{"burstable", webPod(), webUsage},
		{"best effort", podWith(func(p *corev1.Pod) { p.Spec.Containers[0].Resources = corev1.ResourceRequirements{} }),
			rl("count/pods", "1", "pods", "1")},
		{"pending", podWith(func(p *corev1.Pod) { p.Status = corev1.PodStatus{} }), webUsage},
		{"init container above the sum of containers", podWith(func(p *corev1.Pod) {
			p.Spec.InitContainers = []corev1.Container{container("migrate", rl("cpu", "2", "memory", "1Gi"), nil)}
			p.Spec.Containers = []corev1.Container{
				container("app", rl("cpu", "500m", "memory", "256Mi"), nil),
				container("metrics", rl("cpu", "250m", "memory", "128Mi"), nil),
			}
		}), rl("count/pods", "1", "pods", "1", "cpu", "2", "requests.cpu", "2", "memory", "1Gi", "requests.memory", "1Gi")},
		{"sidecar init container runs beside the others", podWith(func(p *corev1.Pod) {
			sidecar := container("log-shipper", rl("cpu", "100m", "memory", "64Mi"), nil)
			sidecar.RestartPolicy = ptr.To(corev1.ContainerRestartPolicyAlways)
			p.Spec.InitContainers = []corev1.Container{sidecar, container("setup", rl("cpu", "1"), nil)}
			p.Spec.Containers = []corev1.Container{container("app", rl("cpu", "500m"), nil)}
		}), rl("count/pods", "1", "pods", "1", "cpu", "1100m", "requests.cpu", "1100m", "memory", "64Mi", "requests.memory", "64Mi")},
		{"hugepages and ephemeral storage", podWith(func(p *corev1.Pod) {
			p.Spec.Containers = []corev1.Container{container("db",
				rl("memory", "1Gi", "hugepages-2Mi", "128Mi", "ephemeral-storage", "1Gi"),
				rl("memory", "1Gi", "hugepages-2Mi", "128Mi", "ephemeral-storage", "2Gi"))}
		}), rl("count/pods", "1", "pods", "1",
			"memory", "1Gi", "requests.memory", "1Gi", "limits.memory", "1Gi",
			"hugepages-2Mi", "128Mi", "requests.hugepages-2Mi", "128Mi",
			"ephemeral-storage", "1Gi", "requests.ephemeral-storage", "1Gi", "limits.ephemeral-storage", "2Gi")},
		{"extended resources", podWith(func(p *corev1.Pod) {
			p.Spec.Containers = []corev1.Container{container("trainer",
				rl("cpu", "1", "nvidia.com/gpu", "2", "deviceclass.resource.kubernetes.io/gpu.example.com", "1"),
				rl("cpu", "1", "nvidia.com/gpu", "2", "deviceclass.resource.kubernetes.io/gpu.example.com", "1"))}
		}), rl("count/pods", "1", "pods", "1", "cpu", "1", "requests.cpu", "1", "limits.cpu", "1",
			"requests.nvidia.com/gpu", "2", "requests.deviceclass.resource.kubernetes.io/gpu.example.com", "1")},
		{"overhead", podWith(func(p *corev1.Pod) {
			p.Spec.RuntimeClassName = ptr.To("kata")
			p.Spec.Overhead = rl("cpu", "250m", "memory", "120Mi")
		}), rl("count/pods", "1", "pods", "1",
			"cpu", "350m", "requests.cpu", "350m", "limits.cpu", "750m",
			"memory", "248Mi", "requests.memory", "248Mi", "limits.memory", "376Mi")},
		{"pod-level resources", podWith(func(p *corev1.Pod) {
			p.Spec.Resources = &corev1.ResourceRequirements{Requests: rl("cpu", "1", "memory", "1Gi"), Limits: rl("cpu", "2", "memory", "2Gi")}
			p.Spec.Containers = []corev1.Container{container("app", nil, nil), container("sidecar", rl("ephemeral-storage", "500Mi"), nil)}
		}), rl("count/pods", "1", "pods", "1",
			"cpu", "1", "requests.cpu", "1", "limits.cpu", "2",
			"memory", "1Gi", "requests.memory", "1Gi", "limits.memory", "2Gi",
			"ephemeral-storage", "500Mi", "requests.ephemeral-storage", "500Mi")},
		{"resize down not yet actuated", podWith(func(p *corev1.Pod) {
			p.Spec.Containers[0].Resources.Requests = rl("cpu", "100m", "memory", "128Mi")
			p.Status.ContainerStatuses = []corev1.ContainerStatus{{
				Name:               "nginx",
				AllocatedResources: rl("cpu", "100m", "memory", "128Mi"),
				Resources:          &corev1.ResourceRequirements{Requests: rl("cpu", "400m", "memory", "128Mi"), Limits: rl("cpu", "500m", "memory", "256Mi")},
			}}
		}), rl("count/pods", "1", "pods", "1",
			"cpu", "400m", "requests.cpu", "400m", "limits.cpu", "500m",
			"memory", "128Mi", "requests.memory", "128Mi", "limits.memory", "256Mi")},
		{"succeeded", podWith(func(p *corev1.Pod) { p.Status.Phase = corev1.PodSucceeded }), rl("count/pods", "1")},
		{"failed", podWith(func(p *corev1.Pod) { p.Status.Phase = corev1.PodFailed }), rl("count/pods", "1")},
		{"deleted, grace period over", podWith(func(p *corev1.Pod) {
			p.DeletionTimestamp = &metav1.Time{Time: now.Add(-time.Minute)}
			p.DeletionGracePeriodSeconds = ptr.To[int64](30)
		}), rl("count/pods", "1")},
		{"deleted, in its grace period", podWith(func(p *corev1.Pod) {
			p.DeletionTimestamp = &metav1.Time{Time: now.Add(-10 * time.Second)}
			p.DeletionGracePeriodSeconds = ptr.To[int64](30)
		}), webUsage},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := e.Usage(tc.pod)
			if err != nil {
				t.Fatal(err)
			}
			checkList(t, "usage", got, tc.want)
		})
	}
	if _, err := e.Usage(&corev1.Service{}); err == nil {
		t.Error("usage of a service: no error")
	}
}

func TestPodUsageFollowsClock(t *testing.T) {
	clk := testingclock.NewFakePassiveClock(now)
	e := NewPodEvaluator(nil, clk)
	pod := podWith(func(p *corev1.Pod) {
		p.DeletionTimestamp = &metav1.Time{Time: now}
		p.DeletionGracePeriodSeconds = ptr.To[int64](30)
	})
	if u, _ := e.Usage(pod); len(u) == 1 {
		t.Errorf("charged nothing at deletion: %s", fmtList(u))
	}
	clk.SetTime(now.Add(31 * time.Second))
	if u, _ := e.Usage(pod); len(u) != 1 {
		t.Errorf("charged after the grace period: %s", fmtList(u))
	}
}

func TestPodMatchingResources(t *testing.T) {
	e := NewPodEvaluator(nil, nil)
	got := e.MatchingResources([]corev1.ResourceName{
		"pods", "count/pods", "requests.cpu", "limits.memory", "cpu", "ephemeral-storage", "limits.ephemeral-storage",
		"hugepages-2Mi", "requests.hugepages-1Gi", "limits.hugepages-2Mi",
		"requests.nvidia.com/gpu", "nvidia.com/gpu", "limits.nvidia.com/gpu",
		"requests.deviceclass.resource.kubernetes.io/gpu.example.com",
		"services", "secrets", "requests.storage", "count/deployments.apps",
	})
	want := []corev1.ResourceName{
		"count/pods", "cpu", "ephemeral-storage", "hugepages-2Mi", "limits.ephemeral-storage", "limits.memory", "pods",
		"requests.cpu", "requests.deviceclass.resource.kubernetes.io/gpu.example.com", "requests.hugepages-1Gi", "requests.nvidia.com/gpu",
	}
	if !equalNames(got, want) {
		t.Errorf("matching resources\n got  %v\n want %v", got, want)
	}
}

func equalNames(a, b []corev1.ResourceName) bool {
	return quotav1.Equals(namesList(a), namesList(b)) && len(a) == len(b)
}

func namesList(names []corev1.ResourceName) corev1.ResourceList {
	out := corev1.ResourceList{}
	for _, n := range names {
		out[n] = rl("x", "1")["x"]
	}
	return out
}

func scope(name corev1.ResourceQuotaScope, op corev1.ScopeSelectorOperator, values ...string) corev1.ScopedResourceSelectorRequirement {
	return corev1.ScopedResourceSelectorRequirement{ScopeName: name, Operator: op, Values: values}
}

func exists(name corev1.ResourceQuotaScope) corev1.ScopedResourceSelectorRequirement {
	return scope(name, corev1.ScopeSelectorOpExists)
}

func TestPodScopes(t *testing.T) {
	e := NewPodEvaluator(nil, nil)
	bestEffort := podWith(func(p *corev1.Pod) { p.Spec.Containers[0].Resources = corev1.ResourceRequirements{} })
	job := podWith(func(p *corev1.Pod) { p.Spec.ActiveDeadlineSeconds = ptr.To[int64](600) })
	critical := podWith(func(p *corev1.Pod) { p.Spec.PriorityClassName = "system-cluster-critical" })
	high := podWith(func(p *corev1.Pod) { p.Spec.PriorityClassName = "high" })
	onlyStorage := podWith(func(p *corev1.Pod) {
		p.Spec.Containers[0].Resources = corev1.ResourceRequirements{Requests: rl("ephemeral-storage", "1Gi")}
	})
	zeroCPU := podWith(func(p *corev1.Pod) {
		p.Spec.Containers[0].Resources = corev1.ResourceRequirements{Requests: rl("cpu", "0"), Limits: rl("cpu", "0")}
	})
	limitsInInit := podWith(func(p *corev1.Pod) {
		p.Spec.Containers[0].Resources = corev1.ResourceRequirements{}
		p.Spec.InitContainers = []corev1.Container{container("setup", nil, rl("memory", "64Mi"))}
	})
	podLevelOnly := podWith(func(p *corev1.Pod) {
		p.Spec.Containers[0].Resources = corev1.ResourceRequirements{}
		p.Spec.Resources = &corev1.ResourceRequirements{Limits: rl("memory", "1Gi")}
	})
	podLevelNone := podWith(func(p *corev1.Pod) {
		// pod-level resources of no cpu or memory: the containers decide.
		p.Spec.Containers[0].Resources = corev1.ResourceRequirements{}
		p.Spec.Resources = &corev1.ResourceRequirements{Requests: rl("ephemeral-storage", "1Gi")}
	})
	statusSaysGuaranteed := podWith(func(p *corev1.Pod) {
		p.Spec.Containers[0].Resources = corev1.ResourceRequirements{}
		p.Status.QOSClass = corev1.PodQOSGuaranteed
	})
	affinity := func(a *corev1.Affinity) *corev1.Pod {
		return podWith(func(p *corev1.Pod) { p.Spec.Affinity = a })
	}
	term := func(namespaces []string, sel *metav1.LabelSelector) corev1.PodAffinityTerm {
		return corev1.PodAffinityTerm{
			LabelSelector:     &metav1.LabelSelector{MatchLabels: map[string]string{"app": "cache"}},
			TopologyKey:       "kubernetes.io/hostname",
			Namespaces:        namespaces,
			NamespaceSelector: sel,
		}
	}
	sameNamespace := affinity(&corev1.Affinity{PodAffinity: &corev1.PodAffinity{
		RequiredDuringSchedulingIgnoredDuringExecution: []corev1.PodAffinityTerm{term(nil, nil)},
	}})
	requiredOther := affinity(&corev1.Affinity{PodAffinity: &corev1.PodAffinity{
		RequiredDuringSchedulingIgnoredDuringExecution: []corev1.PodAffinityTerm{term(nil, nil), term([]string{"cache"}, nil)},
	}})
	preferredSelector := affinity(&corev1.Affinity{PodAffinity: &corev1.PodAffinity{
		PreferredDuringSchedulingIgnoredDuringExecution: []corev1.WeightedPodAffinityTerm{{Weight: 10, PodAffinityTerm: term(nil, &metav1.LabelSelector{})}},
	}})
	antiRequired := affinity(&corev1.Affinity{PodAntiAffinity: &corev1.PodAntiAffinity{
		RequiredDuringSchedulingIgnoredDuringExecution: []corev1.PodAffinityTerm{term([]string{"other"}, nil)},
	}})
	antiPreferred := affinity(&corev1.Affinity{PodAntiAffinity: &corev1.PodAntiAffinity{
		PreferredDuringSchedulingIgnoredDuringExecution: []corev1.WeightedPodAffinityTerm{{Weight: 1, PodAffinityTerm: term([]string{"other"}, nil)}},
	}})

	terminating := exists(corev1.ResourceQuotaScopeTerminating)
	notTerminating := exists(corev1.ResourceQuotaScopeNotTerminating)
	be := exists(corev1.ResourceQuotaScopeBestEffort)
	notBE := exists(corev1.ResourceQuotaScopeNotBestEffort)
	anyPriority := exists(corev1.ResourceQuotaScopePriorityClass)
	noPriority := scope(corev1.ResourceQuotaScopePriorityClass, corev1.ScopeSelectorOpDoesNotExist)
	inCritical := scope(corev1.ResourceQuotaScopePriorityClass, corev1.ScopeSelectorOpIn, "system-cluster-critical", "system-node-critical")
	notInCritical := scope(corev1.ResourceQuotaScopePriorityClass, corev1.ScopeSelectorOpNotIn, "system-cluster-critical")
	crossNamespace := exists(corev1.ResourceQuotaScopeCrossNamespacePodAffinity)
	vac := exists(corev1.ResourceQuotaScopeVolumeAttributesClass)
	all := []corev1.ScopedResourceSelectorRequirement{terminating, notTerminating, be, notBE, anyPriority, noPriority, inCritical, notInCritical, crossNamespace, vac}

	for _, tc := range []struct {
		name string
		pod  *corev1.Pod
		want []corev1.ScopedResourceSelectorRequirement
	}{
		{"burstable", webPod(), []corev1.ScopedResourceSelectorRequirement{notTerminating, notBE, noPriority, notInCritical}},
		{"best effort", bestEffort, []corev1.ScopedResourceSelectorRequirement{notTerminating, be, noPriority, notInCritical}},
		{"active deadline", job, []corev1.ScopedResourceSelectorRequirement{terminating, notBE, noPriority, notInCritical}},
		{"critical", critical, []corev1.ScopedResourceSelectorRequirement{notTerminating, notBE, anyPriority, inCritical}},
		{"high priority", high, []corev1.ScopedResourceSelectorRequirement{notTerminating, notBE, anyPriority, notInCritical}},
		{"only ephemeral storage", onlyStorage, []corev1.ScopedResourceSelectorRequirement{notTerminating, be, noPriority, notInCritical}},
		{"zero cpu", zeroCPU, []corev1.ScopedResourceSelectorRequirement{notTerminating, be, noPriority, notInCritical}},
		{"init container limit", limitsInInit, []corev1.ScopedResourceSelectorRequirement{notTerminating, notBE, noPriority, notInCritical}},
		{"pod-level limit", podLevelOnly, []corev1.ScopedResourceSelectorRequirement{notTerminating, notBE, noPriority, notInCritical}},
		{"pod-level storage only", podLevelNone, []corev1.ScopedResourceSelectorRequirement{notTerminating, be, noPriority, notInCritical}},
		{"qos class in status", statusSaysGuaranteed, []corev1.ScopedResourceSelectorRequirement{notTerminating, notBE, noPriority, notInCritical}},
		{"affinity in its namespace", sameNamespace, []corev1.ScopedResourceSelectorRequirement{notTerminating, notBE, noPriority, notInCritical}},
		{"required affinity to another namespace", requiredOther, []corev1.ScopedResourceSelectorRequirement{notTerminating, notBE, noPriority, notInCritical, crossNamespace}},
		{"preferred affinity by namespace selector", preferredSelector, []corev1.ScopedResourceSelectorRequirement{notTerminating, notBE, noPriority, notInCritical, crossNamespace}},
		{"required anti-affinity", antiRequired, []corev1.ScopedResourceSelectorRequirement{notTerminating, notBE, noPriority, notInCritical, crossNamespace}},
		{"preferred anti-affinity", antiPreferred, []corev1.ScopedResourceSelectorRequirement{notTerminating, notBE, noPriority, notInCritical, crossNamespace}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := e.MatchingScopes(tc.pod, all)
			if err != nil {
				t.Fatal(err)
			}
			if !equalScopes(got, tc.want) {
				t.Errorf("scopes\n got  %v\n want %v", got, tc.want)
			}
		})
	}

	if _, err := e.MatchingScopes(webPod(), []corev1.ScopedResourceSelectorRequirement{scope(corev1.ResourceQuotaScopePriorityClass, "Bad", "x")}); err == nil ||
		!strings.Contains(err.Error(), `"Bad" is not a valid scope selector operator`) {
		t.Errorf("bad operator: %v", err)
	}
	if _, err := e.MatchingScopes(webPod(), []corev1.ScopedResourceSelectorRequirement{scope(corev1.ResourceQuotaScopePriorityClass, corev1.ScopeSelectorOpIn)}); err == nil {
		t.Error("In without values: no error")
	}
}

func equalScopes(a, b []corev1.ScopedResourceSelectorRequirement) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i].ScopeName != b[i].ScopeName || a[i].Operator != b[i].Operator || strings.Join(a[i].Values, ",") != strings.Join(b[i].Values, ",") {
			return false
		}
	}
	return true
}

func TestPodMatches(t *testing.T) {
	e := NewPodEvaluator(nil, nil)
	quota := func(hard corev1.ResourceList, scopes []corev1.ResourceQuotaScope, selector ...corev1.ScopedResourceSelectorRequirement) *corev1.ResourceQuota {
		q := &corev1.ResourceQuota{Spec: corev1.ResourceQuotaSpec{Hard: hard, Scopes: scopes}, Status: corev1.ResourceQuotaStatus{Hard: hard}}
		if len(selector) > 0 {
			q.Spec.ScopeSelector = &corev1.ScopeSelector{MatchExpressions: selector}
		}
		return q
	}
	job := podWith(func(p *corev1.Pod) { p.Spec.ActiveDeadlineSeconds = ptr.To[int64](0) })
	critical := podWith(func(p *corev1.Pod) { p.Spec.PriorityClassName = "system-node-critical" })
	for _, tc := range []struct {
		name  string
		quota *corev1.ResourceQuota
		pod   *corev1.Pod
		want  bool
	}{
		{"compute quota", quota(rl("requests.cpu", "4", "limits.memory", "8Gi"), nil), webPod(), true},
		{"quota of other kinds", quota(rl("services", "10", "secrets", "10"), nil), webPod(), false},
		{"count quota", quota(rl("count/pods", "100"), nil), webPod(), true},
		{"hugepages quota", quota(rl("requests.hugepages-2Mi", "1Gi"), nil), webPod(), true},
		{"not-terminating quota, long-running pod", quota(rl("pods", "10"), []corev1.ResourceQuotaScope{corev1.ResourceQuotaScopeNotTerminating}), webPod(), true},
		{"terminating quota, long-running pod", quota(rl("pods", "10"), []corev1.ResourceQuotaScope{corev1.ResourceQuotaScopeTerminating}), webPod(), false},
		{"terminating quota, deadline 0", quota(rl("pods", "10"), []corev1.ResourceQuotaScope{corev1.ResourceQuotaScopeTerminating}), job, true},
		{"best effort and terminating, burstable job", quota(rl("pods", "10"), []corev1.ResourceQuotaScope{corev1.ResourceQuotaScopeBestEffort, corev1.ResourceQuotaScopeTerminating}), job, false},
		{"priority selector, critical pod", quota(rl("pods", "10"), nil, scope(corev1.ResourceQuotaScopePriorityClass, corev1.ScopeSelectorOpIn, "system-node-critical")), critical, true},
		{"priority selector, plain pod", quota(rl("pods", "10"), nil, scope(corev1.ResourceQuotaScopePriorityClass, corev1.ScopeSelectorOpIn, "system-node-critical")), webPod(), false},
		{"scope of PVCs", quota(rl("pods", "10"), nil, exists(corev1.ResourceQuotaScopeVolumeAttributesClass)), webPod(), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := e.Matches(tc.quota, tc.pod)
			if err != nil {
				t.Fatal(err)
			}
			if got != tc.want {
				t.Errorf("matches: %v, want %v", got, tc.want)
			}
		})
	}
}

func TestPodConstraints(t *testing.T) {
	e := NewPodEvaluator(nil, nil)
	computeQuota := []corev1.ResourceName{"pods", "requests.cpu", "requests.memory", "limits.cpu", "limits.memory"}
	for _, tc := range []struct {
		name     string
		required []corev1.ResourceName
		pod      *corev1.Pod
		want     string
	}{
		{"all stated", computeQuota, webPod(), ""},
		{"quota of no cpu or memory", []corev1.ResourceName{"pods", "requests.storage", "requests.ephemeral-storage", "requests.nvidia.com/gpu"},
			podWith(func(p *corev1.Pod) { p.Spec.Containers[0].Resources = corev1.ResourceRequirements{} }), ""},
		{"no resources", computeQuota,
			podWith(func(p *corev1.Pod) { p.Spec.Containers[0].Resources = corev1.ResourceRequirements{} }),
			"must specify limits.cpu for: nginx; limits.memory for: nginx; requests.cpu for: nginx; requests.memory for: nginx"},
		{"limits missing", []corev1.ResourceName{"limits.cpu", "limits.memory", "requests.cpu"},
			podWith(func(p *corev1.Pod) { p.Spec.Containers[0].Resources.Limits = rl("memory", "256Mi") }),
			"must specify limits.cpu for: nginx"},
		{"bare cpu and memory", []corev1.ResourceName{"cpu", "memory"},
			podWith(func(p *corev1.Pod) { p.Spec.Containers[0].Resources.Requests = rl("cpu", "100m") }),
			"must specify memory for: nginx"},
		{"several containers", []corev1.ResourceName{"requests.cpu", "requests.memory"},
			podWith(func(p *corev1.Pod) {
				p.Spec.Containers = append(p.Spec.Containers,
					container("sidecar", rl("memory", "64Mi"), nil),
					container("exporter", nil, nil))
			}),
			"must specify requests.cpu for: exporter,sidecar; requests.memory for: exporter"},
		{"init container", []corev1.ResourceName{"limits.memory"},
			podWith(func(p *corev1.Pod) {
				p.Spec.InitContainers = []corev1.Container{container("migrate", rl("memory", "64Mi"), nil), container("wait", nil, rl("memory", "16Mi"))}
			}),
			"must specify limits.memory for: migrate"},
		{"pod-level resources", computeQuota,
			podWith(func(p *corev1.Pod) {
				p.Spec.Containers[0].Resources = corev1.ResourceRequirements{}
				p.Spec.Resources = &corev1.ResourceRequirements{Requests: rl("cpu", "1")}
			}), ""},
		{"pod-level resources of no cpu or memory", []corev1.ResourceName{"requests.cpu"},
			podWith(func(p *corev1.Pod) {
				p.Spec.Containers[0].Resources = corev1.ResourceRequirements{}
				p.Spec.Resources = &corev1.ResourceRequirements{Requests: rl("ephemeral-storage", "1Gi")}
			}), "must specify requests.cpu for: nginx"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := e.Constraints(tc.required, tc.pod)
			got := ""
			if err != nil {
				got = err.Error()
			}
			if got != tc.want {
				t.Errorf("constraints: %q, want %q", got, tc.want)
			}
		})
	}
	if err := e.Constraints(nil, &corev1.Service{}); err == nil {
		t.Error("constraints of a service: no error")
	}
}

func TestPodHandles(t *testing.T) {
	e := NewPodEvaluator(nil, nil)
	deadline := func(s *int64) *corev1.Pod { return podWith(func(p *corev1.Pod) { p.Spec.ActiveDeadlineSeconds = s }) }
	for _, tc := range []struct {
		name        string
		obj, old    runtime.Object
		subresource string
		op          admission.Operation
		want        bool
	}{
		{"create", webPod(), nil, "", admission.Create, true},
		{"update, same scope", deadline(ptr.To[int64](60)), deadline(ptr.To[int64](30)), "", admission.Update, false},
		{"update, deadline set", deadline(ptr.To[int64](60)), deadline(nil), "", admission.Update, true},
		{"update, deadline cleared", deadline(nil), deadline(ptr.To[int64](60)), "", admission.Update, true},
		{"update of no pods", nil, nil, "", admission.Update, false},
		{"delete", nil, webPod(), "", admission.Delete, false},
		{"connect", nil, nil, "exec", admission.Connect, false},
		{"resize", webPod(), webPod(), "resize", admission.Update, true},
		{"status", webPod(), webPod(), "status", admission.Update, false},
		{"binding", nil, nil, "binding", admission.Create, false},
		{"ephemeral containers", webPod(), webPod(), "ephemeralcontainers", admission.Update, false},
	} {
		if got := e.Handles(attrs(tc.obj, tc.old, "pods", tc.subresource, tc.op)); got != tc.want {
			t.Errorf("%s: handles %v, want %v", tc.name, got, tc.want)
		}
	}
}
