package admissionwebhook

import (
	"testing"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/utils/ptr"
)

func TestUpdateOptions(t *testing.T) {
	none := ptr.To(admissionregistrationv1.SideEffectClassNone)
	strict := Webhook{Name: "a.example.com", SideEffects: none, AdmissionReviewVersions: []string{"v1"},
		MatchConditions: []admissionregistrationv1.MatchCondition{{Name: "c", Expression: "true"}}}
	if got, want := UpdateOptions([]Webhook{strict}, []Webhook{strict}), (Options{
		IgnoreMatchConditions: true, RequireNoSideEffects: true, RequireRecognizedAdmissionReviewVersion: true,
		RequireUniqueWebhookNames: true, StoredExpressions: sets.New("true"),
	}); !equalOptions(got, want) {
		t.Errorf("strict: %+v, want %+v", got, want)
	}

	loose := Webhook{Name: "a.example.com", SideEffects: ptr.To(admissionregistrationv1.SideEffectClassSome),
		AdmissionReviewVersions: []string{"v2"},
		ObjectSelector: &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{
			{Key: "k", Operator: metav1.LabelSelectorOpIn, Values: []string{"not valid"}}}}}
	if got, want := UpdateOptions([]Webhook{strict}, []Webhook{loose, loose}), (Options{
		AllowInvalidLabelValueInSelector: true, StoredExpressions: sets.New[string](),
	}); !equalOptions(got, want) {
		t.Errorf("loose: %+v, want %+v", got, want)
	}
}

func equalOptions(a, b Options) bool {
	return a.IgnoreMatchConditions == b.IgnoreMatchConditions && a.RequireNoSideEffects == b.RequireNoSideEffects &&
		a.RequireRecognizedAdmissionReviewVersion == b.RequireRecognizedAdmissionReviewVersion &&
		a.RequireUniqueWebhookNames == b.RequireUniqueWebhookNames &&
		a.AllowInvalidLabelValueInSelector == b.AllowInvalidLabelValueInSelector && a.StoredExpressions.Equal(b.StoredExpressions)
}

func TestDefaults(t *testing.T) {
	cc := admissionregistrationv1.WebhookClientConfig{Service: &admissionregistrationv1.ServiceReference{Name: "s", Namespace: "n"}}
	DefaultClientConfig(&cc)
	if p := cc.Service.Port; p == nil || *p != 443 {
		t.Errorf("port %v, want 443", p)
	}
	url := admissionregistrationv1.WebhookClientConfig{URL: ptr.To("https://example.com")}
	DefaultClientConfig(&url)
	if url.Service != nil {
		t.Error("defaulting invented a service")
	}
	rules := []admissionregistrationv1.RuleWithOperations{{}, {Rule: admissionregistrationv1.Rule{Scope: ptr.To(admissionregistrationv1.ClusterScope)}}}
	DefaultRules(rules)
	if *rules[0].Scope != "*" || *rules[1].Scope != "Cluster" {
		t.Errorf("scopes %q %q, want * Cluster", *rules[0].Scope, *rules[1].Scope)
	}
}
