package gateway

import (
	"fmt"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"
)

// attachment is where one parentRef of a route attaches: the listeners
// that take it and, for each, the host names it serves there.
type attachment struct {
	ref      gatewayv1.ParentReference
	gw       *gatewayv1.Gateway
	accepted metav1.Condition
	on       []attached
}

type attached struct {
	l     *listener
	hosts []string
}

// attach finds the listeners of gw (its listener list ls) that the
// parentRef selects and that allow the route, as the Gateway API says:
// sectionName and port narrow the listeners; allowedRoutes must admit
// the route's namespace and kind; the route's hostnames must intersect
// the listener's.
func (w *world) attach(rt *gatewayv1.HTTPRoute, ref gatewayv1.ParentReference, gw *gatewayv1.Gateway, ls []*listener) attachment {
	a := attachment{ref: ref, gw: gw}
	var selected []*listener
	for _, l := range ls {
		if ref.SectionName != nil && *ref.SectionName != l.spec.Name {
			continue
		}
		if ref.Port != nil && *ref.Port != l.spec.Port {
			continue
		}
		selected = append(selected, l)
	}
	if len(selected) == 0 {
		a.accepted = condition(gatewayv1.RouteConditionAccepted, false, gatewayv1.RouteReasonNoMatchingParent,
			fmt.Sprintf("Gateway %s/%s has no listener that matches the parentRef's sectionName and port", gw.Namespace, gw.Name))
		return a
	}
	var allowed []*listener
	for _, l := range selected {
		if l.serves() && w.allows(l, rt) {
			allowed = append(allowed, l)
		}
	}
	if len(allowed) == 0 {
		a.accepted = condition(gatewayv1.RouteConditionAccepted, false, gatewayv1.RouteReasonNotAllowedByListeners,
			fmt.Sprintf("no listener of Gateway %s/%s that the parentRef selects is programmed and allows HTTPRoutes of namespace %s", gw.Namespace, gw.Name, rt.Namespace))
		return a
	}
	for _, l := range allowed {
		if hosts := intersect(l.hostname(), rt.Spec.Hostnames); len(hosts) > 0 {
			a.on = append(a.on, attached{l: l, hosts: hosts})
		}
	}
	if len(a.on) == 0 {
		a.accepted = condition(gatewayv1.RouteConditionAccepted, false, gatewayv1.RouteReasonNoMatchingListenerHostname,
			fmt.Sprintf("no hostname of the route matches a listener hostname of Gateway %s/%s", gw.Namespace, gw.Name))
		return a
	}
	a.accepted = condition(gatewayv1.RouteConditionAccepted, true, gatewayv1.RouteReasonAccepted, "Route is accepted")
	return a
}

// allows says whether the listener's allowedRoutes admit the route: its
// namespace (From Same, the default; All; Selector on the namespace's
// labels) and its kind.
func (w *world) allows(l *listener, rt *gatewayv1.HTTPRoute) bool {
	if len(l.kinds) == 0 {
		return false
	}
	from := gatewayv1.NamespacesFromSame
	var sel *metav1.LabelSelector
	if ar := l.spec.AllowedRoutes; ar != nil && ar.Namespaces != nil {
		if ar.Namespaces.From != nil {
			from = *ar.Namespaces.From
		}
		sel = ar.Namespaces.Selector
	}
	switch from {
	case gatewayv1.NamespacesFromAll:
		return true
	case gatewayv1.NamespacesFromSame:
		return rt.Namespace == l.gw.Namespace
	case gatewayv1.NamespacesFromSelector:
		if sel == nil {
			return false
		}
		s, err := metav1.LabelSelectorAsSelector(sel)
		if err != nil {
			return false
		}
		ns, err := w.namespaces.Get(rt.Namespace)
		return err == nil && s.Matches(labels.Set(ns.Labels))
	}
	return false
}

// intersect is the host names a route with hostnames serves on a
// listener with hostname listenerHost ("" for any): the route's that
// the listener's covers, or the listener's where it is the narrower
// (a route's wildcard over a listener's exact name); "" alone when
// neither names any. Empty: none intersect.
func intersect(listenerHost string, hostnames []gatewayv1.Hostname) []string {
	if len(hostnames) == 0 {
		return []string{listenerHost}
	}
	var out []string
	add := func(h string) {
		for _, o := range out {
			if o == h {
				return
			}
		}
		out = append(out, h)
	}
	for _, hn := range hostnames {
		h := strings.ToLower(string(hn))
		switch {
		case listenerHost == "" || h == listenerHost:
			add(h)
		case covers(listenerHost, h):
			add(h)
		case covers(h, listenerHost):
			add(listenerHost)
		}
	}
	return out
}

// covers says whether the wildcard pattern ("*.example.test", a suffix
// match) covers host, an exact name or a narrower wildcard.
func covers(pattern, host string) bool {
	suffix, ok := strings.CutPrefix(pattern, "*")
	if !ok {
		return false
	}
	rest, ok := strings.CutSuffix(strings.TrimPrefix(host, "*"), suffix)
	return ok && (rest != "" || strings.HasPrefix(host, "*"))
}
