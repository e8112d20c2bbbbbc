package ingress

import (
	"context"
	"fmt"
	"slices"
	"strings"

	networkingv1 "k8s.io/api/networking/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
)

// Classes lists the IngressClasses, for the default class of new
// Ingresses; nil leaves them without one.
type Classes func(ctx context.Context) ([]networkingv1.IngressClass, error)

// Admit is upstream's DefaultIngressClass admission plugin: a new Ingress
// that names no class, neither by ingressClassName nor by the older
// kubernetes.io/ingress.class annotation, gets the default IngressClass
// (annotated ingressclass.kubernetes.io/is-default-class: "true"; of
// several, the newest, then the first by name).
func (s strategy) Admit(ctx context.Context, obj runtime.Object) error {
	in := obj.(*networkingv1.Ingress)
	if s.classes == nil || in.Spec.IngressClassName != nil {
		return nil
	}
	if _, ok := in.Annotations[classAnnotation]; ok {
		return nil
	}
	classes, err := s.classes(ctx)
	if err != nil {
		return apierrors.NewForbidden(networkingv1.Resource("ingresses"), in.Name, fmt.Errorf("failed to get default Ingress class: %w", err))
	}
	var defaults []networkingv1.IngressClass
	for _, c := range classes {
		if c.Annotations[networkingv1.AnnotationIsDefaultIngressClass] == "true" {
			defaults = append(defaults, c)
		}
	}
	if len(defaults) == 0 {
		return nil
	}
	slices.SortFunc(defaults, func(a, b networkingv1.IngressClass) int {
		if c := b.CreationTimestamp.Compare(a.CreationTimestamp.Time); c != 0 {
			return c
		}
		return strings.Compare(a.Name, b.Name)
	})
	name := defaults[0].Name
	in.Spec.IngressClassName = &name
	return nil
}
