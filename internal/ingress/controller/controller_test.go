package controller

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/utils/ptr"

	"github.com/svcnet/svcnet/internal/ingress/routes"
)

func meta(ns, name string, age int) metav1.ObjectMeta {
	return metav1.ObjectMeta{Namespace: ns, Name: name, UID: types.UID("uid-" + name),
		CreationTimestamp: metav1.NewTime(time.Unix(1e9-int64(age), 0))}
}

func service(name string, ports ...corev1.ServicePort) *corev1.Service {
	return &corev1.Service{ObjectMeta: meta("default", name, 0), Spec: corev1.ServiceSpec{Ports: ports}}
}

func slice(svc, portName string, port int32, ready map[string]bool) *discoveryv1.EndpointSlice {
	s := &discoveryv1.EndpointSlice{
		ObjectMeta:  meta("default", svc+"-abc", 0),
		AddressType: discoveryv1.AddressTypeIPv4,
		Ports:       []discoveryv1.EndpointPort{{Name: ptr.To(portName), Port: ptr.To(port), Protocol: ptr.To(corev1.ProtocolTCP)}},
	}
	s.Labels = map[string]string{discoveryv1.LabelServiceName: svc}
	for ip, r := range ready {
		s.Endpoints = append(s.Endpoints, discoveryv1.Endpoint{Addresses: []string{ip}, Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(r)}})
	}
	return s
}

func ingressPath(path string, pt networkingv1.PathType, svc string, port networkingv1.ServiceBackendPort) networkingv1.HTTPIngressPath {
	return networkingv1.HTTPIngressPath{Path: path, PathType: ptr.To(pt),
		Backend: networkingv1.IngressBackend{Service: &networkingv1.IngressServiceBackend{Name: svc, Port: port}}}
}

func tlsSecret(t *testing.T, name, host string) *corev1.Secret {
	t.Helper()
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: host}, DNSNames: []string{host},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour)}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	kder, _ := x509.MarshalECPrivateKey(key)
	return &corev1.Secret{ObjectMeta: meta("default", name, 0), Type: corev1.SecretTypeTLS, Data: map[string][]byte{
		corev1.TLSCertKey:       pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		corev1.TLSPrivateKeyKey: pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kder}),
	}}
}

// served runs the controller on a fake API and returns its latest table.
func run(t *testing.T, objs ...runtime.Object) (*fake.Clientset, func() *routes.Table) {
	t.Helper()
	client := fake.NewClientset(objs...)
	var latest atomic.Pointer[routes.Table]
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- Run(ctx, Config{
			Client: client, Swap: func(t *routes.Table) { latest.Store(t) },
			IngressClass: "svcnet", PublishService: "svcnet-ingress/svcnet-ingress-controller",
		})
	}()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Error(err)
		}
	})
	return client, latest.Load
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	if err := wait.PollUntilContextTimeout(context.Background(), 10*time.Millisecond, 5*time.Second, true,
		func(context.Context) (bool, error) { return cond(), nil }); err != nil {
		t.Fatalf("waiting for %s: %v", what, err)
	}
}

// serve says which route and endpoint a request gets from a table.
func serve(tb *routes.Table, listener, url string) string {
	if tb == nil || tb.Listeners[listener] == nil {
		return "no table"
	}
	rt, _ := tb.Listeners[listener].Route(httptest.NewRequest("GET", url, nil))
	if rt == nil {
		return "404"
	}
	b := rt.Pick()
	if b == nil {
		return rt.Source.Name + " 500"
	}
	return fmt.Sprintf("%s %s %v", rt.Source.Name, b.Service, b.Endpoints)
}

func TestController(t *testing.T) {
	class := &networkingv1.IngressClass{ObjectMeta: metav1.ObjectMeta{Name: "svcnet",
		Annotations: map[string]string{DefaultClassAnnotation: "true"}}, Spec: networkingv1.IngressClassSpec{Controller: ControllerName}}
	web := &networkingv1.Ingress{ObjectMeta: meta("default", "web", 10), Spec: networkingv1.IngressSpec{
		IngressClassName: ptr.To("svcnet"),
		TLS:              []networkingv1.IngressTLS{{Hosts: []string{"web.example.test"}, SecretName: "web-tls"}},
		Rules: []networkingv1.IngressRule{{Host: "web.example.test", IngressRuleValue: networkingv1.IngressRuleValue{HTTP: &networkingv1.HTTPIngressRuleValue{
			Paths: []networkingv1.HTTPIngressPath{
				ingressPath("/app", networkingv1.PathTypePrefix, "app", networkingv1.ServiceBackendPort{Name: "http"}),
				ingressPath("/api", networkingv1.PathTypeImplementationSpecific, "api", networkingv1.ServiceBackendPort{Number: 90}),
				ingressPath("/gone", networkingv1.PathTypeExact, "missing", networkingv1.ServiceBackendPort{Number: 80}),
			}}}}},
	}}
	// Younger, no class (served: svcnet is the default); its duplicate
	// path loses to web's, its defaultBackend serves the rest.
	noClass := &networkingv1.Ingress{ObjectMeta: meta("default", "noclass", 5), Spec: networkingv1.IngressSpec{
		DefaultBackend: &networkingv1.IngressBackend{Service: &networkingv1.IngressServiceBackend{Name: "api", Port: networkingv1.ServiceBackendPort{Number: 90}}},
		Rules: []networkingv1.IngressRule{{Host: "web.example.test", IngressRuleValue: networkingv1.IngressRuleValue{HTTP: &networkingv1.HTTPIngressRuleValue{
			Paths: []networkingv1.HTTPIngressPath{ingressPath("/app", networkingv1.PathTypePrefix, "api", networkingv1.ServiceBackendPort{Number: 90})}}}}},
	}}
	other := &networkingv1.Ingress{ObjectMeta: meta("default", "other", 20), Spec: networkingv1.IngressSpec{
		IngressClassName: ptr.To("nginx"),
		Rules: []networkingv1.IngressRule{{Host: "other.test", IngressRuleValue: networkingv1.IngressRuleValue{HTTP: &networkingv1.HTTPIngressRuleValue{
			Paths: []networkingv1.HTTPIngressPath{ingressPath("/", networkingv1.PathTypePrefix, "app", networkingv1.ServiceBackendPort{Number: 80})}}}}},
	}}
	publish := &corev1.Service{ObjectMeta: meta("svcnet-ingress", "svcnet-ingress-controller", 0),
		Spec:   corev1.ServiceSpec{Type: corev1.ServiceTypeLoadBalancer},
		Status: corev1.ServiceStatus{LoadBalancer: corev1.LoadBalancerStatus{Ingress: []corev1.LoadBalancerIngress{{IP: "10.0.0.200"}}}}}
	client, table := run(t, class, web, noClass, other, publish, tlsSecret(t, "web-tls", "web.example.test"),
		service("app", corev1.ServicePort{Name: "http", Port: 80, TargetPort: intstr.FromString("web"), Protocol: corev1.ProtocolTCP}),
		service("api", corev1.ServicePort{Port: 90, TargetPort: intstr.FromInt32(9090), Protocol: corev1.ProtocolTCP}),
		slice("app", "http", 8080, map[string]bool{"10.244.0.5": true, "10.244.0.6": false}),
		slice("api", "", 9090, map[string]bool{"10.244.1.7": true}),
	)
	ctx := context.Background()

	for url, want := range map[string]string{
		"http://web.example.test/app/x": "web app [10.244.0.5:8080]",
		"http://web.example.test/api":   "web api [10.244.1.7:9090]",
		"http://web.example.test/gone":  "web missing []",
		"http://web.example.test/else":  "noclass api [10.244.1.7:9090]",
		"http://other.test/":            "noclass api [10.244.1.7:9090]",
	} {
		waitFor(t, url+" served by "+want, func() bool { return serve(table(), HTTP, url) == want })
		if got := serve(table(), HTTPS, url); got != want {
			t.Errorf("https %s: %s, want %s", url, got, want)
		}
	}
	if c := table().Listeners[HTTPS].Certificate("web.example.test"); c == nil || c.Leaf.Subject.CommonName != "web.example.test" {
		t.Errorf("certificate for web.example.test: %v", c)
	}

	status := func(name string) []networkingv1.IngressLoadBalancerIngress {
		ing, err := client.NetworkingV1().Ingresses("default").Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return ing.Status.LoadBalancer.Ingress
	}
	waitFor(t, "web's status", func() bool { s := status("web"); return len(s) == 1 && s[0].IP == "10.0.0.200" })
	if s := status("other"); len(s) != 0 {
		t.Errorf("another class's Ingress got status %v", s)
	}

	// Endpoints come and go; a class stops being default.
	_, err := client.DiscoveryV1().EndpointSlices("default").Update(ctx,
		slice("app", "http", 8080, map[string]bool{"10.244.0.5": true, "10.244.0.6": true}), metav1.UpdateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the second app endpoint", func() bool {
		return serve(table(), HTTP, "http://web.example.test/app") == "web app [10.244.0.5:8080 10.244.0.6:8080]"
	})
	class.Annotations = nil
	if _, err := client.NetworkingV1().IngressClasses().Update(ctx, class, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the class-less Ingress dropped", func() bool { return serve(table(), HTTP, "http://other.test/") == "404" })
}

func TestServes(t *testing.T) {
	ing := func(class *string, annotation string) *networkingv1.Ingress {
		i := &networkingv1.Ingress{Spec: networkingv1.IngressSpec{IngressClassName: class}}
		if annotation != "" {
			i.Annotations = map[string]string{legacyClassAnnotation: annotation}
		}
		return i
	}
	for _, tc := range []struct {
		ing       *networkingv1.Ingress
		isDefault bool
		want      bool
	}{
		{ing(ptr.To("svcnet"), ""), false, true},
		{ing(ptr.To("nginx"), ""), true, false},
		{ing(nil, ""), true, true},
		{ing(nil, ""), false, false},
		{ing(nil, "svcnet"), false, true},
		{ing(nil, "nginx"), true, false},
	} {
		if got := Serves(tc.ing, "svcnet", tc.isDefault); got != tc.want {
			t.Errorf("class %v annotation %v default %v: served %v", tc.ing.Spec.IngressClassName, tc.ing.Annotations, tc.isDefault, got)
		}
	}
}

func TestStatusAddresses(t *testing.T) {
	lb := &corev1.Service{Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeLoadBalancer, ExternalIPs: []string{"198.51.100.7"}},
		Status: corev1.ServiceStatus{LoadBalancer: corev1.LoadBalancerStatus{Ingress: []corev1.LoadBalancerIngress{{IP: "10.0.0.200"}, {Hostname: "lb.example.test"}}}}}
	pending := &corev1.Service{Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeLoadBalancer, ClusterIP: "10.96.0.20"}}
	clusterIP := &corev1.Service{Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeClusterIP, ClusterIP: "10.96.0.21"}}
	for svc, want := range map[*corev1.Service]string{
		lb:        "[{ lb.example.test []} {10.0.0.200  []} {198.51.100.7  []}]",
		pending:   "[]",
		clusterIP: "[{10.96.0.21  []}]",
	} {
		if got := fmt.Sprint(serviceAddresses(svc)); got != want {
			t.Errorf("%s Service: %s, want %s", svc.Spec.Type, got, want)
		}
	}

	pod := func(name, node string, phase corev1.PodPhase) *corev1.Pod {
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "svcnet-ingress", Name: name,
			Labels: map[string]string{"app": "ctl", "pod-template-hash": name}},
			Spec: corev1.PodSpec{NodeName: node}, Status: corev1.PodStatus{Phase: phase}}
	}
	node := func(name string, addrs ...corev1.NodeAddress) *corev1.Node {
		return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}, Status: corev1.NodeStatus{Addresses: addrs}}
	}
	client := fake.NewClientset(
		pod("a", "n1", corev1.PodRunning), pod("b", "n2", corev1.PodRunning), pod("c", "n3", corev1.PodPending),
		node("n1", corev1.NodeAddress{Type: corev1.NodeInternalIP, Address: "172.31.0.1"}),
		node("n2", corev1.NodeAddress{Type: corev1.NodeInternalIP, Address: "172.31.0.2"}, corev1.NodeAddress{Type: corev1.NodeExternalIP, Address: "203.0.113.2"}),
	)
	c := &controller{Config: Config{Client: client, PodNamespace: "svcnet-ingress", PodName: "a"}}
	got, err := c.addresses(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if s := fmt.Sprint(got); s != "[{172.31.0.1  []} {203.0.113.2  []}]" {
		t.Errorf("addresses of the controller pods' nodes: %s", s)
	}
}
