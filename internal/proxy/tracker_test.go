package proxy

import (
	"net/netip"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
)

var web = types.NamespacedName{Namespace: "default", Name: "web"}

func service(ports ...corev1.ServicePort) *corev1.Service {
	return &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "web"},
		Spec: corev1.ServiceSpec{ClusterIP: "10.96.0.20", ClusterIPs: []string{"10.96.0.20"}, Type: corev1.ServiceTypeClusterIP,
			Ports: ports},
	}
}

func httpPort() corev1.ServicePort {
	return corev1.ServicePort{Name: "http", Port: 80, Protocol: corev1.ProtocolTCP}
}

type ep struct {
	ip                          string
	ready, serving, terminating bool
	node                        string
}

func slice(name, trigger string, eps ...ep) *discoveryv1.EndpointSlice {
	s := &discoveryv1.EndpointSlice{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: name,
			Labels: map[string]string{discoveryv1.LabelServiceName: "web"}},
		AddressType: discoveryv1.AddressTypeIPv4,
		Ports:       []discoveryv1.EndpointPort{{Name: ptr.To("http"), Port: ptr.To[int32](8080), Protocol: ptr.To(corev1.ProtocolTCP)}},
	}
	if trigger != "" {
		s.Annotations = map[string]string{corev1.EndpointsLastChangeTriggerTime: trigger}
	}
	for _, e := range eps {
		s.Endpoints = append(s.Endpoints, discoveryv1.Endpoint{
			Addresses: []string{e.ip}, NodeName: ptr.To(e.node),
			Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(e.ready), Serving: ptr.To(e.serving), Terminating: ptr.To(e.terminating)},
		})
	}
	return s
}

func addrs(eps []Endpoint) []string {
	var out []string
	for _, e := range eps {
		out = append(out, e.String())
	}
	return out
}

func TestTrackerMergesEventsIntoOneChange(t *testing.T) {
	tr := NewTracker("node-a")
	tr.ServiceUpdated(nil, service(httpPort()))
	tr.SliceUpdated(slice("web-1", "2026-01-02T03:04:05Z", ep{"10.244.0.5", true, true, false, "node-a"}), false)
	tr.SliceUpdated(slice("web-1", "2026-01-02T03:04:06Z",
		ep{"10.244.0.5", true, true, false, "node-a"}, ep{"10.244.1.7", true, true, false, "node-b"}), false)
	if !tr.Pending() {
		t.Fatal("no pending change after events")
	}
	u, triggers := tr.Take(false)
	if len(u.Changed) != 1 || u.Changed[web].Previous != nil || u.Changed[web].Current == nil {
		t.Fatalf("changes: %+v", u.Changed)
	}
	port := u.Changed[web].Current.Ports[0]
	if got := addrs(port.ClusterEndpoints()); !cmp.Equal(got, []string{"10.244.0.5:8080", "10.244.1.7:8080"}) {
		t.Errorf("cluster endpoints %v", got)
	}
	if got := addrs(port.LocalEndpoints()); !cmp.Equal(got, []string{"10.244.0.5:8080"}) {
		t.Errorf("local endpoints %v", got)
	}
	if port.ClusterIPs[0] != netip.MustParseAddr("10.96.0.20") || port.Port != 80 {
		t.Errorf("port %+v", port)
	}
	want := []time.Time{time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC), time.Date(2026, 1, 2, 3, 4, 6, 0, time.UTC)}
	if !cmp.Equal(triggers, want) {
		t.Errorf("trigger times %v, want %v", triggers, want)
	}
	if tr.Pending() {
		t.Error("changes still pending after Take")
	}

	// An update that changes nothing the proxy uses is no change.
	same := service(httpPort())
	same.Labels = map[string]string{"team": "a"}
	tr.ServiceUpdated(nil, same)
	if u, _ := tr.Take(false); len(u.Changed) != 0 || len(u.Services) != 1 {
		t.Errorf("a label change gave changes %+v (services %d)", u.Changed, len(u.Services))
	}

	// Deleted and re-created between two syncs: no change either.
	tr.ServiceUpdated(same, nil)
	tr.ServiceUpdated(nil, same)
	if u, _ := tr.Take(false); len(u.Changed) != 0 {
		t.Errorf("delete and re-create gave changes %+v", u.Changed)
	}

	// Deleted: the change has the previous state and no current one.
	tr.ServiceUpdated(same, nil)
	u, _ = tr.Take(false)
	if ch := u.Changed[web]; ch.Previous == nil || ch.Current != nil || len(u.Services) != 0 {
		t.Errorf("after delete: %+v, services %v", ch, u.Services)
	}
}

func TestTrackerTerminatingFallback(t *testing.T) {
	tr := NewTracker("node-a")
	tr.ServiceUpdated(nil, service(httpPort()))
	// One ready endpoint, one serving terminating: only the ready one.
	tr.SliceUpdated(slice("web-1", "",
		ep{"10.244.0.5", true, true, false, "node-b"},
		ep{"10.244.0.6", false, true, true, "node-a"},
		ep{"10.244.0.7", false, false, true, "node-a"},
		ep{"10.244.0.8", false, false, false, "node-a"}), false)
	u, _ := tr.Take(false)
	port := u.Services[web].Ports[0]
	if got := addrs(port.ClusterEndpoints()); !cmp.Equal(got, []string{"10.244.0.5:8080"}) {
		t.Errorf("with a ready endpoint: cluster endpoints %v", got)
	}
	// No local ready one: the local serving terminating one.
	if got := addrs(port.LocalEndpoints()); !cmp.Equal(got, []string{"10.244.0.6:8080"}) {
		t.Errorf("local endpoints %v", got)
	}
	// No ready endpoint anywhere: the serving terminating ones, never the
	// not serving or not terminating ones.
	tr.SliceUpdated(slice("web-1", "",
		ep{"10.244.0.6", false, true, true, "node-a"},
		ep{"10.244.0.7", false, false, true, "node-a"},
		ep{"10.244.0.8", false, false, false, "node-a"}), false)
	u, _ = tr.Take(false)
	if got := addrs(u.Services[web].Ports[0].ClusterEndpoints()); !cmp.Equal(got, []string{"10.244.0.6:8080"}) {
		t.Errorf("without ready endpoints: cluster endpoints %v", got)
	}
	// Slice deleted: no endpoints.
	tr.SliceUpdated(slice("web-1", ""), true)
	u, _ = tr.Take(false)
	if got := u.Services[web].Ports[0].ClusterEndpoints(); len(got) != 0 {
		t.Errorf("after the slice's deletion: %v", got)
	}
}

func TestServicePortsMatchSlicePortsByNameAndProtocol(t *testing.T) {
	tr := NewTracker("node-a")
	svc := service(httpPort(), corev1.ServicePort{Name: "dns", Port: 53, Protocol: corev1.ProtocolUDP})
	svc.Spec.Type = corev1.ServiceTypeNodePort
	svc.Spec.Ports[0].NodePort = 30080
	svc.Spec.ExternalTrafficPolicy = corev1.ServiceExternalTrafficPolicyLocal
	svc.Spec.HealthCheckNodePort = 31000
	svc.Spec.SessionAffinity = corev1.ServiceAffinityClientIP
	tr.ServiceUpdated(nil, svc)
	tr.SliceUpdated(slice("web-1", "", ep{"10.244.0.5", true, true, false, "node-a"}), false)
	u, _ := tr.Take(false)
	s := u.Services[web]
	http, dns := s.Ports[0], s.Ports[1]
	if len(http.Endpoints) != 1 || len(dns.Endpoints) != 0 {
		t.Errorf("http endpoints %v, dns endpoints %v", http.Endpoints, dns.Endpoints)
	}
	if !http.ExternalLocal || s.HealthCheckNodePort != 31000 || http.AffinitySeconds != corev1.DefaultClientIPServiceAffinitySeconds {
		t.Errorf("service %+v, port %+v", s, http)
	}

	headless := service(httpPort())
	headless.Spec.ClusterIP, headless.Spec.ClusterIPs = corev1.ClusterIPNone, []string{corev1.ClusterIPNone}
	tr.ServiceUpdated(nil, headless)
	u, _ = tr.Take(false)
	if len(u.Services[web].Ports) != 0 {
		t.Errorf("a headless Service has ports %v", u.Services[web].Ports)
	}
}

// Urgent is set by a new Service with cluster IP ports, and by the first
// usable endpoints of a Service that was applied without any (backends
// reject it), and by nothing else.
func TestTrackerUrgent(t *testing.T) {
	tr := NewTracker("node-a")
	// A new Service, with or without endpoints.
	tr.ServiceUpdated(nil, service(httpPort()))
	if !tr.Urgent() {
		t.Error("a new Service is not urgent")
	}
	tr.SliceUpdated(slice("web-1", "", ep{"10.244.0.5", true, true, false, "node-a"}), false)
	if !tr.Urgent() {
		t.Error("a new Service with an endpoint is not urgent")
	}
	tr.Take(false)
	if tr.Urgent() {
		t.Error("Urgent after Take")
	}
	// A new headless Service has nothing to program.
	headless := service(httpPort())
	headless.Name, headless.Spec.ClusterIP, headless.Spec.ClusterIPs = "headless", corev1.ClusterIPNone, nil
	tr.ServiceUpdated(nil, headless)
	if tr.Urgent() {
		t.Error("a new headless Service is urgent")
	}
	tr.Take(false)
	// More endpoints for a Service that has some.
	tr.SliceUpdated(slice("web-1", "", ep{"10.244.0.5", true, true, false, "node-a"}, ep{"10.244.0.6", true, true, false, "node-b"}), false)
	if tr.Urgent() {
		t.Error("a Service with endpoints gaining one is urgent")
	}
	// Without endpoints, applied: rejected.
	tr.SliceUpdated(slice("web-1", ""), false)
	tr.Take(false)
	for _, tc := range []struct {
		what string
		eps  []ep
		want bool
	}{
		{"a not ready endpoint", []ep{{"10.244.0.5", false, false, false, "node-a"}}, false},
		{"a ready endpoint", []ep{{"10.244.0.5", true, true, false, "node-a"}}, true},
		{"a serving terminating endpoint", []ep{{"10.244.0.5", false, true, true, "node-b"}}, true},
		{"an endpoint that went away again", nil, false},
	} {
		tr.SliceUpdated(slice("web-1", "", tc.eps...), false)
		if got := tr.Urgent(); got != tc.want {
			t.Errorf("%s: Urgent %v, want %v", tc.what, got, tc.want)
		}
	}
	tr.SliceUpdated(slice("web-1", "", ep{"10.244.0.5", true, true, false, "node-a"}), false)
	tr.Take(false)
	if tr.Urgent() {
		t.Error("Urgent after Take")
	}

	// A dual-stack Service with IPv4 endpoints is rejected over IPv6
	// until an IPv6 endpoint comes.
	dual := service(httpPort())
	dual.Spec.ClusterIPs = []string{"10.96.0.20", "fd00:10:96::20"}
	tr.ServiceUpdated(nil, dual)
	tr.Take(false)
	if tr.Urgent() {
		t.Error("Urgent after Take")
	}
	v6 := slice("web-v6", "", ep{"fd00:10:244::5", true, true, false, "node-a"})
	v6.AddressType = discoveryv1.AddressTypeIPv6
	tr.SliceUpdated(v6, false)
	if !tr.Urgent() {
		t.Error("the first IPv6 endpoint of a dual-stack Service is not urgent")
	}
}
