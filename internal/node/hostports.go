package node

import (
	"net/netip"
	"strings"

	corev1 "k8s.io/api/core/v1"

	"github.com/svcnet/svcnet/internal/cni"
)

// syncHostPorts maps the hostPorts of the node's pods that have an
// address and are not finished, as the kubelet asks the portmap CNI
// plugin to: each container port (a sidecar's too) with a hostPort is
// reached at that port of the node's addresses (of its hostIP only, when
// one is given). hostNetwork pods listen on the node's ports themselves.
func (a *Agent) syncHostPorts() error {
	var maps []cni.HostPort
	for _, pod := range listPods(a.podLister) {
		if pod.Spec.HostNetwork || podTerminal(pod) {
			continue
		}
		podIP, err := netip.ParseAddr(pod.Status.PodIP)
		if err != nil || !podIP.Is4() {
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
