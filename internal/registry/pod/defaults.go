package pod

import (
	corev1 "k8s.io/api/core/v1"

	"github.com/svcnet/svcnet/internal/registry/validate"
)

// Upstream admission constants.
const (
	defaultServiceAccount    = "default"
	mirrorPodAnnotation      = "kubernetes.io/config.mirror"
	defaultTolerationSeconds = int64(300)
)

// defaultPod applies upstream's SetDefaults_Pod on top of the pod spec
// defaults, and keeps the deprecated serviceAccount field in step with
// serviceAccountName as the v1 conversion does.
func defaultPod(pod *corev1.Pod) {
	validate.DefaultPodSpec(&pod.Spec)
	for _, list := range [][]corev1.Container{pod.Spec.Containers, pod.Spec.InitContainers} {
		for i := range list {
			requestsFromLimits(&list[i].Resources)
		}
	}
	if pod.Spec.EnableServiceLinks == nil {
		enable := corev1.DefaultEnableServiceLinks
		pod.Spec.EnableServiceLinks = &enable
	}
	if pod.Spec.HostNetwork {
		for _, list := range [][]corev1.Container{pod.Spec.Containers, pod.Spec.InitContainers} {
			for i := range list {
				for j := range list[i].Ports {
					if list[i].Ports[j].HostPort == 0 {
						list[i].Ports[j].HostPort = list[i].Ports[j].ContainerPort
					}
				}
			}
		}
	}
	if pod.Spec.ServiceAccountName == "" {
		pod.Spec.ServiceAccountName = pod.Spec.DeprecatedServiceAccount
	}
	pod.Spec.DeprecatedServiceAccount = pod.Spec.ServiceAccountName
}

// requestsFromLimits defaults a missing request to its limit.
func requestsFromLimits(r *corev1.ResourceRequirements) {
	if r.Limits == nil {
		return
	}
	if r.Requests == nil {
		r.Requests = corev1.ResourceList{}
	}
	for name, limit := range r.Limits {
		if _, ok := r.Requests[name]; !ok {
			r.Requests[name] = limit.DeepCopy()
		}
	}
}

// admitTolerations is the DefaultTolerationSeconds admission plugin: a pod
// tolerates a not-ready or unreachable node for 300s unless it says more.
func admitTolerations(pod *corev1.Pod) {
	for _, taint := range []string{corev1.TaintNodeNotReady, corev1.TaintNodeUnreachable} {
		tolerated := false
		for _, t := range pod.Spec.Tolerations {
			if (t.Key == taint || t.Key == "") && (t.Effect == corev1.TaintEffectNoExecute || t.Effect == "") {
				tolerated = true
			}
		}
		if !tolerated {
			seconds := defaultTolerationSeconds
			pod.Spec.Tolerations = append(pod.Spec.Tolerations, corev1.Toleration{
				Key: taint, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute, TolerationSeconds: &seconds,
			})
		}
	}
}
