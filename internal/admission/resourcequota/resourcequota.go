// Package resourcequota enforces the cluster's ResourceQuotas on writes
// with upstream's own plugin, k8s.io/apiserver's ResourceQuota admission:
// a create or update in a namespace is charged to every quota it matches,
// refused (403, "exceeded quota: ...") when that would pass a hard limit
// or (for pods) when a limited resource is not set, and the quotas'
// status.used is raised in the same step, as kube-apiserver does. What
// an object uses is the evaluators' of internal/quota.
package resourcequota

import (
	"context"
	"fmt"

	k8sadmission "k8s.io/apiserver/pkg/admission"
	k8squota "k8s.io/apiserver/pkg/admission/plugin/resourcequota"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"

	"github.com/svcnet/svcnet/internal/admission"
	"github.com/svcnet/svcnet/internal/admission/adapter"
	"github.com/svcnet/svcnet/internal/quota"
)

// evaluators is how many namespaces' writes are judged at once, as
// kube-apiserver's.
const evaluators = 5

// Config is what the quotas are enforced with.
type Config struct {
	// Client writes the quotas' status and reads them while the
	// informer has not listed them yet.
	Client kubernetes.Interface
	// Informers watch the ResourceQuotas; the caller starts them.
	Informers informers.SharedInformerFactory
	// Stop ends the plugin's workers.
	Stop <-chan struct{}
}

// Quotas is the ResourceQuota admission plugin.
type Quotas struct {
	plugin *k8squota.QuotaAdmission
	// Informer is the informer the plugin reads.
	Informer cache.SharedIndexInformer
}

// New makes the plugin, with kube-apiserver's default configuration (no
// resource limited unless a quota names it).
func New(cfg Config) (*Quotas, error) {
	p, err := k8squota.NewResourceQuota(nil, evaluators)
	if err != nil {
		return nil, fmt.Errorf("resource quota admission: %w", err)
	}
	p.SetDrainedNotification(cfg.Stop)
	p.SetExternalKubeClientSet(cfg.Client)
	p.SetExternalKubeInformerFactory(cfg.Informers)
	p.SetQuotaConfiguration(quota.NewAdmissionConfiguration())
	if err := p.ValidateInitialization(); err != nil {
		return nil, fmt.Errorf("resource quota admission: %w", err)
	}
	return &Quotas{plugin: p, Informer: cfg.Informers.Core().V1().ResourceQuotas().Informer()}, nil
}

// Validate implements admission.Plugin.
func (q *Quotas) Validate(ctx context.Context, a *admission.Attributes) error {
	if !q.plugin.Handles(k8sadmission.Operation(a.Operation)) {
		return nil
	}
	return q.plugin.Validate(ctx, adapter.Attributes(a), adapter.Objects)
}
