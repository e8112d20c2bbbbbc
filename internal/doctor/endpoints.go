package doctor

import (
	"cmp"
	"fmt"
	"maps"
	"net"
	"net/netip"
	"slices"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	nodereg "github.com/svcnet/svcnet/internal/registry/node"
)

// endpointReady reads an endpoint's ready condition as consumers do: unset
// means ready.
func endpointReady(e discoveryv1.Endpoint) bool {
	return e.Conditions.Ready == nil || *e.Conditions.Ready
}

// missingFromSlices reports Ready selected pods that the EndpointSlices do
// not list as ready endpoints, or not on every port whose targetPort
// resolves on them (a named targetPort that does not resolve is
// NamedTargetPortNotFound's).
func (d *diagnosis) missingFromSlices() {
	svc := d.svc
	// ports are, per pod, the names of the ports it is a ready endpoint of.
	ports := map[string]map[string]bool{}
	uids := map[string]string{}
	for _, s := range d.slices {
		for _, e := range s.Endpoints {
			if !endpointReady(e) || e.TargetRef == nil || e.TargetRef.Kind != "Pod" {
				continue
			}
			name := e.TargetRef.Name
			if ports[name] == nil {
				ports[name] = map[string]bool{}
			}
			uids[name] = string(e.TargetRef.UID)
			for _, p := range s.Ports {
				ports[name][deref(p.Name)] = true
			}
		}
	}
	var missing []*corev1.Pod
	var evidence []Evidence
	for _, p := range d.matched {
		if !servingPod(svc, p) {
			continue
		}
		got, ok := ports[p.Name]
		if uid := uids[p.Name]; ok && uid != "" && p.UID != "" && uid != string(p.UID) {
			ok = false
		}
		detail := "not a ready endpoint in any EndpointSlice"
		if ok {
			var lacking []string
			for i := range svc.Spec.Ports {
				sp := &svc.Spec.Ports[i]
				if got[sp.Name] || (sp.TargetPort.Type == intstr.String && !namedResolves(p, sp)) {
					continue
				}
				lacking = append(lacking, portLabel(sp))
			}
			if len(lacking) == 0 {
				continue
			}
			detail = "not an endpoint of " + strings.Join(lacking, ", ")
		}
		missing = append(missing, p)
		if len(evidence) < maxEvidence {
			evidence = append(evidence, ev("pod "+p.Name+" ("+podIP(p)+")", detail))
		}
	}
	if len(missing) == 0 {
		return
	}
	names := podNames(missing)
	verb := "is"
	if len(names) > 1 {
		verb = "are"
	}
	d.add(SeverityWarning, ReadyPodsMissingFromEndpointSlices, fmt.Sprintf(
		"%s %s Ready but not a ready endpoint in the Service's EndpointSlices, so it gets no traffic yet. The EndpointSlice controller may not have caught up: run the doctor again in a few seconds, and if this stays, read the controller-manager's log.",
		podsSubject(names), verb), evidence...)
}

// deref is *s, "" for nil.
func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

// podIP is the pod's IP, "no IP" without one.
func podIP(p *corev1.Pod) string {
	return cmp.Or(p.Status.PodIP, "no IP")
}

// readyEndpoints says where connections go: the ready endpoints of each
// Service port, from the EndpointSlices.
func (d *diagnosis) readyEndpoints() {
	svc := d.svc
	addrs := map[string]bool{}
	byPort := map[string][]string{}
	for _, s := range d.slices {
		for _, e := range s.Endpoints {
			if !endpointReady(e) {
				continue
			}
			for _, a := range e.Addresses {
				addrs[a] = true
				for _, p := range s.Ports {
					if p.Port != nil {
						byPort[deref(p.Name)] = append(byPort[deref(p.Name)], net.JoinHostPort(a, strconv.Itoa(int(*p.Port))))
					}
				}
			}
		}
	}
	if len(addrs) == 0 {
		return
	}
	var evidence []Evidence
	for i := range svc.Spec.Ports {
		sp := &svc.Spec.Ports[i]
		list := byPort[sp.Name]
		slices.Sort(list)
		value := "none"
		if len(list) > 0 {
			value = capped(slices.Compact(list))
		}
		evidence = append(evidence, ev(portLabel(sp), value))
	}
	if len(svc.Spec.Ports) == 0 {
		evidence = append(evidence, ev("addresses", capped(slices.Sorted(maps.Keys(addrs)))))
	}
	n := plural(len(addrs), "ready endpoint", "ready endpoints")
	sentence := fmt.Sprintf("The Service has %s: connections to its cluster IP, node ports and load-balancer addresses are balanced across them, per port as below.", n)
	if svc.Spec.ClusterIP == corev1.ClusterIPNone {
		sentence = fmt.Sprintf("The Service has %s; it is headless (no cluster IP), so the cluster DNS answers its name with their addresses.", n)
	}
	d.add(SeverityInfo, ReadyEndpoints, sentence, evidence...)
}

// localEndpoints reports, for externalTrafficPolicy Local, the Ready
// nodes without a ready endpoint of the Service: external traffic that
// reaches them is dropped. With no ready endpoint anywhere it says
// nothing: other findings explain that.
func (d *diagnosis) localEndpoints() error {
	svc := d.svc
	if svc.Spec.ExternalTrafficPolicy != corev1.ServiceExternalTrafficPolicyLocal ||
		(svc.Spec.Type != corev1.ServiceTypeNodePort && svc.Spec.Type != corev1.ServiceTypeLoadBalancer) {
		return nil
	}
	local := map[string]int{}
	for _, s := range d.slices {
		for _, e := range s.Endpoints {
			if endpointReady(e) && e.NodeName != nil {
				local[*e.NodeName]++
			}
		}
	}
	if len(local) == 0 {
		return nil
	}
	nodes, err := d.client.CoreV1().Nodes().List(d.ctx, metav1.ListOptions{})
	if err != nil {
		return fmt.Errorf("list nodes: %w", err)
	}
	var without, with []string
	for _, n := range nodes.Items {
		switch {
		case local[n.Name] > 0:
			with = append(with, fmt.Sprintf("%s (%d)", n.Name, local[n.Name]))
		case nodereg.IsReady(&n):
			without = append(without, n.Name)
		}
	}
	if len(without) == 0 {
		return nil
	}
	slices.Sort(without)
	slices.Sort(with)
	subject, them := "node "+without[0]+" has", "it"
	if len(without) > 1 {
		subject, them = "nodes "+nameList(without)+" have", "them"
	}
	evidence := []Evidence{
		ev("externalTrafficPolicy", string(svc.Spec.ExternalTrafficPolicy)),
		ev("nodes with ready local endpoints", capped(with)),
		ev("ready nodes without", capped(without)),
	}
	if svc.Spec.HealthCheckNodePort != 0 {
		evidence = append(evidence, ev("healthCheckNodePort", fmt.Sprint(svc.Spec.HealthCheckNodePort)))
	}
	d.add(SeverityWarning, NoLocalEndpointOnNodes, fmt.Sprintf(
		"externalTrafficPolicy is Local, and %s no ready endpoint of this Service: external traffic that reaches %s through a node port or the load-balancer address is dropped, not forwarded to another node. Run a pod of the Service on every node that receives traffic (a DaemonSet, or replicas spread over the nodes), or set externalTrafficPolicy: Cluster (which hides the client's address from the pods).",
		subject, them), evidence...)
	return nil
}

// sourceRangesAnnotation is the older spelling of
// spec.loadBalancerSourceRanges, used when the field is empty.
const sourceRangesAnnotation = "service.beta.kubernetes.io/load-balancer-source-ranges"

// loadBalancer reports a LoadBalancer Service still without an address,
// with its events (the allocator says why), and source ranges that
// exclude Options.ClientIP.
func (d *diagnosis) loadBalancer() error {
	svc := d.svc
	if svc.Spec.Type != corev1.ServiceTypeLoadBalancer {
		return nil
	}
	if len(svc.Status.LoadBalancer.Ingress) == 0 {
		if err := d.loadBalancerPending(); err != nil {
			return err
		}
	}
	if !d.opts.ClientIP.IsValid() {
		return nil
	}
	ranges := svc.Spec.LoadBalancerSourceRanges
	if len(ranges) == 0 && svc.Annotations[sourceRangesAnnotation] != "" {
		for r := range strings.SplitSeq(svc.Annotations[sourceRangesAnnotation], ",") {
			ranges = append(ranges, strings.TrimSpace(r))
		}
	}
	if len(ranges) == 0 {
		return nil
	}
	client := d.opts.ClientIP.Unmap()
	for _, r := range ranges {
		if p, err := netip.ParsePrefix(strings.TrimSpace(r)); err == nil && p.Contains(client) {
			return nil
		}
	}
	d.add(SeverityWarning, SourceRangesExcludeClient, fmt.Sprintf(
		"loadBalancerSourceRanges (%s) do not include your address %s, so connections from it to the load-balancer address are dropped. Add a range that covers it, such as %s.",
		strings.Join(ranges, ", "), client, netip.PrefixFrom(client, client.BitLen())),
		ev("loadBalancerSourceRanges", strings.Join(ranges, ", ")), ev("client address", client.String()))
	return nil
}

// metallbAnnotations are the annotations by which a Service asks the
// allocator for addresses or a pool.
var metallbAnnotations = []string{"metallb.io/loadBalancerIPs", "metallb.io/address-pool", "metallb.universe.tf/loadBalancerIPs", "metallb.universe.tf/address-pool"}

// loadBalancerPending reports a LoadBalancer Service without an address.
func (d *diagnosis) loadBalancerPending() error {
	svc := d.svc
	events, err := d.eventsOf("Service", svc.Name, svc.UID)
	if err != nil {
		return err
	}
	var evidence []Evidence
	if c := svc.Spec.LoadBalancerClass; c != nil {
		evidence = append(evidence, ev("loadBalancerClass", *c))
	}
	if svc.Spec.LoadBalancerIP != "" {
		evidence = append(evidence, ev("spec.loadBalancerIP", svc.Spec.LoadBalancerIP))
	}
	for _, a := range metallbAnnotations {
		if v, ok := svc.Annotations[a]; ok {
			evidence = append(evidence, ev("annotation "+a, v))
		}
	}
	var warning *corev1.Event
	for i, e := range events {
		if warning == nil && e.Type == corev1.EventTypeWarning {
			warning = e
		}
		if i < 5 {
			evidence = append(evidence, ev("event", eventLine(e)))
		}
	}
	if len(events) == 0 {
		evidence = append(evidence, ev("events", "none"))
	}
	sentence := "The Service is of type LoadBalancer but has no external address yet (pending)"
	switch {
	case svc.Spec.LoadBalancerClass != nil:
		sentence += fmt.Sprintf(". Its loadBalancerClass is %q: the controller of that class must assign one, and svcnet's allocator serves only Services without a class. Run that class's controller, or remove the class.", *svc.Spec.LoadBalancerClass)
	case warning != nil:
		sentence += fmt.Sprintf(": the allocator says %q (%s). Give it addresses this Service may use (an IPAddressPool in namespace metallb-system, or more addresses in the pool it asks for), or free some.", warning.Message, warning.Reason)
	default:
		sentence += ", and no event says why: check that an IPAddressPool exists in namespace metallb-system and that the controller-manager runs."
	}
	d.add(SeverityError, LoadBalancerPending, sentence, evidence...)
	return nil
}
