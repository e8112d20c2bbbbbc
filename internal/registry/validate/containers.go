package validate

import (
	"fmt"
	"reflect"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apivalidation "k8s.io/apimachinery/pkg/api/validation"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

var (
	pullPolicies          = []corev1.PullPolicy{corev1.PullAlways, corev1.PullIfNotPresent, corev1.PullNever}
	terminationPolicies   = []corev1.TerminationMessagePolicy{corev1.TerminationMessageReadFile, corev1.TerminationMessageFallbackToLogsOnError}
	httpSchemes           = []corev1.URIScheme{corev1.URISchemeHTTP, corev1.URISchemeHTTPS}
	mountPropagations     = []corev1.MountPropagationMode{corev1.MountPropagationBidirectional, corev1.MountPropagationHostToContainer, corev1.MountPropagationNone}
	resizeResources       = []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory}
	resizeRestartPolicies = []corev1.ResourceResizeRestartPolicy{corev1.NotRequired, corev1.RestartContainer}
	seccompTypes          = []corev1.SeccompProfileType{corev1.SeccompProfileTypeLocalhost, corev1.SeccompProfileTypeRuntimeDefault, corev1.SeccompProfileTypeUnconfined}
)

// podContext is what container checks need to know about their pod.
type podContext struct {
	volumes       map[string]corev1.VolumeSource
	gracePeriod   *int64
	restartPolicy corev1.RestartPolicy
}

// containerCommon applies the checks every kind of container shares.
func containerCommon(c *corev1.Container, pod *podContext, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	if c.Name == "" {
		errs = append(errs, field.Required(p.Child("name"), ""))
	} else {
		errs = append(errs, DNSLabel(c.Name, p.Child("name"))...)
	}
	if c.Image == "" {
		errs = append(errs, field.Required(p.Child("image"), ""))
	}
	errs = append(errs, oneOf(c.TerminationMessagePolicy, terminationPolicies, p.Child("terminationMessagePolicy"))...)
	errs = append(errs, ContainerPorts(c.Ports, p.Child("ports"))...)
	errs = append(errs, Env(c.Env, p.Child("env"))...)
	errs = append(errs, EnvFrom(c.EnvFrom, p.Child("envFrom"))...)
	errs = append(errs, volumeMounts(c, pod.volumes, p.Child("volumeMounts"))...)
	errs = append(errs, volumeDevices(c, pod.volumes, p.Child("volumeDevices"))...)
	errs = append(errs, oneOf(c.ImagePullPolicy, pullPolicies, p.Child("imagePullPolicy"))...)
	errs = append(errs, ResourceRequirements(&c.Resources, p.Child("resources"))...)
	errs = append(errs, resizePolicy(c.ResizePolicy, pod.restartPolicy, p.Child("resizePolicy"))...)
	return append(errs, securityContext(c.SecurityContext, p.Child("securityContext"))...)
}

// resizePolicy checks how a container takes an in-place resize: once per
// resource, cpu or memory, and without a restart in a pod that never
// restarts its containers.
func resizePolicy(policies []corev1.ContainerResizePolicy, restart corev1.RestartPolicy, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	seen := map[corev1.ResourceName]bool{}
	for i, policy := range policies {
		if seen[policy.ResourceName] {
			errs = append(errs, field.Duplicate(p.Index(i), policy.ResourceName))
		}
		seen[policy.ResourceName] = true
		errs = append(errs, oneOf(policy.ResourceName, resizeResources, p)...)
		errs = append(errs, oneOf(policy.RestartPolicy, resizeRestartPolicies, p)...)
		if restart == corev1.RestartPolicyNever && policy.RestartPolicy != corev1.NotRequired {
			errs = append(errs, field.Invalid(p, policy.RestartPolicy, "must be 'NotRequired' when pod `restartPolicy` is 'Never'"))
		}
	}
	return errs
}

func volumeMounts(c *corev1.Container, volumes map[string]corev1.VolumeSource, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	devices := map[string]string{}
	for _, d := range c.VolumeDevices {
		devices[d.Name] = d.DevicePath
	}
	mountPoints := map[string]bool{}
	for i, m := range c.VolumeMounts {
		mp := p.Index(i)
		if m.Name == "" {
			errs = append(errs, field.Required(mp.Child("name"), ""))
		}
		if _, ok := volumes[m.Name]; !ok {
			errs = append(errs, field.NotFound(mp.Child("name"), m.Name))
		}
		if m.MountPath == "" {
			errs = append(errs, field.Required(mp.Child("mountPath"), ""))
		}
		if mountPoints[m.MountPath] {
			errs = append(errs, field.Invalid(mp.Child("mountPath"), m.MountPath, "must be unique"))
		}
		mountPoints[m.MountPath] = true
		errs = append(errs, usedByOther(m.Name, m.MountPath, devices, "volumeDevices", mp.Child("name"), mp.Child("mountPath"))...)
		if v, ok := volumes[m.Name]; ok && v.Image != nil {
			if m.SubPath != "" {
				errs = append(errs, field.Invalid(mp.Child("subPath"), m.SubPath, "not allowed in image volume sources"))
			}
			if m.SubPathExpr != "" {
				errs = append(errs, field.Invalid(mp.Child("subPathExpr"), m.SubPathExpr, "not allowed in image volume sources"))
			}
		}
		// upstream reports sub-path errors without the mount's index
		if m.SubPath != "" {
			errs = append(errs, localDescendingPath(m.SubPath, p.Child("subPath"))...)
		}
		if m.SubPathExpr != "" {
			if m.SubPath != "" {
				errs = append(errs, field.Invalid(mp.Child("subPathExpr"), m.SubPathExpr, "subPathExpr and subPath are mutually exclusive"))
			}
			errs = append(errs, localDescendingPath(m.SubPathExpr, p.Child("subPathExpr"))...)
		}
		if prop := m.MountPropagation; prop != nil {
			errs = append(errs, mountPropagation(*prop, c, p.Child("mountPropagation"))...)
		}
		errs = append(errs, recursiveReadOnly(m, p.Child("recursiveReadOnly"))...)
	}
	return errs
}

// usedByOther rejects a volume mount or device whose volume, or whose path,
// the container's other list (volumeMounts or volumeDevices, given as
// volume name to path) already uses.
func usedByOther(name, path string, other map[string]string, otherField string, namePath, pathPath *field.Path) field.ErrorList {
	var errs field.ErrorList
	if _, ok := other[name]; ok {
		errs = append(errs, field.Invalid(namePath, name, "must not already exist in "+otherField))
	}
	for _, otherPath := range other {
		if otherPath == path {
			errs = append(errs, field.Invalid(pathPath, path, "must not already exist as a path in "+otherField))
			break
		}
	}
	return errs
}

func mountPropagation(prop corev1.MountPropagationMode, c *corev1.Container, p *field.Path) field.ErrorList {
	switch prop {
	case corev1.MountPropagationBidirectional:
		if sc := c.SecurityContext; sc == nil || sc.Privileged == nil || !*sc.Privileged {
			return field.ErrorList{field.Forbidden(p, "Bidirectional mount propagation is available only to privileged containers")}
		}
	case corev1.MountPropagationHostToContainer, corev1.MountPropagationNone:
	default:
		return field.ErrorList{field.NotSupported(p, prop, mountPropagations)}
	}
	return nil
}

func recursiveReadOnly(m corev1.VolumeMount, p *field.Path) field.ErrorList {
	if m.RecursiveReadOnly == nil {
		return nil
	}
	var errs field.ErrorList
	switch *m.RecursiveReadOnly {
	case corev1.RecursiveReadOnlyDisabled:
	case corev1.RecursiveReadOnlyEnabled, corev1.RecursiveReadOnlyIfPossible:
		if !m.ReadOnly {
			errs = append(errs, field.Forbidden(p, "may only be specified when readOnly is true"))
		}
		if m.MountPropagation != nil && *m.MountPropagation != corev1.MountPropagationNone {
			errs = append(errs, field.Forbidden(p, "may only be specified when mountPropagation is None or not specified"))
		}
	default:
		errs = append(errs, field.NotSupported(p, *m.RecursiveReadOnly, []corev1.RecursiveReadOnlyMode{
			corev1.RecursiveReadOnlyDisabled, corev1.RecursiveReadOnlyEnabled, corev1.RecursiveReadOnlyIfPossible}))
	}
	return errs
}

func volumeDevices(c *corev1.Container, volumes map[string]corev1.VolumeSource, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	mounts := map[string]string{}
	for _, m := range c.VolumeMounts {
		mounts[m.Name] = m.MountPath
	}
	paths, names := map[string]bool{}, map[string]bool{}
	for i, d := range c.VolumeDevices {
		dp := p.Index(i)
		src, found := volumes[d.Name]
		if d.Name == "" {
			errs = append(errs, field.Required(dp.Child("name"), ""))
		}
		if names[d.Name] {
			errs = append(errs, field.Invalid(dp.Child("name"), d.Name, "must be unique"))
		}
		if found && src.PersistentVolumeClaim == nil && src.Ephemeral == nil {
			errs = append(errs, field.Invalid(dp.Child("name"), d.Name, "can only use volume source type of PersistentVolumeClaim or Ephemeral for block mode"))
		}
		if !found {
			errs = append(errs, field.NotFound(dp.Child("name"), d.Name))
		}
		if d.DevicePath == "" {
			errs = append(errs, field.Required(dp.Child("devicePath"), ""))
		}
		if paths[d.DevicePath] {
			errs = append(errs, field.Invalid(dp.Child("devicePath"), d.DevicePath, "must be unique"))
		}
		if d.DevicePath != "" && len(NoBacksteps(d.DevicePath, dp)) > 0 {
			errs = append(errs, field.Invalid(dp.Child("devicePath"), d.DevicePath, "can not contain backsteps ('..')"))
		} else {
			paths[d.DevicePath] = true
		}
		errs = append(errs, usedByOther(d.Name, d.DevicePath, mounts, "volumeMounts", dp.Child("name"), dp.Child("devicePath"))...)
		if d.Name != "" {
			names[d.Name] = true
		}
	}
	return errs
}

// handler is the union of probe and lifecycle handler actions.
type handler struct {
	exec      *corev1.ExecAction
	httpGet   *corev1.HTTPGetAction
	tcpSocket *corev1.TCPSocketAction
	grpc      *corev1.GRPCAction
	sleep     *corev1.SleepAction
}

func (h handler) check(gracePeriod *int64, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	n := 0
	one := func(name string, set bool, check func(p *field.Path) field.ErrorList) {
		if !set {
			return
		}
		if n > 0 {
			errs = append(errs, field.Forbidden(p.Child(name), "may not specify more than 1 handler type"))
			return
		}
		n++
		errs = append(errs, check(p.Child(name))...)
	}
	one("exec", h.exec != nil, func(p *field.Path) field.ErrorList {
		if len(h.exec.Command) == 0 {
			return field.ErrorList{field.Required(p.Child("command"), "")}
		}
		return nil
	})
	one("httpGet", h.httpGet != nil, func(p *field.Path) field.ErrorList { return httpGet(h.httpGet, p) })
	one("tcpSocket", h.tcpSocket != nil, func(p *field.Path) field.ErrorList {
		return PortNumOrName(h.tcpSocket.Port, p.Child("port"))
	})
	one("grpc", h.grpc != nil, func(p *field.Path) field.ErrorList {
		return PortNumOrName(intstr.FromInt32(h.grpc.Port), p.Child("port"))
	})
	one("sleep", h.sleep != nil, func(p *field.Path) field.ErrorList {
		if gracePeriod != nil && (h.sleep.Seconds < 0 || h.sleep.Seconds > *gracePeriod) {
			return field.ErrorList{field.Invalid(p, h.sleep.Seconds,
				fmt.Sprintf("must be non-negative and less than terminationGracePeriodSeconds (%d)", *gracePeriod))}
		}
		return nil
	})
	if n == 0 {
		errs = append(errs, field.Required(p, "must specify a handler type"))
	}
	return errs
}

func httpGet(h *corev1.HTTPGetAction, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	if h.Path == "" {
		errs = append(errs, field.Required(p.Child("path"), ""))
	}
	errs = append(errs, PortNumOrName(h.Port, p.Child("port"))...)
	if h.Scheme != corev1.URISchemeHTTP && h.Scheme != corev1.URISchemeHTTPS {
		errs = append(errs, field.NotSupported(p.Child("scheme"), h.Scheme, httpSchemes))
	}
	for _, header := range h.HTTPHeaders {
		errs = append(errs, Invalid(p.Child("httpHeaders"), header.Name, validation.IsHTTPHeaderName(header.Name))...)
	}
	return errs
}

func lifecycle(l *corev1.Lifecycle, gracePeriod *int64, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	if h := l.PostStart; h != nil {
		errs = append(errs, handler{exec: h.Exec, httpGet: h.HTTPGet, tcpSocket: h.TCPSocket, sleep: h.Sleep}.check(gracePeriod, p.Child("postStart"))...)
	}
	if h := l.PreStop; h != nil {
		errs = append(errs, handler{exec: h.Exec, httpGet: h.HTTPGet, tcpSocket: h.TCPSocket, sleep: h.Sleep}.check(gracePeriod, p.Child("preStop"))...)
	}
	return errs
}

// probe checks one probe; kind is "liveness", "readiness" or "startup".
func probe(pr *corev1.Probe, kind string, gracePeriod *int64, p *field.Path) field.ErrorList {
	if pr == nil {
		return nil
	}
	h := pr.ProbeHandler
	errs := handler{exec: h.Exec, httpGet: h.HTTPGet, tcpSocket: h.TCPSocket, grpc: h.GRPC}.check(gracePeriod, p)
	errs = append(errs, apivalidation.ValidateNonnegativeField(int64(pr.InitialDelaySeconds), p.Child("initialDelaySeconds"))...)
	errs = append(errs, apivalidation.ValidateNonnegativeField(int64(pr.TimeoutSeconds), p.Child("timeoutSeconds"))...)
	errs = append(errs, apivalidation.ValidateNonnegativeField(int64(pr.PeriodSeconds), p.Child("periodSeconds"))...)
	errs = append(errs, apivalidation.ValidateNonnegativeField(int64(pr.SuccessThreshold), p.Child("successThreshold"))...)
	errs = append(errs, apivalidation.ValidateNonnegativeField(int64(pr.FailureThreshold), p.Child("failureThreshold"))...)
	if t := pr.TerminationGracePeriodSeconds; t != nil && *t <= 0 {
		errs = append(errs, field.Invalid(p.Child("terminationGracePeriodSeconds"), *t, "must be greater than 0"))
	}
	switch kind {
	case "liveness", "startup":
		if pr.SuccessThreshold != 1 {
			errs = append(errs, field.Invalid(p.Child("successThreshold"), pr.SuccessThreshold, "must be 1"))
		}
	case "readiness":
		if pr.TerminationGracePeriodSeconds != nil {
			errs = append(errs, field.Invalid(p.Child("terminationGracePeriodSeconds"), pr.TerminationGracePeriodSeconds, "must not be set for readinessProbes"))
		}
	}
	return errs
}

// probesAndLifecycle checks what regular and sidecar containers may carry.
func probesAndLifecycle(c *corev1.Container, gracePeriod *int64, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	if c.Lifecycle != nil {
		errs = append(errs, lifecycle(c.Lifecycle, gracePeriod, p.Child("lifecycle"))...)
	}
	errs = append(errs, probe(c.LivenessProbe, "liveness", gracePeriod, p.Child("livenessProbe"))...)
	errs = append(errs, probe(c.ReadinessProbe, "readiness", gracePeriod, p.Child("readinessProbe"))...)
	return append(errs, probe(c.StartupProbe, "startup", gracePeriod, p.Child("startupProbe"))...)
}

func securityContext(sc *corev1.SecurityContext, p *field.Path) field.ErrorList {
	if sc == nil {
		return nil
	}
	errs := runAsIDs(sc.RunAsUser, sc.RunAsGroup, p)
	errs = append(errs, seccompProfile(sc.SeccompProfile, p.Child("seccompProfile"))...)
	if sc.AllowPrivilegeEscalation != nil && !*sc.AllowPrivilegeEscalation {
		if sc.Privileged != nil && *sc.Privileged {
			errs = append(errs, field.Invalid(p, sc, "cannot set `allowPrivilegeEscalation` to false and `privileged` to true"))
		}
		if sc.Capabilities != nil {
			for _, c := range sc.Capabilities.Add {
				if string(c) == "CAP_SYS_ADMIN" {
					errs = append(errs, field.Invalid(p, sc, "cannot set `allowPrivilegeEscalation` to false and `capabilities.Add` CAP_SYS_ADMIN"))
				}
			}
		}
	}
	return errs
}

// runAsIDs checks the runAsUser and runAsGroup of a pod or container
// security context.
func runAsIDs(user, group *int64, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	if user != nil {
		for _, msg := range validation.IsValidUserID(*user) {
			errs = append(errs, field.Invalid(p.Child("runAsUser"), *user, msg))
		}
	}
	if group != nil {
		for _, msg := range validation.IsValidGroupID(*group) {
			errs = append(errs, field.Invalid(p.Child("runAsGroup"), *group, msg))
		}
	}
	return errs
}

func seccompProfile(sp *corev1.SeccompProfile, p *field.Path) field.ErrorList {
	if sp == nil {
		return nil
	}
	var errs field.ErrorList
	switch sp.Type {
	case corev1.SeccompProfileTypeLocalhost, corev1.SeccompProfileTypeRuntimeDefault, corev1.SeccompProfileTypeUnconfined:
	case "":
		errs = append(errs, field.Required(p.Child("type"), "type is required when seccompProfile is set"))
	default:
		errs = append(errs, field.NotSupported(p.Child("type"), sp.Type, seccompTypes))
	}
	if sp.Type == corev1.SeccompProfileTypeLocalhost {
		if sp.LocalhostProfile == nil {
			errs = append(errs, field.Required(p.Child("localhostProfile"), "must be set when seccomp type is Localhost"))
		} else {
			errs = append(errs, localDescendingPath(*sp.LocalhostProfile, p.Child("localhostProfile"))...)
		}
	} else if sp.LocalhostProfile != nil {
		errs = append(errs, field.Invalid(p.Child("localhostProfile"), sp, "can only be set when seccomp type is Localhost"))
	}
	return errs
}

// containers checks a pod's regular containers.
func containers(list []corev1.Container, pod *podContext, p *field.Path) field.ErrorList {
	if len(list) == 0 {
		return field.ErrorList{field.Required(p, "")}
	}
	var errs field.ErrorList
	names := map[string]bool{}
	for i := range list {
		c := &list[i]
		cp := p.Index(i)
		errs = append(errs, containerCommon(c, pod, cp)...)
		if names[c.Name] {
			errs = append(errs, field.Duplicate(cp.Child("name"), c.Name))
		}
		names[c.Name] = true
		errs = append(errs, probesAndLifecycle(c, pod.gracePeriod, cp)...)
		if c.RestartPolicy != nil {
			errs = append(errs, field.Forbidden(cp.Child("restartPolicy"), "may not be set for non-init containers"))
		}
	}
	return append(errs, hostPortConflicts(list, p)...)
}

// IsSidecar reports whether an init container keeps running beside the
// regular ones (restartPolicy: Always).
func IsSidecar(c *corev1.Container) bool {
	return c != nil && c.RestartPolicy != nil && *c.RestartPolicy == corev1.ContainerRestartPolicyAlways
}

// initContainers checks a pod's init containers, whose names must also not
// clash with the regular ones.
func initContainers(list, regular []corev1.Container, pod *podContext, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	names := map[string]bool{}
	for _, c := range regular {
		names[c.Name] = true
	}
	for i := range list {
		c := &list[i]
		cp := p.Index(i)
		errs = append(errs, containerCommon(c, pod, cp)...)
		if c.RestartPolicy != nil && *c.RestartPolicy != corev1.ContainerRestartPolicyAlways {
			errs = append(errs, field.NotSupported(cp.Child("restartPolicy"), *c.RestartPolicy,
				[]corev1.ContainerRestartPolicy{corev1.ContainerRestartPolicyAlways}))
		}
		if names[c.Name] {
			errs = append(errs, field.Duplicate(cp.Child("name"), c.Name))
		} else if c.Name != "" {
			names[c.Name] = true
		}
		errs = append(errs, hostPortConflicts([]corev1.Container{*c}, p)...)
		if IsSidecar(c) {
			errs = append(errs, probesAndLifecycle(c, pod.gracePeriod, cp)...)
			continue
		}
		const msg = "may not be set for init containers without restartPolicy=Always"
		if c.Lifecycle != nil {
			errs = append(errs, field.Forbidden(cp.Child("lifecycle"), msg))
		}
		if c.LivenessProbe != nil {
			errs = append(errs, field.Forbidden(cp.Child("livenessProbe"), msg))
		}
		if c.ReadinessProbe != nil {
			errs = append(errs, field.Forbidden(cp.Child("readinessProbe"), msg))
		}
		if c.StartupProbe != nil {
			errs = append(errs, field.Forbidden(cp.Child("startupProbe"), msg))
		}
	}
	return errs
}

// ephemeralAllowed are the fields of an ephemeral container a user may
// set, as upstream's allow list: what the pod relies on (ports, probes,
// lifecycle, resources, restart rules) is not among them.
var ephemeralAllowed = map[string]bool{
	"Name": true, "Image": true, "Command": true, "Args": true, "WorkingDir": true,
	"EnvFrom": true, "Env": true, "VolumeMounts": true, "VolumeDevices": true,
	"TerminationMessagePath": true, "TerminationMessagePolicy": true,
	"ImagePullPolicy": true, "SecurityContext": true,
	"Stdin": true, "StdinOnce": true, "TTY": true,
}

// ephemeralContainers checks a pod's ephemeral containers: each as any
// container, named apart from every other container, targeting a
// regular or init container if it targets one, with no field outside
// the allow list and no subPath mounts (bind mounts that would outlive
// the container).
func ephemeralContainers(list []corev1.EphemeralContainer, spec *corev1.PodSpec, pod *podContext, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	others, names := map[string]bool{}, map[string]bool{}
	for _, c := range slices.Concat(spec.Containers, spec.InitContainers) {
		others[c.Name], names[c.Name] = true, true
	}
	const forbidden = "cannot be set for an Ephemeral Container"
	for i := range list {
		ec := &list[i]
		cp := p.Index(i)
		c := (*corev1.Container)(&ec.EphemeralContainerCommon)
		errs = append(errs, containerCommon(c, pod, cp)...)
		errs = append(errs, ImageWhitespace(c.Image, cp.Child("image"))...)
		if names[ec.Name] {
			errs = append(errs, field.Duplicate(cp.Child("name"), ec.Name))
		}
		names[ec.Name] = true
		if ec.TargetContainerName != "" && !others[ec.TargetContainerName] {
			errs = append(errs, field.NotFound(cp.Child("targetContainerName"), ec.TargetContainerName))
		}
		v, t := reflect.ValueOf(ec.EphemeralContainerCommon), reflect.TypeOf(ec.EphemeralContainerCommon)
		for f := range t.NumField() {
			if name := t.Field(f).Name; !ephemeralAllowed[name] && !v.Field(f).IsZero() {
				errs = append(errs, field.Forbidden(cp.Child(strings.ToLower(name[:1])+name[1:]), forbidden))
			}
		}
		for j, m := range ec.VolumeMounts {
			if m.SubPath != "" {
				errs = append(errs, field.Forbidden(cp.Child("volumeMounts").Index(j).Child("subPath"), forbidden))
			}
			if m.SubPathExpr != "" {
				errs = append(errs, field.Forbidden(cp.Child("volumeMounts").Index(j).Child("subPathExpr"), forbidden))
			}
		}
	}
	return errs
}

// hostPortConflicts rejects two ports that claim the same host port.
func hostPortConflicts(list []corev1.Container, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	seen := map[string]bool{}
	for ci, c := range list {
		for pi, port := range c.Ports {
			if port.HostPort == 0 {
				continue
			}
			key := fmt.Sprintf("%s/%s/%d", port.Protocol, port.HostIP, port.HostPort)
			if seen[key] {
				errs = append(errs, field.Duplicate(p.Index(ci).Child("ports").Index(pi).Child("hostPort"), key))
			}
			seen[key] = true
		}
	}
	return errs
}

// ImageWhitespace is the pod-only check that an image has no surrounding
// blanks (templates tolerate them).
func ImageWhitespace(image string, p *field.Path) field.ErrorList {
	if len(image) != len(strings.TrimSpace(image)) {
		return field.ErrorList{field.Invalid(p, image, "must not have leading or trailing whitespace")}
	}
	return nil
}
