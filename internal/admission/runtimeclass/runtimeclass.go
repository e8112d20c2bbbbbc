// Package runtimeclass is kube-apiserver's RuntimeClass admission plugin:
// a pod created with spec.runtimeClassName gets its RuntimeClass's
// overhead (spec.overhead) and scheduling (its nodeSelector merged into
// the pod's, its tolerations added), and is refused when the RuntimeClass
// does not exist, when its nodeSelector conflicts with the pod's, or when
// the pod's overhead is not the RuntimeClass's, with upstream's messages.
package runtimeclass

import (
	"context"
	"errors"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	nodev1 "k8s.io/api/node/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes"
	nodelisters "k8s.io/client-go/listers/node/v1"

	"github.com/svcnet/svcnet/internal/admission"
)

// PluginName is the plugin's name in --enable-admission-plugins.
const PluginName = "RuntimeClass"

// Plugin is the RuntimeClass admission plugin.
type Plugin struct {
	classes nodelisters.RuntimeClassLister
	client  kubernetes.Interface
}

var (
	_ admission.Plugin  = (*Plugin)(nil)
	_ admission.Mutator = (*Plugin)(nil)
)

// New is the plugin, reading RuntimeClasses from the API server's cache
// and, for one the cache lacks yet, from the API.
func New(classes nodelisters.RuntimeClassLister, client kubernetes.Interface) *Plugin {
	return &Plugin{classes: classes, client: client}
}

var podResource = schema.GroupResource{Resource: "pods"}

// Admit implements admission.Mutator: a new pod gets its RuntimeClass's
// overhead and scheduling.
func (p *Plugin) Admit(ctx context.Context, a *admission.Attributes) error {
	pod, class, err := p.prepare(ctx, a)
	if err != nil || class == nil {
		return err
	}
	if class.Overhead != nil {
		if len(pod.Spec.Overhead) > 0 && !apiequality.Semantic.DeepEqual(class.Overhead.PodFixed, pod.Spec.Overhead) {
			return admission.Forbidden(a, errors.New("pod rejected: Pod's Overhead doesn't match RuntimeClass's defined Overhead"))
		}
		pod.Spec.Overhead = class.Overhead.PodFixed.DeepCopy()
	}
	if s := class.Scheduling; s != nil {
		if len(s.NodeSelector) > 0 && pod.Spec.NodeSelector == nil {
			pod.Spec.NodeSelector = map[string]string{}
		}
		for key, value := range s.NodeSelector {
			if podValue, ok := pod.Spec.NodeSelector[key]; ok && podValue != value {
				return admission.Forbidden(a, fmt.Errorf("conflict: runtimeClass.scheduling.nodeSelector[%s] = %s; pod.spec.nodeSelector[%s] = %s", key, value, key, podValue))
			}
			pod.Spec.NodeSelector[key] = value
		}
		pod.Spec.Tolerations = mergeTolerations(pod.Spec.Tolerations, s.Tolerations)
	}
	return nil
}

// Validate implements admission.Plugin: a new pod's overhead is its
// RuntimeClass's, and only a RuntimeClass's.
func (p *Plugin) Validate(ctx context.Context, a *admission.Attributes) error {
	pod, class, err := p.prepare(ctx, a)
	if err != nil || pod == nil {
		return err
	}
	if class != nil && class.Overhead != nil {
		if !apiequality.Semantic.DeepEqual(class.Overhead.PodFixed, pod.Spec.Overhead) {
			return admission.Forbidden(a, errors.New("pod rejected: Pod's Overhead doesn't match RuntimeClass's defined Overhead"))
		}
		return nil
	}
	if pod.Spec.Overhead != nil {
		return admission.Forbidden(a, errors.New("pod rejected: Pod Overhead set without corresponding RuntimeClass defined Overhead"))
	}
	return nil
}

// prepare is the pod of a pod create and its RuntimeClass (nil for a
// pod without one, and for other writes).
func (p *Plugin) prepare(ctx context.Context, a *admission.Attributes) (*corev1.Pod, *nodev1.RuntimeClass, error) {
	if a.Operation != admission.Create || a.Resource != podResource || a.Subresource != "" {
		return nil, nil, nil
	}
	pod, ok := a.Object.(*corev1.Pod)
	if !ok {
		return nil, nil, apierrors.NewBadRequest("Resource was marked with kind Pod but was unable to be converted")
	}
	if pod.Spec.RuntimeClassName == nil {
		return pod, nil, nil
	}
	name := *pod.Spec.RuntimeClassName
	class, err := p.classes.Get(name)
	if apierrors.IsNotFound(err) {
		// The cache may lag behind a RuntimeClass just made.
		class, err = p.client.NodeV1().RuntimeClasses().Get(ctx, name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return nil, nil, admission.Forbidden(a, fmt.Errorf("pod rejected: RuntimeClass %q not found", name))
		}
	}
	if err != nil {
		return nil, nil, err
	}
	return pod, class, nil
}

// mergeTolerations adds to the pod's tolerations each of the
// RuntimeClass's that no toleration of the pod already covers.
func mergeTolerations(pod, class []corev1.Toleration) []corev1.Toleration {
	out := pod
	for _, t := range class {
		covered := false
		for _, have := range out {
			if covers(have, t) {
				covered = true
				break
			}
		}
		if !covered {
			out = append(out, t)
		}
	}
	return out
}

// covers reports whether toleration a tolerates every taint b does, as
// upstream's isSuperset.
func covers(a, b corev1.Toleration) bool {
	if apiequality.Semantic.DeepEqual(a, b) {
		return true
	}
	if a.Key != b.Key && !(a.Key == "" && a.Operator == corev1.TolerationOpExists) {
		return false
	}
	if a.Effect != "" && a.Effect != b.Effect {
		return false
	}
	if a.Effect == corev1.TaintEffectNoExecute {
		switch {
		case a.TolerationSeconds == nil:
		case b.TolerationSeconds == nil || *b.TolerationSeconds > *a.TolerationSeconds:
			return false
		}
	}
	switch a.Operator {
	case corev1.TolerationOpExists:
		return true
	case corev1.TolerationOpEqual, "":
		return (b.Operator == corev1.TolerationOpEqual || b.Operator == "") && a.Value == b.Value
	}
	return false
}
