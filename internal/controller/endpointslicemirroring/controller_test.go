package endpointslicemirroring

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/svcnet/svcnet/internal/controller"
	"github.com/svcnet/svcnet/internal/controller/controllertest"
)

const ns = "default"

func start(t *testing.T, max int, objects ...runtime.Object) *fake.Clientset {
	t.Helper()
	cs := controllertest.NewClient(objects...)
	controllertest.Start(t, cs, func(ctx context.Context, d controller.Deps) []func(context.Context) {
		c, err := New(ctx, d, Options{Workers: 2, MaxEndpointsPerSubset: max})
		if err != nil {
			t.Fatal(err)
		}
		return []func(context.Context){c.Run}
	})
	return cs
}

func service(name string, selector map[string]string) *corev1.Service {
	return &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec: corev1.ServiceSpec{Selector: selector, Ports: []corev1.ServicePort{{Port: 80}}}}
}

func endpoints(name string, labels map[string]string, ready, notReady []string) *corev1.Endpoints {
	addrs := func(ips []string) []corev1.EndpointAddress {
		var out []corev1.EndpointAddress
		for _, ip := range ips {
			out = append(out, corev1.EndpointAddress{IP: ip})
		}
		return out
	}
	return &corev1.Endpoints{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Labels: labels,
			Annotations: map[string]string{"note": "x", corev1.LastAppliedConfigAnnotation: "{}"}},
		Subsets: []corev1.EndpointSubset{{Addresses: addrs(ready), NotReadyAddresses: addrs(notReady),
			Ports: []corev1.EndpointPort{{Name: "http", Port: 8080, Protocol: corev1.ProtocolTCP}}}},
	}
}

func summary(t *testing.T, cs *fake.Clientset, name string) (string, []discoveryv1.EndpointSlice) {
	list, err := cs.DiscoveryV1().EndpointSlices(ns).List(context.Background(), metav1.ListOptions{LabelSelector: discoveryv1.LabelServiceName + "=" + name})
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, s := range list.Items {
		var eps []string
		for _, e := range s.Endpoints {
			eps = append(eps, fmt.Sprintf("%s(%t)", e.Addresses[0], *e.Conditions.Ready))
		}
		sort.Strings(eps)
		out = append(out, fmt.Sprintf("%s %s:%d %s", s.AddressType, *s.Ports[0].Name, *s.Ports[0].Port, strings.Join(eps, " ")))
	}
	sort.Strings(out)
	return strings.Join(out, "\n"), list.Items
}

func want(t *testing.T, cs *fake.Clientset, name, want string) []discoveryv1.EndpointSlice {
	t.Helper()
	var items []discoveryv1.EndpointSlice
	controllertest.Eventually(t, func() string {
		var got string
		got, items = summary(t, cs, name)
		if got != want {
			return fmt.Sprintf("mirror of %s:\n%s\nwant:\n%s", name, got, want)
		}
		return ""
	})
	return items
}

func TestMirrorsSelectorlessEndpoints(t *testing.T) {
	cs := start(t, 1000, service("ext", nil),
		endpoints("ext", map[string]string{"team": "a"}, []string{"192.0.2.1", "2001:db8::1"}, []string{"192.0.2.2"}),
		service("skip", nil), endpoints("skip", map[string]string{discoveryv1.LabelSkipMirror: "true"}, []string{"192.0.2.9"}, nil),
		service("selected", map[string]string{"app": "x"}), endpoints("selected", nil, []string{"192.0.2.8"}, nil))
	items := want(t, cs, "ext", "IPv4 http:8080 192.0.2.1(true) 192.0.2.2(false)\nIPv6 http:8080 2001:db8::1(true)")
	s := items[0]
	if s.Labels["team"] != "a" || s.Labels[discoveryv1.LabelManagedBy] != ControllerName || s.Annotations["note"] != "x" ||
		s.Annotations[corev1.LastAppliedConfigAnnotation] != "" || s.OwnerReferences[0].Kind != "Endpoints" {
		t.Errorf("mirrored slice metadata: labels %v annotations %v owners %v", s.Labels, s.Annotations, s.OwnerReferences)
	}
	want(t, cs, "skip", "")
	want(t, cs, "selected", "")

	// A Service that gains a selector is no longer mirrored.
	svc, err := cs.CoreV1().Services(ns).Get(context.Background(), "ext", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	svc.Spec.Selector = map[string]string{"app": "ext"}
	if _, err := cs.CoreV1().Services(ns).Update(context.Background(), svc, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	want(t, cs, "ext", "")
}

func TestMaxEndpointsPerSubset(t *testing.T) {
	cs := start(t, 2, service("ext", nil), endpoints("ext", nil, []string{"192.0.2.1", "192.0.2.2", "192.0.2.3"}, []string{"not-an-ip"}))
	want(t, cs, "ext", "IPv4 http:8080 192.0.2.1(true) 192.0.2.2(true)")
	controllertest.Eventually(t, func() string {
		evs, _ := cs.CoreV1().Events(ns).List(context.Background(), metav1.ListOptions{})
		for _, e := range evs.Items {
			if e.Reason == "TooManyAddressesToMirror" {
				return ""
			}
		}
		return "no TooManyAddressesToMirror event"
	})
}
