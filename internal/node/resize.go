package node

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// In-place resize, as the kubelet's: a running container takes the cpu
// and memory its spec has now (pods/resize changes them) without a new
// run, its cgroup updated by `runc update`, unless its resize policy asks
// for a restart for a resource that changed. A resize larger than the
// node leaves the pod with PodResizePending (Infeasible).

// appliedResources are what a run of spec gets: its requests and limits.
// A run records them; a resize changes them.
func appliedResources(spec *corev1.Container) *corev1.ResourceRequirements {
	return &corev1.ResourceRequirements{Requests: spec.Resources.Requests.DeepCopy(), Limits: spec.Resources.Limits.DeepCopy()}
}

// cgroupLimits are the cgroup settings of r, as the kubelet computes
// them: the memory limit in bytes, the CPU quota (the limit's share of a
// 100ms period, at least 1ms) and the CPU shares (2 without a request,
// BestEffort); 0 means none.
func cgroupLimits(r *corev1.ResourceRequirements) (memory, cpuQuota int64, cpuShares uint64) {
	if q, ok := r.Limits[corev1.ResourceMemory]; ok {
		memory = q.Value()
	}
	if q, ok := r.Limits[corev1.ResourceCPU]; ok {
		cpuQuota = max(q.MilliValue()*100, 1000)
	}
	cpuRequest := r.Requests[corev1.ResourceCPU]
	return memory, cpuQuota, uint64(max(cpuRequest.MilliValue()*1024/1000, 2))
}

// resizeInfeasible says why the pod's resources cannot fit the node at
// all, "" when they can: the sum of its containers' requests against the
// node's allocatable cpu and memory.
func (a *Agent) resizeInfeasible(pod *corev1.Pod) string {
	for _, name := range []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory} {
		capacity, ok := a.env.allocatable[name]
		if !ok {
			continue
		}
		var requested int64
		for _, c := range pod.Spec.Containers {
			q := c.Resources.Requests[name]
			requested += quantityValue(name, q)
		}
		for i := range pod.Spec.InitContainers {
			if isSidecar(&pod.Spec.InitContainers[i]) {
				q := pod.Spec.InitContainers[i].Resources.Requests[name]
				requested += quantityValue(name, q)
			}
		}
		if have := quantityValue(name, capacity); requested > have {
			return fmt.Sprintf("Node didn't have enough capacity: %s, requested: %d, capacity: %d", name, requested, have)
		}
	}
	return ""
}

// quantityValue is q in the kubelet's units: millicores for cpu, bytes
// otherwise.
func quantityValue(name corev1.ResourceName, q resource.Quantity) int64 {
	if name == corev1.ResourceCPU {
		return q.MilliValue()
	}
	return q.Value()
}

// resizeWanted reports whether spec asks the run c for other resources
// than it has. A run from before runs recorded them is left alone.
func resizeWanted(c *container, spec *corev1.Container) bool {
	return c.Spec.Resources != nil && !apiequality.Semantic.DeepEqual(c.Spec.Resources, appliedResources(spec))
}

// resizeInPlace brings the running container c to spec's resources. A
// changed resource whose resize policy is RestartContainer stops the
// container, to be started again with them (restarting reports so);
// otherwise the cgroup changes in place and the run records it.
func (a *Agent) resizeInPlace(ctx context.Context, pod *corev1.Pod, c *container, spec *corev1.Container) (restarting bool, err error) {
	if !resizeWanted(c, spec) {
		return false, nil
	}
	want, have := appliedResources(spec), c.Spec.Resources
	for _, p := range spec.ResizePolicy {
		if p.RestartPolicy != corev1.RestartContainer {
			continue
		}
		if !apiequality.Semantic.DeepEqual(have.Requests[p.ResourceName], want.Requests[p.ResourceName]) ||
			!apiequality.Semantic.DeepEqual(have.Limits[p.ResourceName], want.Limits[p.ResourceName]) {
			msg := fmt.Sprintf("Container %s resize requires restart", spec.Name)
			return true, a.killContainer(ctx, pod, c, gracePeriod(pod, nil), msg)
		}
	}
	if c.Spec.Runc != nil {
		memory, quota, shares := cgroupLimits(want)
		if err := c.Spec.Runc.Update(ctx, c.Spec.ID, memory, quota, shares); err != nil {
			return false, fmt.Errorf("resize container %s: %w", spec.Name, err)
		}
	}
	c.Spec.Resources = want
	if err := writeJSON(filepath.Join(c.dir, specFile), c.Spec); err != nil {
		return false, fmt.Errorf("record the resize of container %s: %w", spec.Name, err)
	}
	a.event(pod, spec.Name, corev1.EventTypeNormal, "ResizeCompleted", fmt.Sprintf("Pod resize completed: %s", resizeSummary(want)))
	return false, nil
}

// resizeSummary is r in a short form for the event.
func resizeSummary(r *corev1.ResourceRequirements) string {
	var parts []string
	for _, l := range []struct {
		kind string
		list corev1.ResourceList
	}{{"requests", r.Requests}, {"limits", r.Limits}} {
		for _, name := range []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory} {
			if q, ok := l.list[name]; ok {
				parts = append(parts, fmt.Sprintf("%s.%s=%s", l.kind, name, q.String()))
			}
		}
	}
	return strings.Join(parts, ",")
}

// resizePendingCondition is PodResizePending for a resize the node
// cannot take, keeping its transition time while it stays so.
func resizePendingCondition(pod *corev1.Pod, msg string) corev1.PodCondition {
	c := corev1.PodCondition{
		Type: corev1.PodResizePending, Status: corev1.ConditionTrue, ObservedGeneration: pod.Generation,
		Reason: corev1.PodReasonInfeasible, Message: msg, LastTransitionTime: metav1.Now(),
	}
	if prev := findCondition(pod.Status.Conditions, corev1.PodResizePending); prev != nil && prev.Status == c.Status {
		c.LastTransitionTime = prev.LastTransitionTime
	}
	return c
}
