package openapi

import "testing"

// TestAdmissionRegistration serves the webhook configurations, whose
// types hack/update-openapi.sh generates from k8s.io/api/admissionregistration/v1.
func TestAdmissionRegistration(t *testing.T) {
	s, err := New([]Resource{
		{GVK: gvk("admissionregistration.k8s.io", "v1", "ValidatingWebhookConfiguration"), Plural: "validatingwebhookconfigurations"},
		{GVK: gvk("admissionregistration.k8s.io", "v1", "MutatingWebhookConfiguration"), Plural: "mutatingwebhookconfigurations"},
	})
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	doc, _ := v3Doc(t, s, "apis/admissionregistration.k8s.io/v1")
	for _, kind := range []string{"ValidatingWebhookConfiguration", "MutatingWebhookConfiguration"} {
		want := []any{map[string]any{"group": "admissionregistration.k8s.io", "version": "v1", "kind": kind}}
		if got := dig(t, doc, "components", "schemas", "io.k8s.api.admissionregistration.v1."+kind, extensionGVK); !equalJSON(got, want) {
			t.Errorf("%s %s = %v, want %v", kind, extensionGVK, got, want)
		}
	}
	dig(t, doc, "components", "schemas", "io.k8s.api.admissionregistration.v1.MutatingWebhook", "properties", "reinvocationPolicy")
	dig(t, doc, "paths", "/apis/admissionregistration.k8s.io/v1/validatingwebhookconfigurations/{name}", "patch")
	dig(t, doc, "paths", "/apis/admissionregistration.k8s.io/v1/mutatingwebhookconfigurations", "get")
}
