package quota

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/utils/ptr"
)

func TestUpdateFilterPods(t *testing.T) {
	running := webPod()
	running.Status.ContainerStatuses = []corev1.ContainerStatus{{
		Name:      "nginx",
		Ready:     true,
		Resources: &corev1.ResourceRequirements{Requests: rl("cpu", "100m", "memory", "128Mi"), Limits: rl("cpu", "500m", "memory", "256Mi")},
	}}
	change := func(f func(*corev1.Pod)) *corev1.Pod {
		p := running.DeepCopy()
		f(p)
		return p
	}
	for _, tc := range []struct {
		name     string
		old, cur *corev1.Pod
		want     bool
	}{
		{"no change", running, running.DeepCopy(), false},
		{"became not ready", running, change(func(p *corev1.Pod) { p.Status.ContainerStatuses[0].Ready = false }), false},
		{"labels changed", running, change(func(p *corev1.Pod) { p.Labels = map[string]string{"tier": "web"} }), false},
		{"succeeded", running, change(func(p *corev1.Pod) { p.Status.Phase = corev1.PodSucceeded }), true},
		{"failed", running, change(func(p *corev1.Pod) { p.Status.Phase = corev1.PodFailed }), true},
		{"already failed", change(func(p *corev1.Pod) { p.Status.Phase = corev1.PodFailed }), change(func(p *corev1.Pod) {
			p.Status.Phase = corev1.PodFailed
			p.Status.Message = "evicted"
		}), false},
		{"deleted, grace period running", running, change(func(p *corev1.Pod) {
			p.DeletionTimestamp = &metav1.Time{Time: time.Now()}
			p.DeletionGracePeriodSeconds = ptr.To[int64](30)
		}), false},
		{"deleted, grace period over", running, change(func(p *corev1.Pod) {
			p.DeletionTimestamp = &metav1.Time{Time: time.Now().Add(-time.Hour)}
			p.DeletionGracePeriodSeconds = ptr.To[int64](30)
		}), true},
		{"active deadline set", running, change(func(p *corev1.Pod) { p.Spec.ActiveDeadlineSeconds = ptr.To[int64](60) }), true},
		{"active deadline changed", change(func(p *corev1.Pod) { p.Spec.ActiveDeadlineSeconds = ptr.To[int64](60) }),
			change(func(p *corev1.Pod) { p.Spec.ActiveDeadlineSeconds = ptr.To[int64](30) }), false},
		{"resized", running, change(func(p *corev1.Pod) {
			p.Status.ContainerStatuses[0].Resources.Requests = rl("cpu", "50m", "memory", "128Mi")
		}), true},
		{"same resources, other notation", running, change(func(p *corev1.Pod) {
			p.Status.ContainerStatuses[0].Resources.Requests = rl("cpu", "0.1", "memory", "128Mi")
		}), false},
		{"init container resized", change(func(p *corev1.Pod) {
			p.Status.InitContainerStatuses = []corev1.ContainerStatus{{Name: "sidecar", Resources: &corev1.ResourceRequirements{Requests: rl("cpu", "100m")}}}
		}), change(func(p *corev1.Pod) {
			p.Status.InitContainerStatuses = []corev1.ContainerStatus{{Name: "sidecar", Resources: &corev1.ResourceRequirements{Requests: rl("cpu", "200m")}}}
		}), true},
		{"container status first reported", change(func(p *corev1.Pod) { p.Status.ContainerStatuses = nil }), running, false},
	} {
		if got := UpdateFilter(podsResource, tc.old, tc.cur); got != tc.want {
			t.Errorf("%s: %v, want %v", tc.name, got, tc.want)
		}
	}
}

func TestUpdateFilterServices(t *testing.T) {
	typed := func(typ corev1.ServiceType) *corev1.Service { return service("web", typ, 0) }
	for _, tc := range []struct {
		old, cur corev1.ServiceType
		want     bool
	}{
		{corev1.ServiceTypeClusterIP, corev1.ServiceTypeClusterIP, false},
		{corev1.ServiceTypeNodePort, corev1.ServiceTypeClusterIP, true},
		{corev1.ServiceTypeLoadBalancer, corev1.ServiceTypeClusterIP, true},
		{corev1.ServiceTypeLoadBalancer, corev1.ServiceTypeNodePort, true},
		{corev1.ServiceTypeClusterIP, corev1.ServiceTypeNodePort, true},
		{corev1.ServiceTypeClusterIP, corev1.ServiceTypeExternalName, false},
		{corev1.ServiceTypeNodePort, corev1.ServiceTypeNodePort, false},
	} {
		if got := UpdateFilter(servicesResource, typed(tc.old), typed(tc.cur)); got != tc.want {
			t.Errorf("%s -> %s: %v, want %v", tc.old, tc.cur, got, tc.want)
		}
	}
	// Ports are charged at admission; the filter looks at the type only.
	if UpdateFilter(servicesResource, service("web", corev1.ServiceTypeNodePort, 0, 0), service("web", corev1.ServiceTypeNodePort, 0)) {
		t.Error("a port removed: true")
	}
}

func TestUpdateFilterOthers(t *testing.T) {
	pvc := claim("data", "gold", "10Gi")
	if !UpdateFilter(pvcsResource, pvc, pvc.DeepCopy()) {
		t.Error("claims: an update gives false")
	}
	smaller := claimWith(pvc.DeepCopy(), func(p *corev1.PersistentVolumeClaim) { p.Spec.Resources.Requests = rl("storage", "5Gi") })
	if !UpdateFilter(pvcsResource, pvc, smaller) {
		t.Error("claims: a smaller request gives false")
	}
	for _, gvr := range []schema.GroupVersionResource{
		corev1.SchemeGroupVersion.WithResource("secrets"),
		corev1.SchemeGroupVersion.WithResource("configmaps"),
		{Group: "apps", Version: "v1", Resource: "deployments"},
	} {
		if UpdateFilter(gvr, &corev1.Secret{}, &corev1.Secret{}) {
			t.Errorf("%v: true", gvr)
		}
	}
	// Objects of another type than the resource's are not an update of it.
	if UpdateFilter(podsResource, &corev1.Service{}, &corev1.Service{}) || UpdateFilter(servicesResource, webPod(), webPod()) ||
		UpdateFilter(pvcsResource, webPod(), pvc) {
		t.Error("mistyped objects: true")
	}
}
