package endpointslicemirroring

import (
	"context"
	"maps"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	netutils "k8s.io/utils/net"

	"github.com/svcnet/svcnet/internal/controller/endpointutil"
)

// group is the desired mirror of one (address type, port set).
type group struct {
	addressType discoveryv1.AddressType
	ports       []discoveryv1.EndpointPort
	endpoints   endpointutil.EndpointSet
}

func groupKey(t discoveryv1.AddressType, ports []discoveryv1.EndpointPort) string {
	return string(t) + "|" + endpointutil.PortsKey(ports)
}

// reconcile writes one slice per (address type, port set) of the Endpoints'
// subsets, reusing existing slices by name.
func (c *Controller) reconcile(ctx context.Context, ep *corev1.Endpoints, existing []*discoveryv1.EndpointSlice) (bool, error) {
	desired := map[string]*group{}
	invalid, skipped := 0, 0
	for _, subset := range ep.Subsets {
		ports := slicePorts(subset.Ports)
		// Both families get a group, so that a family whose addresses are
		// all gone loses its slice.
		for _, t := range []discoveryv1.AddressType{discoveryv1.AddressTypeIPv4, discoveryv1.AddressTypeIPv6} {
			if desired[groupKey(t, ports)] == nil {
				desired[groupKey(t, ports)] = &group{addressType: t, ports: ports, endpoints: endpointutil.EndpointSet{}}
			}
		}
		added := 0
		add := func(addrs []corev1.EndpointAddress, ready bool) {
			for _, a := range addrs {
				if added >= c.opts.MaxEndpointsPerSubset {
					skipped++
					continue
				}
				e, t, ok := addressEndpoint(a, ready)
				if !ok {
					invalid++
					skipped++
					continue
				}
				desired[groupKey(t, ports)].endpoints.Insert(e)
				added++
			}
		}
		add(subset.Addresses, true)
		add(subset.NotReadyAddresses, false)
	}
	if invalid > 0 {
		c.recorder.Eventf(ep, corev1.EventTypeWarning, "InvalidIPAddress",
			"Skipped %d invalid IP addresses when mirroring to EndpointSlices", invalid)
	}
	if skipped > invalid {
		c.recorder.Eventf(ep, corev1.EventTypeWarning, "TooManyAddressesToMirror",
			"A max of %d addresses can be mirrored to EndpointSlices per Endpoints subset. %d addresses were skipped", c.opts.MaxEndpointsPerSubset, skipped)
	}

	byKey := map[string][]*discoveryv1.EndpointSlice{}
	for _, s := range existing {
		k := groupKey(s.AddressType, s.Ports)
		byKey[k] = append(byKey[k], s)
	}
	var plan endpointutil.SliceWrites
	for _, k := range slices.Sorted(maps.Keys(desired)) {
		g := desired[k]
		have := byKey[k]
		slices.SortFunc(have, func(a, b *discoveryv1.EndpointSlice) int { return strings.Compare(a.Name, b.Name) })
		if len(g.endpoints) == 0 {
			plan.Delete = append(plan.Delete, have...)
			continue
		}
		want := c.mirrorSlice(ep, g)
		if len(have) == 0 {
			plan.Create = append(plan.Create, want)
			continue
		}
		plan.Delete = append(plan.Delete, have[1:]...)
		if !sameMirror(have[0], want) {
			want.Name, want.GenerateName, want.ResourceVersion = have[0].Name, "", have[0].ResourceVersion
			plan.Update = append(plan.Update, want)
		}
	}
	for k, have := range byKey {
		if desired[k] == nil {
			plan.Delete = append(plan.Delete, have...)
		}
	}
	// Slices about to be deleted are reused for those about to be created.
	plan.Reuse(func(*discoveryv1.EndpointSlice) bool { return true })
	return c.writer(ep, ep.Namespace+"/"+ep.Name).Apply(ctx, ep.Namespace, plan)
}

// writer applies plans for the Endpoints of key, which may be gone (nil).
// No slice is created for Endpoints being deleted.
func (c *Controller) writer(ep *corev1.Endpoints, key string) endpointutil.Writer {
	return endpointutil.Writer{
		Client:    c.client,
		Tracker:   c.tracker,
		Owner:     "Endpoints " + key,
		NoCreates: ep == nil || ep.DeletionTimestamp != nil,
	}
}

// mirrorSlice is the slice mirroring one group of the Endpoints: its
// labels and annotations (but the trigger time and kubectl's
// last-applied configuration) are copied, and it is owned by the Endpoints.
func (c *Controller) mirrorSlice(ep *corev1.Endpoints, g *group) *discoveryv1.EndpointSlice {
	s := &discoveryv1.EndpointSlice{
		ObjectMeta: metav1.ObjectMeta{
			GenerateName:    endpointutil.SlicePrefix(ep.Name),
			Namespace:       ep.Namespace,
			Labels:          maps.Clone(ep.Labels),
			Annotations:     maps.Clone(ep.Annotations),
			OwnerReferences: []metav1.OwnerReference{*metav1.NewControllerRef(ep, corev1.SchemeGroupVersion.WithKind("Endpoints"))},
		},
		AddressType: g.addressType,
		Ports:       g.ports,
	}
	if s.Labels == nil {
		s.Labels = map[string]string{}
	}
	s.Labels[discoveryv1.LabelServiceName] = ep.Name
	s.Labels[discoveryv1.LabelManagedBy] = ControllerName
	if s.Annotations == nil {
		s.Annotations = map[string]string{}
	}
	delete(s.Annotations, corev1.EndpointsLastChangeTriggerTime)
	delete(s.Annotations, corev1.LastAppliedConfigAnnotation)
	for _, e := range g.endpoints.Sorted() {
		s.Endpoints = append(s.Endpoints, *e)
	}
	return s
}

// sameMirror says whether an existing slice already mirrors what want
// holds: the same endpoints, labels and annotations.
func sameMirror(have, want *discoveryv1.EndpointSlice) bool {
	if len(have.Endpoints) != len(want.Endpoints) ||
		!maps.Equal(have.Labels, want.Labels) || !maps.Equal(have.Annotations, want.Annotations) {
		return false
	}
	wanted := endpointutil.EndpointSet{}
	for i := range want.Endpoints {
		wanted.Insert(&want.Endpoints[i])
	}
	for i := range have.Endpoints {
		w, ok := wanted[endpointutil.EndpointKey(&have.Endpoints[i])]
		if !ok || !endpointutil.SameEndpoint(w, &have.Endpoints[i]) {
			return false
		}
	}
	return true
}

// slicePorts converts Endpoints ports to slice ports.
func slicePorts(in []corev1.EndpointPort) []discoveryv1.EndpointPort {
	out := make([]discoveryv1.EndpointPort, 0, len(in))
	for _, p := range in {
		out = append(out, discoveryv1.EndpointPort{
			Name:        new(p.Name),
			Port:        new(p.Port),
			Protocol:    new(p.Protocol),
			AppProtocol: p.AppProtocol,
		})
	}
	return out
}

// addressEndpoint converts one address; ok is false for an invalid IP.
func addressEndpoint(a corev1.EndpointAddress, ready bool) (*discoveryv1.Endpoint, discoveryv1.AddressType, bool) {
	ip := netutils.ParseIPSloppy(a.IP)
	if ip == nil {
		return nil, "", false
	}
	t := discoveryv1.AddressTypeIPv4
	if ip.To4() == nil {
		t = discoveryv1.AddressTypeIPv6
	}
	e := &discoveryv1.Endpoint{
		Addresses:  []string{ip.String()},
		Conditions: discoveryv1.EndpointConditions{Ready: new(ready)},
		TargetRef:  a.TargetRef,
		NodeName:   a.NodeName,
	}
	if a.Hostname != "" {
		e.Hostname = new(a.Hostname)
	}
	return e, t, true
}
