package all

import (
	"strings"
	"testing"

	"github.com/svcnet/svcnet/internal/registry"
)

func TestBatchRegister(t *testing.T) {
	set, err := registry.NewSet(batch()...)
	if err != nil {
		t.Fatal(err)
	}
	// resource: short names, categories, status, generation
	want := map[string]string{
		"batch/v1, Resource=jobs":     "|all|true|true",
		"batch/v1, Resource=cronjobs": "cj|all|true|true",
	}
	for _, r := range set.All() {
		gvr := r.GroupVersionResource().String()
		got := strings.Join([]string{strings.Join(r.ShortNames, ","), strings.Join(r.Categories, ","),
			boolString(r.Status), boolString(r.Generation)}, "|")
		if w, ok := want[gvr]; !ok || got != w || !r.Namespaced {
			t.Errorf("%s: %s namespaced %v, want %q", gvr, got, r.Namespaced, w)
		}
		delete(want, gvr)
		if !registry.Scheme.Recognizes(r.Kind) {
			t.Errorf("%s: the scheme does not know %s", gvr, r.Kind)
		}
	}
	for gvr := range want {
		t.Errorf("missing resource %s", gvr)
	}
}
