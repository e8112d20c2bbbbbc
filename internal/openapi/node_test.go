package openapi

import "testing"

// TestNode serves RuntimeClasses, whose types hack/update-openapi.sh
// generates from k8s.io/api/node/v1.
func TestNode(t *testing.T) {
	s, err := New([]Resource{{GVK: gvk("node.k8s.io", "v1", "RuntimeClass"), Plural: "runtimeclasses"}})
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	doc, _ := v3Doc(t, s, "apis/node.k8s.io/v1")
	want := []any{map[string]any{"group": "node.k8s.io", "version": "v1", "kind": "RuntimeClass"}}
	if got := dig(t, doc, "components", "schemas", "io.k8s.api.node.v1.RuntimeClass", extensionGVK); !equalJSON(got, want) {
		t.Errorf("RuntimeClass %s = %v, want %v", extensionGVK, got, want)
	}
	dig(t, doc, "components", "schemas", "io.k8s.api.node.v1.Scheduling", "properties", "tolerations")
	dig(t, doc, "components", "schemas", "io.k8s.api.node.v1.Overhead", "properties", "podFixed")
	dig(t, doc, "paths", "/apis/node.k8s.io/v1/runtimeclasses/{name}", "patch")
	dig(t, doc, "paths", "/apis/node.k8s.io/v1/runtimeclasses", "get")
}
