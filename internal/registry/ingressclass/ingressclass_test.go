package ingressclass

import (
	"reflect"
	"strings"
	"testing"

	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

func ptr[T any](v T) *T { return &v }

func messages(errs field.ErrorList) []string {
	var out []string
	for _, e := range errs {
		out = append(out, e.Error())
	}
	return out
}

func valid() *networkingv1.IngressClass {
	c := &networkingv1.IngressClass{
		ObjectMeta: metav1.ObjectMeta{Name: "nginx"},
		Spec: networkingv1.IngressClassSpec{
			Controller: "k8s.io/ingress-nginx",
			Parameters: &networkingv1.IngressClassParametersReference{APIGroup: ptr("k8s.example.com"), Kind: "IngressParameters", Name: "external-lb"},
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
	tests := []struct {
		name   string
		change func(*networkingv1.IngressClass)
		want   []string
	}{
		{name: "valid", change: func(*networkingv1.IngressClass) {}},
		{name: "namespaced parameters", change: func(c *networkingv1.IngressClass) {
			c.Spec.Parameters.Scope, c.Spec.Parameters.Namespace = ptr("Namespace"), ptr("ingress")
		}},
		{name: "no controller", change: func(c *networkingv1.IngressClass) { c.Spec.Controller = "" }, want: []string{
			"spec.controller: Required value",
		}},
		{name: "controller without domain", change: func(c *networkingv1.IngressClass) { c.Spec.Controller = "nginx" }, want: []string{
			"spec.controller: Invalid value: \"nginx\": must be a domain-prefixed path (such as \"acme.io/foo\")",
		}},
		{name: "controller too long", change: func(c *networkingv1.IngressClass) { c.Spec.Controller = "example.com/" + strings.Repeat("a", 250) }, want: []string{
			"spec.controller: Too long: may not be more than 250 bytes",
		}},
		{name: "namespace scope without namespace", change: func(c *networkingv1.IngressClass) { c.Spec.Parameters.Scope = ptr("Namespace") }, want: []string{
			"spec.parameters.namespace: Required value: `parameters.scope` is set to 'Namespace'",
		}},
		{name: "cluster scope with namespace", change: func(c *networkingv1.IngressClass) { c.Spec.Parameters.Namespace = ptr("ingress") }, want: []string{
			"spec.parameters.namespace: Forbidden: `parameters.scope` is set to 'Cluster'",
		}},
		{name: "bad scope and reference", change: func(c *networkingv1.IngressClass) {
			c.Spec.Parameters.Scope, c.Spec.Parameters.Kind, c.Spec.Parameters.Name = ptr("Global"), "", "a/b"
		}, want: []string{
			"spec.parameters.kind: Required value",
			"spec.parameters.name: Invalid value: \"a/b\": may not contain '/'",
			"spec.parameters.scope: Unsupported value: \"Global\": supported values: \"Cluster\", \"Namespace\"",
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := valid()
			tt.change(c)
			if got := messages(strategy{}.Validate(c)); !reflect.DeepEqual(got, tt.want) {
				t.Errorf("errors\n got %q\nwant %q", got, tt.want)
			}
		})
	}
}

func TestValidateUpdateControllerImmutable(t *testing.T) {
	old := valid()
	c := old.DeepCopy()
	c.Spec.Controller = "example.com/other"
	want := []string{"spec.controller: Invalid value: \"example.com/other\": field is immutable"}
	if got := messages(strategy{}.ValidateUpdate(c, old)); !reflect.DeepEqual(got, want) {
		t.Errorf("errors %q, want %q", got, want)
	}
}

func TestColumns(t *testing.T) {
	tests := []struct {
		name   string
		params *networkingv1.IngressClassParametersReference
		want   string
	}{
		{"none", nil, "<none>"},
		{"core kind", &networkingv1.IngressClassParametersReference{Kind: "ConfigMap", Name: "cfg"}, "ConfigMap/cfg"},
		{"grouped kind", &networkingv1.IngressClassParametersReference{APIGroup: ptr("k8s.example.com"), Kind: "IngressParameters", Name: "lb"}, "IngressParameters.k8s.example.com/lb"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := &networkingv1.IngressClass{ObjectMeta: metav1.ObjectMeta{Name: "nginx"},
				Spec: networkingv1.IngressClassSpec{Controller: "k8s.io/ingress-nginx", Parameters: tt.params}}
			var names []string
			var cells []interface{}
			for _, col := range Resource().Columns {
				names = append(names, col.Name)
				cells = append(cells, col.Cell(c))
			}
			want := []interface{}{"nginx", "k8s.io/ingress-nginx", tt.want, "<unknown>"}
			if !reflect.DeepEqual(names, []string{"Name", "Controller", "Parameters", "Age"}) || !reflect.DeepEqual(cells, want) {
				t.Errorf("columns %v %q, want cells %q", names, cells, want)
			}
		})
	}
}

func TestResource(t *testing.T) {
	r := Resource()
	if r.Resource != "ingressclasses" || r.Namespaced || r.Status || !r.Generation || r.Kind.Group != "networking.k8s.io" {
		t.Errorf("unexpected discovery data: %+v", r)
	}
}
