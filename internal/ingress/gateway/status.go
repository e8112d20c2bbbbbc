package gateway

import (
	"context"
	"errors"
	"fmt"
	"slices"

	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"
	"sigs.k8s.io/gateway-api/pkg/features"
)

// supportedFeatures are the Gateway API features svcnet implements, as
// GatewayClass status lists them (sorted).
var supportedFeatures = func() []gatewayv1.SupportedFeature {
	names := []features.FeatureName{
		features.SupportGateway, features.SupportHTTPRoute, features.SupportReferenceGrant,
		features.SupportHTTPRouteQueryParamMatching, features.SupportHTTPRouteMethodMatching,
		features.SupportHTTPRouteResponseHeaderModification, features.SupportHTTPRoutePortRedirect,
		features.SupportHTTPRouteSchemeRedirect, features.SupportHTTPRoutePathRedirect,
		features.SupportHTTPRouteHostRewrite, features.SupportHTTPRoutePathRewrite,
		features.SupportHTTPRouteParentRefPort, features.SupportHTTPRoute303RedirectStatusCode,
		features.SupportHTTPRoute307RedirectStatusCode, features.SupportHTTPRoute308RedirectStatusCode,
	}
	slices.Sort(names)
	out := make([]gatewayv1.SupportedFeature, len(names))
	for i, n := range names {
		out[i] = gatewayv1.SupportedFeature{Name: gatewayv1.FeatureName(n)}
	}
	return out
}()

// conditions are want with the generation observed, keeping the
// transition time of those whose status old already had.
func conditions(old []metav1.Condition, gen int64, now metav1.Time, want []metav1.Condition) []metav1.Condition {
	out := make([]metav1.Condition, len(want))
	for i, c := range want {
		c.ObservedGeneration = gen
		c.LastTransitionTime = now
		if o := meta.FindStatusCondition(old, c.Type); o != nil && o.Status == c.Status {
			c.LastTransitionTime = o.LastTransitionTime
		}
		out[i] = c
	}
	return out
}

// classStatus is a GatewayClass's status as the build has it.
func classStatus(c *gatewayv1.GatewayClass, want []metav1.Condition, now metav1.Time) gatewayv1.GatewayClassStatus {
	return gatewayv1.GatewayClassStatus{
		Conditions:        conditions(c.Status.Conditions, c.Generation, now, want),
		SupportedFeatures: supportedFeatures,
	}
}

// gatewayStatusOf is a Gateway's status as the build has it.
func gatewayStatusOf(gw *gatewayv1.Gateway, st *gatewayStatus, addrs []gatewayv1.GatewayStatusAddress, now metav1.Time) gatewayv1.GatewayStatus {
	out := gatewayv1.GatewayStatus{
		Addresses:            addrs,
		Conditions:           conditions(gw.Status.Conditions, gw.Generation, now, st.conditions),
		AttachedListenerSets: gw.Status.AttachedListenerSets,
	}
	for _, l := range st.listeners {
		var old []metav1.Condition
		for _, o := range gw.Status.Listeners {
			if o.Name == l.spec.Name {
				old = o.Conditions
			}
		}
		out.Listeners = append(out.Listeners, gatewayv1.ListenerStatus{
			Name:           l.spec.Name,
			SupportedKinds: l.kinds,
			AttachedRoutes: l.attached,
			Conditions:     conditions(old, gw.Generation, now, listenerConditions(l)),
		})
	}
	return out
}

// routeStatus is an HTTPRoute's status: the parents of other controllers
// as they are, then svcnet's.
func routeStatus(rt *gatewayv1.HTTPRoute, parents []routeParent, now metav1.Time) gatewayv1.HTTPRouteStatus {
	out := gatewayv1.HTTPRouteStatus{RouteStatus: gatewayv1.RouteStatus{Parents: []gatewayv1.RouteParentStatus{}}}
	for _, p := range rt.Status.Parents {
		if p.ControllerName != ControllerName {
			out.Parents = append(out.Parents, p)
		}
	}
	for _, p := range parents {
		var old []metav1.Condition
		for _, o := range rt.Status.Parents {
			if o.ControllerName == ControllerName && apiequality.Semantic.DeepEqual(o.ParentRef, p.ref) {
				old = o.Conditions
			}
		}
		out.Parents = append(out.Parents, gatewayv1.RouteParentStatus{
			ParentRef:      p.ref,
			ControllerName: ControllerName,
			Conditions:     conditions(old, rt.Generation, now, p.conditions),
		})
	}
	return out
}

// writeStatus updates the status of every object whose status the
// build changed; routes svcnet no longer answers for lose its parents.
func (c *gwController) writeStatus(ctx context.Context, w *world, b *built, now metav1.Time) error {
	var errs []error
	update := func(gvr schema.GroupVersionResource, obj metav1.Object, typed any) {
		u, err := runtime.DefaultUnstructuredConverter.ToUnstructured(typed)
		if err == nil {
			_, err = c.Dynamic.Resource(gvr).Namespace(obj.GetNamespace()).UpdateStatus(ctx, &unstructured.Unstructured{Object: u}, metav1.UpdateOptions{})
		}
		if err != nil && !apierrors.IsNotFound(err) {
			errs = append(errs, fmt.Errorf("status of %s %s/%s: %w", gvr.Resource, obj.GetNamespace(), obj.GetName(), err))
		}
	}
	for _, gc := range w.classes {
		want, ok := b.classes[gc]
		if !ok {
			continue
		}
		if st := classStatus(gc, want, now); !apiequality.Semantic.DeepEqual(st, gc.Status) {
			up := gc.DeepCopy()
			up.Status = st
			update(GatewayClasses, up, up)
		}
	}
	for _, gw := range w.gateways {
		st, ok := b.gateways[gw]
		if !ok {
			continue
		}
		if s := gatewayStatusOf(gw, st, w.addresses, now); !apiequality.Semantic.DeepEqual(s, gw.Status) {
			up := gw.DeepCopy()
			up.Status = s
			update(Gateways, up, up)
		}
	}
	for _, rt := range w.routes {
		parents, ok := b.routes[rt]
		if !ok && !slices.ContainsFunc(rt.Status.Parents, func(p gatewayv1.RouteParentStatus) bool { return p.ControllerName == ControllerName }) {
			continue
		}
		if s := routeStatus(rt, parents, now); !apiequality.Semantic.DeepEqual(s, rt.Status) {
			up := rt.DeepCopy()
			up.Status = s
			update(HTTPRoutes, up, up)
		}
	}
	return errors.Join(errs...)
}
