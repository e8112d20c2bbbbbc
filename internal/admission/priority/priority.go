// Package priority is kube-apiserver's Priority admission plugin. A new
// pod gets spec.priority and spec.preemptionPolicy from the PriorityClass
// its spec.priorityClassName names or, when it names none, from the global
// default class (whose name it then gets), else priority 0 and
// PreemptLowerPriority. A pod naming a class that does not exist, or
// setting a priority or preemption policy of its own that differs from
// the class's, is refused with upstream's messages; an update of a pod
// keeps what its create was given. A PriorityClass marked globalDefault
// while another class is the default is refused.
//
// Classes are read from the API server's informer cache, as upstream's
// lister; a named class the cache lacks yet is read from the API, so that
// a pod created right after its class (the system classes the API server
// writes at start, a class a client has just made) is not refused.
package priority

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes"
	schedulinglisters "k8s.io/client-go/listers/scheduling/v1"

	"github.com/svcnet/svcnet/internal/admission"
)

// PluginName is the plugin's name in --enable-admission-plugins.
const PluginName = "Priority"

// defaultPriority is a pod's priority when no class is the global
// default (upstream's DefaultPriorityWhenNoDefaultClassExists).
const defaultPriority = int32(0)

// Plugin is the Priority admission plugin.
type Plugin struct {
	classes schedulinglisters.PriorityClassLister
	client  kubernetes.Interface
}

var (
	_ admission.Plugin  = (*Plugin)(nil)
	_ admission.Mutator = (*Plugin)(nil)
)

// New is the plugin, reading PriorityClasses from the API server's cache
// and, for a named one the cache lacks, from the API.
func New(classes schedulinglisters.PriorityClassLister, client kubernetes.Interface) *Plugin {
	return &Plugin{classes: classes, client: client}
}

var (
	podResource           = schema.GroupResource{Resource: "pods"}
	priorityClassResource = schedulingv1.Resource("priorityclasses")
)

// Admit implements admission.Mutator: a new pod gets its priority, an
// updated one keeps it.
func (p *Plugin) Admit(ctx context.Context, a *admission.Attributes) error {
	if a.Subresource != "" || a.Resource != podResource {
		return nil
	}
	switch a.Operation {
	case admission.Create:
		return p.admitCreate(ctx, a)
	case admission.Update:
		return admitUpdate(a)
	}
	return nil
}

// admitCreate resolves a new pod's priority from its class.
func (p *Plugin) admitCreate(ctx context.Context, a *admission.Attributes) error {
	pod, ok := a.Object.(*corev1.Pod)
	if !ok {
		return apierrors.NewBadRequest("resource was marked with kind Pod but was unable to be converted")
	}
	name, priority, policy, err := p.establish(ctx, a, pod.Spec.PriorityClassName)
	if err != nil {
		return err
	}
	pod.Spec.PriorityClassName = name
	if pod.Spec.Priority != nil && *pod.Spec.Priority != priority {
		return admission.Forbidden(a, fmt.Errorf("the integer value of priority (%d) must not be provided in pod spec; priority admission controller computed %d from the given PriorityClass name", *pod.Spec.Priority, priority))
	}
	pod.Spec.Priority = &priority
	if policy != nil {
		if pod.Spec.PreemptionPolicy != nil && *pod.Spec.PreemptionPolicy != *policy {
			return admission.Forbidden(a, fmt.Errorf("the string value of PreemptionPolicy (%s) must not be provided in pod spec; priority admission controller computed %s from the given PriorityClass name", *pod.Spec.PreemptionPolicy, *policy))
		}
		pod.Spec.PreemptionPolicy = policy
	}
	return nil
}

// admitUpdate keeps the priority and preemption policy the create gave
// a pod whose update leaves them out; validation refuses other changes.
func admitUpdate(a *admission.Attributes) error {
	pod, ok := a.Object.(*corev1.Pod)
	if !ok {
		return apierrors.NewBadRequest("resource was marked with kind Pod but was unable to be converted")
	}
	old, ok := a.OldObject.(*corev1.Pod)
	if !ok {
		return apierrors.NewBadRequest("resource was marked with kind Pod but was unable to be converted")
	}
	if pod.Spec.Priority == nil && old.Spec.Priority != nil {
		pod.Spec.Priority = old.Spec.Priority
	}
	if pod.Spec.PreemptionPolicy == nil && old.Spec.PreemptionPolicy != nil {
		pod.Spec.PreemptionPolicy = old.Spec.PreemptionPolicy
	}
	return nil
}

// establish is the class name, priority and preemption policy of a pod
// naming class name: that class's, or the global default's for none.
func (p *Plugin) establish(ctx context.Context, a *admission.Attributes, name string) (string, int32, *corev1.PreemptionPolicy, error) {
	if name == "" {
		def, err := p.globalDefault()
		if err != nil {
			return "", 0, nil, fmt.Errorf("error occurred while retrieving default priority class: %w", err)
		}
		if def == nil {
			policy := corev1.PreemptLowerPriority
			return "", defaultPriority, &policy, nil
		}
		return def.Name, def.Value, copyPolicy(def.PreemptionPolicy), nil
	}
	class, err := p.classes.Get(name)
	if apierrors.IsNotFound(err) {
		// The cache may lag behind a class just made.
		class, err = p.client.SchedulingV1().PriorityClasses().Get(ctx, name, metav1.GetOptions{})
	}
	if err != nil {
		if apierrors.IsNotFound(err) {
			return "", 0, nil, admission.Forbidden(a, fmt.Errorf("no PriorityClass with name %v was found", name))
		}
		return "", 0, nil, fmt.Errorf("failed to resolve PriorityClass with name %s: %w", name, err)
	}
	return name, class.Value, copyPolicy(class.PreemptionPolicy), nil
}

// globalDefault is the class marked globalDefault, nil when there is
// none; of several (made at once, past the check), the lowest.
func (p *Plugin) globalDefault() (*schedulingv1.PriorityClass, error) {
	list, err := p.classes.List(labels.Everything())
	if err != nil {
		return nil, err
	}
	var def *schedulingv1.PriorityClass
	for _, c := range list {
		if c.GlobalDefault && (def == nil || c.Value < def.Value) {
			def = c
		}
	}
	return def, nil
}

// copyPolicy is a pod's own copy of a cached class's policy.
func copyPolicy(policy *corev1.PreemptionPolicy) *corev1.PreemptionPolicy {
	if policy == nil {
		return nil
	}
	out := *policy
	return &out
}

// Validate implements admission.Plugin: a PriorityClass may be the
// global default only while no other class is.
func (p *Plugin) Validate(_ context.Context, a *admission.Attributes) error {
	if a.Subresource != "" || a.Resource != priorityClassResource ||
		(a.Operation != admission.Create && a.Operation != admission.Update) {
		return nil
	}
	class, ok := a.Object.(*schedulingv1.PriorityClass)
	if !ok {
		return apierrors.NewBadRequest("resource was marked with kind PriorityClass but was unable to be converted")
	}
	if !class.GlobalDefault {
		return nil
	}
	def, err := p.globalDefault()
	if err != nil {
		return fmt.Errorf("failed to get default priority class: %v", err)
	}
	if def != nil && (a.Operation == admission.Create || def.Name != class.Name) {
		return admission.Forbidden(a, fmt.Errorf("PriorityClass %v is already marked as default. Only one default can exist", def.Name))
	}
	return nil
}
