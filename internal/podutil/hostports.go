package podutil

import corev1 "k8s.io/api/core/v1"

// HostPort is a port a pod takes on its node: a protocol and port on one
// host address, "0.0.0.0" for all of them.
type HostPort struct {
	Protocol corev1.Protocol
	Port     int32
	IP       string
}

// AllAddresses is the IP of a host port on every address of the node.
const AllAddresses = "0.0.0.0"

// HostPorts are the host ports of a pod's containers and sidecars (init
// containers that keep running), with upstream's defaults: TCP, all
// addresses.
func HostPorts(pod *corev1.Pod) []HostPort {
	var out []HostPort
	add := func(cs []corev1.Container, sidecarsOnly bool) {
		for i := range cs {
			if sidecarsOnly && (cs[i].RestartPolicy == nil || *cs[i].RestartPolicy != corev1.ContainerRestartPolicyAlways) {
				continue
			}
			for _, p := range cs[i].Ports {
				if p.HostPort <= 0 {
					continue
				}
				hp := HostPort{Protocol: p.Protocol, Port: p.HostPort, IP: p.HostIP}
				if hp.Protocol == "" {
					hp.Protocol = corev1.ProtocolTCP
				}
				if hp.IP == "" {
					hp.IP = AllAddresses
				}
				out = append(out, hp)
			}
		}
	}
	add(pod.Spec.Containers, false)
	add(pod.Spec.InitContainers, true)
	return out
}

// Conflicts says whether two host ports cannot both be taken: the same
// protocol and port on the same address, or on all addresses on either
// side.
func (h HostPort) Conflicts(o HostPort) bool {
	return h.Protocol == o.Protocol && h.Port == o.Port && (h.IP == o.IP || h.IP == AllAddresses || o.IP == AllAddresses)
}
