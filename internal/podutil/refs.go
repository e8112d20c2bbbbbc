// Package podutil names the objects a pod uses, as upstream's
// pkg/api/pod visitors: the Secrets and ConfigMaps its volumes, projected
// volumes, environment and image pull secrets read, the claims of its
// volumes, and its ResourceClaims. The Node authorizer lets a node read
// exactly these, and the node watches all but the ResourceClaims. It also
// lists the host ports a pod takes, which the scheduler and the node's
// admission both keep apart.
package podutil

import (
	corev1 "k8s.io/api/core/v1"
)

// envSources gathers the env and envFrom of all the pod's containers.
func envSources(pod *corev1.Pod) (env []corev1.EnvVar, from []corev1.EnvFromSource) {
	add := func(e []corev1.EnvVar, f []corev1.EnvFromSource) {
		env = append(env, e...)
		from = append(from, f...)
	}
	for i := range pod.Spec.InitContainers {
		add(pod.Spec.InitContainers[i].Env, pod.Spec.InitContainers[i].EnvFrom)
	}
	for i := range pod.Spec.Containers {
		add(pod.Spec.Containers[i].Env, pod.Spec.Containers[i].EnvFrom)
	}
	for i := range pod.Spec.EphemeralContainers {
		add(pod.Spec.EphemeralContainers[i].Env, pod.Spec.EphemeralContainers[i].EnvFrom)
	}
	return env, from
}

// Secrets names the Secrets the pod reads: image pull secrets, secret
// and projected volumes, and its containers' env and envFrom.
func Secrets(pod *corev1.Pod) []string {
	var names []string
	for _, s := range pod.Spec.ImagePullSecrets {
		names = append(names, s.Name)
	}
	names = append(names, VolumeSecrets(pod)...)
	env, from := envSources(pod)
	for _, e := range env {
		if e.ValueFrom != nil && e.ValueFrom.SecretKeyRef != nil {
			names = append(names, e.ValueFrom.SecretKeyRef.Name)
		}
	}
	for _, f := range from {
		if f.SecretRef != nil {
			names = append(names, f.SecretRef.Name)
		}
	}
	return nonEmpty(names)
}

// ConfigMaps names the ConfigMaps the pod reads: configMap and projected
// volumes, and its containers' env and envFrom.
func ConfigMaps(pod *corev1.Pod) []string {
	names := VolumeConfigMaps(pod)
	env, from := envSources(pod)
	for _, e := range env {
		if e.ValueFrom != nil && e.ValueFrom.ConfigMapKeyRef != nil {
			names = append(names, e.ValueFrom.ConfigMapKeyRef.Name)
		}
	}
	for _, f := range from {
		if f.ConfigMapRef != nil {
			names = append(names, f.ConfigMapRef.Name)
		}
	}
	return nonEmpty(names)
}

// VolumeSecrets names the Secrets the pod's volumes project.
func VolumeSecrets(pod *corev1.Pod) []string {
	var names []string
	for _, v := range pod.Spec.Volumes {
		switch {
		case v.Secret != nil:
			names = append(names, v.Secret.SecretName)
		case v.Projected != nil:
			for _, s := range v.Projected.Sources {
				if s.Secret != nil {
					names = append(names, s.Secret.Name)
				}
			}
		}
	}
	return nonEmpty(names)
}

// VolumeConfigMaps names the ConfigMaps the pod's volumes project.
func VolumeConfigMaps(pod *corev1.Pod) []string {
	var names []string
	for _, v := range pod.Spec.Volumes {
		switch {
		case v.ConfigMap != nil:
			names = append(names, v.ConfigMap.Name)
		case v.Projected != nil:
			for _, s := range v.Projected.Sources {
				if s.ConfigMap != nil {
					names = append(names, s.ConfigMap.Name)
				}
			}
		}
	}
	return nonEmpty(names)
}

// Claims names the PersistentVolumeClaims of the pod's volumes, the
// claims of its ephemeral volumes (<pod>-<volume>) included.
func Claims(pod *corev1.Pod) []string {
	var names []string
	for _, v := range pod.Spec.Volumes {
		switch {
		case v.PersistentVolumeClaim != nil:
			names = append(names, v.PersistentVolumeClaim.ClaimName)
		case v.Ephemeral != nil:
			names = append(names, pod.Name+"-"+v.Name)
		}
	}
	return nonEmpty(names)
}

// ResourceClaims names the ResourceClaims (resource.k8s.io) the pod uses,
// as upstream's resourceclaim.PodClaims: those its spec.resourceClaims
// name, those made from a template for it (in its status, unless not
// needed) and its extended resources' claim.
func ResourceClaims(pod *corev1.Pod) []string {
	var names []string
	for _, c := range pod.Spec.ResourceClaims {
		switch {
		case c.ResourceClaimName != nil:
			names = append(names, *c.ResourceClaimName)
		case c.ResourceClaimTemplateName != nil:
			for _, st := range pod.Status.ResourceClaimStatuses {
				if st.Name == c.Name && st.ResourceClaimName != nil {
					names = append(names, *st.ResourceClaimName)
				}
			}
		}
	}
	if st := pod.Status.ExtendedResourceClaimStatus; st != nil {
		names = append(names, st.ResourceClaimName)
	}
	return nonEmpty(names)
}

func nonEmpty(names []string) []string {
	out := names[:0]
	for _, n := range names {
		if n != "" {
			out = append(out, n)
		}
	}
	return out
}
