// Package all lists every resource svcnet serves; the API server is built
// from this set.
package all

import (
	"k8s.io/client-go/kubernetes"

	"github.com/svcnet/svcnet/internal/allocator"
	"github.com/svcnet/svcnet/internal/auth/authn"
	"github.com/svcnet/svcnet/internal/auth/authz"
	"github.com/svcnet/svcnet/internal/auth/rbac"
	"github.com/svcnet/svcnet/internal/registry"
	"github.com/svcnet/svcnet/internal/registry/metrics"
	"github.com/svcnet/svcnet/internal/registry/pod"
	"github.com/svcnet/svcnet/internal/registry/serviceaccount"
)

// Deps are what some kinds need of the rest of the API server.
type Deps struct {
	// Services are allocated from these ranges.
	Services allocator.Services
	// Authorizer is the whole authorization chain, which answers the
	// access reviews and the escalation check's "escalate" and "bind".
	Authorizer authz.Authorizer
	// RBAC resolves the rules a user holds (rules reviews, escalation).
	RBAC *rbac.Authorizer
	// Tokens issues service account tokens; ServiceAccounts finds pods'
	// service accounts for their admission.
	Tokens          *serviceaccount.Tokens
	ServiceAccounts pod.ServiceAccounts
	// Authenticator answers TokenReviews.
	Authenticator authn.TokenAuthenticator
	// Client is the API server's own loopback client, through which
	// pods/eviction reads budgets and deletes pods, and new Ingresses find
	// the default IngressClass.
	Client kubernetes.Interface
	// Metrics, when set, is served as metrics.k8s.io.
	Metrics metrics.Source
}

// evictions serves pods/eviction when there is a loopback client.
func evictions(d Deps) *pod.Evictions {
	if d.Client == nil {
		return nil
	}
	return &pod.Evictions{Client: d.Client}
}

// Resources returns fresh descriptors of every served resource.
func Resources(d Deps) []*registry.Resource {
	out := append(core(d), groups(d)...)
	out = append(out, batch()...)
	out = append(out, certificates(d)...)
	out = append(out, apiextensions()...)
	out = append(out, admissionregistration(d)...)
	out = append(out, nodeGroup()...)
	out = append(out, scheduling()...)
	out = append(out, resourceGroup()...)
	out = append(out, eventsGroup()...)
	out = append(out, apiregistration()...)
	out = append(out, flowcontrol()...)
	out = append(out, storagemigration()...)
	if d.Metrics != nil {
		out = append(out, metrics.Resources(d.Metrics)...)
	}
	return append(out, auth(d)...)
}

// Set indexes Resources for the API server.
func Set(d Deps) (*registry.Set, error) {
	return registry.NewSet(Resources(d)...)
}
