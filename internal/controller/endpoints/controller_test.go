package endpoints

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/svcnet/svcnet/internal/controller"
	"github.com/svcnet/svcnet/internal/controller/controllertest"
)

const ns = "default"

var app = map[string]string{"app": "web"}

func start(t *testing.T, objects ...runtime.Object) *fake.Clientset {
	t.Helper()
	cs := controllertest.NewClient(objects...)
	controllertest.Start(t, cs, func(ctx context.Context, d controller.Deps) []func(context.Context) {
		c, err := New(ctx, d, Options{Workers: 2})
		if err != nil {
			t.Fatal(err)
		}
		return []func(context.Context){c.Run}
	})
	return cs
}

func service(name string, ports ...corev1.ServicePort) *corev1.Service {
	return &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Labels: map[string]string{"team": "a"}},
		Spec:       corev1.ServiceSpec{Selector: app, Ports: ports, ClusterIP: "10.96.0.10", IPFamilies: []corev1.IPFamily{corev1.IPv4Protocol}},
	}
}

func pod(name, ip string, ready bool) *corev1.Pod {
	status := corev1.ConditionFalse
	if ready {
		status = corev1.ConditionTrue
	}
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, UID: types.UID("uid-" + name), Labels: app},
		Spec:       corev1.PodSpec{NodeName: "node-1"},
		Status: corev1.PodStatus{Phase: corev1.PodRunning, PodIP: ip, PodIPs: []corev1.PodIP{{IP: ip}},
			Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: status}}},
	}
}

// render shows Endpoints as kubectl's ENDPOINTS column would, with
// not-ready addresses marked.
func render(ep *corev1.Endpoints) string {
	var out []string
	for _, s := range ep.Subsets {
		for _, p := range s.Ports {
			for _, a := range s.Addresses {
				out = append(out, fmt.Sprintf("%s:%d", a.IP, p.Port))
			}
			for _, a := range s.NotReadyAddresses {
				out = append(out, fmt.Sprintf("%s:%d!", a.IP, p.Port))
			}
		}
		if len(s.Ports) == 0 {
			for _, a := range s.Addresses {
				out = append(out, a.IP)
			}
		}
	}
	sort.Strings(out)
	return strings.Join(out, ",")
}

func get(t *testing.T, cs *fake.Clientset, name string) (*corev1.Endpoints, error) {
	t.Helper()
	return cs.CoreV1().Endpoints(ns).Get(context.Background(), name, metav1.GetOptions{})
}

func want(t *testing.T, cs *fake.Clientset, name, want string) *corev1.Endpoints {
	t.Helper()
	var ep *corev1.Endpoints
	controllertest.Eventually(t, func() string {
		var err error
		if ep, err = get(t, cs, name); err != nil {
			return err.Error()
		}
		if got := render(ep); got != want {
			return fmt.Sprintf("endpoints %s: %s, want %s", name, got, want)
		}
		return ""
	})
	return ep
}

func TestReadyAndNotReadyAddresses(t *testing.T) {
	cs := start(t, service("web", corev1.ServicePort{Port: 8080, TargetPort: intstr.FromInt32(80), Protocol: corev1.ProtocolTCP}),
		pod("web-1", "10.0.0.1", true), pod("web-2", "10.0.0.2", false))
	ep := want(t, cs, "web", "10.0.0.1:80,10.0.0.2:80!")
	if ep.Labels["team"] != "a" || ep.Labels[LabelManagedBy] != ControllerName {
		t.Errorf("labels %v", ep.Labels)
	}
	if a := ep.Subsets[0].Addresses[0]; a.TargetRef == nil || a.TargetRef.Name != "web-1" || a.NodeName == nil || *a.NodeName != "node-1" {
		t.Errorf("address %+v", a)
	}

	if err := cs.CoreV1().Services(ns).Delete(context.Background(), "web", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	controllertest.Eventually(t, func() string {
		if _, err := get(t, cs, "web"); !apierrors.IsNotFound(err) {
			return fmt.Sprintf("endpoints of a deleted Service: %v", err)
		}
		return ""
	})
}

func TestPublishNotReadyAndHeadlessWithoutPorts(t *testing.T) {
	svc := service("db")
	svc.Spec.ClusterIP = corev1.ClusterIPNone
	svc.Spec.PublishNotReadyAddresses = true
	cs := start(t, svc, pod("db-0", "10.0.0.1", false))
	ep := want(t, cs, "db", "10.0.0.1")
	if _, ok := ep.Labels[corev1.IsHeadlessService]; !ok {
		t.Errorf("headless label missing: %v", ep.Labels)
	}
}

func TestOverCapacityIsTruncated(t *testing.T) {
	objects := []runtime.Object{service("big", corev1.ServicePort{Port: 80, TargetPort: intstr.FromInt32(80), Protocol: corev1.ProtocolTCP})}
	for i := range 1100 {
		objects = append(objects, pod(fmt.Sprintf("big-%04d", i), fmt.Sprintf("10.1.%d.%d", i/250, i%250+1), i%2 == 0))
	}
	cs := start(t, objects...)
	var ep *corev1.Endpoints
	controllertest.Eventually(t, func() string {
		var err error
		if ep, err = get(t, cs, "big"); err != nil {
			return err.Error()
		}
		return ""
	})
	ready, notReady := count(ep.Subsets)
	if ready != 550 || notReady != 450 || ep.Annotations[corev1.EndpointsOverCapacity] != "truncated" {
		t.Errorf("ready %d, not ready %d, annotations %v; want 550, 450 and %s=truncated", ready, notReady, ep.Annotations, corev1.EndpointsOverCapacity)
	}
}

func TestTruncateKeepsReadyFirst(t *testing.T) {
	addrs := func(n int) []corev1.EndpointAddress {
		out := make([]corev1.EndpointAddress, n)
		for i := range out {
			out[i].IP = fmt.Sprintf("10.0.%d.%d", i/250, i%250)
		}
		return out
	}
	ep := &corev1.Endpoints{Subsets: []corev1.EndpointSubset{
		{Addresses: addrs(900), NotReadyAddresses: addrs(100)},
		{Addresses: addrs(300), NotReadyAddresses: addrs(20)},
	}}
	if !truncate(ep) {
		t.Fatal("1320 addresses not truncated")
	}
	got := fmt.Sprintf("%d/%d %d/%d", len(ep.Subsets[0].Addresses), len(ep.Subsets[0].NotReadyAddresses),
		len(ep.Subsets[1].Addresses), len(ep.Subsets[1].NotReadyAddresses))
	if got != "750/0 250/0" {
		t.Errorf("kept %s, want 750/0 250/0 (ready only, proportional)", got)
	}
}

func TestRepackGroupsPortsByAddresses(t *testing.T) {
	p := newPacker()
	a := func(ip string) corev1.EndpointAddress { return corev1.EndpointAddress{IP: ip} }
	http := &corev1.EndpointPort{Name: "http", Port: 80, Protocol: corev1.ProtocolTCP}
	metrics := &corev1.EndpointPort{Name: "metrics", Port: 9090, Protocol: corev1.ProtocolTCP}
	p.add(a("10.0.0.2"), http, true)
	p.add(a("10.0.0.1"), http, true)
	p.add(a("10.0.0.1"), metrics, true)
	p.add(a("10.0.0.2"), metrics, false)
	got := fmt.Sprint(render(&corev1.Endpoints{Subsets: p.subsets()}), " ", len(p.subsets()))
	if got != "10.0.0.1:80,10.0.0.1:9090,10.0.0.2:80,10.0.0.2:9090! 2" {
		t.Errorf("repacked %s", got)
	}
}
