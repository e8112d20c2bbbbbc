package all

import (
	"testing"

	"github.com/svcnet/svcnet/internal/registry"
)

func TestGroupsRegister(t *testing.T) {
	set, err := registry.NewSet(groups(Deps{})...)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]bool{
		"apps/v1, Resource=deployments": true, "apps/v1, Resource=replicasets": true, "apps/v1, Resource=statefulsets": true,
		"apps/v1, Resource=daemonsets": true, "policy/v1, Resource=poddisruptionbudgets": true,
		"apps/v1, Resource=controllerrevisions": true, "coordination.k8s.io/v1, Resource=leases": true,
		"autoscaling/v2, Resource=horizontalpodautoscalers": true, "autoscaling/v1, Resource=horizontalpodautoscalers": true,
		"discovery.k8s.io/v1, Resource=endpointslices": true, "networking.k8s.io/v1, Resource=ingresses": true,
		"networking.k8s.io/v1, Resource=ingressclasses": true, "storage.k8s.io/v1, Resource=storageclasses": true,
		"networking.k8s.io/v1, Resource=servicecidrs": true, "networking.k8s.io/v1, Resource=ipaddresses": true,
		"storage.k8s.io/v1, Resource=csinodes": true,
	}
	for _, r := range set.All() {
		gvr := r.GroupVersionResource().String()
		if !want[gvr] {
			t.Errorf("unexpected resource %s", gvr)
		}
		delete(want, gvr)
		if !registry.Scheme.Recognizes(r.Kind) {
			t.Errorf("%s: the scheme does not know %s", gvr, r.Kind)
		}
		if len(r.Columns) < 2 || r.Columns[0].Format != "name" || r.Columns[0].Name != "Name" {
			t.Errorf("%s: table does not start with the NAME column", gvr)
		}
	}
	for gvr := range want {
		t.Errorf("missing resource %s", gvr)
	}
}
