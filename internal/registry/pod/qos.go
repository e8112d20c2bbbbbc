package pod

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

// qosClass computes a pod's QoS class from its cpu and memory requests and
// limits, pod-level ones first, as upstream's ComputePodQOS. A missing
// request counts as its limit, which is what defaulting makes it.
func qosClass(spec *corev1.PodSpec) corev1.PodQOSClass {
	requests, limits := corev1.ResourceList{}, corev1.ResourceList{}
	guaranteed := true
	add := func(sum corev1.ResourceList, list corev1.ResourceList) (cpuAndMemory bool) {
		found := 0
		for name, q := range list {
			if (name != corev1.ResourceCPU && name != corev1.ResourceMemory) || q.Cmp(resource.Quantity{}) <= 0 {
				continue
			}
			found++
			total := q.DeepCopy()
			if prev, ok := sum[name]; ok {
				total.Add(prev)
			}
			sum[name] = total
		}
		return found == 2
	}
	if r := spec.Resources; r != nil && len(r.Requests)+len(r.Limits) > 0 {
		add(requests, effectiveRequests(*r))
		if len(r.Limits) > 0 && !add(limits, r.Limits) {
			guaranteed = false
		}
	} else {
		for _, list := range [][]corev1.Container{spec.Containers, spec.InitContainers} {
			for _, c := range list {
				add(requests, effectiveRequests(c.Resources))
				if !add(limits, c.Resources.Limits) {
					guaranteed = false
				}
			}
		}
	}
	if len(requests) == 0 && len(limits) == 0 {
		return corev1.PodQOSBestEffort
	}
	for name, req := range requests {
		if lim, ok := limits[name]; !ok || lim.Cmp(req) != 0 {
			guaranteed = false
		}
	}
	if guaranteed && len(requests) == len(limits) {
		return corev1.PodQOSGuaranteed
	}
	return corev1.PodQOSBurstable
}

func effectiveRequests(r corev1.ResourceRequirements) corev1.ResourceList {
	out := corev1.ResourceList{}
	for name, q := range r.Limits {
		out[name] = q
	}
	for name, q := range r.Requests {
		out[name] = q
	}
	return out
}
