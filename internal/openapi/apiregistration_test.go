package openapi

import "testing"

// TestAPIRegistration serves APIServices, whose types hack/update-openapi.sh
// generates from k8s.io/kube-aggregator/pkg/apis/apiregistration/v1, under
// kube-apiserver's model names.
func TestAPIRegistration(t *testing.T) {
	s, err := New([]Resource{{GVK: gvk("apiregistration.k8s.io", "v1", "APIService"), Plural: "apiservices", Subresources: []string{"status"}}})
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	doc, _ := v3Doc(t, s, "apis/apiregistration.k8s.io/v1")
	const model = "io.k8s.kube-aggregator.pkg.apis.apiregistration.v1."
	want := []any{map[string]any{"group": "apiregistration.k8s.io", "version": "v1", "kind": "APIService"}}
	if got := dig(t, doc, "components", "schemas", model+"APIService", extensionGVK); !equalJSON(got, want) {
		t.Errorf("APIService %s = %v, want %v", extensionGVK, got, want)
	}
	dig(t, doc, "components", "schemas", model+"APIServiceSpec", "properties", "groupPriorityMinimum")
	dig(t, doc, "components", "schemas", model+"ServiceReference", "properties", "port")
	dig(t, doc, "components", "schemas", model+"APIServiceCondition", "properties", "reason")
	dig(t, doc, "paths", "/apis/apiregistration.k8s.io/v1/apiservices/{name}/status", "put")
	dig(t, doc, "paths", "/apis/apiregistration.k8s.io/v1/apiservices", "get")
}
