package apiserver

import (
	"testing"

	"github.com/svcnet/svcnet/internal/registry"
	"github.com/svcnet/svcnet/internal/registry/configmap"
)

// A label selector on a built-in resource refuses stored documents whose
// labels do not match before they are decoded, and keeps what it cannot
// read; without a label selector, or for a custom resource, there is no
// prefilter.
func TestLabelPrefilter(t *testing.T) {
	res := configmap.Resource()
	sel, err := newSelector(res, "app=web,tier!=db", "")
	if err != nil {
		t.Fatal(err)
	}
	pre := sel.prefilter()
	for doc, want := range map[string]bool{
		`{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"a","labels":{"app":"web"}}}`:                true,
		`{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"a","labels":{"app":"web","tier":"db"}}}`:    false,
		`{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"a","labels":{"app":"ngnix"}}}`:              false,
		`{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"a"},"data":{"labels":"{\"app\":\"web\"}"}}`: false,
		`not JSON`: true,
	} {
		if got := pre([]byte(doc)); got != want {
			t.Errorf("prefilter(%s) = %v, want %v", doc, got, want)
		}
	}
	if sel, _ := newSelector(res, "", "metadata.name=a"); sel.prefilter() != nil {
		t.Error("a prefilter without a label selector")
	}
	custom := &registry.Resource{Kind: res.Kind, Unstructured: &registry.Unstructured{}}
	if sel, _ := newSelector(custom, "app=web", ""); sel.prefilter() != nil {
		t.Error("a prefilter for a custom resource, whose conversion may change labels")
	}
}
