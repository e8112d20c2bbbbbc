package openapi

import "testing"

// TestAdmissionRegistration serves the webhook configurations and the
// admission policies with their bindings, whose types
// hack/update-openapi.sh generates from k8s.io/api/admissionregistration/v1.
func TestAdmissionRegistration(t *testing.T) {
	const group = "admissionregistration.k8s.io"
	s, err := New([]Resource{
		{GVK: gvk(group, "v1", "ValidatingWebhookConfiguration"), Plural: "validatingwebhookconfigurations"},
		{GVK: gvk(group, "v1", "MutatingWebhookConfiguration"), Plural: "mutatingwebhookconfigurations"},
		{GVK: gvk(group, "v1", "ValidatingAdmissionPolicy"), Plural: "validatingadmissionpolicies", Subresources: []string{"status"}},
		{GVK: gvk(group, "v1", "ValidatingAdmissionPolicyBinding"), Plural: "validatingadmissionpolicybindings"},
		{GVK: gvk(group, "v1", "MutatingAdmissionPolicy"), Plural: "mutatingadmissionpolicies"},
		{GVK: gvk(group, "v1", "MutatingAdmissionPolicyBinding"), Plural: "mutatingadmissionpolicybindings"},
	})
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	doc, _ := v3Doc(t, s, "apis/admissionregistration.k8s.io/v1")
	for _, kind := range []string{"ValidatingWebhookConfiguration", "MutatingWebhookConfiguration",
		"ValidatingAdmissionPolicy", "ValidatingAdmissionPolicyBinding", "MutatingAdmissionPolicy", "MutatingAdmissionPolicyBinding"} {
		want := []any{map[string]any{"group": group, "version": "v1", "kind": kind}}
		if got := dig(t, doc, "components", "schemas", "io.k8s.api.admissionregistration.v1."+kind, extensionGVK); !equalJSON(got, want) {
			t.Errorf("%s %s = %v, want %v", kind, extensionGVK, got, want)
		}
	}
	dig(t, doc, "components", "schemas", "io.k8s.api.admissionregistration.v1.MutatingWebhook", "properties", "reinvocationPolicy")
	dig(t, doc, "components", "schemas", "io.k8s.api.admissionregistration.v1.ValidatingAdmissionPolicyStatus", "properties", "typeChecking")
	dig(t, doc, "components", "schemas", "io.k8s.api.admissionregistration.v1.Mutation", "properties", "applyConfiguration")
	dig(t, doc, "paths", "/apis/admissionregistration.k8s.io/v1/validatingwebhookconfigurations/{name}", "patch")
	dig(t, doc, "paths", "/apis/admissionregistration.k8s.io/v1/mutatingwebhookconfigurations", "get")
	dig(t, doc, "paths", "/apis/admissionregistration.k8s.io/v1/validatingadmissionpolicies/{name}/status", "put")
	dig(t, doc, "paths", "/apis/admissionregistration.k8s.io/v1/validatingadmissionpolicybindings", "post")
	dig(t, doc, "paths", "/apis/admissionregistration.k8s.io/v1/mutatingadmissionpolicies/{name}", "delete")
	dig(t, doc, "paths", "/apis/admissionregistration.k8s.io/v1/mutatingadmissionpolicybindings", "get")
}
