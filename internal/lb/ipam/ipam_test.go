package ipam

import (
	"math"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.universe.tf/metallb/api/v1beta1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/record"
	"k8s.io/utils/ptr"

	"github.com/svcnet/svcnet/internal/controller"
)

func ipPool(name string, spec v1beta1.IPAddressPoolSpec) *v1beta1.IPAddressPool {
	return &v1beta1.IPAddressPool{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "metallb-system"}, Spec: spec}
}

func addrs(a ...string) v1beta1.IPAddressPoolSpec { return v1beta1.IPAddressPoolSpec{Addresses: a} }

// svc is a LoadBalancer Service default/name on TCP port 80 with an IPv4
// cluster IP; opts change it.
func svc(name string, opts ...func(*corev1.Service)) *corev1.Service {
	s := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default", Annotations: map[string]string{}},
		Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeLoadBalancer, ClusterIP: "10.96.0.20", ClusterIPs: []string{"10.96.0.20"},
			Ports: []corev1.ServicePort{{Protocol: corev1.ProtocolTCP, Port: 80}}},
	}
	for _, o := range opts {
		o(s)
	}
	return s
}

func annotated(k, v string) func(*corev1.Service) {
	return func(s *corev1.Service) { s.Annotations[k] = v }
}

func inNamespace(ns string) func(*corev1.Service) {
	return func(s *corev1.Service) { s.Namespace = ns }
}

func labelled(k, v string) func(*corev1.Service) {
	return func(s *corev1.Service) { s.Labels = map[string]string{k: v} }
}

func onPort(p int32) func(*corev1.Service) {
	return func(s *corev1.Service) { s.Spec.Ports = []corev1.ServicePort{{Protocol: corev1.ProtocolTCP, Port: p}} }
}

func dualStacked(policy corev1.IPFamilyPolicy) func(*corev1.Service) {
	return func(s *corev1.Service) {
		s.Spec.IPFamilyPolicy = &policy
		s.Spec.ClusterIPs = []string{"10.96.0.20", "fd00:96::20"}
		s.Spec.IPFamilies = []corev1.IPFamily{corev1.IPv4Protocol, corev1.IPv6Protocol}
	}
}

// harness is a controller without an API: balance on Services kept here.
type harness struct {
	t      *testing.T
	c      *Controller
	events *record.FakeRecorder
}

func newHarness(t *testing.T, ps ...*v1beta1.IPAddressPool) *harness {
	t.Helper()
	h := &harness{t: t, events: record.NewFakeRecorder(1000), c: &Controller{alloc: newAllocator(), written: map[string]written{}}}
	h.c.recorder = h.events
	h.c.queue = controller.NewQueue(controller.NewMetrics(prometheus.NewRegistry()), controller.QueueConfig[key]{Name: ControllerName})
	h.setPools(ps...)
	return h
}

func (h *harness) setPools(ps ...*v1beta1.IPAddressPool) {
	h.t.Helper()
	parsed, err := parsePools(ps, []*corev1.Namespace{{ObjectMeta: metav1.ObjectMeta{Name: "team-a", Labels: map[string]string{"team": "a"}}}})
	if err != nil {
		h.t.Fatal(err)
	}
	h.c.pools = parsed
	h.c.alloc.setPools(parsed)
}

// converge balances s in place and returns its addresses and the events.
func (h *harness) converge(s *corev1.Service) (string, string) {
	h.c.balance(s.Namespace+"/"+s.Name, s)
	var ips []string
	for _, ing := range s.Status.LoadBalancer.Ingress {
		ips = append(ips, ing.IP)
	}
	var events []string
	for len(h.events.Events) > 0 {
		events = append(events, <-h.events.Events)
	}
	return strings.Join(ips, ","), strings.Join(events, "\n")
}

func TestAllocation(t *testing.T) {
	homelab := ipPool("homelab", addrs("10.0.0.200-10.0.0.215"))
	for _, tc := range []struct {
		name  string
		pools []*v1beta1.IPAddressPool
		svcs  []*corev1.Service
		// want are the addresses of each Service, in order; event, if
		// set, the last Service's event.
		want  []string
		event string
	}{
		{name: "lowest free first, in order", pools: []*v1beta1.IPAddressPool{homelab},
			svcs:  []*corev1.Service{svc("gitea"), svc("argocd"), svc("harbor"), svc("grafana")},
			want:  []string{"10.0.0.200", "10.0.0.201", "10.0.0.202", "10.0.0.203"},
			event: `Normal IPAllocated Assigned IP ["10.0.0.203"]`},
		{name: "spec.loadBalancerIP", pools: []*v1beta1.IPAddressPool{homelab},
			svcs: []*corev1.Service{svc("a", func(s *corev1.Service) { s.Spec.LoadBalancerIP = "10.0.0.210" }), svc("b")},
			want: []string{"10.0.0.210", "10.0.0.200"}},
		{name: "annotation, and its older spelling", pools: []*v1beta1.IPAddressPool{homelab},
			svcs: []*corev1.Service{svc("a", annotated(AnnotationLoadBalancerIPs, "10.0.0.211")), svc("b", annotated(deprecatedAnnotationLoadBalancerIPs, "10.0.0.212"))},
			want: []string{"10.0.0.211", "10.0.0.212"}},
		{name: "both asks", pools: []*v1beta1.IPAddressPool{homelab},
			svcs: []*corev1.Service{svc("a", annotated(AnnotationLoadBalancerIPs, "10.0.0.211"), func(s *corev1.Service) { s.Spec.LoadBalancerIP = "10.0.0.210" })},
			want: []string{""}, event: `Warning AllocationFailed Failed to allocate IP for "default/a": service can not have both metallb.io/loadBalancerIPs and svc.Spec.LoadBalancerIP`},
		{name: "address outside every pool", pools: []*v1beta1.IPAddressPool{homelab},
			svcs: []*corev1.Service{svc("a", func(s *corev1.Service) { s.Spec.LoadBalancerIP = "10.0.1.1" })},
			want: []string{""}, event: `Warning AllocationFailed Failed to allocate IP for "default/a": ["10.0.1.1"] is not allowed in config`},
		{name: "full pool", pools: []*v1beta1.IPAddressPool{ipPool("tiny", addrs("10.0.0.1/31"))},
			svcs: []*corev1.Service{svc("a"), svc("b"), svc("c")},
			want: []string{"10.0.0.0", "10.0.0.1", ""}, event: `Warning AllocationFailed Failed to allocate IP for "default/c": no available IPs`},
		{name: "avoidBuggyIPs", pools: []*v1beta1.IPAddressPool{ipPool("p", v1beta1.IPAddressPoolSpec{Addresses: []string{"10.0.0.254-10.0.1.1"}, AvoidBuggyIPs: true})},
			svcs: []*corev1.Service{svc("a"), svc("b"), svc("c")},
			want: []string{"10.0.0.254", "10.0.1.1", ""}},
		{name: "autoAssign false only by name", pools: []*v1beta1.IPAddressPool{
			ipPool("manual", v1beta1.IPAddressPoolSpec{Addresses: []string{"10.0.1.0/24"}, AutoAssign: ptr.To(false)})},
			svcs: []*corev1.Service{svc("a"), svc("b", annotated(AnnotationAddressPool, "manual")), svc("c", annotated(deprecatedAnnotationAddressPool, "manual"))},
			want: []string{"", "10.0.1.0", "10.0.1.1"}},
		{name: "unknown pool", pools: []*v1beta1.IPAddressPool{homelab},
			svcs: []*corev1.Service{svc("a", annotated(AnnotationAddressPool, "nope"))},
			want: []string{""}, event: `Warning AllocationFailed Failed to allocate IP for "default/a": unknown pool "nope"`},
		{name: "asked address from another pool than named", pools: []*v1beta1.IPAddressPool{homelab, ipPool("other", addrs("10.0.1.0/24"))},
			svcs: []*corev1.Service{svc("a", annotated(AnnotationAddressPool, "other"), func(s *corev1.Service) { s.Spec.LoadBalancerIP = "10.0.0.210" })},
			want: []string{""}, event: `Warning AllocationFailed Failed to allocate IP for "default/a": requested loadBalancer IP(s) ["10.0.0.210"] is not compatible with requested address pool other`},
		{name: "pools by name when none is pinned", pools: []*v1beta1.IPAddressPool{ipPool("b", addrs("10.0.2.0/24")), ipPool("a", addrs("10.0.1.0/31"))},
			svcs: []*corev1.Service{svc("x"), svc("y"), svc("z")},
			want: []string{"10.0.1.0", "10.0.1.1", "10.0.2.0"}},
		{name: "namespaces, selectors and priority", pools: []*v1beta1.IPAddressPool{
			homelab,
			ipPool("team-low", v1beta1.IPAddressPoolSpec{Addresses: []string{"10.0.1.0/24"}, AllocateTo: &v1beta1.ServiceAllocation{Priority: 2, Namespaces: []string{"team-a"}}}),
			ipPool("team-high", v1beta1.IPAddressPoolSpec{Addresses: []string{"10.0.2.0/24"}, AllocateTo: &v1beta1.ServiceAllocation{Priority: 1,
				NamespaceSelectors: []metav1.LabelSelector{{MatchLabels: map[string]string{"team": "a"}}}}}),
			ipPool("web", v1beta1.IPAddressPoolSpec{Addresses: []string{"10.0.3.0/24"}, AllocateTo: &v1beta1.ServiceAllocation{
				ServiceSelectors: []metav1.LabelSelector{{MatchLabels: map[string]string{"tier": "web"}}}}}),
		},
			svcs: []*corev1.Service{svc("a", inNamespace("team-a")), svc("b"), svc("c", labelled("tier", "web"))},
			want: []string{"10.0.2.0", "10.0.0.200", "10.0.3.0"}},
		{name: "shared by key, different ports", pools: []*v1beta1.IPAddressPool{homelab},
			svcs: []*corev1.Service{svc("http", annotated(AnnotationAllowSharedIP, "k")), svc("https", annotated(AnnotationAllowSharedIP, "k"), onPort(443)),
				svc("old", annotated(deprecatedAnnotationAllowSharedIP, "k"), onPort(8080))},
			want: []string{"10.0.0.200", "10.0.0.200", "10.0.0.200"}},
		{name: "not shared: same port, other key, no key", pools: []*v1beta1.IPAddressPool{homelab},
			svcs: []*corev1.Service{svc("a", annotated(AnnotationAllowSharedIP, "k")), svc("b", annotated(AnnotationAllowSharedIP, "k")),
				svc("c", annotated(AnnotationAllowSharedIP, "j"), onPort(443)), svc("d", onPort(444))},
			want: []string{"10.0.0.200", "10.0.0.201", "10.0.0.202", "10.0.0.203"}},
		{name: "not shared: Local with other selectors", pools: []*v1beta1.IPAddressPool{homelab},
			svcs: []*corev1.Service{
				svc("a", annotated(AnnotationAllowSharedIP, "k"), func(s *corev1.Service) {
					s.Spec.ExternalTrafficPolicy, s.Spec.Selector = corev1.ServiceExternalTrafficPolicyLocal, map[string]string{"app": "a"}
				}),
				svc("b", annotated(AnnotationAllowSharedIP, "k"), onPort(443), func(s *corev1.Service) {
					s.Spec.ExternalTrafficPolicy, s.Spec.Selector = corev1.ServiceExternalTrafficPolicyLocal, map[string]string{"app": "b"}
				}),
				svc("c", annotated(AnnotationAllowSharedIP, "k"), onPort(444), annotated(AnnotationLoadBalancerIPs, "10.0.0.200"), func(s *corev1.Service) {
					s.Spec.ExternalTrafficPolicy, s.Spec.Selector = corev1.ServiceExternalTrafficPolicyLocal, map[string]string{"app": "c"}
				}),
			},
			want:  []string{"10.0.0.200", "10.0.0.201", ""},
			event: `Warning AllocationFailed Failed to allocate IP for "default/c": can't change sharing key for "default/c", address also in use by default/a`},
		{name: "port in use on an asked address", pools: []*v1beta1.IPAddressPool{homelab},
			svcs: []*corev1.Service{svc("a", annotated(AnnotationAllowSharedIP, "k")), svc("b", annotated(AnnotationAllowSharedIP, "k"), annotated(AnnotationLoadBalancerIPs, "10.0.0.200"))},
			want: []string{"10.0.0.200", ""}, event: `Warning AllocationFailed Failed to allocate IP for "default/b": port TCP/80 is already in use on "10.0.0.200"`},
		{name: "IPv6", pools: []*v1beta1.IPAddressPool{ipPool("v6", addrs("fd00:10::100-fd00:10::1ff"))},
			svcs: []*corev1.Service{svc("a", func(s *corev1.Service) { s.Spec.ClusterIP, s.Spec.ClusterIPs = "fd00:96::20", []string{"fd00:96::20"} })},
			want: []string{"fd00:10::100"}},
		{name: "wrong family", pools: []*v1beta1.IPAddressPool{ipPool("v6", addrs("fd00:10::/120"))},
			svcs: []*corev1.Service{svc("a")},
			want: []string{""}, event: `Warning AllocationFailed Failed to allocate IP for "default/a": no available IPs`},
		{name: "dual-stack", pools: []*v1beta1.IPAddressPool{ipPool("v4only", addrs("10.0.0.0/24")), ipPool("z-dual", addrs("10.0.1.0/24", "fd00:10::/120"))},
			svcs: []*corev1.Service{svc("require", dualStacked(corev1.IPFamilyPolicyRequireDualStack)), svc("prefer", dualStacked(corev1.IPFamilyPolicyPreferDualStack))},
			want: []string{"10.0.1.0,fd00:10::", "10.0.1.1,fd00:10::1"}},
		{name: "prefer dual-stack on one family", pools: []*v1beta1.IPAddressPool{ipPool("v4only", addrs("10.0.0.0/24"))},
			svcs: []*corev1.Service{svc("prefer", dualStacked(corev1.IPFamilyPolicyPreferDualStack)), svc("require", dualStacked(corev1.IPFamilyPolicyRequireDualStack))},
			want: []string{"10.0.0.0", ""}},
		{name: "not a LoadBalancer", pools: []*v1beta1.IPAddressPool{homelab},
			svcs: []*corev1.Service{svc("a", func(s *corev1.Service) { s.Spec.Type = corev1.ServiceTypeClusterIP })},
			want: []string{""}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t, tc.pools...)
			var event string
			for i, s := range tc.svcs {
				var got string
				got, event = h.converge(s)
				if got != tc.want[i] {
					t.Errorf("%s: addresses %q, want %q (events %s)", s.Name, got, tc.want[i], event)
				}
			}
			if tc.event != "" && !strings.Contains(event, tc.event) {
				t.Errorf("events of %s:\n%s\nwant %s", tc.svcs[len(tc.svcs)-1].Name, event, tc.event)
			}
		})
	}
}

// TestRelease: deleting a Service or turning it into a ClusterIP frees
// its address for the next, and clears what the controller wrote.
func TestRelease(t *testing.T) {
	h := newHarness(t, ipPool("tiny", addrs("10.0.0.0/31")))
	a, b, c := svc("a"), svc("b"), svc("c")
	for _, s := range []*corev1.Service{a, b, c} {
		h.converge(s)
	}
	if _, ev := h.converge(c); !strings.Contains(ev, "no available IPs") {
		t.Fatalf("c got an address from a full pool: %s", ev)
	}
	again, err := h.c.converge(t.Context(), "default/a", nil)
	if err != nil || !again {
		t.Fatalf("deleting a: again %t, err %v; want a reprocess", again, err)
	}
	if got, _ := h.converge(c); got != "10.0.0.0" {
		t.Errorf("c after a's deletion: %q, want 10.0.0.0", got)
	}
	b.Spec.Type = corev1.ServiceTypeClusterIP
	if got, _ := h.converge(b); got != "" || b.Annotations[AnnotationIPAllocateFromPool] != "" {
		t.Errorf("b as ClusterIP: addresses %q, annotations %v; want none", got, b.Annotations)
	}
	if got, _ := h.converge(svc("d")); got != "10.0.0.1" {
		t.Errorf("d after b's change: %q, want 10.0.0.1", got)
	}
	if got := c.Status.LoadBalancer.Ingress[0].IPMode; got == nil || *got != corev1.LoadBalancerIPModeVIP {
		t.Errorf("ipMode %v, want VIP", got)
	}
}

// TestRestart: a new controller converging the Services as it starts
// (those with addresses first) keeps every address, even from a pending
// Service older than the ones holding the lowest addresses.
func TestRestart(t *testing.T) {
	pool := ipPool("homelab", addrs("10.0.0.200-10.0.0.203"))
	h := newHarness(t, pool)
	now := time.Now()
	old := svc("old", func(s *corev1.Service) { s.CreationTimestamp = metav1.NewTime(now.Add(-time.Hour)) })
	var svcs []*corev1.Service
	for i, name := range []string{"a", "b", "c"} {
		s := svc(name, func(s *corev1.Service) { s.CreationTimestamp = metav1.NewTime(now.Add(time.Duration(i) * time.Minute)) })
		h.converge(s)
		svcs = append(svcs, s)
	}

	restarted := newHarness(t, pool)
	svcs = append([]*corev1.Service{old}, svcs...)
	convergeOrder(svcs)
	if svcs[0].Name != "a" || svcs[3].Name != "old" {
		t.Errorf("converge order %s ... %s, want those with addresses first, by age", svcs[0].Name, svcs[3].Name)
	}
	for _, s := range svcs {
		restarted.converge(s)
	}
	for _, s := range svcs {
		want := map[string]string{"a": "10.0.0.200", "b": "10.0.0.201", "c": "10.0.0.202", "old": "10.0.0.203"}[s.Name]
		if got := s.Status.LoadBalancer.Ingress[0].IP; got != want {
			t.Errorf("%s after the restart: %s, want %s", s.Name, got, want)
		}
	}
}

// TestPoolChange: an address no pool owns any more is taken back and
// the Service gets one of the new pool, with MetalLB's event.
func TestPoolChange(t *testing.T) {
	h := newHarness(t, ipPool("homelab", addrs("10.0.0.200-10.0.0.215")))
	a := svc("a")
	h.converge(a)
	h.setPools(ipPool("homelab", addrs("10.0.1.0/24")))
	got, ev := h.converge(a)
	if got != "10.0.1.0" || !strings.Contains(ev, `Normal ClearAssignment current IP for "default/a" not allowed by config`) {
		t.Errorf("after the pool moved: %q, events %s", got, ev)
	}
	h.setPools()
	if got, _ := h.converge(a); got != "" {
		t.Errorf("with no pools: %q, want none", got)
	}
}

func TestParsePools(t *testing.T) {
	for _, tc := range []struct {
		name  string
		pools []*v1beta1.IPAddressPool
		err   string
	}{
		{"overlap", []*v1beta1.IPAddressPool{ipPool("a", addrs("10.0.0.0/24")), ipPool("b", addrs("10.0.0.200-10.0.0.215"))},
			`CIDR "10.0.0.200/29" in pool "b" overlaps with already defined CIDR "10.0.0.0/24"`},
		{"no addresses", []*v1beta1.IPAddressPool{ipPool("a", addrs())}, "parsing address pool a: pool has no prefixes defined"},
		{"bad range", []*v1beta1.IPAddressPool{ipPool("a", addrs("10.0.0.9-10.0.0.1"))},
			`parsing address pool a: invalid CIDR "10.0.0.9-10.0.0.1" in pool "a": invalid IP range "10.0.0.9-10.0.0.1": start IP "10.0.0.9" is after the end IP "10.0.0.1"`},
		{"duplicate namespace", []*v1beta1.IPAddressPool{ipPool("a", v1beta1.IPAddressPoolSpec{Addresses: []string{"10.0.0.0/24"},
			AllocateTo: &v1beta1.ServiceAllocation{Namespaces: []string{"x", "x"}}})}, "parsing address pool a: duplicate definition in namespaces field"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := parsePools(tc.pools, nil); err == nil || err.Error() != tc.err {
				t.Errorf("error %v, want %s", err, tc.err)
			}
		})
	}
}

func TestCounters(t *testing.T) {
	h := newHarness(t, ipPool("p", v1beta1.IPAddressPoolSpec{Addresses: []string{"10.0.0.0/24", "fd00::/64"}, AvoidBuggyIPs: true}))
	h.converge(svc("a", annotated(AnnotationAllowSharedIP, "k")))
	h.converge(svc("b", annotated(AnnotationAllowSharedIP, "k"), onPort(443)))
	h.converge(svc("c"))
	a4, a6, f4, f6 := h.c.alloc.counters("p")
	if a4 != 2 || a6 != 0 || f4 != 252 || f6 != math.MaxInt64 {
		t.Errorf("assigned %d/%d available %d/%d, want 2/0 252/MaxInt64", a4, a6, f4, f6)
	}
}

// TestStaleCache: converging a Service again from a cache that has not
// seen the controller's last write of it neither writes nor allocates
// again.
func TestStaleCache(t *testing.T) {
	h := newHarness(t, ipPool("homelab", addrs("10.0.0.200-10.0.0.215")))
	a := svc("a", func(s *corev1.Service) { s.ResourceVersion = "5" })
	client := fake.NewClientset(a)
	h.c.client = client
	for range 2 {
		if _, err := h.c.converge(t.Context(), "default/a", a); err != nil {
			t.Fatal(err)
		}
	}
	var writes int
	for _, act := range client.Actions() {
		if act.GetVerb() == "update" && act.GetSubresource() == "status" {
			writes++
		}
	}
	if writes != 1 || len(h.events.Events) != 1 {
		t.Errorf("%d status writes and %d events, want one of each", writes, len(h.events.Events))
	}
	got, err := client.CoreV1().Services("default").Get(t.Context(), "a", metav1.GetOptions{})
	if err != nil || len(got.Status.LoadBalancer.Ingress) != 1 || got.Status.LoadBalancer.Ingress[0].IP != "10.0.0.200" {
		t.Errorf("written status %+v (%v), want 10.0.0.200", got.Status, err)
	}
}
