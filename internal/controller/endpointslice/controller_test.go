package endpointslice

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/svcnet/svcnet/internal/controller"
	"github.com/svcnet/svcnet/internal/controller/controllertest"
)

const ns = "default"

// env is one controller on a fake clientset.
type env struct {
	t  *testing.T
	cs *fake.Clientset
}

func start(t *testing.T, opts Options, objects ...runtime.Object) *env {
	t.Helper()
	if opts.Workers == 0 {
		opts.Workers = 2
	}
	if opts.MaxEndpointsPerSlice == 0 {
		opts.MaxEndpointsPerSlice = 100
	}
	cs := controllertest.NewClient(objects...)
	controllertest.Start(t, cs, func(ctx context.Context, d controller.Deps) []func(context.Context) {
		c, err := New(ctx, d, opts)
		if err != nil {
			t.Fatal(err)
		}
		return []func(context.Context){c.Run}
	})
	return &env{t: t, cs: cs}
}

func node(name, zone string) *corev1.Node {
	n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}}
	if zone != "" {
		n.Labels = map[string]string{corev1.LabelTopologyZone: zone}
	}
	return n
}

func service(name string, selector map[string]string, ports ...corev1.ServicePort) *corev1.Service {
	return &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, UID: types.UID("uid-" + name), Labels: map[string]string{"team": "a"}},
		Spec: corev1.ServiceSpec{
			Selector: selector, Ports: ports, ClusterIP: "10.96.0.10",
			IPFamilies: []corev1.IPFamily{corev1.IPv4Protocol},
		},
	}
}

func port(name string, p int32, target intstr.IntOrString) corev1.ServicePort {
	return corev1.ServicePort{Name: name, Port: p, TargetPort: target, Protocol: corev1.ProtocolTCP}
}

func pod(name, ip string, ready bool, labels map[string]string) *corev1.Pod {
	status := corev1.ConditionFalse
	if ready {
		status = corev1.ConditionTrue
	}
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, UID: types.UID("uid-" + name), Labels: labels, ResourceVersion: "1"},
		Spec:       corev1.PodSpec{NodeName: "node-1", Containers: []corev1.Container{{Name: "c"}}},
		Status: corev1.PodStatus{
			Phase: corev1.PodRunning, PodIP: ip, PodIPs: []corev1.PodIP{{IP: ip}},
			Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: status}},
		},
	}
}

var app = map[string]string{"app": "web"}

func (e *env) slices(svc string) []discoveryv1.EndpointSlice {
	list, err := e.cs.DiscoveryV1().EndpointSlices(ns).List(context.Background(), metav1.ListOptions{LabelSelector: discoveryv1.LabelServiceName + "=" + svc})
	if err != nil {
		e.t.Fatal(err)
	}
	sort.Slice(list.Items, func(i, j int) bool { return list.Items[i].Name < list.Items[j].Name })
	return list.Items
}

// summary renders the slices of a Service as "addressType ports: ip(ready) ...".
func (e *env) summary(svc string) string {
	var out []string
	for _, s := range e.slices(svc) {
		var ports, eps []string
		for _, p := range s.Ports {
			ports = append(ports, fmt.Sprintf("%s:%d", *p.Name, *p.Port))
		}
		for _, ep := range s.Endpoints {
			eps = append(eps, fmt.Sprintf("%s(%t)", ep.Addresses[0], *ep.Conditions.Ready))
		}
		sort.Strings(eps)
		out = append(out, fmt.Sprintf("%s [%s]: %s", s.AddressType, strings.Join(ports, ","), strings.Join(eps, " ")))
	}
	sort.Strings(out)
	return strings.Join(out, "\n")
}

func (e *env) want(svc, want string) {
	e.t.Helper()
	controllertest.Eventually(e.t, func() string {
		if got := e.summary(svc); got != want {
			return fmt.Sprintf("slices of %s:\n%s\nwant:\n%s", svc, got, want)
		}
		return ""
	})
}

func (e *env) setReady(p *corev1.Pod, ready bool) {
	e.t.Helper()
	cur, err := e.cs.CoreV1().Pods(ns).Get(context.Background(), p.Name, metav1.GetOptions{})
	if err != nil {
		e.t.Fatal(err)
	}
	cur.Status.Conditions[0].Status = corev1.ConditionFalse
	if ready {
		cur.Status.Conditions[0].Status = corev1.ConditionTrue
	}
	if _, err := e.cs.CoreV1().Pods(ns).UpdateStatus(context.Background(), cur, metav1.UpdateOptions{}); err != nil {
		e.t.Fatal(err)
	}
}

// writes counts the slice writes made since the last call.
func (e *env) writes() map[string]int {
	out := map[string]int{}
	for _, a := range e.cs.Actions() {
		if a.GetResource().Resource == "endpointslices" && slices.Contains([]string{"create", "update", "delete"}, a.GetVerb()) {
			out[a.GetVerb()]++
		}
	}
	e.cs.ClearActions()
	return out
}

func TestReadyPodsAndNotReady(t *testing.T) {
	p1, p2 := pod("web-1", "10.0.0.1", true, app), pod("web-2", "10.0.0.2", true, app)
	e := start(t, Options{}, node("node-1", "zone-a"), service("web", app, port("", 8080, intstr.FromInt32(80))), p1, p2)
	e.want("web", "IPv4 [:80]: 10.0.0.1(true) 10.0.0.2(true)")

	s := e.slices("web")[0]
	if !strings.HasPrefix(s.Name, "web-") || s.GenerateName != "web-" {
		t.Errorf("name %q generateName %q, want web-<suffix> from web-", s.Name, s.GenerateName)
	}
	wantLabels := map[string]string{"team": "a", discoveryv1.LabelServiceName: "web", discoveryv1.LabelManagedBy: ControllerName}
	if !maps.Equal(s.Labels, wantLabels) {
		t.Errorf("labels %v, want %v", s.Labels, wantLabels)
	}
	if len(s.OwnerReferences) != 1 || s.OwnerReferences[0].Kind != "Service" || s.OwnerReferences[0].Name != "web" ||
		!*s.OwnerReferences[0].Controller || !*s.OwnerReferences[0].BlockOwnerDeletion {
		t.Errorf("owner references %+v", s.OwnerReferences)
	}
	ep := s.Endpoints[0]
	if *ep.NodeName != "node-1" || *ep.Zone != "zone-a" || ep.TargetRef.Kind != "Pod" || ep.TargetRef.Name == "" || *ep.Conditions.Serving != true || *ep.Conditions.Terminating {
		t.Errorf("endpoint %+v", ep)
	}
	if s.Ports[0].Name == nil || *s.Ports[0].Name != "" || *s.Ports[0].Protocol != corev1.ProtocolTCP {
		t.Errorf("unnamed port must be stored with name \"\": %+v", s.Ports[0])
	}

	e.setReady(p2, false)
	e.want("web", "IPv4 [:80]: 10.0.0.1(true) 10.0.0.2(false)")
}

func TestPublishNotReadyAddresses(t *testing.T) {
	svc := service("web", app, port("http", 80, intstr.FromInt32(8080)))
	svc.Spec.PublishNotReadyAddresses = true
	e := start(t, Options{}, node("node-1", ""), svc, pod("web-1", "10.0.0.1", false, app))
	e.want("web", "IPv4 [http:8080]: 10.0.0.1(true)")
	if s := e.slices("web")[0]; *s.Endpoints[0].Conditions.Serving {
		t.Errorf("serving must follow readiness: %+v", s.Endpoints[0].Conditions)
	}
}

func TestSelectorMatchingNothingGivesEmptySlice(t *testing.T) {
	e := start(t, Options{}, node("node-1", ""), service("web", map[string]string{"app": "wbe"}, port("", 80, intstr.FromInt32(80))),
		pod("web-1", "10.0.0.1", true, app))
	e.want("web", "IPv4 []: ")
}

func TestManyPodsFillSlicesAndOneChangeWritesOneSlice(t *testing.T) {
	objects := []runtime.Object{node("node-1", ""), service("web", app, port("", 80, intstr.FromInt32(80)))}
	var pods []*corev1.Pod
	for i := range 250 {
		p := pod(fmt.Sprintf("web-%03d", i), fmt.Sprintf("10.0.%d.%d", i/200, i%200+1), true, app)
		pods = append(pods, p)
		objects = append(objects, p)
	}
	e := start(t, Options{}, objects...)
	controllertest.Eventually(t, func() string {
		var sizes []int
		for _, s := range e.slices("web") {
			sizes = append(sizes, len(s.Endpoints))
		}
		sort.Sort(sort.Reverse(sort.IntSlice(sizes)))
		if fmt.Sprint(sizes) != "[100 100 50]" {
			return fmt.Sprintf("slice sizes %v, want [100 100 50]", sizes)
		}
		return ""
	})
	time.Sleep(200 * time.Millisecond)
	e.writes()
	e.setReady(pods[7], false)
	controllertest.Eventually(t, func() string {
		for _, s := range e.slices("web") {
			for _, ep := range s.Endpoints {
				if ep.TargetRef.Name == pods[7].Name && !*ep.Conditions.Ready {
					return ""
				}
			}
		}
		return "web-007 still ready"
	})
	time.Sleep(200 * time.Millisecond)
	if w := e.writes(); fmt.Sprint(w) != "map[update:1]" {
		t.Errorf("one pod change made writes %v, want one update", w)
	}
}

func TestNamedTargetPortResolvesPerPod(t *testing.T) {
	withPort := func(p *corev1.Pod, n int32) *corev1.Pod {
		p.Spec.Containers[0].Ports = []corev1.ContainerPort{{Name: "http", ContainerPort: n, Protocol: corev1.ProtocolTCP}}
		return p
	}
	e := start(t, Options{}, node("node-1", ""), service("web", app, port("web", 80, intstr.FromString("http"))),
		withPort(pod("web-1", "10.0.0.1", true, app), 8080), withPort(pod("web-2", "10.0.0.2", true, app), 9090),
		pod("web-3", "10.0.0.3", true, app))
	e.want("web", "IPv4 []: 10.0.0.3(true)\nIPv4 [web:8080]: 10.0.0.1(true)\nIPv4 [web:9090]: 10.0.0.2(true)")
}

func TestDeletedSliceComesBack(t *testing.T) {
	e := start(t, Options{}, node("node-1", ""), service("web", app, port("", 80, intstr.FromInt32(80))), pod("web-1", "10.0.0.1", true, app))
	e.want("web", "IPv4 [:80]: 10.0.0.1(true)")
	old := e.slices("web")[0].Name
	if err := e.cs.DiscoveryV1().EndpointSlices(ns).Delete(context.Background(), old, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	controllertest.Eventually(t, func() string {
		if s := e.slices("web"); len(s) != 1 || s[0].Name == old {
			return fmt.Sprintf("slices after deleting %s: %d", old, len(s))
		}
		return ""
	})
}

func TestTerminatingHostnameAndMissingNode(t *testing.T) {
	svc := service("db", app, port("", 5432, intstr.FromInt32(5432)))
	svc.Spec.ClusterIP = corev1.ClusterIPNone
	terminating := pod("db-0", "10.0.0.1", true, app)
	terminating.Spec.Hostname, terminating.Spec.Subdomain = "db-0", "db"
	now := metav1.Now()
	terminating.DeletionTimestamp = &now
	lost := pod("db-1", "10.0.0.2", true, app)
	lost.Spec.NodeName = "gone"
	e := start(t, Options{}, node("node-1", ""), svc, terminating, lost)
	e.want("db", "IPv4 [:5432]: 10.0.0.1(false)")
	s := e.slices("db")[0]
	c := s.Endpoints[0].Conditions
	if !*c.Serving || !*c.Terminating || s.Endpoints[0].Hostname == nil || *s.Endpoints[0].Hostname != "db-0" {
		t.Errorf("terminating endpoint %+v hostname %v", c, s.Endpoints[0].Hostname)
	}
	if _, ok := s.Labels[corev1.IsHeadlessService]; !ok {
		t.Errorf("headless Service's slice lacks %s: %v", corev1.IsHeadlessService, s.Labels)
	}
}

func TestDualStack(t *testing.T) {
	svc := service("web", app, port("", 80, intstr.FromInt32(80)))
	svc.Spec.IPFamilies = []corev1.IPFamily{corev1.IPv4Protocol, corev1.IPv6Protocol}
	p := pod("web-1", "10.0.0.1", true, app)
	p.Status.PodIPs = append(p.Status.PodIPs, corev1.PodIP{IP: "fd00::0001"})
	e := start(t, Options{}, node("node-1", ""), svc, p)
	e.want("web", "IPv4 [:80]: 10.0.0.1(true)\nIPv6 [:80]: fd00::1(true)")
}

func TestBatchPeriodGivesOneWrite(t *testing.T) {
	objects := []runtime.Object{node("node-1", ""), service("web", app, port("", 80, intstr.FromInt32(80)))}
	var pods []*corev1.Pod
	for i := range 10 {
		p := pod(fmt.Sprintf("web-%d", i), fmt.Sprintf("10.0.0.%d", i+1), false, app)
		pods = append(pods, p)
		objects = append(objects, p)
	}
	const batch = time.Second
	e := start(t, Options{BatchPeriod: batch}, objects...)
	e.want("web", "IPv4 [:80]: 10.0.0.1(false) 10.0.0.10(false) 10.0.0.2(false) 10.0.0.3(false) 10.0.0.4(false) 10.0.0.5(false) 10.0.0.6(false) 10.0.0.7(false) 10.0.0.8(false) 10.0.0.9(false)")
	time.Sleep(100 * time.Millisecond)
	e.writes()
	start := time.Now()
	for _, p := range pods {
		e.setReady(p, true)
	}
	if took := time.Since(start); took > batch/2 {
		t.Skipf("making ten pods ready took %s, too slow to fall within one batch period", took)
	}
	e.want("web", "IPv4 [:80]: 10.0.0.1(true) 10.0.0.10(true) 10.0.0.2(true) 10.0.0.3(true) 10.0.0.4(true) 10.0.0.5(true) 10.0.0.6(true) 10.0.0.7(true) 10.0.0.8(true) 10.0.0.9(true)")
	time.Sleep(batch + 200*time.Millisecond)
	if w := e.writes(); fmt.Sprint(w) != "map[update:1]" {
		t.Errorf("ten pods made ready within the batch period made writes %v, want one update", w)
	}
}

func TestTrafficDistributionHints(t *testing.T) {
	svc := service("web", app, port("", 80, intstr.FromInt32(80)))
	svc.Spec.TrafficDistribution = new(corev1.ServiceTrafficDistributionPreferSameNode)
	e := start(t, Options{}, node("node-1", "zone-a"), svc, pod("web-1", "10.0.0.1", true, app), pod("web-2", "10.0.0.2", false, app))
	e.want("web", "IPv4 [:80]: 10.0.0.1(true) 10.0.0.2(false)")
	for _, ep := range e.slices("web")[0].Endpoints {
		switch {
		case *ep.Conditions.Ready && (ep.Hints == nil || ep.Hints.ForZones[0].Name != "zone-a" || ep.Hints.ForNodes[0].Name != "node-1"):
			t.Errorf("ready endpoint hints %+v, want zone-a and node-1", ep.Hints)
		case !*ep.Conditions.Ready && ep.Hints != nil:
			t.Errorf("not-ready endpoint has hints %+v", ep.Hints)
		}
	}
}
