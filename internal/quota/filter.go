package quota

import (
	"time"

	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// UpdateFilter tells the resourcequota controller which updates of an
// object (seen by its informers) may lower the usage of the quotas of the
// object's namespace, so that it recounts them at once instead of at its
// next full resync; admission only ever charges increases. It has the
// signature of the UpdateFilter option of upstream's resourcequota
// controller.
//
//   - a pod: the resources of a container or init container in its status
//     changed (an in-place resize), it moved in or out of the Terminating
//     scope, or it was charged and no longer is (it failed or succeeded,
//     or its deletion grace period is over);
//   - a service: its type changed as quota sees it (NodePort,
//     LoadBalancer, or any other), either way;
//   - a persistent volume claim: any update. Upstream means only changes
//     of the allocated storage or of the volume attributes classes, but
//     its comparison of the allocated storage always finds a difference
//     (see the claim evaluator's Handles); every update it is, which also
//     covers a request lowered after a failed expansion.
//
// Other resources, and objects of an unexpected type, give false.
func UpdateFilter(gvr schema.GroupVersionResource, oldObj, newObj any) bool {
	return updateFilter(gvr, oldObj, newObj, time.Now())
}

func updateFilter(gvr schema.GroupVersionResource, oldObj, newObj any, now time.Time) bool {
	switch gvr.GroupResource() {
	case podsResource.GroupResource():
		old, ok1 := oldObj.(*corev1.Pod)
		pod, ok2 := newObj.(*corev1.Pod)
		if !ok1 || !ok2 {
			return false
		}
		if statusResourcesChanged(old.Status.ContainerStatuses, pod.Status.ContainerStatuses) ||
			statusResourcesChanged(old.Status.InitContainerStatuses, pod.Status.InitContainerStatuses) {
			return true
		}
		if isTerminating(old) != isTerminating(pod) {
			return true
		}
		return podCharged(old, now) && !podCharged(pod, now)
	case servicesResource.GroupResource():
		old, ok1 := oldObj.(*corev1.Service)
		svc, ok2 := newObj.(*corev1.Service)
		return ok1 && ok2 && quotaServiceType(old) != quotaServiceType(svc)
	case pvcsResource.GroupResource():
		_, ok1 := oldObj.(*corev1.PersistentVolumeClaim)
		_, ok2 := newObj.(*corev1.PersistentVolumeClaim)
		return ok1 && ok2
	}
	return false
}

// statusResourcesChanged: a container of old is still there (by name) with
// other resources in its status.
func statusResourcesChanged(old, cur []corev1.ContainerStatus) bool {
	for i := range old {
		for j := range cur {
			if cur[j].Name == old[i].Name {
				if !apiequality.Semantic.DeepEqual(old[i].Resources, cur[j].Resources) {
					return true
				}
				break
			}
		}
	}
	return false
}
