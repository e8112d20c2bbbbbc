package doctor

import (
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/svcnet/svcnet/internal/controller/podstate"
)

// declaredPort is a port a container of a pod declares.
type declaredPort struct {
	container string
	port      corev1.ContainerPort
}

// String is `80/TCP "web" (container nginx)`.
func (p declaredPort) String() string {
	s := fmt.Sprintf("%d/%s", p.port.ContainerPort, p.port.Protocol)
	if p.port.Name != "" {
		s += fmt.Sprintf(" %q", p.port.Name)
	}
	return s + " (container " + p.container + ")"
}

// declaredPorts are the ports the pod's containers declare, and its
// restartable (sidecar) init containers', which also serve.
func declaredPorts(p *corev1.Pod) []declaredPort {
	var out []declaredPort
	add := func(c corev1.Container) {
		for _, cp := range c.Ports {
			cp.Protocol = protocol(cp.Protocol)
			out = append(out, declaredPort{container: c.Name, port: cp})
		}
	}
	for _, c := range p.Spec.InitContainers {
		if c.RestartPolicy != nil && *c.RestartPolicy == corev1.ContainerRestartPolicyAlways {
			add(c)
		}
	}
	for _, c := range p.Spec.Containers {
		add(c)
	}
	return out
}

// protocol is p, TCP when unset (the API server's default).
func protocol(p corev1.Protocol) corev1.Protocol {
	if p == "" {
		return corev1.ProtocolTCP
	}
	return p
}

// portLabel names a Service port: `port "http" (80/TCP)` or `port 80/TCP`.
func portLabel(sp *corev1.ServicePort) string {
	if sp.Name != "" {
		return fmt.Sprintf("port %q (%d/%s)", sp.Name, sp.Port, protocol(sp.Protocol))
	}
	return fmt.Sprintf("port %d/%s", sp.Port, protocol(sp.Protocol))
}

// portCheck collects, for one Service port, the active selected pods by
// how its targetPort resolves on them.
type portCheck struct {
	sp     *corev1.ServicePort
	active []*corev1.Pod
	// target is a numeric targetPort (the port when unset).
	target int32
	// missing: no container declares it; other: declared under another
	// protocol only; undeclared: the pod declares no port at all.
	missing, other, undeclared []*corev1.Pod
	// declared are the ports the pods declare, each once; otherProto
	// those of the targetPort under another protocol.
	declared, otherProto []string
}

// targetPorts checks each Service port's targetPort against the ports the
// active selected pods declare.
func (d *diagnosis) targetPorts() {
	var active []*corev1.Pod
	for _, p := range d.matched {
		if podstate.Active(p) {
			active = append(active, p)
		}
	}
	if len(active) == 0 {
		return
	}
	for i := range d.svc.Spec.Ports {
		sp := &d.svc.Spec.Ports[i]
		c := &portCheck{sp: sp, active: active, target: sp.TargetPort.IntVal}
		if c.target == 0 {
			c.target = sp.Port
		}
		c.run()
		if c.sp.TargetPort.Type == intstr.String {
			d.namedTargetPort(c)
		} else {
			d.numericTargetPort(c)
		}
	}
}

// run sorts the pods by how the targetPort resolves on them.
func (c *portCheck) run() {
	proto := protocol(c.sp.Protocol)
	named := c.sp.TargetPort.Type == intstr.String
	matches := func(dp declaredPort) bool {
		if named {
			return dp.port.Name == c.sp.TargetPort.StrVal
		}
		return dp.port.ContainerPort == c.target
	}
	for _, p := range c.active {
		decl := declaredPorts(p)
		for _, dp := range decl {
			if s := dp.String(); !slices.Contains(c.declared, s) {
				c.declared = append(c.declared, s)
			}
		}
		// A name resolves as upstream's FindPort: name and protocol.
		if slices.ContainsFunc(decl, func(dp declaredPort) bool { return matches(dp) && dp.port.Protocol == proto }) {
			continue
		}
		var others []string
		for _, dp := range decl {
			if matches(dp) && dp.port.Protocol != proto {
				others = append(others, dp.String())
			}
		}
		switch {
		case len(others) > 0:
			c.other = append(c.other, p)
			for _, o := range others {
				if !slices.Contains(c.otherProto, o) {
					c.otherProto = append(c.otherProto, o)
				}
			}
		case len(decl) == 0 && !named:
			c.undeclared = append(c.undeclared, p)
		default:
			c.missing = append(c.missing, p)
		}
	}
}

// subject names the pods of list: "the selected pods" when they are all
// of them.
func (c *portCheck) subject(list []*corev1.Pod) string {
	if len(list) == len(c.active) {
		return "the selected pods"
	}
	if len(list) == 1 {
		return "pod " + list[0].Name
	}
	return "pods " + nameList(podNames(list))
}

// targetString is the targetPort as the Service means it.
func (c *portCheck) targetString() string {
	if c.sp.TargetPort.Type == intstr.String {
		return c.sp.TargetPort.StrVal
	}
	return fmt.Sprint(c.target)
}

// evidence are the facts of a port check.
func (c *portCheck) evidence(pods []*corev1.Pod) []Evidence {
	declared := "none"
	if len(c.declared) > 0 {
		declared = capped(c.declared)
	}
	return []Evidence{
		ev("service "+portLabel(c.sp), "targetPort "+c.targetString()),
		ev("pods affected", capped(podNames(pods))),
		ev("ports the selected pods declare", declared),
	}
}

// namedTargetPort reports a named targetPort that does not resolve on
// some pods: the EndpointSlice controller leaves the port out of their
// endpoints, as upstream's does.
func (d *diagnosis) namedTargetPort(c *portCheck) {
	name, proto, label := c.sp.TargetPort.StrVal, protocol(c.sp.Protocol), portLabel(c.sp)
	consequence := func(pods []*corev1.Pod) (Severity, string) {
		if len(pods) == len(c.active) {
			return SeverityError, fmt.Sprintf("so the EndpointSlice controller leaves %s out of their endpoints and connections to it are refused", label)
		}
		return SeverityWarning, fmt.Sprintf("so the EndpointSlice controller leaves %s out of their endpoints: they get no traffic on it", label)
	}
	if len(c.other) > 0 {
		sev, so := consequence(c.other)
		d.add(sev, TargetPortProtocolMismatch, fmt.Sprintf(
			"targetPort %q of %s names %s of %s, but a named targetPort resolves only to a port of the Service port's protocol (%s), %s. Declare the port under %s as well, or set the Service port's protocol to the container's.",
			name, label, nameList(c.otherProto), c.subject(c.other), proto, so, proto),
			c.evidence(c.other)...)
	}
	if len(c.missing) > 0 {
		sev, so := consequence(c.missing)
		fix := fmt.Sprintf("They declare no port: declare one named %q in the container, or set targetPort to the number the application listens on.", name)
		if len(c.declared) > 0 {
			fix = fmt.Sprintf("They declare %s: name the right one %q, or set targetPort to its number.", nameList(c.declared), name)
		}
		d.add(sev, NamedTargetPortNotFound, fmt.Sprintf(
			"targetPort %q of %s is not the name of a %s port of any container of %s, %s. %s",
			name, label, proto, c.subject(c.missing), so, fix),
			c.evidence(c.missing)...)
	}
}

// numericTargetPort reports a numeric targetPort the pods do not declare:
// an error when they declare other ports (the application likely listens
// there), a warning when they declare none (declaring is optional) or
// declare it under another protocol only.
func (d *diagnosis) numericTargetPort(c *portCheck) {
	port, proto, label := c.target, protocol(c.sp.Protocol), portLabel(c.sp)
	if len(c.missing) > 0 {
		var candidates []string
		for _, p := range c.missing {
			for _, dp := range declaredPorts(p) {
				if n := fmt.Sprint(dp.port.ContainerPort); dp.port.Protocol == proto && !slices.Contains(candidates, n) {
					candidates = append(candidates, n)
				}
			}
		}
		fix := fmt.Sprintf("make the application listen on %d/%s", port, proto)
		if len(candidates) > 0 {
			fix = fmt.Sprintf("set targetPort to %s, or %s", strings.Join(candidates, " or "), fix)
		}
		d.add(SeverityError, TargetPortNotExposed, fmt.Sprintf(
			"targetPort %d of %s is not a port that %s declare: they declare %s. Connections are forwarded to port %d, where the application likely does not listen: %s.",
			port, label, c.subject(c.missing), nameList(declaredOf(c.missing)), port, fix),
			c.evidence(c.missing)...)
	}
	if len(c.other) > 0 {
		d.add(SeverityWarning, TargetPortProtocolMismatch, fmt.Sprintf(
			"targetPort %d of %s is declared by %s only as %s, not under %s: check that the application listens on %d/%s, or set the Service port's protocol to the container's.",
			port, label, c.subject(c.other), nameList(c.otherProto), proto, port, proto),
			c.evidence(c.other)...)
	}
	if len(c.undeclared) > 0 {
		d.add(SeverityWarning, TargetPortNotDeclared, fmt.Sprintf(
			"No container of %s declares port %d/%s, the targetPort of %s. Kubernetes does not require it, but check that the application listens on %d/%s.",
			c.subject(c.undeclared), port, proto, label, port, proto),
			c.evidence(c.undeclared)...)
	}
}

// declaredOf are the ports the pods declare, each once.
func declaredOf(pods []*corev1.Pod) []string {
	var out []string
	for _, p := range pods {
		for _, dp := range declaredPorts(p) {
			if s := dp.String(); !slices.Contains(out, s) {
				out = append(out, s)
			}
		}
	}
	return out
}

// namedResolves says whether the pod declares the port a named targetPort
// names, under the Service port's protocol, as upstream's FindPort does.
func namedResolves(p *corev1.Pod, sp *corev1.ServicePort) bool {
	return slices.ContainsFunc(declaredPorts(p), func(dp declaredPort) bool {
		return dp.port.Name == sp.TargetPort.StrVal && dp.port.Protocol == protocol(sp.Protocol)
	})
}
