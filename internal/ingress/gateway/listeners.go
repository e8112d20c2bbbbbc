package gateway

import (
	"crypto/tls"
	"fmt"
	"slices"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"
)

// Port is one of the proxy's listeners as Gateways see it: the port
// clients reach it on (the controller Service's port), whether it
// terminates TLS, and the name of its listener in the routes table.
type Port struct {
	Port     int32
	TLS      bool
	Listener string
}

// listener is one Gateway listener as the build sees it.
type listener struct {
	gw   *gatewayv1.Gateway
	spec *gatewayv1.Listener
	// port is the proxy listener it is served on (nil: not accepted).
	port  *Port
	kinds []gatewayv1.RouteGroupKind
	// accepted, resolved and programmed are its conditions, without
	// times and generations.
	accepted, resolved metav1.Condition
	certs              []*tls.Certificate
	attached           int32
}

// serves says whether routes attach to the listener: accepted with
// every reference resolved.
func (l *listener) serves() bool {
	return l.accepted.Status == metav1.ConditionTrue && l.resolved.Status == metav1.ConditionTrue
}

func (l *listener) hostname() string {
	if l.spec.Hostname == nil {
		return ""
	}
	return strings.ToLower(string(*l.spec.Hostname))
}

func condition[T, R ~string](typ T, ok bool, reason R, msg string) metav1.Condition {
	s := metav1.ConditionFalse
	if ok {
		s = metav1.ConditionTrue
	}
	return metav1.Condition{Type: string(typ), Status: s, Reason: string(reason), Message: msg}
}

// httpRouteKind is the only route kind svcnet's listeners take.
var httpRouteKind = gatewayv1.RouteGroupKind{Group: ptrTo(gatewayv1.Group(gatewayv1.GroupName)), Kind: "HTTPRoute"}

// listeners checks a Gateway's listeners against the proxy's ports and
// resolves their certificates and route kinds.
func (w *world) listeners(gw *gatewayv1.Gateway) []*listener {
	var out []*listener
	for i := range gw.Spec.Listeners {
		spec := &gw.Spec.Listeners[i]
		l := &listener{gw: gw, spec: spec}
		l.accepted = condition(gatewayv1.ListenerConditionAccepted, true, gatewayv1.ListenerReasonAccepted, "Listener is accepted")
		l.resolved = condition(gatewayv1.ListenerConditionResolvedRefs, true, gatewayv1.ListenerReasonResolvedRefs, "All references are resolved")
		l.kinds = w.routeKinds(l)
		switch spec.Protocol {
		case gatewayv1.HTTPProtocolType, gatewayv1.HTTPSProtocolType:
			tlsPort := spec.Protocol == gatewayv1.HTTPSProtocolType
			for j := range w.ports {
				if w.ports[j].Port == int32(spec.Port) && w.ports[j].TLS == tlsPort {
					l.port = &w.ports[j]
				}
			}
			if l.port == nil {
				l.accepted = condition(gatewayv1.ListenerConditionAccepted, false, gatewayv1.ListenerReasonPortUnavailable,
					fmt.Sprintf("svcnet's proxy serves %s; %s on port %d is not served", w.portsText(), spec.Protocol, spec.Port))
			} else if tlsPort {
				w.certificates(l)
			}
		default:
			l.accepted = condition(gatewayv1.ListenerConditionAccepted, false, gatewayv1.ListenerReasonUnsupportedProtocol,
				fmt.Sprintf("protocol %s is not supported: svcnet serves HTTP and HTTPS listeners", spec.Protocol))
		}
		out = append(out, l)
	}
	return out
}

// portsText says which protocols the proxy serves on which ports.
func (w *world) portsText() string {
	var parts []string
	for _, p := range w.ports {
		proto := gatewayv1.HTTPProtocolType
		if p.TLS {
			proto = gatewayv1.HTTPSProtocolType
		}
		parts = append(parts, fmt.Sprintf("%s on port %d", proto, p.Port))
	}
	return strings.Join(parts, " and ")
}

// routeKinds are the listener's supported route kinds: HTTPRoute unless
// allowedRoutes.kinds names others, which make ResolvedRefs false.
func (w *world) routeKinds(l *listener) []gatewayv1.RouteGroupKind {
	if l.spec.AllowedRoutes == nil || len(l.spec.AllowedRoutes.Kinds) == 0 {
		if l.spec.Protocol == gatewayv1.HTTPProtocolType || l.spec.Protocol == gatewayv1.HTTPSProtocolType {
			return []gatewayv1.RouteGroupKind{httpRouteKind}
		}
		return []gatewayv1.RouteGroupKind{}
	}
	kinds := []gatewayv1.RouteGroupKind{}
	var invalid []string
	for _, k := range l.spec.AllowedRoutes.Kinds {
		group := gatewayv1.GroupName
		if k.Group != nil {
			group = string(*k.Group)
		}
		if group == gatewayv1.GroupName && k.Kind == httpRouteKind.Kind {
			if !slices.ContainsFunc(kinds, func(g gatewayv1.RouteGroupKind) bool { return g.Kind == k.Kind }) {
				kinds = append(kinds, httpRouteKind)
			}
			continue
		}
		invalid = append(invalid, group+"/"+string(k.Kind))
	}
	if len(invalid) > 0 {
		l.resolved = condition(gatewayv1.ListenerConditionResolvedRefs, false, gatewayv1.ListenerReasonInvalidRouteKinds,
			fmt.Sprintf("route kinds %s are not supported: svcnet serves %s/HTTPRoute", strings.Join(invalid, ", "), gatewayv1.GroupName))
	}
	return kinds
}

// certificates resolves an HTTPS listener's certificateRefs: Secrets of
// the Gateway's namespace, or of another one that a ReferenceGrant opens
// to the Gateway.
func (w *world) certificates(l *listener) {
	if l.spec.TLS != nil && l.spec.TLS.Mode != nil && *l.spec.TLS.Mode != gatewayv1.TLSModeTerminate {
		l.accepted = condition(gatewayv1.ListenerConditionAccepted, false, gatewayv1.ListenerReasonUnsupportedValue,
			fmt.Sprintf("TLS mode %s is not supported on HTTPS listeners: svcnet terminates TLS", *l.spec.TLS.Mode))
		return
	}
	if l.spec.TLS == nil || len(l.spec.TLS.CertificateRefs) == 0 {
		l.resolved = condition(gatewayv1.ListenerConditionResolvedRefs, false, gatewayv1.ListenerReasonInvalidCertificateRef, "an HTTPS listener needs tls.certificateRefs")
		return
	}
	for _, ref := range l.spec.TLS.CertificateRefs {
		ns := l.gw.Namespace
		if ref.Namespace != nil {
			ns = string(*ref.Namespace)
		}
		name := ns + "/" + string(ref.Name)
		fail := func(reason gatewayv1.ListenerConditionReason, msg string) {
			l.resolved = condition(gatewayv1.ListenerConditionResolvedRefs, false, reason, msg)
		}
		switch {
		case (ref.Group != nil && *ref.Group != "") || (ref.Kind != nil && *ref.Kind != "Secret"):
			fail(gatewayv1.ListenerReasonInvalidCertificateRef, fmt.Sprintf("certificate reference %s is not a core Secret", name))
			continue
		case ns != l.gw.Namespace && !w.granted(l.gw.Namespace, "Gateway", ns, "", "Secret", string(ref.Name)):
			fail(gatewayv1.ListenerReasonRefNotPermitted, fmt.Sprintf("no ReferenceGrant in namespace %s allows Gateways of %s to use Secret %s", ns, l.gw.Namespace, ref.Name))
			continue
		}
		s, err := w.secrets.Secrets(ns).Get(string(ref.Name))
		if err != nil {
			fail(gatewayv1.ListenerReasonInvalidCertificateRef, fmt.Sprintf("secret %s: %v", name, err))
			continue
		}
		c, err := w.certs.Get(s)
		if err != nil {
			fail(gatewayv1.ListenerReasonInvalidCertificateRef, err.Error())
			continue
		}
		l.certs = append(l.certs, c)
	}
}

func ptrTo[T any](v T) *T { return &v }
