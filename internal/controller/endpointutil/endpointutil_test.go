package endpointutil

import (
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/sets"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
)

func TestFindPort(t *testing.T) {
	always := corev1.ContainerRestartPolicyAlways
	pod := &corev1.Pod{Spec: corev1.PodSpec{
		InitContainers: []corev1.Container{
			{Name: "init", Ports: []corev1.ContainerPort{{Name: "sidecar", ContainerPort: 1, Protocol: corev1.ProtocolTCP}}},
			{Name: "proxy", RestartPolicy: &always, Ports: []corev1.ContainerPort{{Name: "sidecar", ContainerPort: 15001, Protocol: corev1.ProtocolTCP}}},
		},
		Containers: []corev1.Container{{Name: "app", Ports: []corev1.ContainerPort{
			{Name: "dns", ContainerPort: 5353, Protocol: corev1.ProtocolUDP},
			{Name: "http", ContainerPort: 8080, Protocol: corev1.ProtocolTCP},
		}}},
	}}
	for _, tc := range []struct {
		target intstr.IntOrString
		proto  corev1.Protocol
		want   string
	}{
		{intstr.FromInt32(80), corev1.ProtocolTCP, "80 true"},
		{intstr.FromString("http"), corev1.ProtocolTCP, "8080 true"},
		{intstr.FromString("dns"), corev1.ProtocolTCP, "0 false"}, // protocol must match
		{intstr.FromString("dns"), corev1.ProtocolUDP, "5353 true"},
		{intstr.FromString("sidecar"), corev1.ProtocolTCP, "15001 true"},
		{intstr.FromString("missing"), corev1.ProtocolTCP, "0 false"},
	} {
		port, ok := FindPort(pod, &corev1.ServicePort{TargetPort: tc.target, Protocol: tc.proto})
		if got := fmt.Sprint(port, " ", ok); got != tc.want {
			t.Errorf("%s/%s: got %s, want %s", tc.target.String(), tc.proto, got, tc.want)
		}
	}
}

func TestServicesToSync(t *testing.T) {
	indexer := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{})
	for name, sel := range map[string]map[string]string{"a": {"app": "a"}, "b": {"app": "b"}, "all": {}, "none": nil} {
		_ = indexer.Add(&corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns"}, Spec: corev1.ServiceSpec{Selector: sel}})
	}
	lister := corelisters.NewServiceLister(indexer)
	pod := func(rv, app string, ready bool) *corev1.Pod {
		status := corev1.ConditionFalse
		if ready {
			status = corev1.ConditionTrue
		}
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "ns", ResourceVersion: rv, Labels: map[string]string{"app": app}},
			Status: corev1.PodStatus{Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: status}}}}
	}
	for _, tc := range []struct {
		name     string
		old, cur *corev1.Pod
		want     []string
	}{
		{"add", nil, pod("1", "a", false), []string{"ns/a", "ns/all"}},
		{"delete", pod("1", "b", true), nil, []string{"ns/all", "ns/b"}},
		{"resync", pod("1", "a", false), pod("1", "a", true), nil},
		{"irrelevant", pod("1", "a", false), pod("2", "a", false), nil},
		{"ready", pod("1", "a", false), pod("2", "a", true), []string{"ns/a", "ns/all"}},
		{"relabel", pod("1", "a", false), pod("2", "b", false), []string{"ns/a", "ns/b"}},
		{"relabel and ready", pod("1", "a", false), pod("2", "b", true), []string{"ns/a", "ns/all", "ns/b"}},
	} {
		if got := sets.List(ServicesToSync(lister, tc.old, tc.cur)); fmt.Sprint(got) != fmt.Sprint(tc.want) {
			t.Errorf("%s: %v, want %v", tc.name, got, tc.want)
		}
	}
}

func TestSliceTrackerStaleness(t *testing.T) {
	tr := NewSliceTracker()
	slice := func(uid string, gen int64) *discoveryv1.EndpointSlice {
		return &discoveryv1.EndpointSlice{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", UID: types.UID(uid), Generation: gen,
			Labels: map[string]string{discoveryv1.LabelServiceName: "web"}}}
	}
	if tr.Stale("ns", "web", "svc-1", nil) {
		t.Error("an untracked Service is stale")
	}
	tr.Written(slice("s1", 2))
	if !tr.ShouldSync(slice("s1", 3)) || tr.ShouldSync(slice("s1", 2)) {
		t.Error("ShouldSync must ignore the controller's own write and notice newer ones")
	}
	if !tr.Stale("ns", "web", "svc-1", []*discoveryv1.EndpointSlice{slice("s1", 1)}) {
		t.Error("a cached slice older than written is not stale")
	}
	if !tr.Stale("ns", "web", "svc-1", nil) {
		t.Error("a written slice missing from the cache is not stale")
	}
	tr.Deleted(slice("s1", 2))
	if !tr.Stale("ns", "web", "svc-1", []*discoveryv1.EndpointSlice{slice("s1", 2)}) {
		t.Error("a deleted slice still cached is not stale")
	}
	if !tr.ObserveDeletion(slice("s1", 2)) || tr.ObserveDeletion(slice("s2", 1)) {
		t.Error("only the controller's own deletions are expected")
	}
	tr.Written(slice("s3", 1))
	if tr.Stale("ns", "web", "svc-2", nil) {
		t.Error("a recreated Service inherits the old one's slices")
	}
}

func TestTriggerTimes(t *testing.T) {
	tt := NewTriggerTimes()
	created := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "ns", CreationTimestamp: metav1.NewTime(created)}}
	pod := func(name string, at time.Time) *corev1.Pod {
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name}, Status: corev1.PodStatus{Conditions: []corev1.PodCondition{
			{Type: corev1.PodReady, Status: corev1.ConditionTrue, LastTransitionTime: metav1.NewTime(at)}}}}
	}
	t1, t2 := created.Add(time.Minute), created.Add(2*time.Minute)
	if got := tt.Compute(svc, []*corev1.Pod{pod("a", t1)}); !got.Equal(created) {
		t.Errorf("first sync: %v, want the Service's creation", got)
	}
	if got := tt.Compute(svc, []*corev1.Pod{pod("a", t1)}); !got.IsZero() {
		t.Errorf("nothing changed: %v, want none", got)
	}
	if got := tt.Compute(svc, []*corev1.Pod{pod("a", t2), pod("b", t1)}); !got.Equal(t1) {
		t.Errorf("two changes: %v, want the oldest %v", got, t1)
	}
}
