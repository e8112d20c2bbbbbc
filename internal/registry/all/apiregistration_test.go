package all

import (
	"strings"
	"testing"

	"github.com/svcnet/svcnet/internal/registry"
)

func TestAPIRegistrationRegister(t *testing.T) {
	set, err := registry.NewSet(apiregistration()...)
	if err != nil {
		t.Fatal(err)
	}
	// resource: short names, categories, namespaced, status, generation, columns
	want := map[string]string{
		"apiregistration.k8s.io/v1, Resource=apiservices": "|api-extensions|false|true|false|Name,Service,Available,Age",
	}
	for _, r := range set.All() {
		gvr := r.GroupVersionResource().String()
		var columns []string
		for _, c := range r.Columns {
			columns = append(columns, c.Name)
		}
		got := strings.Join([]string{strings.Join(r.ShortNames, ","), strings.Join(r.Categories, ","),
			boolString(r.Namespaced), boolString(r.Status), boolString(r.Generation), strings.Join(columns, ",")}, "|")
		if w, ok := want[gvr]; !ok || got != w {
			t.Errorf("%s: %s, want %q", gvr, got, w)
		}
		delete(want, gvr)
		if !registry.Scheme.Recognizes(r.Kind) {
			t.Errorf("%s: the scheme does not know %s", gvr, r.Kind)
		}
		if p := r.Prefix(); p != "/registry/apiregistration.k8s.io/apiservices/" {
			t.Errorf("%s: stored under %s", gvr, p)
		}
	}
	for gvr := range want {
		t.Errorf("missing resource %s", gvr)
	}
}
