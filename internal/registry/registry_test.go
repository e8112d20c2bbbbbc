package registry

import (
	"testing"

	"k8s.io/apimachinery/pkg/runtime/schema"
)

func res(group, version, plural string) *Resource {
	return &Resource{Kind: schema.GroupVersionKind{Group: group, Version: version, Kind: plural + "Kind"}, Resource: plural}
}

func TestSetReplace(t *testing.T) {
	set, err := NewSet(res("", "v1", "configmaps"))
	if err != nil {
		t.Fatal(err)
	}
	gen := set.Generation()
	v1, v2 := res("example.com", "v1", "widgets"), res("example.com", "v2", "widgets")
	if err := set.Replace("widgets.example.com", v1, v2); err != nil {
		t.Fatal(err)
	}
	if set.Generation() == gen || set.ByGVR(v2.GroupVersionResource()) != v2 || set.ByGVK(v1.Kind) != v1 || len(set.All()) != 3 {
		t.Fatalf("after adding two versions: generation %d (was %d), %d resources", set.Generation(), gen, len(set.All()))
	}
	if gvs := set.GroupVersions(); len(gvs) != 3 || gvs[0].Group != "" {
		t.Errorf("group versions %v", gvs)
	}
	// A definition may not take what is served already.
	if err := set.Replace("other", res("", "v1", "configmaps")); err == nil {
		t.Error("a second configmaps was accepted")
	}
	if err := set.Replace("other", res("example.com", "v1", "widgets")); err == nil {
		t.Error("another owner's widgets was accepted")
	}
	// Its owner may serve it again, with one version fewer, then none.
	v1b := res("example.com", "v1", "widgets")
	if err := set.Replace("widgets.example.com", v1b); err != nil {
		t.Fatal(err)
	}
	if set.ByGVR(v1.GroupVersionResource()) != v1b || set.ByGVR(v2.GroupVersionResource()) != nil || len(set.All()) != 2 {
		t.Errorf("after replacing: v1 %p (want %p), v2 %v, %d resources", set.ByGVR(v1.GroupVersionResource()), v1b, set.ByGVR(v2.GroupVersionResource()), len(set.All()))
	}
	if err := set.Replace("widgets.example.com"); err != nil {
		t.Fatal(err)
	}
	if set.ByGVR(v1.GroupVersionResource()) != nil || len(set.All()) != 1 {
		t.Errorf("after removing: %d resources", len(set.All()))
	}
}

func TestSetChanged(t *testing.T) {
	set, err := NewSet(res("", "v1", "configmaps"))
	if err != nil {
		t.Fatal(err)
	}
	changed := set.Changed()
	if set.Changed() != changed {
		t.Error("two waits for one change got two channels")
	}
	select {
	case <-changed:
		t.Fatal("closed before any change")
	default:
	}
	if err := set.Replace("other", res("", "v1", "configmaps")); err == nil {
		t.Fatal("a refused replace succeeded")
	}
	select {
	case <-changed:
		t.Fatal("closed by a refused replace")
	default:
	}
	if err := set.Replace("widgets.example.com", res("example.com", "v1", "widgets")); err != nil {
		t.Fatal(err)
	}
	select {
	case <-changed:
	default:
		t.Fatal("not closed by a change")
	}
	next := set.Changed()
	select {
	case <-next:
		t.Fatal("the next wait is over before the next change")
	default:
	}
}
