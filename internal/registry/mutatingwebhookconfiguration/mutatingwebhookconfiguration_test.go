package mutatingwebhookconfiguration

import (
	"testing"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/svcnet/svcnet/internal/registry/registrytest"
)

// webhook is a valid webhook calling a service, before defaulting.
func webhook(name string) admissionregistrationv1.MutatingWebhook {
	return admissionregistrationv1.MutatingWebhook{
		Name: name,
		ClientConfig: admissionregistrationv1.WebhookClientConfig{
			Service: &admissionregistrationv1.ServiceReference{Namespace: "webhooks", Name: "label", Path: ptr.To("/mutate")},
		},
		Rules: []admissionregistrationv1.RuleWithOperations{{
			Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.OperationAll},
			Rule:       admissionregistrationv1.Rule{APIGroups: []string{"apps"}, APIVersions: []string{"v1"}, Resources: []string{"deployments", "deployments/scale"}},
		}},
		SideEffects:             ptr.To(admissionregistrationv1.SideEffectClassNoneOnDryRun),
		AdmissionReviewVersions: []string{"v1beta1", "v1"},
	}
}

func valid() *admissionregistrationv1.MutatingWebhookConfiguration {
	c := &admissionregistrationv1.MutatingWebhookConfiguration{
		ObjectMeta: metav1.ObjectMeta{Name: "label-deployments"},
		Webhooks:   []admissionregistrationv1.MutatingWebhook{webhook("label.example.com")},
	}
	strategy{}.Default(c)
	return c
}

func TestDefault(t *testing.T) {
	in := &admissionregistrationv1.MutatingWebhookConfiguration{Webhooks: []admissionregistrationv1.MutatingWebhook{webhook("label.example.com")}}
	want := in.DeepCopy()
	h := &want.Webhooks[0]
	h.FailurePolicy = ptr.To(admissionregistrationv1.Fail)
	h.MatchPolicy = ptr.To(admissionregistrationv1.Equivalent)
	h.NamespaceSelector = &metav1.LabelSelector{}
	h.ObjectSelector = &metav1.LabelSelector{}
	h.TimeoutSeconds = ptr.To[int32](10)
	h.ReinvocationPolicy = ptr.To(admissionregistrationv1.NeverReinvocationPolicy)
	h.ClientConfig.Service.Port = ptr.To[int32](443)
	h.Rules[0].Scope = ptr.To(admissionregistrationv1.AllScopes)

	set := valid()
	set.Webhooks[0].ReinvocationPolicy = ptr.To(admissionregistrationv1.IfNeededReinvocationPolicy)

	registrytest.RunDefault(t, strategy{}, []registrytest.DefaultCase[*admissionregistrationv1.MutatingWebhookConfiguration]{
		{Name: "unset", In: in, Want: want},
		{Name: "set", In: set, Want: set.DeepCopy()},
	})
}

func TestValidate(t *testing.T) {
	type c = *admissionregistrationv1.MutatingWebhookConfiguration
	registrytest.RunValidate(t, strategy{}, valid, []registrytest.Case[c]{
		{Name: "valid", Change: func(c) {}},
		{Name: "if needed", Change: func(c c) {
			c.Webhooks[0].ReinvocationPolicy = ptr.To(admissionregistrationv1.IfNeededReinvocationPolicy)
		}},
		{Name: "in order", Change: func(c c) {
			h := &c.Webhooks[0]
			h.Name = "label"
			h.TimeoutSeconds = ptr.To[int32](0)
			h.ReinvocationPolicy = ptr.To(admissionregistrationv1.ReinvocationPolicyType("Always"))
			h.ClientConfig.Service.Port = ptr.To[int32](70000)
			h.AdmissionReviewVersions = []string{"v1", "v1"}
		}, Want: []string{
			`webhooks[0].name: Invalid value: "label": should be a domain with at least three segments separated by dots`,
			"webhooks[0].timeoutSeconds: Invalid value: 0: the timeout value must be between 1 and 30 seconds",
			`webhooks[0].reinvocationPolicy: Unsupported value: "Always": supported values: "IfNeeded", "Never"`,
			"webhooks[0].clientConfig.service.port: Invalid value: 70000: port is not valid: must be between 1 and 65535, inclusive",
			`webhooks[0].admissionReviewVersions[1]: Invalid value: "v1": duplicate version`,
		}},
		{Name: "static name", Change: func(c c) { c.Name = "x.static.k8s.io" }, Want: []string{
			`metadata.name: Invalid value: "x.static.k8s.io": names ending with ".static.k8s.io" are reserved for static manifest-based configurations and cannot be managed via the API`,
		}},
	})
}

func TestValidateUpdate(t *testing.T) {
	type c = *admissionregistrationv1.MutatingWebhookConfiguration
	registrytest.RunValidateUpdate(t, strategy{}, valid, []registrytest.Case[c]{
		{Name: "stored side effects kept", Old: func(c c) { c.Webhooks[0].SideEffects = nil },
			Change: func(c c) { c.Webhooks[0].SideEffects = ptr.To(admissionregistrationv1.SideEffectClassUnknown) }},
		{Name: "side effects still required", Old: func(c c) { c.Webhooks[0].SideEffects = nil }, Change: func(c) {}, Want: []string{
			"webhooks[0].sideEffects: Required value: must specify one of None, NoneOnDryRun, Some, Unknown",
		}},
		{Name: "new duplicate name refused", Change: func(c c) { c.Webhooks = append(c.Webhooks, c.Webhooks[0]) }, Want: []string{
			`webhooks[1].name: Duplicate value: "label.example.com"`,
		}},
	})
}

func TestColumns(t *testing.T) {
	registrytest.ExpectRow(t, Resource().Columns, valid(), []string{"Name", "Webhooks", "Age"},
		[]interface{}{"label-deployments", int64(1), "<unknown>"})
}

func TestResource(t *testing.T) {
	r := Resource()
	if r.Resource != "mutatingwebhookconfigurations" || r.Namespaced || r.Status || !r.Generation ||
		r.Kind.String() != "admissionregistration.k8s.io/v1, Kind=MutatingWebhookConfiguration" {
		t.Errorf("unexpected discovery data: %+v", r)
	}
}
