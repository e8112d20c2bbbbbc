// Package webhook calls the cluster's admission webhooks (the
// MutatingWebhookConfigurations and ValidatingWebhookConfigurations) with
// upstream's own plugins, k8s.io/apiserver's MutatingAdmissionWebhook and
// ValidatingAdmissionWebhook: which hooks match a request (rules,
// namespace and object selectors, match conditions), the AdmissionReview
// sent, the patches applied, the failure policy and the errors a refusal
// or a failed call gives are theirs. A webhook behind a Service is dialled
// through Config.DialService (the cluster's pods are reached through their
// node's agent); one at a URL is dialled directly.
package webhook

import (
	"context"
	"fmt"
	"net"

	k8sadmission "k8s.io/apiserver/pkg/admission"
	"k8s.io/apiserver/pkg/admission/plugin/webhook/mutating"
	"k8s.io/apiserver/pkg/admission/plugin/webhook/validating"
	webhookutil "k8s.io/apiserver/pkg/util/webhook"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"

	"github.com/svcnet/svcnet/internal/admission"
	"github.com/svcnet/svcnet/internal/admission/adapter"
)

// Config is what the webhooks are called with.
type Config struct {
	// Client reads namespaces the informers do not have yet.
	Client kubernetes.Interface
	// Informers watch the webhook configurations and namespaces; the
	// caller starts them (Webhooks.Informers are the ones to wait for).
	Informers informers.SharedInformerFactory
	// DialService connects to a ready endpoint of the Service's port.
	DialService func(ctx context.Context, namespace, name string, port int32) (net.Conn, error)
}

// Webhooks is the mutating and the validating admission webhook plugin.
type Webhooks struct {
	mutating   *mutating.Plugin
	validating *validating.Plugin
	// Informers are the informers the plugins read.
	Informers []cache.SharedIndexInformer
}

// New makes both plugins, reading their configurations from cfg's
// informers.
func New(cfg Config) (*Webhooks, error) {
	m, err := mutating.NewMutatingWebhook(nil)
	if err != nil {
		return nil, fmt.Errorf("mutating admission webhook: %w", err)
	}
	v, err := validating.NewValidatingAdmissionWebhook(nil)
	if err != nil {
		return nil, fmt.Errorf("validating admission webhook: %w", err)
	}
	for _, p := range []interface {
		SetExternalKubeClientSet(kubernetes.Interface)
		SetExternalKubeInformerFactory(informers.SharedInformerFactory)
		SetAuthenticationInfoResolverWrapper(webhookutil.AuthenticationInfoResolverWrapper)
		ValidateInitialization() error
	}{m, v} {
		p.SetExternalKubeClientSet(cfg.Client)
		p.SetExternalKubeInformerFactory(cfg.Informers)
		p.SetAuthenticationInfoResolverWrapper(ServiceDialing(cfg.DialService))
		if err := p.ValidateInitialization(); err != nil {
			return nil, fmt.Errorf("admission webhooks: %w", err)
		}
	}
	r := cfg.Informers.Admissionregistration().V1()
	return &Webhooks{mutating: m, validating: v, Informers: []cache.SharedIndexInformer{
		r.MutatingWebhookConfigurations().Informer(), r.ValidatingWebhookConfigurations().Informer(),
		cfg.Informers.Core().V1().Namespaces().Informer(),
	}}, nil
}

// ServiceDialing makes a webhook behind a Service (an admission webhook,
// or a custom resource definition's conversion webhook) dial through
// dial, whatever address its client asks for (the Service's DNS name).
func ServiceDialing(dial func(ctx context.Context, namespace, name string, port int32) (net.Conn, error)) webhookutil.AuthenticationInfoResolverWrapper {
	return func(next webhookutil.AuthenticationInfoResolver) webhookutil.AuthenticationInfoResolver {
		return &webhookutil.AuthenticationInfoResolverDelegator{
			ClientConfigForFunc: next.ClientConfigFor,
			ClientConfigForServiceFunc: func(name, namespace string, port int) (*rest.Config, error) {
				cfg, err := next.ClientConfigForService(name, namespace, port)
				if err != nil {
					return nil, err
				}
				cfg = rest.CopyConfig(cfg)
				cfg.Dial = func(ctx context.Context, _, _ string) (net.Conn, error) {
					return dial(ctx, namespace, name, int32(port))
				}
				return cfg, nil
			},
		}
	}
}

// Admit implements admission.Mutator: the mutating webhooks, which may
// change a.Object.
func (w *Webhooks) Admit(ctx context.Context, a *admission.Attributes) error {
	if !w.mutating.Handles(k8sadmission.Operation(a.Operation)) {
		return nil
	}
	return w.mutating.Admit(ctx, adapter.Attributes(a), adapter.Objects)
}

// Validate implements admission.Plugin: the validating webhooks.
func (w *Webhooks) Validate(ctx context.Context, a *admission.Attributes) error {
	return w.validating.Validate(ctx, adapter.Attributes(a), adapter.Objects)
}
