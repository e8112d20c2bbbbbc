package ingress

import (
	"reflect"
	"testing"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/svcnet/svcnet/internal/registry/registrytest"
)

func backend(name string, port int32) networkingv1.IngressBackend {
	return networkingv1.IngressBackend{Service: &networkingv1.IngressServiceBackend{Name: name,
		Port: networkingv1.ServiceBackendPort{Number: port}}}
}

func valid() *networkingv1.Ingress {
	prefix := networkingv1.PathTypePrefix
	return &networkingv1.Ingress{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "default"},
		Spec: networkingv1.IngressSpec{
			IngressClassName: ptr.To("nginx"),
			Rules: []networkingv1.IngressRule{{
				Host: "web.example.com",
				IngressRuleValue: networkingv1.IngressRuleValue{HTTP: &networkingv1.HTTPIngressRuleValue{
					Paths: []networkingv1.HTTPIngressPath{{Path: "/", PathType: &prefix, Backend: backend("web", 80)}},
				}},
			}},
		},
	}
}

func paths(in *networkingv1.Ingress) []networkingv1.HTTPIngressPath {
	return in.Spec.Rules[0].HTTP.Paths
}

func TestValidate(t *testing.T) {
	registrytest.RunValidate(t, strategy{}, valid, []registrytest.Case[*networkingv1.Ingress]{
		{Name: "valid", Change: func(*networkingv1.Ingress) {}},
		{Name: "default backend only", Change: func(in *networkingv1.Ingress) {
			b := backend("web", 80)
			in.Spec.Rules, in.Spec.DefaultBackend = nil, &b
		}},
		{Name: "neither rules nor default backend", Change: func(in *networkingv1.Ingress) { in.Spec.Rules = nil }, Want: []string{
			"spec: Invalid value: null: either `defaultBackend` or `rules` must be specified",
		}},
		{Name: "no path type", Change: func(in *networkingv1.Ingress) {
			paths(in)[0].PathType = nil
			paths(in)[0].Backend = networkingv1.IngressBackend{}
		}, Want: []string{
			"spec.rules[0].http.paths[0].pathType: Required value: pathType must be specified",
		}},
		{Name: "unknown path type", Change: func(in *networkingv1.Ingress) { paths(in)[0].PathType = ptr.To(networkingv1.PathType("Regex")) }, Want: []string{
			"spec.rules[0].http.paths[0].pathType: Unsupported value: \"Regex\": supported values: \"Exact\", \"ImplementationSpecific\", \"Prefix\"",
		}},
		{Name: "bad prefix path", Change: func(in *networkingv1.Ingress) { paths(in)[0].Path = "api//v1/.." }, Want: []string{
			"spec.rules[0].http.paths[0].path: Invalid value: \"api//v1/..\": must be an absolute path",
			"spec.rules[0].http.paths[0].path: Invalid value: \"api//v1/..\": must not contain '//'",
			"spec.rules[0].http.paths[0].path: Invalid value: \"api//v1/..\": cannot end with '/..'",
		}},
		{Name: "implementation specific may be empty", Change: func(in *networkingv1.Ingress) {
			paths(in)[0].Path = ""
			paths(in)[0].PathType = ptr.To(networkingv1.PathTypeImplementationSpecific)
		}},
		{Name: "no paths", Change: func(in *networkingv1.Ingress) { in.Spec.Rules[0].HTTP.Paths = nil }, Want: []string{
			"spec.rules[0].http.paths: Required value",
		}},
		{Name: "backend service", Change: func(in *networkingv1.Ingress) {
			paths(in)[0].Backend = networkingv1.IngressBackend{Service: &networkingv1.IngressServiceBackend{Name: "Web_Svc"}}
		}, Want: []string{
			"spec.rules[0].http.paths[0].backend.service.name: Invalid value: \"Web_Svc\": a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')",
			"spec.rules[0].http.paths[0].backend: Required value: port name or number is required",
		}},
		{Name: "service name may start with a digit", Change: func(in *networkingv1.Ingress) { paths(in)[0].Backend = backend("1web", 80) }},
		{Name: "both port name and number", Change: func(in *networkingv1.Ingress) { paths(in)[0].Backend.Service.Port.Name = "http" }, Want: []string{
			"spec.rules[0].http.paths[0].backend: Invalid value: \"\": cannot set both port name & port number",
		}},
		{Name: "port out of range", Change: func(in *networkingv1.Ingress) { paths(in)[0].Backend.Service.Port.Number = 70000 }, Want: []string{
			"spec.rules[0].http.paths[0].backend.service.port.number: Invalid value: 70000: must be between 1 and 65535, inclusive",
		}},
		{Name: "no backend", Change: func(in *networkingv1.Ingress) { paths(in)[0].Backend = networkingv1.IngressBackend{} }, Want: []string{
			"spec.rules[0].http.paths[0].backend: Invalid value: \"\": resource or service backend is required",
		}},
		{Name: "resource backend", Change: func(in *networkingv1.Ingress) {
			paths(in)[0].Backend = networkingv1.IngressBackend{Resource: &corev1.TypedLocalObjectReference{Kind: "Bucket"}}
		}, Want: []string{
			"spec.rules[0].http.paths[0].backend.resource.name: Required value",
		}},
		{Name: "ip host", Change: func(in *networkingv1.Ingress) { in.Spec.Rules[0].Host = "10.0.0.1" }, Want: []string{
			"spec.rules[0].host: Invalid value: \"10.0.0.1\": must be a DNS name, not an IP address",
		}},
		{Name: "wildcard host", Change: func(in *networkingv1.Ingress) { in.Spec.Rules[0].Host = "*.example.com" }},
		{Name: "tls", Change: func(in *networkingv1.Ingress) {
			in.Spec.TLS = []networkingv1.IngressTLS{{Hosts: []string{"web.example.com", "Bad_Host"}, SecretName: "web_tls"}}
		}, Want: []string{
			"spec.tls[0].hosts[1]: Invalid value: \"Bad_Host\": a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')",
			"spec.tls[0].secretName: Invalid value: \"web_tls\": a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')",
		}},
		{Name: "class annotation disagrees", Change: func(in *networkingv1.Ingress) {
			in.Annotations = map[string]string{"kubernetes.io/ingress.class": "traefik"}
		}, Want: []string{
			"annotations.kubernetes.io/ingress.class: Invalid value: \"traefik\": must match `ingressClassName` when both are specified",
		}},
	})
}

func TestValidateUpdateRatchets(t *testing.T) {
	old := valid()
	old.Annotations = map[string]string{"kubernetes.io/ingress.class": "traefik"}
	old.Spec.TLS = []networkingv1.IngressTLS{{SecretName: "web_tls"}}
	in := old.DeepCopy()
	in.Labels = map[string]string{"team": "a"}
	if errs := (strategy{}).ValidateUpdate(in, old); len(errs) != 0 {
		t.Errorf("update of an ingress stored with a legacy secret name and class annotation refused: %v", errs)
	}
	in.Spec.Rules[0].Host = "10.0.0.1"
	registrytest.ExpectErrors(t, strategy{}.ValidateUpdate(in, old),
		"spec.rules[0].host: Invalid value: \"10.0.0.1\": must be a DNS name, not an IP address")
}

func TestColumns(t *testing.T) {
	rule := func(host string) networkingv1.IngressRule { return networkingv1.IngressRule{Host: host} }
	tests := []struct {
		name  string
		in    networkingv1.Ingress
		cells []interface{}
	}{{
		name:  "no class, no hosts",
		in:    networkingv1.Ingress{ObjectMeta: metav1.ObjectMeta{Name: "a"}},
		cells: []interface{}{"a", "<none>", "*", "", "80", "<unknown>"},
	}, {
		name: "five rules, tls, load balancer",
		in: networkingv1.Ingress{
			ObjectMeta: metav1.ObjectMeta{Name: "b"},
			Spec: networkingv1.IngressSpec{IngressClassName: ptr.To("nginx"),
				Rules: []networkingv1.IngressRule{rule("a.com"), rule(""), rule("b.com"), rule("c.com"), rule("d.com")},
				TLS:   []networkingv1.IngressTLS{{SecretName: "tls"}}},
			Status: networkingv1.IngressStatus{LoadBalancer: networkingv1.IngressLoadBalancerStatus{Ingress: []networkingv1.IngressLoadBalancerIngress{
				{IP: "10.0.0.9"}, {Hostname: "lb.example.com"}, {IP: "10.0.0.2"}, {IP: "10.0.0.9"}}}},
		},
		cells: []interface{}{"b", "nginx", "a.com,b.com,c.com + 2 more...", "10.0.0.2,10.0.0.9,lb.example.com", "80, 443", "<unknown>"},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			registrytest.ExpectRow(t, Resource(nil).Columns, &tt.in, []string{"Name", "Class", "Hosts", "Address", "Ports", "Age"}, tt.cells)
		})
	}
}

func TestResource(t *testing.T) {
	r := Resource(nil)
	if r.Resource != "ingresses" || !reflect.DeepEqual(r.ShortNames, []string{"ing"}) || !r.Status || !r.Generation ||
		len(r.Categories) != 0 || r.Kind.String() != "networking.k8s.io/v1, Kind=Ingress" {
		t.Errorf("unexpected discovery data: %+v", r)
	}
}
