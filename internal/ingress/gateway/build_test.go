package gateway

import (
	"net/http/httptest"
	"net/netip"
	"reflect"
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	corelisters "k8s.io/client-go/listers/core/v1"
	discoverylisters "k8s.io/client-go/listers/discovery/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/cert"
	"k8s.io/utils/ptr"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"
	gatewayv1beta1 "sigs.k8s.io/gateway-api/apis/v1beta1"

	"github.com/svcnet/svcnet/internal/ingress/controller"
	"github.com/svcnet/svcnet/internal/ingress/routes"
)

var ports = []Port{{Port: 80, Listener: controller.HTTP}, {Port: 443, TLS: true, Listener: controller.HTTPS}}

func objectMeta(ns, name string, age int) metav1.ObjectMeta {
	return metav1.ObjectMeta{Namespace: ns, Name: name, UID: types.UID("uid-" + ns + "-" + name), Generation: 3,
		CreationTimestamp: metav1.NewTime(time.Unix(1e9-int64(age), 0))}
}

// objects fills listers with the core objects a test's routes refer to.
func newWorld(t *testing.T, objs ...any) *world {
	t.Helper()
	idx := func() cache.Indexer {
		return cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc})
	}
	svcs, slcs, secrets, nss := idx(), idx(), idx(), idx()
	w := &world{ports: ports, certs: &controller.Certificates{},
		addresses: []gatewayv1.GatewayStatusAddress{{Type: ptr.To(gatewayv1.IPAddressType), Value: "10.0.0.200"}}}
	for _, o := range objs {
		var err error
		switch o := o.(type) {
		case *corev1.Service:
			err = svcs.Add(o)
		case *discoveryv1.EndpointSlice:
			err = slcs.Add(o)
		case *corev1.Secret:
			err = secrets.Add(o)
		case *corev1.Namespace:
			err = nss.Add(o)
		case *gatewayv1.GatewayClass:
			w.classes = append(w.classes, o)
		case *gatewayv1.Gateway:
			w.gateways = append(w.gateways, o)
		case *gatewayv1.HTTPRoute:
			w.routes = append(w.routes, o)
		case *gatewayv1beta1.ReferenceGrant:
			w.grants = append(w.grants, o)
		default:
			t.Fatalf("unexpected %T", o)
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	w.services, w.slices = corelisters.NewServiceLister(svcs), discoverylisters.NewEndpointSliceLister(slcs)
	w.secrets, w.namespaces = corelisters.NewSecretLister(secrets), corelisters.NewNamespaceLister(nss)
	return w
}

// backendService is a Service with port 80 to targetPort 8080 and one
// ready endpoint, ip.
func backendService(ns, name, ip string) []any {
	svc := &corev1.Service{ObjectMeta: objectMeta(ns, name, 0), Spec: corev1.ServiceSpec{Ports: []corev1.ServicePort{{Name: "http", Port: 80, Protocol: corev1.ProtocolTCP}}}}
	s := &discoveryv1.EndpointSlice{
		ObjectMeta:  objectMeta(ns, name+"-abc", 0),
		AddressType: discoveryv1.AddressTypeIPv4,
		Ports:       []discoveryv1.EndpointPort{{Name: ptr.To("http"), Port: ptr.To[int32](8080), Protocol: ptr.To(corev1.ProtocolTCP)}},
		Endpoints:   []discoveryv1.Endpoint{{Addresses: []string{ip}, Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(true)}}},
	}
	s.Labels = map[string]string{discoveryv1.LabelServiceName: name}
	return []any{svc, s}
}

func class(name string, ctl gatewayv1.GatewayController) *gatewayv1.GatewayClass {
	return &gatewayv1.GatewayClass{ObjectMeta: objectMeta("", name, 0), Spec: gatewayv1.GatewayClassSpec{ControllerName: ctl}}
}

func gateway(ns, name, class string, ls ...gatewayv1.Listener) *gatewayv1.Gateway {
	return &gatewayv1.Gateway{ObjectMeta: objectMeta(ns, name, 0), Spec: gatewayv1.GatewaySpec{GatewayClassName: gatewayv1.ObjectName(class), Listeners: ls}}
}

func httpListener(name string, port gatewayv1.PortNumber, host string) gatewayv1.Listener {
	l := gatewayv1.Listener{Name: gatewayv1.SectionName(name), Port: port, Protocol: gatewayv1.HTTPProtocolType}
	if host != "" {
		l.Hostname = ptr.To(gatewayv1.Hostname(host))
	}
	return l
}

func route(ns, name string, age int, parent string, hosts []string, rules ...gatewayv1.HTTPRouteRule) *gatewayv1.HTTPRoute {
	rt := &gatewayv1.HTTPRoute{ObjectMeta: objectMeta(ns, name, age)}
	rt.Spec.ParentRefs = []gatewayv1.ParentReference{{Name: gatewayv1.ObjectName(parent), Namespace: ptr.To(gatewayv1.Namespace("infra"))}}
	for _, h := range hosts {
		rt.Spec.Hostnames = append(rt.Spec.Hostnames, gatewayv1.Hostname(h))
	}
	rt.Spec.Rules = rules
	return rt
}

func backendRef(ns, name string, port, weight int32) gatewayv1.HTTPBackendRef {
	ref := gatewayv1.HTTPBackendRef{BackendRef: gatewayv1.BackendRef{
		BackendObjectReference: gatewayv1.BackendObjectReference{Name: gatewayv1.ObjectName(name), Port: ptr.To(gatewayv1.PortNumber(port))},
		Weight:                 ptr.To(weight),
	}}
	if ns != "" {
		ref.Namespace = ptr.To(gatewayv1.Namespace(ns))
	}
	return ref
}

func rule(matches []gatewayv1.HTTPRouteMatch, refs ...gatewayv1.HTTPBackendRef) gatewayv1.HTTPRouteRule {
	return gatewayv1.HTTPRouteRule{Matches: matches, BackendRefs: refs}
}

func pathPrefix(p string) []gatewayv1.HTTPRouteMatch {
	return []gatewayv1.HTTPRouteMatch{{Path: &gatewayv1.HTTPPathMatch{Type: ptr.To(gatewayv1.PathMatchPathPrefix), Value: ptr.To(p)}}}
}

// served is the route and backend service the table's listener gives a
// request (one pick of each route's first backend with weight).
func served(t *testing.T, tb *routes.Table, listener, method, url string, header map[string]string) (*routes.Route, *routes.Backend) {
	t.Helper()
	r := httptest.NewRequest(method, url, nil)
	for k, v := range header {
		r.Header.Set(k, v)
	}
	l := tb.Listeners[listener]
	if l == nil {
		t.Fatalf("no listener %s", listener)
	}
	rt, _ := l.Route(r)
	if rt == nil {
		return nil, nil
	}
	return rt, rt.Pick()
}

func cond(cs []metav1.Condition, typ string) metav1.Condition {
	for _, c := range cs {
		if c.Type == typ {
			return c
		}
	}
	return metav1.Condition{Type: typ, Status: "missing"}
}

func wantCond(t *testing.T, what string, cs []metav1.Condition, typ string, status metav1.ConditionStatus, reason string) {
	t.Helper()
	if c := cond(cs, typ); c.Status != status || c.Reason != reason {
		t.Errorf("%s: %s = %s/%s (%s), want %s/%s", what, typ, c.Status, c.Reason, c.Message, status, reason)
	}
}

func TestListenersAndClasses(t *testing.T) {
	certPEM, keyPEM, err := cert.GenerateSelfSignedCertKey("web.example.test", nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	secret := &corev1.Secret{ObjectMeta: objectMeta("infra", "web-tls", 0), Type: corev1.SecretTypeTLS,
		Data: map[string][]byte{corev1.TLSCertKey: certPEM, corev1.TLSPrivateKeyKey: keyPEM}}
	https := func(name, secretNS, secretName string) gatewayv1.Listener {
		l := gatewayv1.Listener{Name: gatewayv1.SectionName(name), Port: 443, Protocol: gatewayv1.HTTPSProtocolType, Hostname: ptr.To(gatewayv1.Hostname("web.example.test")),
			TLS: &gatewayv1.ListenerTLSConfig{CertificateRefs: []gatewayv1.SecretObjectReference{{Name: gatewayv1.ObjectName(secretName)}}}}
		if secretNS != "" {
			l.TLS.CertificateRefs[0].Namespace = ptr.To(gatewayv1.Namespace(secretNS))
		}
		return l
	}
	kinds := httpListener("kinds", 80, "kinds.example.test")
	kinds.AllowedRoutes = &gatewayv1.AllowedRoutes{Kinds: []gatewayv1.RouteGroupKind{{Kind: "HTTPRoute"}, {Kind: "TCPRoute"}}}
	gw := gateway("infra", "gw", "svcnet",
		httpListener("http", 80, ""),
		https("https", "", "web-tls"),
		https("missing", "", "nope"),
		https("foreign", "other", "web-tls"),
		httpListener("alt", 8080, ""),
		gatewayv1.Listener{Name: "tcp", Port: 9000, Protocol: gatewayv1.TCPProtocolType},
		kinds,
	)
	w := newWorld(t, secret, class("svcnet", ControllerName), class("other", "example.com/other"), gw,
		gateway("infra", "theirs", "other", httpListener("http", 80, "")))
	b := w.build()

	if len(b.classes) != 1 {
		t.Fatalf("classes: %v", b.classes)
	}
	for c, cs := range b.classes {
		if c.Name != "svcnet" {
			t.Errorf("status for class %s", c.Name)
		}
		wantCond(t, "class", cs, "Accepted", metav1.ConditionTrue, "Accepted")
	}
	if len(b.gateways) != 1 || b.gateways[gw] == nil {
		t.Fatalf("gateways: %v", b.gateways)
	}
	st := gatewayStatusOf(gw, b.gateways[gw], w.addresses, metav1.Now())
	wantCond(t, "gateway", st.Conditions, "Accepted", metav1.ConditionTrue, "ListenersNotValid")
	wantCond(t, "gateway", st.Conditions, "Programmed", metav1.ConditionTrue, "Programmed")
	if len(st.Addresses) != 1 || st.Addresses[0].Value != "10.0.0.200" {
		t.Errorf("addresses %v", st.Addresses)
	}
	want := map[string][4]string{ // Accepted, ResolvedRefs, Programmed
		"http":    {"True/Accepted", "True/ResolvedRefs", "True/Programmed"},
		"https":   {"True/Accepted", "True/ResolvedRefs", "True/Programmed"},
		"missing": {"True/Accepted", "False/InvalidCertificateRef", "False/Invalid"},
		"foreign": {"True/Accepted", "False/RefNotPermitted", "False/Invalid"},
		"alt":     {"False/PortUnavailable", "True/ResolvedRefs", "False/Invalid"},
		"tcp":     {"False/UnsupportedProtocol", "True/ResolvedRefs", "False/Invalid"},
		"kinds":   {"True/Accepted", "False/InvalidRouteKinds", "False/Invalid"},
	}
	if len(st.Listeners) != len(want) {
		t.Fatalf("%d listener statuses", len(st.Listeners))
	}
	for _, ls := range st.Listeners {
		w := want[string(ls.Name)]
		for i, typ := range []string{"Accepted", "ResolvedRefs", "Programmed"} {
			c := cond(ls.Conditions, typ)
			if got := string(c.Status) + "/" + c.Reason; got != w[i] {
				t.Errorf("listener %s: %s %s (%s), want %s", ls.Name, typ, got, c.Message, w[i])
			}
			if c.ObservedGeneration != 3 {
				t.Errorf("listener %s: %s observedGeneration %d", ls.Name, typ, c.ObservedGeneration)
			}
		}
		wantCond(t, "listener "+string(ls.Name), ls.Conditions, "Conflicted", metav1.ConditionFalse, "NoConflicts")
		switch ls.Name {
		case "tcp":
			if len(ls.SupportedKinds) != 0 {
				t.Errorf("tcp supportedKinds %v", ls.SupportedKinds)
			}
		default:
			if len(ls.SupportedKinds) != 1 || ls.SupportedKinds[0].Kind != "HTTPRoute" {
				t.Errorf("%s supportedKinds %v", ls.Name, ls.SupportedKinds)
			}
		}
	}
	https443 := b.table.Listeners[controller.HTTPS]
	if len(https443.Certificates) != 1 || https443.Certificate("web.example.test") == nil {
		t.Errorf("https certificates %+v", https443.Certificates)
	}

	// A grant opens the other namespace's Secret to the Gateway.
	secret2 := secret.DeepCopy()
	secret2.Namespace = "other"
	grant := &gatewayv1beta1.ReferenceGrant{ObjectMeta: objectMeta("other", "allow", 0), Spec: gatewayv1beta1.ReferenceGrantSpec{
		From: []gatewayv1beta1.ReferenceGrantFrom{{Group: gatewayv1.GroupName, Kind: "Gateway", Namespace: "infra"}},
		To:   []gatewayv1beta1.ReferenceGrantTo{{Group: "", Kind: "Secret"}},
	}}
	w = newWorld(t, secret2, grant, class("svcnet", ControllerName), gateway("infra", "gw", "svcnet", https("foreign", "other", "web-tls")))
	b = w.build()
	for _, st := range b.gateways {
		if !st.listeners[0].serves() {
			t.Errorf("granted secret: %+v", st.listeners[0].resolved)
		}
	}
}

func TestRoutes(t *testing.T) {
	objs := []any{class("svcnet", ControllerName),
		gateway("infra", "gw", "svcnet", httpListener("http", 80, ""), httpListener("shop", 80, "*.shop.test")),
	}
	objs = append(objs, backendService("apps", "v1", "10.244.0.10")...)
	objs = append(objs, backendService("apps", "v2", "10.244.0.20")...)
	objs = append(objs, backendService("backends", "far", "10.244.0.30")...)
	all := gatewayv1.NamespacesFromAll
	gw := objs[1].(*gatewayv1.Gateway)
	gw.Spec.Listeners[0].AllowedRoutes = &gatewayv1.AllowedRoutes{Namespaces: &gatewayv1.RouteNamespaces{From: &all}}
	selector := gatewayv1.NamespacesFromSelector
	gw.Spec.Listeners[1].AllowedRoutes = &gatewayv1.AllowedRoutes{Namespaces: &gatewayv1.RouteNamespaces{From: &selector,
		Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"shop": "yes"}}}}
	objs = append(objs,
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "apps", Labels: map[string]string{"shop": "yes"}}},
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "other"}})

	split := route("apps", "split", 10, "gw", []string{"web.example.test"},
		rule(pathPrefix("/"), backendRef("", "v1", 80, 90), backendRef("", "v2", 80, 10)))
	byHeader := route("apps", "by-header", 5, "gw", []string{"web.example.test"},
		rule([]gatewayv1.HTTPRouteMatch{{Headers: []gatewayv1.HTTPHeaderMatch{{Name: "X-Version", Value: "2"}}}}, backendRef("", "v2", 80, 1)))
	redirect := route("apps", "redirect", 1, "gw", []string{"web.example.test"}, gatewayv1.HTTPRouteRule{
		Matches: []gatewayv1.HTTPRouteMatch{{Path: &gatewayv1.HTTPPathMatch{Type: ptr.To(gatewayv1.PathMatchExact), Value: ptr.To("/old")}}},
		Filters: []gatewayv1.HTTPRouteFilter{{Type: gatewayv1.HTTPRouteFilterRequestRedirect,
			RequestRedirect: &gatewayv1.HTTPRequestRedirectFilter{Path: &gatewayv1.HTTPPathModifier{Type: gatewayv1.FullPathHTTPPathModifier, ReplaceFullPath: ptr.To("/new")}, StatusCode: ptr.To(301)}}},
	})
	shop := route("apps", "shop", 0, "gw", []string{"a.shop.test", "web.example.test"}, rule(nil, backendRef("", "v1", 80, 1)))
	shop.Spec.ParentRefs[0].SectionName = ptr.To(gatewayv1.SectionName("shop"))
	notShop := route("other", "not-shop", 0, "gw", nil, rule(nil))
	notShop.Spec.ParentRefs[0].SectionName = ptr.To(gatewayv1.SectionName("shop"))
	noHost := route("apps", "no-host", 0, "gw", []string{"b.other.test"}, rule(nil, backendRef("", "v1", 80, 1)))
	noHost.Spec.ParentRefs[0].SectionName = ptr.To(gatewayv1.SectionName("shop"))
	noSection := route("apps", "no-section", 0, "gw", nil, rule(nil))
	noSection.Spec.ParentRefs[0].SectionName = ptr.To(gatewayv1.SectionName("nope"))
	refs := route("apps", "refs", 0, "gw", []string{"refs.test"},
		rule(pathPrefix("/far"), backendRef("backends", "far", 80, 1)),
		rule(pathPrefix("/missing"), backendRef("", "missing", 80, 1)),
		rule(pathPrefix("/port"), backendRef("", "v1", 81, 1)))
	kind := route("apps", "kind", 0, "gw", []string{"kind.test"}, rule(nil, backendRef("", "v1", 80, 1)))
	kind.Spec.Rules[0].BackendRefs[0].Kind = ptr.To(gatewayv1.Kind("Bucket"))
	mirror := route("apps", "mirror", 0, "gw", []string{"mirror.test"},
		gatewayv1.HTTPRouteRule{Filters: []gatewayv1.HTTPRouteFilter{{Type: gatewayv1.HTTPRouteFilterRequestMirror}}},
		rule(pathPrefix("/ok"), backendRef("", "v1", 80, 1)))
	elsewhere := route("apps", "elsewhere", 0, "theirs", nil, rule(nil))
	objs = append(objs, split, byHeader, redirect, shop, notShop, noHost, noSection, refs, kind, mirror, elsewhere)
	w := newWorld(t, objs...)
	b := w.build()
	tb := b.table

	_, be := served(t, tb, controller.HTTP, "GET", "http://web.example.test/x", map[string]string{"X-Version": "2"})
	if be == nil || be.Service != "v2" || !slices.Equal(be.Endpoints, []netip.AddrPort{netip.MustParseAddrPort("10.244.0.20:8080")}) {
		t.Errorf("header match: %+v", be)
	}
	rt, _ := served(t, tb, controller.HTTP, "GET", "http://web.example.test/x", nil)
	if rt == nil || rt.Source.Name != "split" || len(rt.Backends) != 2 || rt.Backends[0].Weight != 90 || rt.Backends[1].Weight != 10 {
		t.Errorf("split: %+v", rt)
	}
	rt, _ = served(t, tb, controller.HTTP, "GET", "http://web.example.test/old", nil)
	if rt == nil || len(rt.Filters) != 1 || rt.Filters[0].Redirect == nil || rt.Filters[0].Redirect.Status() != 301 {
		t.Errorf("redirect: %+v", rt)
	}
	if rt, _ := served(t, tb, controller.HTTP, "GET", "http://a.shop.test/", nil); rt == nil || rt.Source.Name != "shop" {
		t.Errorf("a.shop.test: %+v", rt)
	}
	// web.example.test is outside the shop listener's *.shop.test.
	if rt, _ := served(t, tb, controller.HTTP, "GET", "http://c.shop.test/", nil); rt != nil {
		t.Errorf("c.shop.test served by %+v", rt)
	}
	if _, be := served(t, tb, controller.HTTP, "GET", "http://refs.test/missing", nil); be == nil || !be.Invalid {
		t.Errorf("missing service: %+v", be)
	}
	if _, be := served(t, tb, controller.HTTP, "GET", "http://refs.test/far", nil); be == nil || !be.Invalid {
		t.Errorf("ungranted service: %+v", be)
	}
	if rt, _ := served(t, tb, controller.HTTP, "GET", "http://mirror.test/", nil); rt != nil {
		t.Errorf("rule with an unsupported filter served: %+v", rt)
	}
	if tb.Listeners[controller.HTTPS] == nil || len(tb.Listeners[controller.HTTPS].Hosts) != 0 {
		t.Errorf("https listener: %+v", tb.Listeners[controller.HTTPS])
	}

	parent := func(rt *gatewayv1.HTTPRoute) []metav1.Condition {
		t.Helper()
		ps := b.routes[rt]
		if len(ps) != 1 {
			t.Fatalf("route %s: %d parents", rt.Name, len(ps))
		}
		return ps[0].conditions
	}
	for _, c := range []struct {
		rt               *gatewayv1.HTTPRoute
		accepted, reason string
		resolved, rr     string
	}{
		{split, "True", "Accepted", "True", "ResolvedRefs"},
		{shop, "True", "Accepted", "True", "ResolvedRefs"},
		{notShop, "False", "NotAllowedByListeners", "True", "ResolvedRefs"},
		{noHost, "False", "NoMatchingListenerHostname", "True", "ResolvedRefs"},
		{noSection, "False", "NoMatchingParent", "True", "ResolvedRefs"},
		{refs, "True", "Accepted", "False", "RefNotPermitted"},
		{kind, "True", "Accepted", "False", "InvalidKind"},
		{mirror, "True", "Accepted", "True", "ResolvedRefs"},
	} {
		cs := parent(c.rt)
		wantCond(t, c.rt.Name, cs, "Accepted", metav1.ConditionStatus(c.accepted), c.reason)
		wantCond(t, c.rt.Name, cs, "ResolvedRefs", metav1.ConditionStatus(c.resolved), c.rr)
	}
	wantCond(t, "mirror", parent(mirror), "PartiallyInvalid", metav1.ConditionTrue, "UnsupportedValue")
	if _, ok := b.routes[elsewhere]; ok {
		t.Error("status for a route of a Gateway svcnet does not serve")
	}
	st := gatewayStatusOf(gw, b.gateways[gw], w.addresses, metav1.Now())
	// http: split, by-header, redirect, refs, kind, mirror, not-shop... (From All); shop: shop.
	attached := map[gatewayv1.SectionName]int32{}
	for _, l := range st.Listeners {
		attached[l.Name] = l.AttachedRoutes
	}
	if attached["http"] != 6 || attached["shop"] != 1 {
		t.Errorf("attachedRoutes %v", attached)
	}
}

func TestRefGrantedBackend(t *testing.T) {
	objs := []any{class("svcnet", ControllerName), gateway("infra", "gw", "svcnet", httpListener("http", 80, ""))}
	objs = append(objs, backendService("backends", "far", "10.244.0.30")...)
	rt := route("infra", "far", 0, "gw", nil, rule(nil, backendRef("backends", "far", 80, 1)))
	grant := &gatewayv1beta1.ReferenceGrant{ObjectMeta: objectMeta("backends", "allow", 0), Spec: gatewayv1beta1.ReferenceGrantSpec{
		From: []gatewayv1beta1.ReferenceGrantFrom{{Group: gatewayv1.GroupName, Kind: "HTTPRoute", Namespace: "infra"}},
		To:   []gatewayv1beta1.ReferenceGrantTo{{Group: "", Kind: "Service", Name: ptr.To(gatewayv1.ObjectName("far"))}},
	}}
	w := newWorld(t, append(objs, rt, grant)...)
	b := w.build()
	wantCond(t, "granted", b.routes[rt][0].conditions, "ResolvedRefs", metav1.ConditionTrue, "ResolvedRefs")
	if _, be := served(t, b.table, controller.HTTP, "GET", "http://any/", nil); be == nil || be.Invalid || len(be.Endpoints) != 1 {
		t.Errorf("granted backend %+v", be)
	}
}

// TestPrecedence: across routes of one host, Exact before prefixes,
// longer prefixes first, then method, header and query matches; ties go
// to the older route; a wildcard host's routes follow an exact host's.
func TestPrecedence(t *testing.T) {
	objs := []any{class("svcnet", ControllerName), gateway("infra", "gw", "svcnet", httpListener("http", 80, ""))}
	objs = append(objs, backendService("infra", "v1", "10.244.0.10")...)
	m := func(path string, exact bool, method string, headers, queries int) gatewayv1.HTTPRouteMatch {
		typ := gatewayv1.PathMatchPathPrefix
		if exact {
			typ = gatewayv1.PathMatchExact
		}
		out := gatewayv1.HTTPRouteMatch{Path: &gatewayv1.HTTPPathMatch{Type: &typ, Value: &path}}
		if method != "" {
			out.Method = ptr.To(gatewayv1.HTTPMethod(method))
		}
		for i := range headers {
			out.Headers = append(out.Headers, gatewayv1.HTTPHeaderMatch{Name: gatewayv1.HTTPHeaderName([]string{"A", "B"}[i]), Value: "1"})
		}
		for i := range queries {
			out.QueryParams = append(out.QueryParams, gatewayv1.HTTPQueryParamMatch{Name: gatewayv1.HTTPHeaderName([]string{"q", "r"}[i]), Value: "1"})
		}
		return out
	}
	ref := backendRef("", "v1", 80, 1)
	one := func(name string, age int, host string, mm gatewayv1.HTTPRouteMatch) *gatewayv1.HTTPRoute {
		rt := route("infra", name, age, "gw", []string{host}, rule([]gatewayv1.HTTPRouteMatch{mm}, ref))
		return rt
	}
	objs = append(objs,
		one("root", 9, "h.test", m("/", false, "", 0, 0)),
		one("prefix-a", 9, "h.test", m("/a", false, "", 0, 0)),
		one("prefix-ab", 1, "h.test", m("/a/b", false, "", 0, 0)),
		one("exact-a", 0, "h.test", m("/a", true, "", 0, 0)),
		one("method", 0, "h.test", m("/a", false, "POST", 0, 0)),
		one("headers1", 0, "h.test", m("/a", false, "", 1, 0)),
		one("headers2", 0, "h.test", m("/a", false, "", 2, 0)),
		one("query", 0, "h.test", m("/a", false, "", 1, 1)),
		one("tie-newer", 1, "t.test", m("/", false, "", 0, 0)),
		one("tie-older", 2, "t.test", m("/", false, "", 0, 0)),
		one("wild", 0, "*.h.test", m("/w", false, "", 0, 0)),
		one("exact-host", 0, "x.h.test", m("/", true, "", 0, 0)),
	)
	b := newWorld(t, objs...).build()
	for _, c := range []struct {
		method, url string
		header      map[string]string
		want        string
	}{
		{"GET", "http://h.test/", nil, "root"},
		{"GET", "http://h.test/a", nil, "exact-a"},
		{"GET", "http://h.test/a/b/c", nil, "prefix-ab"},
		{"POST", "http://h.test/a/x", map[string]string{"A": "1", "B": "1"}, "method"},
		{"GET", "http://h.test/a/x?q=1", map[string]string{"A": "1", "B": "1"}, "headers2"},
		{"GET", "http://h.test/a/x?q=1", map[string]string{"A": "1"}, "query"},
		{"GET", "http://h.test/a/x", map[string]string{"A": "1"}, "headers1"},
		{"GET", "http://h.test/a/x", nil, "prefix-a"},
		{"GET", "http://t.test/", nil, "tie-older"},
		{"GET", "http://x.h.test/", nil, "exact-host"},
		{"GET", "http://x.h.test/w", nil, "wild"},
		{"GET", "http://y.x.h.test/w", nil, "wild"},
	} {
		rt, _ := served(t, b.table, controller.HTTP, c.method, c.url, c.header)
		if rt == nil || rt.Source.Name != c.want {
			t.Errorf("%s %s %v: %+v, want %s", c.method, c.url, c.header, rt, c.want)
		}
	}
}

func TestIntersect(t *testing.T) {
	for _, c := range []struct {
		listener string
		route    []gatewayv1.Hostname
		want     []string
	}{
		{"", nil, []string{""}},
		{"a.test", nil, []string{"a.test"}},
		{"", []gatewayv1.Hostname{"a.test", "*.b.test"}, []string{"a.test", "*.b.test"}},
		{"test.example.com", []gatewayv1.Hostname{"*.example.com"}, []string{"test.example.com"}},
		{"*.example.com", []gatewayv1.Hostname{"foo.test.example.com", "test.example.net", "*.example.com"}, []string{"foo.test.example.com", "*.example.com"}},
		{"*.example.com", []gatewayv1.Hostname{"example.com"}, nil},
		{"*.example.com", []gatewayv1.Hostname{"*.a.example.com"}, []string{"*.a.example.com"}},
		{"*.a.example.com", []gatewayv1.Hostname{"*.example.com"}, []string{"*.a.example.com"}},
		{"a.test", []gatewayv1.Hostname{"b.test"}, nil},
	} {
		if got := intersect(c.listener, c.route); !slices.Equal(got, c.want) {
			t.Errorf("intersect(%q, %v) = %q, want %q", c.listener, c.route, got, c.want)
		}
	}
}

func TestFilters(t *testing.T) {
	hdr := &gatewayv1.HTTPHeaderFilter{Set: []gatewayv1.HTTPHeader{{Name: "X-Set", Value: "1"}}, Add: []gatewayv1.HTTPHeader{{Name: "X-Add", Value: "2"}}, Remove: []string{"X-Gone"}}
	got, err := filters([]gatewayv1.HTTPRouteFilter{
		{Type: gatewayv1.HTTPRouteFilterRequestHeaderModifier, RequestHeaderModifier: hdr},
		{Type: gatewayv1.HTTPRouteFilterResponseHeaderModifier, ResponseHeaderModifier: hdr},
		{Type: gatewayv1.HTTPRouteFilterURLRewrite, URLRewrite: &gatewayv1.HTTPURLRewriteFilter{Hostname: ptr.To(gatewayv1.PreciseHostname("backend.test")),
			Path: &gatewayv1.HTTPPathModifier{Type: gatewayv1.PrefixMatchHTTPPathModifier, ReplacePrefixMatch: ptr.To("/v2")}}},
		{Type: gatewayv1.HTTPRouteFilterRequestRedirect, RequestRedirect: &gatewayv1.HTTPRequestRedirectFilter{Scheme: ptr.To("https"), Port: ptr.To(gatewayv1.PortNumber(8443))}},
	})
	if err != nil {
		t.Fatal(err)
	}
	want := &routes.HeaderModifier{Set: []routes.Header{{Name: "X-Set", Value: "1"}}, Add: []routes.Header{{Name: "X-Add", Value: "2"}}, Remove: []string{"X-Gone"}}
	if len(got) != 4 || !reflect.DeepEqual(got[0].RequestHeaders, want) || !reflect.DeepEqual(got[1].ResponseHeaders, want) {
		t.Fatalf("header filters %+v", got)
	}
	if rw := got[2].Rewrite; rw == nil || rw.Hostname != "backend.test" || rw.Path == nil || rw.Path.FullPath || rw.Path.ReplacePrefixMatch != "/v2" {
		t.Errorf("rewrite %+v", got[2].Rewrite)
	}
	r := httptest.NewRequest("GET", "http://web.example.test/a?b=c", nil)
	if rd := got[3].Redirect; rd == nil || rd.Location(r, &routes.Match{}, 80, false) != "https://web.example.test:8443/a?b=c" || rd.Status() != 302 {
		t.Errorf("redirect %+v", got[3].Redirect)
	}
	m, err := match(gatewayv1.HTTPRouteMatch{
		Headers:     []gatewayv1.HTTPHeaderMatch{{Name: "X-A", Value: "1"}, {Name: "x-a", Value: "2"}, {Name: "X-B", Value: "3"}},
		QueryParams: []gatewayv1.HTTPQueryParamMatch{{Name: "q", Value: "1"}, {Name: "q", Value: "2"}, {Name: "Q", Value: "3"}},
	})
	if err != nil || len(m.Headers) != 2 || m.Headers[0].Value != "1" || len(m.QueryParams) != 2 || m.QueryParams[1].Value != "3" {
		t.Errorf("repeated names: %+v %v", m, err)
	}
	if _, err := filters([]gatewayv1.HTTPRouteFilter{{Type: gatewayv1.HTTPRouteFilterCORS}}); err == nil {
		t.Error("CORS filter accepted")
	}
}
