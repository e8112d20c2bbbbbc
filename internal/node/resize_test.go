package node

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/utils/ptr"
)

func TestCgroupLimits(t *testing.T) {
	for _, tc := range []struct {
		name          string
		r             corev1.ResourceRequirements
		memory, quota int64
		shares        uint64
	}{
		{"best effort", corev1.ResourceRequirements{}, 0, 0, 2},
		{"burstable", corev1.ResourceRequirements{
			Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("25m")},
			Limits:   corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("35m"), corev1.ResourceMemory: resource.MustParse("50Mi")},
		}, 50 << 20, 3500, 25},
		// The kubelet's minimum quota is 1ms of a 100ms period.
		{"tiny limit", corev1.ResourceRequirements{Limits: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("5m")}}, 0, 1000, 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m, q, s := cgroupLimits(&tc.r)
			if m != tc.memory || q != tc.quota || s != tc.shares {
				t.Fatalf("cgroupLimits = %d, %d, %d; want %d, %d, %d", m, q, s, tc.memory, tc.quota, tc.shares)
			}
		})
	}
}

func TestResizeWanted(t *testing.T) {
	spec := &corev1.Container{Name: "c", Resources: corev1.ResourceRequirements{
		Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("20m")}}}
	run := &container{Spec: containerSpec{Resources: appliedResources(spec)}}
	if resizeWanted(run, spec) {
		t.Fatal("a run with its spec's resources wants a resize")
	}
	resized := spec.DeepCopy()
	resized.Resources.Requests[corev1.ResourceCPU] = resource.MustParse("25m")
	if !resizeWanted(run, resized) {
		t.Fatal("a run whose spec's cpu request changed wants no resize")
	}
	// Equal quantities written otherwise are no change.
	resized.Resources.Requests[corev1.ResourceCPU] = resource.MustParse("0.02")
	if resizeWanted(run, resized) {
		t.Fatal("0.02 cpu against 20m wants a resize")
	}
	if resizeWanted(&container{}, resized) {
		t.Fatal("a run that recorded no resources wants a resize")
	}
}

func TestResizeInfeasible(t *testing.T) {
	a := &Agent{env: &envSources{allocatable: corev1.ResourceList{
		corev1.ResourceCPU: resource.MustParse("2"), corev1.ResourceMemory: resource.MustParse("1Gi")}}}
	pod := &corev1.Pod{Spec: corev1.PodSpec{
		InitContainers: []corev1.Container{{Name: "side", RestartPolicy: ptr.To(corev1.ContainerRestartPolicyAlways),
			Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("500m")}}}},
		Containers: []corev1.Container{{Name: "main",
			Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1500m")}}}},
	}}
	if msg := a.resizeInfeasible(pod); msg != "" {
		t.Fatalf("a pod of exactly the node's cpu: %q", msg)
	}
	pod.Spec.Containers[0].Resources.Requests[corev1.ResourceCPU] = resource.MustParse("1501m")
	msg := a.resizeInfeasible(pod)
	if want := "Node didn't have enough capacity: cpu, requested: 2001, capacity: 2000"; msg != want {
		t.Fatalf("resizeInfeasible = %q, want %q", msg, want)
	}
	if !strings.Contains(resizePendingCondition(pod, msg).Message, "requested: 2001") {
		t.Fatal("the PodResizePending condition does not carry the message")
	}
}
