package endpointslice

import (
	"log/slog"
	"maps"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/sets"
	netutils "k8s.io/utils/net"

	"github.com/svcnet/svcnet/internal/controller/endpointutil"
	"github.com/svcnet/svcnet/internal/controller/podstate"
)

// addressTypes are the slice address types a Service gets: one per IP
// family in spec.ipFamilies; without families (a Service written before
// they existed), the family of its cluster IP, and both for a headless one.
func addressTypes(svc *corev1.Service) sets.Set[discoveryv1.AddressType] {
	types := sets.New[discoveryv1.AddressType]()
	for _, f := range svc.Spec.IPFamilies {
		switch f {
		case corev1.IPv4Protocol:
			types.Insert(discoveryv1.AddressTypeIPv4)
		case corev1.IPv6Protocol:
			types.Insert(discoveryv1.AddressTypeIPv6)
		}
	}
	if types.Len() > 0 {
		return types
	}
	if ip := svc.Spec.ClusterIP; ip != "" && ip != corev1.ClusterIPNone {
		if netutils.IsIPv6String(ip) {
			return types.Insert(discoveryv1.AddressTypeIPv6)
		}
		return types.Insert(discoveryv1.AddressTypeIPv4)
	}
	return types.Insert(discoveryv1.AddressTypeIPv4, discoveryv1.AddressTypeIPv6)
}

// endpointPorts resolves the Service's ports on one pod. A named
// targetPort missing from the pod drops that port for this pod, so pods
// that resolve differently land in different slices. Unnamed ports keep
// name "" (kubectl describe dereferences it).
func endpointPorts(svc *corev1.Service, pod *corev1.Pod) []discoveryv1.EndpointPort {
	ports := []discoveryv1.EndpointPort{}
	for i := range svc.Spec.Ports {
		sp := &svc.Spec.Ports[i]
		num, ok := endpointutil.FindPort(pod, sp)
		if !ok {
			slog.Debug("named target port not found on pod", "service", svc.Namespace+"/"+svc.Name, "pod", pod.Name, "port", sp.TargetPort.String())
			continue
		}
		ports = append(ports, discoveryv1.EndpointPort{
			Name:        new(sp.Name),
			Port:        new(num),
			Protocol:    new(sp.Protocol),
			AppProtocol: sp.AppProtocol,
		})
	}
	return ports
}

// podEndpoint is the endpoint of a pod in a slice of addressType. node is
// nil when the pod's node is unknown.
func podEndpoint(pod *corev1.Pod, node *corev1.Node, svc *corev1.Service, addressType discoveryv1.AddressType) *discoveryv1.Endpoint {
	serving := podstate.Ready(pod)
	terminating := pod.DeletionTimestamp != nil
	// A terminating pod is never ready, unless the Service publishes
	// addresses regardless of readiness.
	ready := svc.Spec.PublishNotReadyAddresses || (serving && !terminating)
	ep := &discoveryv1.Endpoint{
		Addresses: podAddresses(pod, addressType),
		Conditions: discoveryv1.EndpointConditions{
			Ready:       &ready,
			Serving:     &serving,
			Terminating: &terminating,
		},
		TargetRef: &corev1.ObjectReference{Kind: "Pod", Namespace: pod.Namespace, Name: pod.Name, UID: pod.UID},
	}
	if pod.Spec.NodeName != "" {
		ep.NodeName = new(pod.Spec.NodeName)
	}
	if node != nil && node.Labels[corev1.LabelTopologyZone] != "" {
		ep.Zone = new(node.Labels[corev1.LabelTopologyZone])
	}
	if hostname, ok := endpointutil.Hostname(pod, svc); ok {
		ep.Hostname = &hostname
	}
	ep.Hints = trafficHints(svc, ep)
	return ep
}

// podAddresses are the pod's IPs of the address type, in canonical form.
func podAddresses(pod *corev1.Pod, addressType discoveryv1.AddressType) []string {
	var addrs []string
	for _, podIP := range pod.Status.PodIPs {
		ip := netutils.ParseIPSloppy(podIP.IP)
		if ip == nil {
			continue
		}
		if (ip.To4() == nil) == (addressType == discoveryv1.AddressTypeIPv6) {
			addrs = append(addrs, ip.String())
		}
	}
	return addrs
}

// trafficHints follows spec.trafficDistribution: with PreferClose or
// PreferSameZone a ready endpoint is hinted to its own zone, with
// PreferSameNode to its own node and zone; otherwise no hints.
func trafficHints(svc *corev1.Service, ep *discoveryv1.Endpoint) *discoveryv1.EndpointHints {
	td := svc.Spec.TrafficDistribution
	if td == nil || !*ep.Conditions.Ready {
		return nil
	}
	var hints discoveryv1.EndpointHints
	switch *td {
	case corev1.ServiceTrafficDistributionPreferClose, corev1.ServiceTrafficDistributionPreferSameZone:
	case corev1.ServiceTrafficDistributionPreferSameNode:
		if ep.NodeName != nil {
			hints.ForNodes = []discoveryv1.ForNode{{Name: *ep.NodeName}}
		}
	default:
		return nil
	}
	if ep.Zone != nil {
		hints.ForZones = []discoveryv1.ForZone{{Name: *ep.Zone}}
	}
	if hints.ForZones == nil && hints.ForNodes == nil {
		return nil
	}
	return &hints
}

// reservedLabels are the slice labels the controller owns; a Service's own
// labels of these names are not copied.
var reservedLabels = sets.New(discoveryv1.LabelServiceName, discoveryv1.LabelManagedBy, corev1.IsHeadlessService)

// sliceLabels are the labels a slice of svc should carry: the Service's
// labels, the service name, managed-by, and the headless mark. changed
// says whether the Service's labels differ from the slice's.
func sliceLabels(slice *discoveryv1.EndpointSlice, svc *corev1.Service) (map[string]string, bool) {
	have, want := map[string]string{}, map[string]string{}
	for k, v := range slice.Labels {
		if !reservedLabels.Has(k) {
			have[k] = v
		}
	}
	for k, v := range svc.Labels {
		if !reservedLabels.Has(k) {
			want[k] = v
		}
	}
	changed := !maps.Equal(have, want)
	if svc.Spec.ClusterIP == corev1.ClusterIPNone || svc.Spec.ClusterIP == "" {
		want[corev1.IsHeadlessService] = ""
	}
	want[discoveryv1.LabelServiceName] = svc.Name
	want[discoveryv1.LabelManagedBy] = ControllerName
	return want, changed
}

// newSlice is an empty slice of svc for the ports and address type, named
// by the API server from generateName.
func newSlice(svc *corev1.Service, ports []discoveryv1.EndpointPort, addressType discoveryv1.AddressType) *discoveryv1.EndpointSlice {
	slice := &discoveryv1.EndpointSlice{
		ObjectMeta: metav1.ObjectMeta{
			GenerateName:    endpointutil.SlicePrefix(svc.Name),
			Namespace:       svc.Namespace,
			OwnerReferences: []metav1.OwnerReference{*metav1.NewControllerRef(svc, corev1.SchemeGroupVersion.WithKind("Service"))},
		},
		AddressType: addressType,
		Ports:       ports,
		Endpoints:   []discoveryv1.Endpoint{},
	}
	slice.Labels, _ = sliceLabels(slice, svc)
	return slice
}
