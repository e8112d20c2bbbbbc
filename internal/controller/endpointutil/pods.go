// Package endpointutil holds the rules and bookkeeping that the Endpoints,
// EndpointSlice and EndpointSlice mirroring controllers share, as upstream's
// k8s.io/endpointslice/util does: which pods have an endpoint, how a Service
// port resolves on a pod, which Services a pod event concerns, endpoint
// identity, the generations a controller expects of its own slices, and the
// last-change-trigger-time annotation.
package endpointutil

import (
	"maps"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/sets"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"

	"github.com/svcnet/svcnet/internal/controller/podstate"
	"github.com/svcnet/svcnet/internal/informer"
)

// HasEndpoint says whether a pod belongs in endpoint lists at all: it is
// not finished (Succeeded or Failed) and has an IP. Terminating pods count
// only with includeTerminating.
func HasEndpoint(pod *corev1.Pod, includeTerminating bool) bool {
	if pod.Status.Phase == corev1.PodSucceeded || pod.Status.Phase == corev1.PodFailed {
		return false
	}
	if pod.Status.PodIP == "" && len(pod.Status.PodIPs) == 0 {
		return false
	}
	return includeTerminating || pod.DeletionTimestamp == nil
}

// Hostname is the pod's hostname when it is published for svc: the pod
// sets one and its subdomain names svc, in svc's namespace.
func Hostname(pod *corev1.Pod, svc *corev1.Service) (string, bool) {
	ok := pod.Spec.Hostname != "" && pod.Spec.Subdomain == svc.Name && pod.Namespace == svc.Namespace
	return pod.Spec.Hostname, ok
}

// FindPort resolves a Service port's targetPort on one pod: a number is
// used as is; a name is looked up among the container ports of the pod's
// containers, then of its restartable (sidecar) init containers, matching
// name and protocol. ok is false when the name is not found.
func FindPort(pod *corev1.Pod, sp *corev1.ServicePort) (port int32, ok bool) {
	if sp.TargetPort.Type == intstr.Int {
		return int32(sp.TargetPort.IntValue()), true
	}
	name := sp.TargetPort.StrVal
	find := func(containers []corev1.Container, sidecarsOnly bool) (int32, bool) {
		for _, c := range containers {
			if sidecarsOnly && (c.RestartPolicy == nil || *c.RestartPolicy != corev1.ContainerRestartPolicyAlways) {
				continue
			}
			for _, p := range c.Ports {
				if p.Name == name && p.Protocol == sp.Protocol {
					return p.ContainerPort, true
				}
			}
		}
		return 0, false
	}
	if port, ok := find(pod.Spec.Containers, false); ok {
		return port, true
	}
	return find(pod.Spec.InitContainers, true)
}

// ServicesToSync returns the keys of the Services whose endpoints a pod
// event may change. old is nil for an add, cur for a delete. An update
// that changes nothing an endpoint shows (labels, readiness, IPs, deletion,
// hostname) concerns no Service.
func ServicesToSync(services corelisters.ServiceLister, old, cur *corev1.Pod) sets.Set[string] {
	switch {
	case old == nil && cur == nil:
		return nil
	case old == nil:
		return selecting(services, cur.Namespace, cur.Labels)
	case cur == nil:
		return selecting(services, old.Namespace, old.Labels)
	case old.ResourceVersion == cur.ResourceVersion:
		return nil // a resync: Service resyncs cover it
	}
	endpointChanged := endpointChanged(old, cur)
	membershipChanged := !maps.Equal(old.Labels, cur.Labels) ||
		old.Spec.Hostname != cur.Spec.Hostname || old.Spec.Subdomain != cur.Spec.Subdomain
	switch {
	case !endpointChanged && !membershipChanged:
		return nil
	case !membershipChanged:
		return selecting(services, cur.Namespace, cur.Labels)
	}
	now, before := selecting(services, cur.Namespace, cur.Labels), selecting(services, old.Namespace, old.Labels)
	if endpointChanged {
		return now.Union(before)
	}
	// Only the labels changed: the Services that gained or lost the pod.
	return now.Difference(before).Union(before.Difference(now))
}

// endpointChanged says whether an update changes the pod's endpoint in the
// Services it already belongs to.
func endpointChanged(old, cur *corev1.Pod) bool {
	if (old.DeletionTimestamp == nil) != (cur.DeletionTimestamp == nil) || podstate.Ready(old) != podstate.Ready(cur) {
		return true
	}
	if len(old.Status.PodIPs) != len(cur.Status.PodIPs) {
		return true
	}
	for i := range old.Status.PodIPs {
		if old.Status.PodIPs[i].IP != cur.Status.PodIPs[i].IP {
			return true
		}
	}
	// Name, namespace and UID never change, and nodeName is set before
	// the pod has an IP.
	return false
}

// selecting returns the keys of the Services in namespace whose selector
// matches podLabels. A nil selector selects nothing; an empty one all.
func selecting(services corelisters.ServiceLister, namespace string, podLabels map[string]string) sets.Set[string] {
	set := sets.New[string]()
	list, err := services.Services(namespace).List(labels.Everything())
	if err != nil { // a lister reads memory and does not fail
		return set
	}
	for _, svc := range list {
		if svc.Spec.Selector == nil {
			continue
		}
		if labels.SelectorFromValidatedSet(svc.Spec.Selector).Matches(labels.Set(podLabels)) {
			set.Insert(svc.Namespace + "/" + svc.Name)
		}
	}
	return set
}

// PodEvents returns pod informer handlers that call queue with the key of
// every Service whose endpoints the event may change.
func PodEvents(services corelisters.ServiceLister, queue func(key string)) cache.ResourceEventHandlerFuncs {
	on := func(old, cur any) {
		oldPod, _ := informer.Object[*corev1.Pod](old)
		curPod, _ := informer.Object[*corev1.Pod](cur)
		for key := range ServicesToSync(services, oldPod, curPod) {
			queue(key)
		}
	}
	return cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { on(nil, obj) },
		UpdateFunc: on,
		DeleteFunc: func(obj any) { on(obj, nil) },
	}
}
