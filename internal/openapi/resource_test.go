package openapi

import "testing"

// TestResourceGroup serves the five kinds of resource.k8s.io/v1, whose
// types hack/update-openapi.sh generates from k8s.io/api/resource/v1.
func TestResourceGroup(t *testing.T) {
	s, err := New([]Resource{
		{GVK: gvk("resource.k8s.io", "v1", "DeviceClass"), Plural: "deviceclasses"},
		{GVK: gvk("resource.k8s.io", "v1", "ResourceClaim"), Plural: "resourceclaims", Namespaced: true, Subresources: []string{"status"}},
		{GVK: gvk("resource.k8s.io", "v1", "ResourceClaimTemplate"), Plural: "resourceclaimtemplates", Namespaced: true},
		{GVK: gvk("resource.k8s.io", "v1", "ResourceSlice"), Plural: "resourceslices"},
		{GVK: gvk("resource.k8s.io", "v1", "DeviceTaintRule"), Plural: "devicetaintrules", Subresources: []string{"status"}},
	})
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	doc, _ := v3Doc(t, s, "apis/resource.k8s.io/v1")
	want := []any{map[string]any{"group": "resource.k8s.io", "version": "v1", "kind": "ResourceClaim"}}
	if got := dig(t, doc, "components", "schemas", "io.k8s.api.resource.v1.ResourceClaim", extensionGVK); !equalJSON(got, want) {
		t.Errorf("ResourceClaim %s = %v, want %v", extensionGVK, got, want)
	}
	dig(t, doc, "components", "schemas", "io.k8s.api.resource.v1.ExactDeviceRequest", "properties", "allocationMode")
	dig(t, doc, "components", "schemas", "io.k8s.api.resource.v1.DeviceTaint", "properties", "timeAdded")
	dig(t, doc, "paths", "/apis/resource.k8s.io/v1/namespaces/{namespace}/resourceclaims/{name}/status", "patch")
	dig(t, doc, "paths", "/apis/resource.k8s.io/v1/devicetaintrules/{name}/status", "put")
	dig(t, doc, "paths", "/apis/resource.k8s.io/v1/resourceslices", "get")
	dig(t, doc, "paths", "/apis/resource.k8s.io/v1/deviceclasses/{name}", "delete")
	dig(t, doc, "paths", "/apis/resource.k8s.io/v1/namespaces/{namespace}/resourceclaimtemplates", "post")
}
