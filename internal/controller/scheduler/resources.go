package scheduler

import (
	"slices"

	corev1 "k8s.io/api/core/v1"
)

// The requests upstream's scoring assumes for a container that states
// none, so that pods without requests still spread by count.
const (
	defaultMilliCPU = 100
	defaultMemory   = 200 * 1024 * 1024
)

// resources are amounts of cpu (millicores), memory (bytes) and any other
// resource (ephemeral-storage, extended resources) in its base unit.
type resources struct {
	milliCPU, memory int64
	scalar           map[corev1.ResourceName]int64
}

func (r *resources) add(o resources) {
	r.milliCPU += o.milliCPU
	r.memory += o.memory
	for name, v := range o.scalar {
		if r.scalar == nil {
			r.scalar = map[corev1.ResourceName]int64{}
		}
		r.scalar[name] += v
	}
}

func (r *resources) sub(o resources) {
	r.milliCPU -= o.milliCPU
	r.memory -= o.memory
	for name, v := range o.scalar {
		if r.scalar[name] -= v; r.scalar[name] == 0 {
			delete(r.scalar, name)
		}
	}
}

// atLeast raises each amount of r to o's.
func (r *resources) atLeast(o resources) {
	r.milliCPU = max(r.milliCPU, o.milliCPU)
	r.memory = max(r.memory, o.memory)
	for name, v := range o.scalar {
		if r.scalar == nil {
			r.scalar = map[corev1.ResourceName]int64{}
		}
		r.scalar[name] = max(r.scalar[name], v)
	}
}

// scalarNames are the other resources' names, sorted.
func (r resources) scalarNames() []corev1.ResourceName {
	names := make([]corev1.ResourceName, 0, len(r.scalar))
	for name := range r.scalar {
		names = append(names, name)
	}
	slices.Sort(names)
	return names
}

// fromList reads a ResourceList; with nonZero, a missing cpu or memory
// counts as upstream's scoring default.
func fromList(l corev1.ResourceList, nonZero bool) resources {
	var r resources
	for name, q := range l {
		switch name {
		case corev1.ResourceCPU:
			r.milliCPU = q.MilliValue()
		case corev1.ResourceMemory:
			r.memory = q.Value()
		case corev1.ResourcePods:
		default:
			if r.scalar == nil {
				r.scalar = map[corev1.ResourceName]int64{}
			}
			r.scalar[name] = q.Value()
		}
	}
	if nonZero {
		if _, ok := l[corev1.ResourceCPU]; !ok {
			r.milliCPU = defaultMilliCPU
		}
		if _, ok := l[corev1.ResourceMemory]; !ok {
			r.memory = defaultMemory
		}
		r.scalar = nil // scoring looks at cpu and memory only
	}
	return r
}

// podRequests is what a pod asks of its node, as the kubelet admits it:
// the regular containers and the sidecars (restartable init containers)
// together, or the largest init container with the sidecars started
// before it, whichever is more, plus the pod's overhead. Pod-level
// requests, where given, replace the containers' cpu and memory. With
// nonZero, containers without cpu or memory requests count as upstream's
// scoring defaults.
func podRequests(pod *corev1.Pod, nonZero bool) resources {
	var total, sidecars, initPeak resources
	for i := range pod.Spec.Containers {
		total.add(fromList(pod.Spec.Containers[i].Resources.Requests, nonZero))
	}
	for i := range pod.Spec.InitContainers {
		c := &pod.Spec.InitContainers[i]
		req := fromList(c.Resources.Requests, nonZero)
		if c.RestartPolicy != nil && *c.RestartPolicy == corev1.ContainerRestartPolicyAlways {
			total.add(req)
			sidecars.add(req)
			initPeak.atLeast(sidecars)
			continue
		}
		req.add(sidecars)
		initPeak.atLeast(req)
	}
	total.atLeast(initPeak)
	if pod.Spec.Resources != nil {
		if q, ok := pod.Spec.Resources.Requests[corev1.ResourceCPU]; ok {
			total.milliCPU = q.MilliValue()
		}
		if q, ok := pod.Spec.Resources.Requests[corev1.ResourceMemory]; ok {
			total.memory = q.Value()
		}
	}
	if pod.Spec.Overhead != nil {
		total.add(fromList(pod.Spec.Overhead, false))
	}
	return total
}

// allocatable is what a node offers pods, and how many pods it takes.
func allocatable(node *corev1.Node) (resources, int64) {
	pods := node.Status.Allocatable[corev1.ResourcePods]
	return fromList(node.Status.Allocatable, false), pods.Value()
}
