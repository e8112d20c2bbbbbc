package node

import (
	"net/netip"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"

	"github.com/svcnet/svcnet/internal/cni"
)

// syncHostPorts maps the hostPorts of the node's pods that have a
// sandbox and are not finished, as the kubelet asks the portmap CNI
// plugin to once the sandbox is set up: each container port (a
// sidecar's too) with a hostPort is reached at that port of the node's
// addresses (of its hostIP only, when one is given), at the address the
// pod network gave the sandbox (never one read from the pod's status).
// hostNetwork pods listen on the node's ports themselves.
func (a *Agent) syncHostPorts() error {
	var maps []cni.HostPort
	for _, pod := range listPods(a.podLister) {
		if pod.Spec.HostNetwork || podTerminal(pod) {
			continue
		}
		var ports []corev1.ContainerPort
		for _, c := range pod.Spec.InitContainers {
			if isSidecar(&c) {
				ports = append(ports, c.Ports...)
			}
		}
		for _, c := range pod.Spec.Containers {
			ports = append(ports, c.Ports...)
		}
		if !slices.ContainsFunc(ports, func(p corev1.ContainerPort) bool { return p.HostPort != 0 }) {
			continue
		}
		ip, err := a.net.SandboxIP(string(pod.UID))
		if err != nil {
			return err
		}
		podIP, ok := netip.AddrFromSlice(ip.To4())
		if !ok {
			continue // no sandbox (yet, or any more)
		}
		for _, p := range ports {
			if p.HostPort == 0 {
				continue
			}
			hp := cni.HostPort{HostPort: uint16(p.HostPort), Protocol: strings.ToLower(string(p.Protocol)), PodIP: podIP, PodPort: uint16(p.ContainerPort)}
			if hp.Protocol == "" {
				hp.Protocol = "tcp"
			}
			if ip, err := netip.ParseAddr(p.HostIP); err == nil && !ip.IsUnspecified() {
				if !ip.Is4() {
					continue
				}
				hp.HostIP = ip
			}
			maps = append(maps, hp)
		}
	}
	return a.net.SyncHostPorts(maps)
}
