package gateway

import (
	"cmp"
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	corelisters "k8s.io/client-go/listers/core/v1"
	discoverylisters "k8s.io/client-go/listers/discovery/v1"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"
	gatewayv1beta1 "sigs.k8s.io/gateway-api/apis/v1beta1"

	"github.com/svcnet/svcnet/internal/ingress/controller"
	"github.com/svcnet/svcnet/internal/ingress/routes"
)

// world is what a build reads: the Gateway API objects (as the informers
// hold them) and the listers of what they refer to.
type world struct {
	classes  []*gatewayv1.GatewayClass
	gateways []*gatewayv1.Gateway
	routes   []*gatewayv1.HTTPRoute
	grants   []*gatewayv1beta1.ReferenceGrant

	namespaces corelisters.NamespaceLister
	services   corelisters.ServiceLister
	slices     discoverylisters.EndpointSliceLister
	secrets    corelisters.SecretLister
	certs      *controller.Certificates

	// ports are the proxy's listeners; addresses the Gateways' status
	// addresses (the controller Service's).
	ports     []Port
	addresses []gatewayv1.GatewayStatusAddress
}

// built is a build's outcome: the table, and the status each object of
// svcnet's classes should have (conditions without their times).
type built struct {
	table    *routes.Table
	classes  map[*gatewayv1.GatewayClass][]metav1.Condition
	gateways map[*gatewayv1.Gateway]*gatewayStatus
	routes   map[*gatewayv1.HTTPRoute][]routeParent
}

type gatewayStatus struct {
	conditions []metav1.Condition
	listeners  []*listener
}

// routeParent is the status of one parentRef svcnet answers for.
type routeParent struct {
	ref        gatewayv1.ParentReference
	conditions []metav1.Condition
}

// entry is one route match in a virtual host and the HTTPRoute it is
// of. A host's entries are in the order ties keep: routes by age and
// name, then their rules and matches in order.
type entry struct {
	route *routes.Route
	rt    *gatewayv1.HTTPRoute
}

// build translates the Gateways of svcnet's classes and the HTTPRoutes
// attached to them into a table with a listener per proxy port, and
// works out their status.
func (w *world) build() *built {
	b := &built{
		classes:  map[*gatewayv1.GatewayClass][]metav1.Condition{},
		gateways: map[*gatewayv1.Gateway]*gatewayStatus{},
		routes:   map[*gatewayv1.HTTPRoute][]routeParent{},
	}
	ours := map[string]bool{}
	for _, c := range w.classes {
		if c.Spec.ControllerName == ControllerName {
			ours[c.Name] = true
			b.classes[c] = []metav1.Condition{
				condition(gatewayv1.GatewayClassConditionStatusAccepted, true, gatewayv1.GatewayClassReasonAccepted, "Handled by svcnet's gateway controller"),
				condition(gatewayv1.GatewayClassConditionStatusSupportedVersion, true, gatewayv1.GatewayClassReasonSupportedVersion, "The Gateway API version installed is supported"),
			}
		}
	}
	served := map[string]*gatewayv1.Gateway{} // by namespace/name
	for _, gw := range w.gateways {
		if !ours[string(gw.Spec.GatewayClassName)] {
			continue
		}
		served[gw.Namespace+"/"+gw.Name] = gw
		b.gateways[gw] = &gatewayStatus{listeners: w.listeners(gw)}
	}

	// hosts[proxy listener][hostname] are the entries of each virtual host.
	hosts := map[string]map[string][]entry{}
	for _, rt := range sortedRoutes(w.routes) {
		var parents []routeParent
		var on []attached
		for _, ref := range rt.Spec.ParentRefs {
			if (ref.Group != nil && *ref.Group != gatewayv1.GroupName) || (ref.Kind != nil && *ref.Kind != "Gateway") {
				continue
			}
			ns := rt.Namespace
			if ref.Namespace != nil {
				ns = string(*ref.Namespace)
			}
			gw, ok := served[ns+"/"+string(ref.Name)]
			if !ok {
				continue // not a Gateway of svcnet's classes
			}
			a := w.attach(rt, ref, gw, b.gateways[gw].listeners)
			on = append(on, a.on...)
			parents = append(parents, routeParent{ref: ref, conditions: []metav1.Condition{a.accepted}})
		}
		if len(parents) == 0 {
			continue
		}
		rules, resolved, invalid := w.rules(rt)
		for i := range parents {
			p := &parents[i]
			if invalid != "" && p.conditions[0].Status == metav1.ConditionTrue {
				if len(rules) == 0 {
					p.conditions[0] = condition(gatewayv1.RouteConditionAccepted, false, gatewayv1.RouteReasonUnsupportedValue, invalid)
				} else {
					p.conditions = append(p.conditions, condition(gatewayv1.RouteConditionPartiallyInvalid, true, gatewayv1.RouteReasonUnsupportedValue, invalid))
				}
			}
			p.conditions = append(p.conditions, resolved)
		}
		b.routes[rt] = parents
		if len(rules) == 0 {
			continue
		}
		seenListener := map[*listener]bool{}
		for _, at := range on {
			if !seenListener[at.l] {
				seenListener[at.l] = true
				at.l.attached++
			}
			name := at.l.port.Listener
			if hosts[name] == nil {
				hosts[name] = map[string][]entry{}
			}
			for _, h := range at.hosts {
				if hasRoute(hosts[name][h], rt) {
					continue // attached to two listeners of one port
				}
				hosts[name][h] = append(hosts[name][h], rules...)
			}
		}
	}

	b.table = &routes.Table{Listeners: map[string]*routes.Listener{}}
	for _, p := range w.ports {
		b.table.Listeners[p.Listener] = &routes.Listener{SuffixWildcards: true, Hosts: virtualHosts(hosts[p.Listener])}
	}
	for _, gw := range w.gateways {
		st := b.gateways[gw]
		if st == nil {
			continue
		}
		for _, l := range st.listeners {
			if l.serves() && len(l.certs) > 0 {
				tl := b.table.Listeners[l.port.Listener]
				for _, c := range l.certs {
					var names []string
					if h := l.hostname(); h != "" {
						names = []string{h}
					} else if c.Leaf != nil {
						names = c.Leaf.DNSNames
					}
					tl.Certificates = append(tl.Certificates, routes.Certificate{Hosts: names, Cert: c})
				}
			}
		}
		st.conditions = w.gatewayConditions(gw, st.listeners)
	}
	w.certs.Sweep()
	return b
}

// sortedRoutes orders routes as the Gateway API breaks ties between
// them: the oldest first, then by namespace/name.
func sortedRoutes(rts []*gatewayv1.HTTPRoute) []*gatewayv1.HTTPRoute {
	rts = slices.Clone(rts)
	slices.SortFunc(rts, func(a, b *gatewayv1.HTTPRoute) int {
		if c := a.CreationTimestamp.Compare(b.CreationTimestamp.Time); c != 0 {
			return c
		}
		return cmp.Or(cmp.Compare(a.Namespace, b.Namespace), cmp.Compare(a.Name, b.Name))
	})
	return rts
}

func hasRoute(es []entry, rt *gatewayv1.HTTPRoute) bool {
	return slices.ContainsFunc(es, func(e entry) bool { return e.rt == rt })
}

// rules translates a route's rules into entries, one per match. A rule
// that svcnet cannot serve as written (an unsupported filter, a regular
// expression that does not compile) is left out and invalid says why;
// resolved is the ResolvedRefs condition of its backendRefs.
func (w *world) rules(rt *gatewayv1.HTTPRoute) (es []entry, resolved metav1.Condition, invalid string) {
	resolved = condition(gatewayv1.RouteConditionResolvedRefs, true, gatewayv1.RouteReasonResolvedRefs, "All references are resolved")
	src := routes.Source{Kind: "HTTPRoute", Namespace: rt.Namespace, Name: rt.Name}
	for i, rule := range rt.Spec.Rules {
		fs, err := filters(rule.Filters)
		var backends []*routes.Backend
		for _, ref := range rule.BackendRefs {
			if len(ref.Filters) > 0 && err == nil {
				err = fmt.Errorf("filters of backendRefs are not supported")
			}
			be, reason, msg := w.backend(rt.Namespace, ref.BackendRef)
			if reason != "" && resolved.Status == metav1.ConditionTrue {
				resolved = condition(gatewayv1.RouteConditionResolvedRefs, false, reason, msg)
			}
			backends = append(backends, be)
		}
		matches := rule.Matches
		if len(matches) == 0 {
			matches = []gatewayv1.HTTPRouteMatch{{}}
		}
		var ruleEntries []entry
		for j := 0; j < len(matches) && err == nil; j++ {
			var m routes.Match
			if m, err = match(matches[j]); err == nil {
				r := &routes.Route{Source: src, Matches: []routes.Match{m}, Filters: fs, Backends: backends}
				ruleEntries = append(ruleEntries, entry{route: r, rt: rt})
			}
		}
		if err != nil {
			if invalid == "" {
				invalid = fmt.Sprintf("rule %d is not served: %v", i, err)
			}
			continue
		}
		es = append(es, ruleEntries...)
	}
	return es, resolved, invalid
}

// match translates one HTTPRouteMatch. Regular expressions (RE2) must
// match the whole path or value; of several matches of one header (any
// case) or query parameter name, the first counts.
func match(m gatewayv1.HTTPRouteMatch) (routes.Match, error) {
	var out routes.Match
	out.Path = routes.PathMatch{Type: routes.PathPrefix, Value: "/"}
	if p := m.Path; p != nil {
		if p.Value != nil {
			out.Path.Value = *p.Value
		}
		if p.Type != nil {
			switch *p.Type {
			case gatewayv1.PathMatchExact:
				out.Path.Type = routes.PathExact
			case gatewayv1.PathMatchRegularExpression:
				re, err := fullMatch(out.Path.Value)
				if err != nil {
					return out, fmt.Errorf("path regular expression: %w", err)
				}
				out.Path.Type, out.Path.Regexp = routes.PathRegularExpression, re
			}
		}
	}
	for i, h := range m.Headers {
		if slices.ContainsFunc(m.Headers[:i], func(o gatewayv1.HTTPHeaderMatch) bool { return strings.EqualFold(string(o.Name), string(h.Name)) }) {
			continue // the API: only the first match of a header name counts
		}
		v := routes.ValueMatch{Type: routes.MatchExact, Name: string(h.Name), Value: h.Value}
		if h.Type != nil && *h.Type == gatewayv1.HeaderMatchRegularExpression {
			re, err := fullMatch(h.Value)
			if err != nil {
				return out, fmt.Errorf("header %s regular expression: %w", h.Name, err)
			}
			v.Type, v.Regexp = routes.MatchRegularExpression, re
		}
		out.Headers = append(out.Headers, v)
	}
	for i, q := range m.QueryParams {
		if slices.ContainsFunc(m.QueryParams[:i], func(o gatewayv1.HTTPQueryParamMatch) bool { return o.Name == q.Name }) {
			continue // as for headers: the first match of a name counts
		}
		v := routes.ValueMatch{Type: routes.MatchExact, Name: string(q.Name), Value: q.Value}
		if q.Type != nil && *q.Type == gatewayv1.QueryParamMatchRegularExpression {
			re, err := fullMatch(q.Value)
			if err != nil {
				return out, fmt.Errorf("query parameter %s regular expression: %w", q.Name, err)
			}
			v.Type, v.Regexp = routes.MatchRegularExpression, re
		}
		out.QueryParams = append(out.QueryParams, v)
	}
	if m.Method != nil {
		out.Method = string(*m.Method)
	}
	return out, nil
}

func fullMatch(expr string) (*regexp.Regexp, error) {
	return regexp.Compile("^(?:" + expr + ")$")
}

// filters translates a rule's filters, in order; those svcnet does not
// implement make the rule invalid.
func filters(fs []gatewayv1.HTTPRouteFilter) ([]routes.Filter, error) {
	var out []routes.Filter
	for _, f := range fs {
		switch {
		case f.Type == gatewayv1.HTTPRouteFilterRequestHeaderModifier && f.RequestHeaderModifier != nil:
			out = append(out, routes.Filter{RequestHeaders: headerModifier(f.RequestHeaderModifier)})
		case f.Type == gatewayv1.HTTPRouteFilterResponseHeaderModifier && f.ResponseHeaderModifier != nil:
			out = append(out, routes.Filter{ResponseHeaders: headerModifier(f.ResponseHeaderModifier)})
		case f.Type == gatewayv1.HTTPRouteFilterRequestRedirect && f.RequestRedirect != nil:
			rd := f.RequestRedirect
			r := &routes.Redirect{Path: pathModifier(rd.Path)}
			if rd.Scheme != nil {
				r.Scheme = *rd.Scheme
			}
			if rd.Hostname != nil {
				r.Hostname = string(*rd.Hostname)
			}
			if rd.Port != nil {
				r.Port = int32(*rd.Port)
			}
			if rd.StatusCode != nil {
				r.StatusCode = *rd.StatusCode
			}
			out = append(out, routes.Filter{Redirect: r})
		case f.Type == gatewayv1.HTTPRouteFilterURLRewrite && f.URLRewrite != nil:
			r := &routes.Rewrite{Path: pathModifier(f.URLRewrite.Path)}
			if f.URLRewrite.Hostname != nil {
				r.Hostname = string(*f.URLRewrite.Hostname)
			}
			out = append(out, routes.Filter{Rewrite: r})
		default:
			return nil, fmt.Errorf("filter %s is not supported", f.Type)
		}
	}
	return out, nil
}

func headerModifier(h *gatewayv1.HTTPHeaderFilter) *routes.HeaderModifier {
	m := &routes.HeaderModifier{Remove: h.Remove}
	for _, s := range h.Set {
		m.Set = append(m.Set, routes.Header{Name: string(s.Name), Value: s.Value})
	}
	for _, a := range h.Add {
		m.Add = append(m.Add, routes.Header{Name: string(a.Name), Value: a.Value})
	}
	return m
}

func pathModifier(p *gatewayv1.HTTPPathModifier) *routes.PathModifier {
	switch {
	case p == nil:
		return nil
	case p.Type == gatewayv1.FullPathHTTPPathModifier && p.ReplaceFullPath != nil:
		return &routes.PathModifier{FullPath: true, ReplaceFullPath: *p.ReplaceFullPath}
	case p.Type == gatewayv1.PrefixMatchHTTPPathModifier && p.ReplacePrefixMatch != nil:
		return &routes.PathModifier{ReplacePrefixMatch: *p.ReplacePrefixMatch}
	}
	return nil
}

// backend resolves a backendRef to the ready endpoints of a Service
// port. A reference that does not resolve gives an Invalid backend (its
// share of requests answers 500) and the ResolvedRefs reason.
func (w *world) backend(ns string, ref gatewayv1.BackendRef) (*routes.Backend, gatewayv1.RouteConditionReason, string) {
	be := &routes.Backend{Namespace: ns, Service: string(ref.Name), Weight: 1}
	if ref.Weight != nil {
		be.Weight = *ref.Weight
	}
	if ref.Namespace != nil {
		be.Namespace = string(*ref.Namespace)
	}
	name := be.Namespace + "/" + be.Service
	fail := func(reason gatewayv1.RouteConditionReason, msg string) (*routes.Backend, gatewayv1.RouteConditionReason, string) {
		be.Invalid = true
		return be, reason, msg
	}
	if (ref.Group != nil && *ref.Group != "") || (ref.Kind != nil && *ref.Kind != "Service") {
		group, kind := "core", "Service"
		if ref.Group != nil && *ref.Group != "" {
			group = string(*ref.Group)
		}
		if ref.Kind != nil {
			kind = string(*ref.Kind)
		}
		return fail(gatewayv1.RouteReasonInvalidKind, fmt.Sprintf("backendRef %s is a %s of group %s: svcnet sends to core Services", name, kind, group))
	}
	if be.Namespace != ns && !w.granted(ns, "HTTPRoute", be.Namespace, "", "Service", be.Service) {
		return fail(gatewayv1.RouteReasonRefNotPermitted, fmt.Sprintf("no ReferenceGrant in namespace %s allows HTTPRoutes of %s to use Service %s", be.Namespace, ns, be.Service))
	}
	svc, err := w.services.Services(be.Namespace).Get(be.Service)
	if err != nil {
		return fail(gatewayv1.RouteReasonBackendNotFound, fmt.Sprintf("service %s: %v", name, err))
	}
	if ref.Port == nil {
		return fail(gatewayv1.RouteReasonBackendNotFound, fmt.Sprintf("backendRef %s has no port", name))
	}
	var sp *corev1.ServicePort
	for i, p := range svc.Spec.Ports {
		if p.Port == int32(*ref.Port) && (p.Protocol == corev1.ProtocolTCP || p.Protocol == "") {
			sp = &svc.Spec.Ports[i]
		}
	}
	if sp == nil {
		return fail(gatewayv1.RouteReasonBackendNotFound, fmt.Sprintf("service %s has no TCP port %d", name, *ref.Port))
	}
	be.Endpoints = controller.ReadyEndpoints(w.slices, svc, sp)
	return be, "", ""
}

// granted says whether a ReferenceGrant in namespace toNS lets objects
// of fromKind (of the Gateway API's group) in fromNS refer to the object
// toName of toGroup/toKind.
func (w *world) granted(fromNS, fromKind, toNS, toGroup, toKind, toName string) bool {
	for _, g := range w.grants {
		if g.Namespace != toNS {
			continue
		}
		from := slices.ContainsFunc(g.Spec.From, func(f gatewayv1beta1.ReferenceGrantFrom) bool {
			return f.Group == gatewayv1.GroupName && string(f.Kind) == fromKind && string(f.Namespace) == fromNS
		})
		to := slices.ContainsFunc(g.Spec.To, func(t gatewayv1beta1.ReferenceGrantTo) bool {
			return string(t.Group) == toGroup && string(t.Kind) == toKind && (t.Name == nil || string(*t.Name) == toName)
		})
		if from && to {
			return true
		}
	}
	return false
}

// virtualHosts orders each host's entries by the Gateway API's match
// precedence and appends those of the wildcard hosts that cover it and
// of the catch-all, more specific hosts first: a request for
// a.example.test tries the routes of a.example.test, then of
// *.example.test, then of routes with no hostname.
func virtualHosts(m map[string][]entry) []*routes.VirtualHost {
	names := slices.Collect(maps.Keys(m))
	slices.SortFunc(names, func(a, b string) int { return cmp.Or(cmp.Compare(len(b), len(a)), cmp.Compare(a, b)) })
	for _, h := range names {
		slices.SortStableFunc(m[h], func(a, b entry) int { return precedence(a.route.Matches[0], b.route.Matches[0]) })
	}
	var out []*routes.VirtualHost
	for _, h := range names {
		vh := &routes.VirtualHost{Hostname: h}
		for _, o := range names {
			if o == h || o == "" || covers(o, h) {
				for _, e := range m[o] {
					vh.Routes = append(vh.Routes, e.route)
				}
			}
		}
		out = append(out, vh)
	}
	return out
}

// precedence orders two matches as the Gateway API asks: an Exact path
// first, then a regular expression (svcnet's choice; the API leaves it
// to implementations), then the longer prefix; then a method match;
// then more header matches; then more query parameter matches.
func precedence(a, b routes.Match) int {
	rank := func(p routes.PathMatch) int {
		switch p.Type {
		case routes.PathExact:
			return 2
		case routes.PathRegularExpression:
			return 1
		}
		return 0
	}
	return cmp.Or(
		cmp.Compare(rank(b.Path), rank(a.Path)),
		cmp.Compare(len(b.Path.Value), len(a.Path.Value)),
		cmp.Compare(boolInt(b.Method != ""), boolInt(a.Method != "")),
		cmp.Compare(len(b.Headers), len(a.Headers)),
		cmp.Compare(len(b.QueryParams), len(a.QueryParams)),
	)
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

// gatewayConditions are a Gateway's Accepted and Programmed conditions:
// accepted when some listener is; programmed once the controller
// Service has an address and some listener serves.
func (w *world) gatewayConditions(gw *gatewayv1.Gateway, ls []*listener) []metav1.Condition {
	var bad []string
	accepted, serving := false, false
	for _, l := range ls {
		if l.accepted.Status == metav1.ConditionTrue {
			accepted = true
		} else {
			bad = append(bad, string(l.spec.Name))
		}
		serving = serving || l.serves()
	}
	acc := condition(gatewayv1.GatewayConditionAccepted, true, gatewayv1.GatewayReasonAccepted, "Gateway is accepted")
	if len(bad) > 0 {
		acc = condition(gatewayv1.GatewayConditionAccepted, accepted, gatewayv1.GatewayReasonListenersNotValid,
			fmt.Sprintf("listeners %s are not valid", strings.Join(bad, ", ")))
	}
	prog := condition(gatewayv1.GatewayConditionProgrammed, true, gatewayv1.GatewayReasonProgrammed, "Gateway is programmed")
	switch {
	case !serving:
		prog = condition(gatewayv1.GatewayConditionProgrammed, false, gatewayv1.GatewayReasonInvalid, "no listener of the Gateway can be served")
	case len(w.addresses) == 0:
		prog = condition(gatewayv1.GatewayConditionProgrammed, false, gatewayv1.GatewayReasonAddressNotAssigned, "the ingress controller's Service has no address yet")
	default:
		for _, a := range gw.Spec.Addresses {
			if !slices.ContainsFunc(w.addresses, func(s gatewayv1.GatewayStatusAddress) bool { return s.Value == a.Value }) {
				prog = condition(gatewayv1.GatewayConditionProgrammed, false, gatewayv1.GatewayReasonAddressNotUsable,
					fmt.Sprintf("address %s is not the ingress controller's: svcnet's Gateways share its Service's addresses", a.Value))
				break
			}
		}
	}
	return []metav1.Condition{acc, prog}
}

// listenerConditions are a listener's status conditions.
func listenerConditions(l *listener) []metav1.Condition {
	prog := condition(gatewayv1.ListenerConditionProgrammed, true, gatewayv1.ListenerReasonProgrammed, "Listener is programmed")
	if !l.serves() {
		prog = condition(gatewayv1.ListenerConditionProgrammed, false, gatewayv1.ListenerReasonInvalid, "Listener is not served: see Accepted and ResolvedRefs")
	}
	return []metav1.Condition{
		l.accepted, prog, l.resolved,
		condition(gatewayv1.ListenerConditionConflicted, false, gatewayv1.ListenerReasonNoConflicts, "No conflicts"),
	}
}
