package openapi

import "testing"

// TestFlowControlAndStorageMigration serves the flowcontrol and
// storagemigration kinds, whose types hack/update-openapi.sh generates from
// k8s.io/api/flowcontrol/v1 and k8s.io/api/storagemigration/v1.
func TestFlowControlAndStorageMigration(t *testing.T) {
	s, err := New([]Resource{
		{GVK: gvk("flowcontrol.apiserver.k8s.io", "v1", "FlowSchema"), Plural: "flowschemas", Subresources: []string{"status"}},
		{GVK: gvk("flowcontrol.apiserver.k8s.io", "v1", "PriorityLevelConfiguration"), Plural: "prioritylevelconfigurations", Subresources: []string{"status"}},
		{GVK: gvk("storagemigration.k8s.io", "v1", "StorageVersionMigration"), Plural: "storageversionmigrations", Subresources: []string{"status"}},
	})
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	doc, _ := v3Doc(t, s, "apis/flowcontrol.apiserver.k8s.io/v1")
	want := []any{map[string]any{"group": "flowcontrol.apiserver.k8s.io", "version": "v1", "kind": "FlowSchema"}}
	if got := dig(t, doc, "components", "schemas", "io.k8s.api.flowcontrol.v1.FlowSchema", extensionGVK); !equalJSON(got, want) {
		t.Errorf("FlowSchema %s = %v, want %v", extensionGVK, got, want)
	}
	dig(t, doc, "components", "schemas", "io.k8s.api.flowcontrol.v1.QueuingConfiguration", "properties", "handSize")
	dig(t, doc, "paths", "/apis/flowcontrol.apiserver.k8s.io/v1/prioritylevelconfigurations/{name}/status", "put")
	doc, _ = v3Doc(t, s, "apis/storagemigration.k8s.io/v1")
	dig(t, doc, "components", "schemas", "io.k8s.api.storagemigration.v1.StorageVersionMigrationSpec", "properties", "resource")
	dig(t, doc, "paths", "/apis/storagemigration.k8s.io/v1/storageversionmigrations/{name}/status", "patch")
}
