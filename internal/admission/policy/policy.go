// Package policy judges writes by the cluster's admission policies, the
// ValidatingAdmissionPolicies and MutatingAdmissionPolicies with their
// bindings, with upstream's own plugins (k8s.io/apiserver's
// ValidatingAdmissionPolicy and MutatingAdmissionPolicy): the matching,
// the CEL expressions and their variables (object, oldObject, params,
// request, namespaceObject, authorizer), the mutations applied, the
// validation actions and the messages of a refusal are theirs.
package policy

import (
	"context"
	"fmt"

	"k8s.io/apimachinery/pkg/api/meta"
	k8sadmission "k8s.io/apiserver/pkg/admission"
	"k8s.io/apiserver/pkg/admission/plugin/policy/mutating"
	"k8s.io/apiserver/pkg/admission/plugin/policy/validating"
	"k8s.io/apiserver/pkg/authorization/authorizer"
	utilfeature "k8s.io/apiserver/pkg/util/feature"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"

	"github.com/svcnet/svcnet/internal/admission"
	"github.com/svcnet/svcnet/internal/admission/adapter"
)

// Config is what the policies are judged with.
type Config struct {
	// Client reads namespaces the informers lack and the OpenAPI schemas
	// mutations are applied by; Dynamic reads policies' params.
	Client  kubernetes.Interface
	Dynamic dynamic.Interface
	// Informers watch the policies, bindings and namespaces; the caller
	// starts them.
	Informers  informers.SharedInformerFactory
	RESTMapper meta.RESTMapper
	Authorizer authorizer.UnconditionalAuthorizer
	// Stop ends the plugins' compilers and watches of params.
	Stop <-chan struct{}
}

// Policies is the validating and the mutating admission policy plugin.
type Policies struct {
	validating *validating.Plugin
	mutating   *mutating.Plugin
	// Informers are the informers the plugins read.
	Informers []cache.SharedIndexInformer
}

// New makes both plugins.
func New(cfg Config) (*Policies, error) {
	v, err := validating.NewPlugin(nil)
	if err != nil {
		return nil, fmt.Errorf("validating admission policy: %w", err)
	}
	m, err := mutating.NewPlugin(nil)
	if err != nil {
		return nil, fmt.Errorf("mutating admission policy: %w", err)
	}
	m.InspectFeatureGates(utilfeature.DefaultFeatureGate)
	for _, p := range []interface {
		SetExternalKubeInformerFactory(informers.SharedInformerFactory)
		SetExternalKubeClientSet(kubernetes.Interface)
		SetDynamicClient(dynamic.Interface)
		SetRESTMapper(meta.RESTMapper)
		SetDrainedNotification(<-chan struct{})
		SetUnconditionalAuthorizer(authorizer.UnconditionalAuthorizer)
		ValidateInitialization() error
	}{v, m} {
		p.SetExternalKubeInformerFactory(cfg.Informers)
		p.SetExternalKubeClientSet(cfg.Client)
		p.SetDynamicClient(cfg.Dynamic)
		p.SetRESTMapper(cfg.RESTMapper)
		p.SetDrainedNotification(cfg.Stop)
		p.SetUnconditionalAuthorizer(cfg.Authorizer)
		if err := p.ValidateInitialization(); err != nil {
			return nil, fmt.Errorf("admission policies: %w", err)
		}
	}
	r := cfg.Informers.Admissionregistration().V1()
	return &Policies{validating: v, mutating: m, Informers: []cache.SharedIndexInformer{
		r.ValidatingAdmissionPolicies().Informer(), r.ValidatingAdmissionPolicyBindings().Informer(),
		r.MutatingAdmissionPolicies().Informer(), r.MutatingAdmissionPolicyBindings().Informer(),
		cfg.Informers.Core().V1().Namespaces().Informer(),
	}}, nil
}

// Admit implements admission.Mutator: the mutating policies, which may
// change a.Object.
func (p *Policies) Admit(ctx context.Context, a *admission.Attributes) error {
	if !p.mutating.Handles(k8sadmission.Operation(a.Operation)) {
		return nil
	}
	return p.mutating.Admit(ctx, adapter.Attributes(a), adapter.Objects)
}

// Validate implements admission.Plugin: the validating policies.
func (p *Policies) Validate(ctx context.Context, a *admission.Attributes) error {
	return p.validating.Validate(ctx, adapter.Attributes(a), adapter.Objects)
}

// WaitForReady waits (a while) until both plugins have read and compiled
// the policies; false if they have not.
func (p *Policies) WaitForReady() bool {
	return p.validating.WaitForReady() && p.mutating.WaitForReady()
}
