// Package pod is the Pod strategy: upstream's defaults, the admission steps
// a pod always goes through on a real cluster (service account "default",
// default tolerations), validation with upstream's messages, the QoS class
// and the READY/STATUS/RESTARTS columns of `kubectl get pods`. A pod's
// priority is the API server's Priority admission plugin's
// (internal/admission/priority), which reads PriorityClasses.
package pod

import (
	"strconv"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/svcnet/svcnet/internal/registry"
)

// Resource describes pods; their service accounts are looked up in sas
// (nil: only the name is defaulted), and evictions serves pods/eviction
// (nil: not served).
func Resource(sas ServiceAccounts, evictions *Evictions) *registry.Resource {
	r := &registry.Resource{
		Kind:                corev1.SchemeGroupVersion.WithKind("Pod"),
		Resource:            "pods",
		Singular:            "pod",
		ShortNames:          []string{"po"},
		Categories:          []string{"all"},
		Namespaced:          true,
		Status:              true,
		Generation:          true,
		ReturnDeletedObject: true,
		Strategy:            strategy{sas: sas},
		Columns:             columns(),
		Fields:              selectableFields,
		Subresources: map[string]registry.Subresource{
			"ephemeralcontainers": ephemeralContainers(),
			"resize":              resize(),
		},
	}
	if evictions != nil {
		r.Actions = map[string]registry.Action{"eviction": evictions.Action()}
	}
	return r
}

type strategy struct {
	registry.Base
	sas ServiceAccounts
}

func (strategy) Default(obj runtime.Object) { defaultPod(obj.(*corev1.Pod)) }

// PrepareForCreate starts the pod Pending with its QoS class, then applies
// what upstream's admission plugins add to every new pod.
func (strategy) PrepareForCreate(obj runtime.Object) {
	pod := obj.(*corev1.Pod)
	pod.Status = corev1.PodStatus{Phase: corev1.PodPending, QOSClass: qosClass(&pod.Spec)}
	if len(pod.Spec.SchedulingGates) > 0 {
		pod.Status.Conditions = append(pod.Status.Conditions, corev1.PodCondition{
			Type:    corev1.PodScheduled,
			Status:  corev1.ConditionFalse,
			Reason:  corev1.PodReasonSchedulingGated,
			Message: "Scheduling is blocked due to non-empty scheduling gates",
		})
	}
	MergeLabelKeys(pod)
	admitTolerations(pod)
}

// PrepareForUpdate re-applies the default tolerations, whose admission
// plugin also runs on updates.
func (strategy) PrepareForUpdate(obj, _ runtime.Object) {
	admitTolerations(obj.(*corev1.Pod))
}

// PrepareForStatusUpdate keeps the owner references, as upstream's pod
// status strategy: old kubelets corrupted them, breaking garbage
// collection.
func (strategy) PrepareForStatusUpdate(obj, old runtime.Object) {
	obj.(*corev1.Pod).OwnerReferences = old.(*corev1.Pod).OwnerReferences
}

func (strategy) Validate(obj runtime.Object) field.ErrorList {
	return validateCreate(obj.(*corev1.Pod))
}

func (strategy) ValidateUpdate(obj, old runtime.Object) field.ErrorList {
	return validateUpdate(obj.(*corev1.Pod), old.(*corev1.Pod))
}

// selectableFields are the pod fields upstream's field selectors know.
func selectableFields(obj runtime.Object) fields.Set {
	pod := obj.(*corev1.Pod)
	podIP := ""
	if len(pod.Status.PodIPs) > 0 {
		podIP = pod.Status.PodIPs[0].IP
	}
	return fields.Set{
		"spec.nodeName":            pod.Spec.NodeName,
		"spec.restartPolicy":       string(pod.Spec.RestartPolicy),
		"spec.schedulerName":       pod.Spec.SchedulerName,
		"spec.serviceAccountName":  pod.Spec.ServiceAccountName,
		"spec.hostNetwork":         strconv.FormatBool(pod.Spec.HostNetwork),
		"status.phase":             string(pod.Status.Phase),
		"status.podIP":             podIP,
		"status.nominatedNodeName": pod.Status.NominatedNodeName,
	}
}
