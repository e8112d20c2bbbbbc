package addons

import (
	"context"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/dynamic"
	"k8s.io/utils/ptr"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/svcnet/svcnet/internal/ingress/gateway"
)

// GatewayClass is the GatewayClass of the Ingress add-on's controller,
// which also serves the Gateway API (package ingress/gateway).
const GatewayClass = "svcnet"

// ApplyGatewayClass creates or updates the GatewayClass svcnet, whose
// Gateways the Ingress add-on's controller serves. The Gateway API's
// definitions must be established first.
func ApplyGatewayClass(ctx context.Context, client dynamic.Interface) error {
	return apply(ctx, client.Resource(gateway.GatewayClasses), &gatewayv1.GatewayClass{
		TypeMeta:   metav1.TypeMeta{Kind: "GatewayClass", APIVersion: gatewayv1.GroupVersion.String()},
		ObjectMeta: metav1.ObjectMeta{Name: GatewayClass, Labels: map[string]string{"app.kubernetes.io/name": "svcnet-ingress"}},
		Spec: gatewayv1.GatewayClassSpec{
			ControllerName: gateway.ControllerName,
			Description:    ptr.To("svcnet's ingress proxy: HTTP on port 80, HTTPS on 443"),
		},
	})
}
