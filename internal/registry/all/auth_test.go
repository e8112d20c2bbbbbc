package all

import (
	"testing"

	"github.com/svcnet/svcnet/internal/registry"
)

func TestAuthRegister(t *testing.T) {
	set, err := registry.NewSet(auth(Deps{})...)
	if err != nil {
		t.Fatal(err)
	}
	// resource: namespaced, virtual (create only)
	want := map[string]string{
		"authentication.k8s.io/v1, Resource=selfsubjectreviews":       "false|true",
		"authentication.k8s.io/v1, Resource=tokenreviews":             "false|true",
		"authorization.k8s.io/v1, Resource=subjectaccessreviews":      "false|true",
		"authorization.k8s.io/v1, Resource=selfsubjectaccessreviews":  "false|true",
		"authorization.k8s.io/v1, Resource=localsubjectaccessreviews": "true|true",
		"authorization.k8s.io/v1, Resource=selfsubjectrulesreviews":   "false|true",
		"rbac.authorization.k8s.io/v1, Resource=roles":                "true|false",
		"rbac.authorization.k8s.io/v1, Resource=rolebindings":         "true|false",
		"rbac.authorization.k8s.io/v1, Resource=clusterroles":         "false|false",
		"rbac.authorization.k8s.io/v1, Resource=clusterrolebindings":  "false|false",
	}
	for _, r := range set.All() {
		gvr := r.GroupVersionResource().String()
		got := map[bool]string{true: "true", false: "false"}
		if w, ok := want[gvr]; !ok || got[r.Namespaced]+"|"+got[r.Create != nil] != w {
			t.Errorf("%s: namespaced %v, virtual %v; want %q", gvr, r.Namespaced, r.Create != nil, w)
		}
		delete(want, gvr)
		if !registry.Scheme.Recognizes(r.Kind) {
			t.Errorf("%s: the scheme does not know %s", gvr, r.Kind)
		}
	}
	for gvr := range want {
		t.Errorf("%s not served", gvr)
	}
}
