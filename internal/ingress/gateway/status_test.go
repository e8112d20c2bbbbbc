package gateway

import (
	"context"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	k8stesting "k8s.io/client-go/testing"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"
)

func TestConditionsKeepTransitionTimes(t *testing.T) {
	then := metav1.NewTime(time.Unix(1e9, 0))
	now := metav1.NewTime(time.Unix(2e9, 0))
	old := []metav1.Condition{
		{Type: "Accepted", Status: metav1.ConditionTrue, LastTransitionTime: then, ObservedGeneration: 1},
		{Type: "Programmed", Status: metav1.ConditionFalse, LastTransitionTime: then},
	}
	got := conditions(old, 2, now, []metav1.Condition{
		{Type: "Accepted", Status: metav1.ConditionTrue, Reason: "Accepted"},
		{Type: "Programmed", Status: metav1.ConditionTrue, Reason: "Programmed"},
	})
	if !got[0].LastTransitionTime.Equal(&then) || !got[1].LastTransitionTime.Equal(&now) {
		t.Errorf("transition times %v %v", got[0].LastTransitionTime, got[1].LastTransitionTime)
	}
	if got[0].ObservedGeneration != 2 || got[1].ObservedGeneration != 2 {
		t.Errorf("observedGeneration %d %d", got[0].ObservedGeneration, got[1].ObservedGeneration)
	}
}

// TestWriteStatus: a route's parents of other controllers stay, svcnet's
// are written once, and a second build with nothing changed writes
// nothing.
func TestWriteStatus(t *testing.T) {
	objs := []any{class("svcnet", ControllerName), gateway("infra", "gw", "svcnet", httpListener("http", 80, ""))}
	objs = append(objs, backendService("infra", "v1", "10.244.0.10")...)
	rt := route("infra", "web", 0, "gw", nil, rule(nil, backendRef("", "v1", 80, 1)))
	theirs := gatewayv1.RouteParentStatus{ParentRef: gatewayv1.ParentReference{Name: "elsewhere"}, ControllerName: "example.com/other",
		Conditions: []metav1.Condition{{Type: "Accepted", Status: metav1.ConditionTrue, Reason: "Accepted", LastTransitionTime: metav1.NewTime(time.Unix(1e9, 0))}}}
	rt.Status.Parents = []gatewayv1.RouteParentStatus{theirs}
	objs = append(objs, rt)
	w := newWorld(t, objs...)

	// Created through the client: the fake's guess of a resource from
	// a kind makes "gatewaies" of Gateway.
	dyn := dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(), map[schema.GroupVersionResource]string{
		GatewayClasses: "GatewayClassList", Gateways: "GatewayList", HTTPRoutes: "HTTPRouteList",
	})
	for _, o := range []struct {
		gvr  schema.GroupVersionResource
		kind string
		obj  metav1.Object
	}{{GatewayClasses, "GatewayClass", w.classes[0]}, {Gateways, "Gateway", w.gateways[0]}, {HTTPRoutes, "HTTPRoute", rt}} {
		m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(o.obj)
		if err != nil {
			t.Fatal(err)
		}
		u := &unstructured.Unstructured{Object: m}
		u.SetAPIVersion(gatewayv1.GroupVersion.String())
		u.SetKind(o.kind)
		if _, err := dyn.Resource(o.gvr).Namespace(o.obj.GetNamespace()).Create(context.Background(), u, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	dyn.ClearActions()
	c := &gwController{Config: Config{Dynamic: dyn}}
	now := metav1.NewTime(time.Unix(2e9, 0))
	if err := c.writeStatus(context.Background(), w, w.build(), now); err != nil {
		t.Fatal(err)
	}
	updates := 0
	for _, a := range dyn.Actions() {
		if a.GetVerb() == "update" && a.GetSubresource() == "status" {
			updates++
		}
	}
	if updates != 3 {
		t.Fatalf("%d status updates, want 3 (class, gateway, route): %v", updates, dyn.Actions())
	}
	u, err := dyn.Resource(HTTPRoutes).Namespace("infra").Get(context.Background(), "web", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var got gatewayv1.HTTPRoute
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, &got); err != nil {
		t.Fatal(err)
	}
	if len(got.Status.Parents) != 2 || got.Status.Parents[0].ControllerName != "example.com/other" || got.Status.Parents[1].ControllerName != ControllerName {
		t.Fatalf("parents %+v", got.Status.Parents)
	}
	p := got.Status.Parents[1]
	if p.ParentRef.Name != "gw" || cond(p.Conditions, "Accepted").Status != metav1.ConditionTrue || cond(p.Conditions, "Accepted").ObservedGeneration != 3 {
		t.Errorf("svcnet's parent %+v", p)
	}

	// What the API now holds, built again: nothing to write.
	w.routes = []*gatewayv1.HTTPRoute{&got}
	for i, gvr := range []schema.GroupVersionResource{GatewayClasses, Gateways} {
		ns := map[int]string{0: "", 1: "infra"}[i]
		u, err := dyn.Resource(gvr).Namespace(ns).Get(context.Background(), map[int]string{0: "svcnet", 1: "gw"}[i], metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		switch i {
		case 0:
			err = runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, w.classes[0])
		case 1:
			err = runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, w.gateways[0])
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	dyn.ClearActions()
	if err := c.writeStatus(context.Background(), w, w.build(), metav1.NewTime(time.Unix(3e9, 0))); err != nil {
		t.Fatal(err)
	}
	for _, a := range dyn.Actions() {
		if _, ok := a.(k8stesting.UpdateAction); ok {
			t.Errorf("unchanged status written again: %v", a)
		}
	}
}
