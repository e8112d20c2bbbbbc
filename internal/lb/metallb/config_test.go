package metallb

import (
	"context"
	"testing"
	"time"

	"go.universe.tf/metallb/api/v1beta1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	"k8s.io/client-go/tools/cache"
)

func TestConfigReadsMetalLBNamespace(t *testing.T) {
	scheme := runtime.NewScheme()
	obj := func(kind, ns, name string, spec map[string]any) *unstructured.Unstructured {
		u := &unstructured.Unstructured{Object: map[string]any{"spec": spec}}
		u.SetAPIVersion(v1beta1.GroupVersion.String())
		u.SetKind(kind)
		u.SetNamespace(ns)
		u.SetName(name)
		return u
	}
	client := dynamicfake.NewSimpleDynamicClientWithCustomListKinds(scheme,
		map[schema.GroupVersionResource]string{IPAddressPools: "IPAddressPoolList", L2Advertisements: "L2AdvertisementList"},
		obj("IPAddressPool", Namespace, "b", map[string]any{"addresses": []any{"10.0.1.0/24"}, "autoAssign": false}),
		obj("IPAddressPool", Namespace, "a", map[string]any{"addresses": []any{"10.0.0.200-10.0.0.215"}}),
		obj("IPAddressPool", "elsewhere", "c", map[string]any{"addresses": []any{"10.0.2.0/24"}}),
		obj("L2Advertisement", Namespace, "l2", map[string]any{"ipAddressPools": []any{"a"}}),
	)
	c, err := New(client)
	if err != nil {
		t.Fatal(err)
	}
	stop := make(chan struct{})
	defer func() { close(stop); c.Shutdown() }()
	c.Start(stop)
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	if !cache.WaitForCacheSync(ctx.Done(), c.HasSynced) {
		t.Fatal("informers did not sync")
	}
	pools := c.Pools()
	if len(pools) != 2 || pools[0].Name != "a" || pools[1].Name != "b" || pools[0].Spec.Addresses[0] != "10.0.0.200-10.0.0.215" ||
		pools[1].Spec.AutoAssign == nil || *pools[1].Spec.AutoAssign {
		t.Errorf("pools %+v, want a and b of %s as MetalLB's types", pools, Namespace)
	}
	if p := c.Pool("b"); p == nil || p.Spec.Addresses[0] != "10.0.1.0/24" {
		t.Errorf("Pool(b) = %+v", p)
	}
	if p := c.Pool("c"); p != nil {
		t.Errorf("Pool(c) of another namespace = %+v, want none", p)
	}
	if ads := c.L2Advertisements(); len(ads) != 1 || ads[0].Spec.IPAddressPools[0] != "a" {
		t.Errorf("L2Advertisements %+v", ads)
	}
}
