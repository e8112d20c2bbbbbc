package ingressclass

import (
	"strings"
	"testing"

	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/svcnet/svcnet/internal/registry/registrytest"
)

func valid() *networkingv1.IngressClass {
	c := &networkingv1.IngressClass{
		ObjectMeta: metav1.ObjectMeta{Name: "nginx"},
		Spec: networkingv1.IngressClassSpec{
			Controller: "k8s.io/ingress-nginx",
			Parameters: &networkingv1.IngressClassParametersReference{APIGroup: ptr.To("k8s.example.com"), Kind: "IngressParameters", Name: "external-lb"},
		},
	}
	strategy{}.Default(c)
	return c
}

func TestDefaultScope(t *testing.T) {
	if s := valid().Spec.Parameters.Scope; s == nil || *s != "Cluster" {
		t.Errorf("scope %v, want Cluster", s)
	}
	c := &networkingv1.IngressClass{}
	strategy{}.Default(c)
	if c.Spec.Parameters != nil {
		t.Error("defaulting invented parameters")
	}
}

func TestValidate(t *testing.T) {
	registrytest.RunValidate(t, strategy{}, valid, []registrytest.Case[*networkingv1.IngressClass]{
		{Name: "valid", Change: func(*networkingv1.IngressClass) {}},
		{Name: "namespaced parameters", Change: func(c *networkingv1.IngressClass) {
			c.Spec.Parameters.Scope, c.Spec.Parameters.Namespace = ptr.To("Namespace"), ptr.To("ingress")
		}},
		{Name: "no controller", Change: func(c *networkingv1.IngressClass) { c.Spec.Controller = "" }, Want: []string{
			"spec.controller: Required value",
		}},
		{Name: "controller without domain", Change: func(c *networkingv1.IngressClass) { c.Spec.Controller = "nginx" }, Want: []string{
			"spec.controller: Invalid value: \"nginx\": must be a domain-prefixed path (such as \"acme.io/foo\")",
		}},
		{Name: "controller too long", Change: func(c *networkingv1.IngressClass) { c.Spec.Controller = "example.com/" + strings.Repeat("a", 250) }, Want: []string{
			"spec.controller: Too long: may not be more than 250 bytes",
		}},
		{Name: "namespace scope without namespace", Change: func(c *networkingv1.IngressClass) { c.Spec.Parameters.Scope = ptr.To("Namespace") }, Want: []string{
			"spec.parameters.namespace: Required value: `parameters.scope` is set to 'Namespace'",
		}},
		{Name: "cluster scope with namespace", Change: func(c *networkingv1.IngressClass) { c.Spec.Parameters.Namespace = ptr.To("ingress") }, Want: []string{
			"spec.parameters.namespace: Forbidden: `parameters.scope` is set to 'Cluster'",
		}},
		{Name: "bad scope and reference", Change: func(c *networkingv1.IngressClass) {
			c.Spec.Parameters.Scope, c.Spec.Parameters.Kind, c.Spec.Parameters.Name = ptr.To("Global"), "", "a/b"
		}, Want: []string{
			"spec.parameters.kind: Required value",
			"spec.parameters.name: Invalid value: \"a/b\": may not contain '/'",
			"spec.parameters.scope: Unsupported value: \"Global\": supported values: \"Cluster\", \"Namespace\"",
		}},
	})
}

func TestValidateUpdateControllerImmutable(t *testing.T) {
	old := valid()
	c := old.DeepCopy()
	c.Spec.Controller = "example.com/other"
	registrytest.ExpectErrors(t, strategy{}.ValidateUpdate(c, old), "spec.controller: Invalid value: \"example.com/other\": field is immutable")
}

func TestColumns(t *testing.T) {
	tests := []struct {
		name   string
		params *networkingv1.IngressClassParametersReference
		want   string
	}{
		{"none", nil, "<none>"},
		{"core kind", &networkingv1.IngressClassParametersReference{Kind: "ConfigMap", Name: "cfg"}, "ConfigMap/cfg"},
		{"grouped kind", &networkingv1.IngressClassParametersReference{APIGroup: ptr.To("k8s.example.com"), Kind: "IngressParameters", Name: "lb"}, "IngressParameters.k8s.example.com/lb"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := &networkingv1.IngressClass{ObjectMeta: metav1.ObjectMeta{Name: "nginx"},
				Spec: networkingv1.IngressClassSpec{Controller: "k8s.io/ingress-nginx", Parameters: tt.params}}
			registrytest.ExpectRow(t, Resource().Columns, c, []string{"Name", "Controller", "Parameters", "Age"},
				[]interface{}{"nginx", "k8s.io/ingress-nginx", tt.want, "<unknown>"})
		})
	}
}

func TestResource(t *testing.T) {
	r := Resource()
	if r.Resource != "ingressclasses" || r.Namespaced || r.Status || !r.Generation || r.Kind.Group != "networking.k8s.io" {
		t.Errorf("unexpected discovery data: %+v", r)
	}
}
