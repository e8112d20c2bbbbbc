package addons

import (
	"context"
	"testing"

	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
)

// TestIngressDefaultClass: svcnet's IngressClass is the default unless
// another IngressClass already is.
func TestIngressDefaultClass(t *testing.T) {
	ctx := context.Background()
	for _, other := range []bool{false, true} {
		client := fake.NewClientset()
		if other {
			_, err := client.NetworkingV1().IngressClasses().Create(ctx, &networkingv1.IngressClass{ObjectMeta: metav1.ObjectMeta{Name: "nginx",
				Annotations: map[string]string{networkingv1.AnnotationIsDefaultIngressClass: "true"}}}, metav1.CreateOptions{})
			if err != nil {
				t.Fatal(err)
			}
		}
		if err := ApplyIngress(ctx, client); err != nil {
			t.Fatal(err)
		}
		c, err := client.NetworkingV1().IngressClasses().Get(ctx, IngressClass, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if got := c.Annotations[networkingv1.AnnotationIsDefaultIngressClass] == "true"; got == other || c.Spec.Controller != "svcnet.io/ingress" {
			t.Errorf("another default class %v: svcnet default %v, controller %s", other, got, c.Spec.Controller)
		}
		svc, err := client.CoreV1().Services(IngressNamespace).Get(ctx, IngressController, metav1.GetOptions{})
		if err != nil || svc.Spec.Type != "LoadBalancer" || svc.Spec.ExternalTrafficPolicy != "Local" {
			t.Errorf("controller Service: %v %+v", err, svc)
		}
	}
}
