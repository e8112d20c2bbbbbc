package podautoscaler

import (
	"fmt"
	"testing"
	"time"

	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	metricsv1beta1 "k8s.io/metrics/pkg/apis/metrics/v1beta1"
	"k8s.io/utils/ptr"

	"github.com/svcnet/svcnet/internal/registry/horizontalpodautoscaler"
)

var now = time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)

// pod is a running pod started an hour ago, ready since its start, asking
// request milli-CPU.
func pod(name string, request int64, ready corev1.ConditionStatus) *corev1.Pod {
	start := metav1.NewTime(now.Add(-time.Hour))
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Resources: corev1.ResourceRequirements{
			Requests: corev1.ResourceList{corev1.ResourceCPU: *resource.NewMilliQuantity(request, resource.DecimalSI)}}}}},
		Status: corev1.PodStatus{Phase: corev1.PodRunning, StartTime: &start,
			Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: ready, LastTransitionTime: start}}},
	}
}

func metricsOf(values ...int64) podMetrics {
	m := podMetrics{}
	for i, v := range values {
		m[fmt.Sprintf("p%d", i)] = podMetric{value: v, timestamp: now.Add(-10 * time.Second), window: 15 * time.Second}
	}
	return m
}

func pods(n int, request int64) []*corev1.Pod {
	var out []*corev1.Pod
	for i := range n {
		out = append(out, pod(fmt.Sprintf("p%d", i), request, corev1.ConditionTrue))
	}
	return out
}

// The cases follow upstream's replica_calculator_test.
func TestReplicas(t *testing.T) {
	calc := calculator{tolerances: tolerances{0.1, 0.1}, cpuInitialization: 5 * time.Minute, readinessDelay: 30 * time.Second, now: now}
	unreadyFirst := pods(3, 1000)
	unreadyFirst[0].Status.Conditions[0].Status = corev1.ConditionFalse
	pendingFirst := pods(3, 1000)
	pendingFirst[0].Status.Phase = corev1.PodPending
	deleted := pods(3, 1000)
	deleted[2].DeletionTimestamp = &metav1.Time{Time: now}
	young := pods(3, 1000)
	for _, p := range young[:1] { // started a minute ago, its sample from before it was ready
		p.Status.StartTime = &metav1.Time{Time: now.Add(-time.Minute)}
		p.Status.Conditions[0].LastTransitionTime = metav1.Time{Time: now.Add(-20 * time.Second)}
	}
	noRequest := pods(2, 1000)
	noRequest[1].Spec.Containers[0].Resources = corev1.ResourceRequirements{}
	tests := []struct {
		name        string
		current     int32
		metrics     podMetrics
		pods        []*corev1.Pod
		utilization int32
		average     int64
		want        int32
		wantUtil    int32
		err         string
	}{
		{name: "scale up", current: 3, metrics: metricsOf(300, 500, 700), pods: pods(3, 1000), utilization: 30, want: 5, wantUtil: 50},
		{name: "scale down", current: 5, metrics: metricsOf(100, 300, 500, 250, 250), pods: pods(5, 1000), utilization: 50, want: 3, wantUtil: 28},
		{name: "within tolerance", current: 3, metrics: metricsOf(1010, 1030, 1020), pods: pods(3, 1000), utilization: 100, want: 3, wantUtil: 102},
		{name: "unready pods count as idle on the way up", current: 3, metrics: metricsOf(300, 500, 700), pods: unreadyFirst, utilization: 30, want: 4, wantUtil: 60},
		{name: "pending pods count as idle on the way up", current: 3, metrics: metricsOf(300, 500, 700), pods: pendingFirst, utilization: 30, want: 4, wantUtil: 60},
		{name: "a pod initializing with a sample from before it was ready", current: 3, metrics: metricsOf(300, 500, 700), pods: young, utilization: 30, want: 4, wantUtil: 60},
		{name: "deleted pods are ignored", current: 3, metrics: metricsOf(500, 500, 5000), pods: deleted, utilization: 50, want: 3, wantUtil: 50},
		{name: "missing pods count as at their request on the way down", current: 4, metrics: metricsOf(100, 100, 100), pods: pods(4, 1000), utilization: 50, want: 3, wantUtil: 10},
		{name: "missing pods count as idle on the way up", current: 4, metrics: metricsOf(1000, 1000, 1000), pods: pods(4, 1000), utilization: 50, want: 6, wantUtil: 100},
		{name: "missing pods that would reverse the change hold it", current: 2, metrics: metricsOf(450), pods: pods(2, 1000), utilization: 40, want: 2, wantUtil: 45},
		{name: "average value", current: 3, metrics: metricsOf(2000, 2000, 2000), pods: pods(3, 1000), average: 1000, want: 6},
		{name: "no pods", current: 1, metrics: metricsOf(10), utilization: 50, err: "no pods returned by selector while calculating replica count"},
		{name: "no ready pod with metrics", current: 1, metrics: metricsOf(10), pods: unreadyFirst[:1], utilization: 50,
			err: "did not receive metrics for targeted pods (pods might be unready)"},
		{name: "a missing request", current: 2, metrics: metricsOf(10, 10), pods: noRequest, utilization: 50,
			err: "missing request for cpu in container c of Pod p1"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := calc.replicas(tt.current, tt.metrics, now, tt.pods, corev1.ResourceCPU, tt.utilization, tt.average)
			if tt.err != "" {
				if err == nil || err.Error() != tt.err {
					t.Fatalf("error %v, want %q", err, tt.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got.replicas != tt.want || got.utilization != tt.wantUtil {
				t.Errorf("replicas %d at %d%%, want %d at %d%%", got.replicas, got.utilization, tt.want, tt.wantUtil)
			}
		})
	}
}

func TestLimit(t *testing.T) {
	for _, tt := range []struct {
		current, desired, min, max, want int32
		reason                           string
	}{
		{1, 10, 1, 10, 4, "ScaleUpLimit"},
		{10, 30, 1, 15, 15, "TooManyReplicas"},
		{3, 0, 1, 10, 1, "TooFewReplicas"},
		{3, 5, 1, 10, 5, "DesiredWithinRange"},
	} {
		if got, reason, _ := limit(tt.current, tt.desired, tt.min, tt.max); got != tt.want || reason != tt.reason {
			t.Errorf("limit(%d -> %d in [%d, %d]) = %d %s, want %d %s", tt.current, tt.desired, tt.min, tt.max, got, reason, tt.want, tt.reason)
		}
	}
}

func TestStabilize(t *testing.T) {
	h := newHistory()
	h.recordInitial("k", 5, now.Add(-time.Minute))
	if got := h.stabilize("k", 2, 5*time.Minute, now); got != 5 {
		t.Errorf("scale-down within the window: %d, want the recent 5", got)
	}
	if got := h.stabilize("k", 2, 5*time.Minute, now.Add(10*time.Minute)); got != 2 {
		t.Errorf("after the window: %d, want 2", got)
	}
}

func TestBehavior(t *testing.T) {
	up, down := horizontalpodautoscaler.ScaleUpDefaults(), horizontalpodautoscaler.ScaleDownDefaults()
	down.StabilizationWindowSeconds = ptr.To[int32](300)
	norm := func(current, desired int32) normalization {
		return normalization{key: "k", up: up, down: down, min: 1, max: 100, current: current, desire: desired}
	}
	h := newHistory()
	// The defaults: 4 pods or double per 15s, whichever is more.
	if got, reason, _ := h.limitWithBehavior(norm(2, 50), now); got != 6 || reason != "ScaleUpLimit" {
		t.Errorf("from 2: %d %s, want 6 ScaleUpLimit", got, reason)
	}
	if got, _, _ := h.limitWithBehavior(norm(10, 50), now); got != 20 {
		t.Errorf("from 10: %d, want 20", got)
	}
	// A scale-up within the period counts against it.
	h.recordScale("k", &autoscalingv2.HorizontalPodAutoscalerBehavior{ScaleUp: up, ScaleDown: down}, 2, 6, now)
	if got, _, _ := h.limitWithBehavior(norm(6, 50), now.Add(5*time.Second)); got != 6 {
		t.Errorf("right after scaling 2 -> 6: %d, want 6 (the period started at 2)", got)
	}
	if got, _, _ := h.limitWithBehavior(norm(6, 50), now.Add(20*time.Second)); got != 12 {
		t.Errorf("after the period: %d, want 12", got)
	}
	// Min and Disabled select policies.
	minUp := up.DeepCopy()
	minUp.SelectPolicy = ptr.To(autoscalingv2.MinChangePolicySelect)
	if got := scaleUpLimit(10, nil, nil, minUp, now); got != 14 {
		t.Errorf("Min policy from 10: %d, want 14", got)
	}
	disabled := down.DeepCopy()
	disabled.SelectPolicy = ptr.To(autoscalingv2.DisabledPolicySelect)
	n := norm(10, 1)
	n.down = disabled
	if got, reason, _ := newHistory().limitWithBehavior(n, now); got != 10 || reason != "ScaleDownLimit" {
		t.Errorf("scale-down disabled: %d %s, want 10 ScaleDownLimit", got, reason)
	}
	// The scale-down window holds the highest recent recommendation.
	h = newHistory()
	h.recordInitial("k", 8, now.Add(-time.Minute))
	if got, reason, _ := h.stabilizeWithBehavior(norm(8, 3), now); got != 8 || reason != "ScaleDownStabilized" {
		t.Errorf("stabilized scale-down: %d %s, want 8 ScaleDownStabilized", got, reason)
	}
	// The scale-up window (0 by default) does not hold a scale-up.
	if got, _, _ := h.stabilizeWithBehavior(norm(8, 12), now); got != 12 {
		t.Errorf("scale-up: %d, want 12", got)
	}
}

func TestResourceMetrics(t *testing.T) {
	cpu := func(milli int64) corev1.ResourceList {
		return corev1.ResourceList{corev1.ResourceCPU: *resource.NewMilliQuantity(milli, resource.DecimalSI)}
	}
	ts := metav1.NewTime(now)
	list := []metricsv1beta1.PodMetrics{
		{ObjectMeta: metav1.ObjectMeta{Name: "two"}, Timestamp: ts, Window: metav1.Duration{Duration: 15 * time.Second},
			Containers: []metricsv1beta1.ContainerMetrics{{Name: "a", Usage: cpu(100)}, {Name: "b", Usage: cpu(250)}}},
		{ObjectMeta: metav1.ObjectMeta{Name: "partial"}, Timestamp: ts,
			Containers: []metricsv1beta1.ContainerMetrics{{Name: "a", Usage: cpu(100)}, {Name: "b", Usage: corev1.ResourceList{}}}},
		{ObjectMeta: metav1.ObjectMeta{Name: "none"}, Timestamp: ts},
	}
	m, got := resourceMetrics(list, corev1.ResourceCPU)
	if len(m) != 1 || m["two"].value != 350 || m["two"].window != 15*time.Second || !got.Equal(now) {
		t.Errorf("metrics = %v at %v; want only two's 350m", m, got)
	}
}
