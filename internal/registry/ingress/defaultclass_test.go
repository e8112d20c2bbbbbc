package ingress

import (
	"context"
	"errors"
	"testing"
	"time"

	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

func TestDefaultIngressClass(t *testing.T) {
	class := func(name string, age time.Duration, isDefault bool) networkingv1.IngressClass {
		c := networkingv1.IngressClass{ObjectMeta: metav1.ObjectMeta{Name: name, CreationTimestamp: metav1.NewTime(time.Unix(1e9, 0).Add(-age))}}
		if isDefault {
			c.Annotations = map[string]string{networkingv1.AnnotationIsDefaultIngressClass: "true"}
		}
		return c
	}
	list := func(cs ...networkingv1.IngressClass) Classes {
		return func(context.Context) ([]networkingv1.IngressClass, error) { return cs, nil }
	}
	for _, tc := range []struct {
		name    string
		classes Classes
		in      *networkingv1.Ingress
		want    string // "" none
	}{
		{"the default", list(class("nginx", time.Hour, false), class("svcnet", time.Hour, true)), &networkingv1.Ingress{}, "svcnet"},
		{"no default", list(class("svcnet", time.Hour, false)), &networkingv1.Ingress{}, ""},
		{"the newest of two", list(class("old", time.Hour, true), class("new", time.Minute, true)), &networkingv1.Ingress{}, "new"},
		{"by name at the same age", list(class("b", time.Hour, true), class("a", time.Hour, true)), &networkingv1.Ingress{}, "a"},
		{"a class named", list(class("svcnet", time.Hour, true)), &networkingv1.Ingress{Spec: networkingv1.IngressSpec{IngressClassName: ptr.To("other")}}, "other"},
		{"the annotation", list(class("svcnet", time.Hour, true)), &networkingv1.Ingress{ObjectMeta: metav1.ObjectMeta{Annotations: map[string]string{classAnnotation: "nginx"}}}, ""},
		{"no lister", nil, &networkingv1.Ingress{}, ""},
	} {
		if err := (strategy{classes: tc.classes}).Admit(context.Background(), tc.in); err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		if got := ptrOr(tc.in.Spec.IngressClassName); got != tc.want {
			t.Errorf("%s: ingressClassName %q, want %q", tc.name, got, tc.want)
		}
	}
	failing := func(context.Context) ([]networkingv1.IngressClass, error) { return nil, errors.New("boom") }
	if err := (strategy{classes: failing}).Admit(context.Background(), &networkingv1.Ingress{}); err == nil {
		t.Error("a failed list admitted the Ingress")
	}
}

func ptrOr(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}
