package validate

import (
	"strings"

	corev1 "k8s.io/api/core/v1"
)

// Default file modes and token lifetime of volume sources.
const (
	defaultFileMode        int32 = 0644
	defaultTokenExpiration int64 = 3600
)

// DefaultPodSpec fills in what upstream defaults in a pod spec and in
// everything it contains (containers, probes, volumes), for pods and pod
// templates alike.
func DefaultPodSpec(spec *corev1.PodSpec) {
	if spec.DNSPolicy == "" {
		spec.DNSPolicy = corev1.DNSClusterFirst
	}
	if spec.RestartPolicy == "" {
		spec.RestartPolicy = corev1.RestartPolicyAlways
	}
	if spec.SecurityContext == nil {
		spec.SecurityContext = &corev1.PodSecurityContext{}
	}
	if spec.TerminationGracePeriodSeconds == nil {
		period := int64(corev1.DefaultTerminationGracePeriodSeconds)
		spec.TerminationGracePeriodSeconds = &period
	}
	if spec.SchedulerName == "" {
		spec.SchedulerName = corev1.DefaultSchedulerName
	}
	for i := range spec.Containers {
		defaultContainer(&spec.Containers[i])
	}
	for i := range spec.InitContainers {
		defaultContainer(&spec.InitContainers[i])
	}
	for i := range spec.EphemeralContainers {
		defaultContainer((*corev1.Container)(&spec.EphemeralContainers[i].EphemeralContainerCommon))
	}
	for i := range spec.Volumes {
		defaultVolume(&spec.Volumes[i])
	}
	RoundResources(spec.Overhead)
	if spec.Resources != nil {
		RoundResources(spec.Resources.Limits)
		RoundResources(spec.Resources.Requests)
	}
}

// defaultContainer fills in a container's defaults: the pull policy from
// the image tag, the termination message, port protocols, probe timings.
func defaultContainer(c *corev1.Container) {
	if c.ImagePullPolicy == "" {
		c.ImagePullPolicy = PullPolicyFor(c.Image)
	}
	if c.TerminationMessagePath == "" {
		c.TerminationMessagePath = corev1.TerminationMessagePathDefault
	}
	if c.TerminationMessagePolicy == "" {
		c.TerminationMessagePolicy = corev1.TerminationMessageReadFile
	}
	for i := range c.Ports {
		if c.Ports[i].Protocol == "" {
			c.Ports[i].Protocol = corev1.ProtocolTCP
		}
	}
	for i := range c.Env {
		if from := c.Env[i].ValueFrom; from != nil {
			defaultFieldRef(from.FieldRef)
		}
	}
	for _, p := range []*corev1.Probe{c.LivenessProbe, c.ReadinessProbe, c.StartupProbe} {
		defaultProbe(p)
	}
	if l := c.Lifecycle; l != nil {
		for _, h := range []*corev1.LifecycleHandler{l.PostStart, l.PreStop} {
			if h != nil {
				defaultHTTPGet(h.HTTPGet)
			}
		}
	}
	RoundResources(c.Resources.Limits)
	RoundResources(c.Resources.Requests)
}

// PullPolicyFor is the pull policy of an image that does not say: Always for
// ":latest" or an untagged image, IfNotPresent otherwise (including a
// reference that does not parse).
func PullPolicyFor(image string) corev1.PullPolicy {
	if imageTag(image) == "latest" {
		return corev1.PullAlways
	}
	return corev1.PullIfNotPresent
}

// imageTag returns the tag of an image reference: "latest" when it has
// neither tag nor digest, "" when it has only a digest or does not parse.
func imageTag(image string) string {
	name, _, digested := strings.Cut(image, "@")
	if name == "" || strings.ContainsAny(image, " \t\n") {
		return ""
	}
	repo, tag := name, ""
	if i := strings.LastIndex(name, ":"); i > strings.LastIndex(name, "/") {
		repo, tag = name[:i], name[i+1:]
	}
	path := repo
	if first, rest, ok := strings.Cut(repo, "/"); ok && (strings.ContainsAny(first, ".:") || first == "localhost") {
		path = rest
	}
	if path != strings.ToLower(path) {
		return ""
	}
	if tag == "" && !digested {
		return "latest"
	}
	return tag
}

func defaultFieldRef(ref *corev1.ObjectFieldSelector) {
	if ref != nil && ref.APIVersion == "" {
		ref.APIVersion = "v1"
	}
}

func defaultProbe(p *corev1.Probe) {
	if p == nil {
		return
	}
	if p.TimeoutSeconds == 0 {
		p.TimeoutSeconds = 1
	}
	if p.PeriodSeconds == 0 {
		p.PeriodSeconds = 10
	}
	if p.SuccessThreshold == 0 {
		p.SuccessThreshold = 1
	}
	if p.FailureThreshold == 0 {
		p.FailureThreshold = 3
	}
	defaultHTTPGet(p.HTTPGet)
}

func defaultHTTPGet(h *corev1.HTTPGetAction) {
	if h == nil {
		return
	}
	if h.Path == "" {
		h.Path = "/"
	}
	if h.Scheme == "" {
		h.Scheme = corev1.URISchemeHTTP
	}
}

func defaultMode(mode **int32) {
	if *mode == nil {
		m := defaultFileMode
		*mode = &m
	}
}

func defaultVolume(v *corev1.Volume) {
	src := &v.VolumeSource
	if *src == (corev1.VolumeSource{}) {
		src.EmptyDir = &corev1.EmptyDirVolumeSource{}
	}
	if src.HostPath != nil {
		DefaultHostPath(src.HostPath)
	}
	if src.Secret != nil {
		defaultMode(&src.Secret.DefaultMode)
	}
	if src.ConfigMap != nil {
		defaultMode(&src.ConfigMap.DefaultMode)
	}
	if d := src.DownwardAPI; d != nil {
		defaultMode(&d.DefaultMode)
		for i := range d.Items {
			defaultFieldRef(d.Items[i].FieldRef)
		}
	}
	if pr := src.Projected; pr != nil {
		defaultMode(&pr.DefaultMode)
		for _, s := range pr.Sources {
			if t := s.ServiceAccountToken; t != nil && t.ExpirationSeconds == nil {
				e := defaultTokenExpiration
				t.ExpirationSeconds = &e
			}
			if s.DownwardAPI != nil {
				for i := range s.DownwardAPI.Items {
					defaultFieldRef(s.DownwardAPI.Items[i].FieldRef)
				}
			}
		}
	}
	if e := src.Ephemeral; e != nil && e.VolumeClaimTemplate != nil {
		DefaultPersistentVolumeClaimSpec(&e.VolumeClaimTemplate.Spec)
	}
	if img := src.Image; img != nil && img.PullPolicy == "" {
		img.PullPolicy = PullPolicyFor(img.Reference)
	}
}

// DefaultHostPath sets the unset host path type ("") explicitly.
func DefaultHostPath(h *corev1.HostPathVolumeSource) {
	if h.Type == nil {
		t := corev1.HostPathUnset
		h.Type = &t
	}
}

// DefaultPersistentVolumeClaimSpec defaults a claim spec (claims and the
// claim templates of ephemeral volumes): Filesystem mode, rounded sizes.
func DefaultPersistentVolumeClaimSpec(spec *corev1.PersistentVolumeClaimSpec) {
	if spec.VolumeMode == nil {
		m := corev1.PersistentVolumeFilesystem
		spec.VolumeMode = &m
	}
	RoundResources(spec.Resources.Limits)
	RoundResources(spec.Resources.Requests)
}
