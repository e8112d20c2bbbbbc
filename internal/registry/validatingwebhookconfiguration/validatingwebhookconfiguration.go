// Package validatingwebhookconfiguration is the admissionregistration.k8s.io/v1
// ValidatingWebhookConfiguration strategy: upstream's webhook defaults,
// its validation (shared with MutatingWebhookConfiguration in
// internal/registry/admissionwebhook) and the WEBHOOKS column. Calling the
// webhooks is the API server's admission, not this package's.
package validatingwebhookconfiguration

import (
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/utils/ptr"

	"github.com/svcnet/svcnet/internal/registry"
	"github.com/svcnet/svcnet/internal/registry/admissionwebhook"
)

// Resource describes validatingwebhookconfigurations.
func Resource() *registry.Resource {
	return &registry.Resource{
		Kind:       admissionregistrationv1.SchemeGroupVersion.WithKind("ValidatingWebhookConfiguration"),
		Resource:   "validatingwebhookconfigurations",
		Singular:   "validatingwebhookconfiguration",
		Categories: []string{"api-extensions"},
		// Upstream starts at generation 1 and bumps it when the webhooks
		// change.
		Generation: true,
		Strategy:   strategy{},
		Columns: []registry.Column{
			registry.NameColumn(),
			{TableColumnDefinition: metav1.TableColumnDefinition{Name: "Webhooks", Type: "integer",
				Description: "Webhooks indicates the number of webhooks registered in this configuration"},
				Cell: func(o runtime.Object) interface{} {
					return int64(len(o.(*admissionregistrationv1.ValidatingWebhookConfiguration).Webhooks))
				}},
			registry.AgeColumn(),
		},
	}
}

type strategy struct{ registry.Base }

// Default follows upstream's SetObjectDefaults_ValidatingWebhookConfiguration.
func (strategy) Default(obj runtime.Object) {
	c := obj.(*admissionregistrationv1.ValidatingWebhookConfiguration)
	for i := range c.Webhooks {
		h := &c.Webhooks[i]
		if h.FailurePolicy == nil {
			h.FailurePolicy = ptr.To(admissionregistrationv1.Fail)
		}
		if h.MatchPolicy == nil {
			h.MatchPolicy = ptr.To(admissionregistrationv1.Equivalent)
		}
		if h.NamespaceSelector == nil {
			h.NamespaceSelector = &metav1.LabelSelector{}
		}
		if h.ObjectSelector == nil {
			h.ObjectSelector = &metav1.LabelSelector{}
		}
		if h.TimeoutSeconds == nil {
			h.TimeoutSeconds = ptr.To[int32](10)
		}
		admissionwebhook.DefaultClientConfig(&h.ClientConfig)
		admissionwebhook.DefaultRules(h.Rules)
	}
}

func (strategy) Validate(obj runtime.Object) field.ErrorList {
	c := obj.(*admissionregistrationv1.ValidatingWebhookConfiguration)
	errs := admissionwebhook.Validate(webhooks(c.Webhooks), admissionwebhook.CreateOptions())
	return append(errs, admissionwebhook.ValidateName(c.Name)...)
}

// ValidateUpdate relaxes what the stored configuration already broke, as
// upstream's ValidateValidatingWebhookConfigurationUpdate.
func (strategy) ValidateUpdate(obj, old runtime.Object) field.ErrorList {
	hooks := webhooks(obj.(*admissionregistrationv1.ValidatingWebhookConfiguration).Webhooks)
	oldHooks := webhooks(old.(*admissionregistrationv1.ValidatingWebhookConfiguration).Webhooks)
	return admissionwebhook.Validate(hooks, admissionwebhook.UpdateOptions(hooks, oldHooks))
}

// webhooks returns the shared view of validating webhooks.
func webhooks(in []admissionregistrationv1.ValidatingWebhook) []admissionwebhook.Webhook {
	out := make([]admissionwebhook.Webhook, len(in))
	for i, h := range in {
		out[i] = admissionwebhook.Webhook{
			Name:                    h.Name,
			ClientConfig:            h.ClientConfig,
			Rules:                   h.Rules,
			FailurePolicy:           h.FailurePolicy,
			MatchPolicy:             h.MatchPolicy,
			NamespaceSelector:       h.NamespaceSelector,
			ObjectSelector:          h.ObjectSelector,
			SideEffects:             h.SideEffects,
			TimeoutSeconds:          h.TimeoutSeconds,
			AdmissionReviewVersions: h.AdmissionReviewVersions,
			MatchConditions:         h.MatchConditions,
		}
	}
	return out
}
