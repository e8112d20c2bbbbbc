package openapi

import "testing"

// TestScheduling serves PriorityClasses, whose types hack/update-openapi.sh
// generates from k8s.io/api/scheduling/v1.
func TestScheduling(t *testing.T) {
	s, err := New([]Resource{{GVK: gvk("scheduling.k8s.io", "v1", "PriorityClass"), Plural: "priorityclasses"}})
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	doc, _ := v3Doc(t, s, "apis/scheduling.k8s.io/v1")
	want := []any{map[string]any{"group": "scheduling.k8s.io", "version": "v1", "kind": "PriorityClass"}}
	if got := dig(t, doc, "components", "schemas", "io.k8s.api.scheduling.v1.PriorityClass", extensionGVK); !equalJSON(got, want) {
		t.Errorf("PriorityClass %s = %v, want %v", extensionGVK, got, want)
	}
	dig(t, doc, "components", "schemas", "io.k8s.api.scheduling.v1.PriorityClass", "properties", "preemptionPolicy")
	dig(t, doc, "paths", "/apis/scheduling.k8s.io/v1/priorityclasses/{name}", "delete")
	dig(t, doc, "paths", "/apis/scheduling.k8s.io/v1/priorityclasses", "get")
}
