package node

import (
	"fmt"
	"net"
	"strconv"

	corev1 "k8s.io/api/core/v1"
)

// KubeletEndpointAnnotation holds host:port of a node agent's HTTPS
// server when the API server must reach it elsewhere than at its
// InternalIP, as for a node that runs in its own network namespace and
// serves on the host's loopback.
const KubeletEndpointAnnotation = "node.svcnet.io/kubelet-endpoint"

// KubeletEndpoint is where the API server reaches a node's agent: the
// annotation, else the InternalIP and the kubelet port, as upstream.
func KubeletEndpoint(n *corev1.Node) (string, error) {
	if ep := n.Annotations[KubeletEndpointAnnotation]; ep != "" {
		return ep, nil
	}
	port := n.Status.DaemonEndpoints.KubeletEndpoint.Port
	if port == 0 {
		return "", fmt.Errorf("node %q reports no kubelet port", n.Name)
	}
	addr := PreferredAddress(n)
	if addr == "" {
		return "", fmt.Errorf("node %q reports no address", n.Name)
	}
	return net.JoinHostPort(addr, strconv.Itoa(int(port))), nil
}

// PreferredAddress is the address at which the API server reaches a node,
// the first of its InternalIP, ExternalIP and Hostname addresses (the
// order of kube-apiserver's --kubelet-preferred-address-types); "" when
// it reports none.
func PreferredAddress(n *corev1.Node) string {
	for _, t := range []corev1.NodeAddressType{corev1.NodeInternalIP, corev1.NodeExternalIP, corev1.NodeHostName} {
		for _, a := range n.Status.Addresses {
			if a.Type == t && a.Address != "" {
				return a.Address
			}
		}
	}
	return ""
}

// IsReady reports whether the node's Ready condition is True, as
// upstream's IsNodeReady (pkg/api/v1/node).
func IsReady(n *corev1.Node) bool {
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}
