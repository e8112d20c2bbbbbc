package cluster

import (
	"context"
	"errors"
	"fmt"
	"net"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/restmapper"
	"k8s.io/client-go/tools/cache"

	"github.com/svcnet/svcnet/internal/admission"
	"github.com/svcnet/svcnet/internal/admission/adapter"
	"github.com/svcnet/svcnet/internal/admission/noderestriction"
	"github.com/svcnet/svcnet/internal/admission/policy"
	"github.com/svcnet/svcnet/internal/admission/priority"
	"github.com/svcnet/svcnet/internal/admission/resourcequota"
	"github.com/svcnet/svcnet/internal/admission/runtimeclass"
	"github.com/svcnet/svcnet/internal/admission/webhook"
	"github.com/svcnet/svcnet/internal/auth/authn"
	"github.com/svcnet/svcnet/internal/auth/authz"
	"github.com/svcnet/svcnet/internal/auth/bootstrappolicy"
	"github.com/svcnet/svcnet/internal/auth/bootstraptoken"
	"github.com/svcnet/svcnet/internal/auth/nodeauthorizer"
	"github.com/svcnet/svcnet/internal/auth/rbac"
	"github.com/svcnet/svcnet/internal/auth/serviceaccount"
	saregistry "github.com/svcnet/svcnet/internal/registry/serviceaccount"
)

// Authorization modes, as kube-apiserver's --authorization-mode.
const (
	AuthorizationNode        = "Node"
	AuthorizationRBAC        = "RBAC"
	AuthorizationAlwaysAllow = "AlwaysAllow"
)

// DefaultAuthorizationModes are kubeadm's: the Node authorizer, then RBAC.
var DefaultAuthorizationModes = []string{AuthorizationNode, AuthorizationRBAC}

// apiAuth is who the API server lets do what: client certificates,
// bootstrap tokens (--enable-bootstrap-token-auth) and service account
// tokens authenticate; system:masters, then the modes'
// authorizers, authorize. The RBAC policy and the objects tokens name are
// read through informers on the server's loopback, as upstream's. With
// the Node authorizer comes the NodeRestriction admission plugin (as
// kubeadm enables both).
type apiAuth struct {
	factory   informers.SharedInformerFactory
	rbac      *rbac.Authorizer
	chain     authz.Authorizer
	admission admission.Plugin
	authn     *authn.Authenticator
	tokens    *saregistry.Tokens
	objects   *serviceaccount.Cached
	key       *serviceaccount.Key
	// listed are the informers whose lists start waits for.
	listed []cache.SharedIndexInformer
	// policies judge writes by the admission policies; stop ends them.
	policies *policy.Policies
	stop     chan struct{}
	// dialService reaches a Service's endpoint for the admission
	// webhooks: the API server's, set once it is built.
	dialService func(ctx context.Context, namespace, name string, port int32) (net.Conn, error)
}

func newAPIAuth(caDir string, modes []string, bootstrapTokens bool, loopbackConfig *rest.Config, loopback kubernetes.Interface) (*apiAuth, error) {
	key, err := serviceaccount.LoadOrCreateKey(caDir)
	if err != nil {
		return nil, err
	}
	factory := informers.NewSharedInformerFactory(loopback, 0)
	p := factory.Rbac().V1()
	a := &apiAuth{
		factory: factory, key: key,
		rbac: rbac.New(rbac.Listers{Roles: p.Roles().Lister(), RoleBindings: p.RoleBindings().Lister(),
			ClusterRoles: p.ClusterRoles().Lister(), ClusterRoleBindings: p.ClusterRoleBindings().Lister()}),
		objects: serviceaccount.NewCached(loopback, factory),
	}
	chain := authz.Union{authz.PrivilegedGroups{user.SystemPrivilegedGroup}}
	// As kube-apiserver's default plugins, in its order: the built-in
	// ones (NodeRestriction with the Node authorizer, Priority,
	// RuntimeClass), then the admission policies and webhooks, then
	// ResourceQuota.
	var plugins admission.Chain
	nodeRestriction := false
	if len(modes) == 0 {
		modes = DefaultAuthorizationModes
	}
	for _, m := range modes {
		switch m {
		case AuthorizationNode:
			core := factory.Core().V1()
			pods := core.Pods().Informer()
			if err := pods.AddIndexers(nodeauthorizer.Indexers); err != nil {
				return nil, fmt.Errorf("node authorizer: %w", err)
			}
			claims := core.PersistentVolumeClaims()
			pcrs := factory.Certificates().V1().PodCertificateRequests()
			a.listed = append(a.listed, claims.Informer(), pcrs.Informer())
			chain = append(chain, &nodeauthorizer.Authorizer{Pods: pods.GetIndexer(),
				Claims: claims.Lister(), PodCertificateRequests: pcrs.Lister(), Rules: bootstrappolicy.NodeRules()})
			nodeRestriction = true
		case AuthorizationRBAC:
			chain = append(chain, a.rbac)
		case AuthorizationAlwaysAllow:
			chain = append(chain, authz.AlwaysAllow{})
		default:
			return nil, fmt.Errorf("--authorization-mode %q: want %s, %s or %s", m, AuthorizationNode, AuthorizationRBAC, AuthorizationAlwaysAllow)
		}
	}
	a.chain = chain
	if nodeRestriction {
		// It asks the whole chain, as upstream's asks its unconditional
		// authorizer.
		core := factory.Core().V1()
		plugins = append(plugins, noderestriction.New(core.Pods().Lister(), core.Nodes().Lister(), core.ServiceAccounts().Lister(), chain))
	}
	// The PriorityClasses are listed before the bootstrap writes the
	// system ones, which the first pods name.
	priorityClasses := factory.Scheduling().V1().PriorityClasses()
	a.listed = append(a.listed, priorityClasses.Informer())
	plugins = append(plugins, priority.New(priorityClasses.Lister(), loopback))
	classes := factory.Node().V1().RuntimeClasses()
	a.listed = append(a.listed, classes.Informer())
	plugins = append(plugins, runtimeclass.New(classes.Lister(), loopback))
	dyn, err := dynamic.NewForConfig(loopbackConfig)
	if err != nil {
		return nil, fmt.Errorf("admission policies' client: %w", err)
	}
	a.stop = make(chan struct{})
	a.policies, err = policy.New(policy.Config{Client: loopback, Dynamic: dyn, Informers: factory,
		RESTMapper: restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(loopback.Discovery())),
		Authorizer: adapter.Authorizer{Authorizer: chain}, Stop: a.stop})
	if err != nil {
		return nil, err
	}
	hooks, err := webhook.New(webhook.Config{Client: loopback, Informers: factory, DialService: a.dial})
	if err != nil {
		return nil, err
	}
	quotas, err := resourcequota.New(resourcequota.Config{Client: loopback, Informers: factory, Stop: a.stop})
	if err != nil {
		return nil, err
	}
	a.listed = append(a.listed, a.policies.Informers...)
	a.listed = append(a.listed, hooks.Informers...)
	a.listed = append(a.listed, quotas.Informer)
	// Upstream's order: the mutating policies before the mutating
	// webhooks, the validating policies after the validating webhooks,
	// the quotas last.
	a.admission = append(plugins, mutatingFirst{a.policies}, hooks, validatingLast{a.policies}, quotas)
	audiences := []string{serviceaccount.DefaultIssuer}
	a.tokens = &saregistry.Tokens{Issuer: &serviceaccount.Issuer{Key: key, Issuer: serviceaccount.DefaultIssuer},
		Audiences: audiences, Objects: a.objects}
	// Bound tokens, the legacy tokens of service account token Secrets,
	// then bootstrap tokens (when enabled), as upstream's chain; each
	// token's answer is cached.
	tokens := []authn.TokenAuthenticator{
		&serviceaccount.Authenticator{Issuer: serviceaccount.DefaultIssuer, Key: key, Audiences: audiences, Objects: a.objects},
		&serviceaccount.LegacyAuthenticator{Key: key, Audiences: audiences, Objects: a.objects},
	}
	if bootstrapTokens {
		tokens = append(tokens, &bootstraptoken.Authenticator{Audiences: audiences,
			Secrets: factory.Core().V1().Secrets().Lister().Secrets(metav1.NamespaceSystem)})
	}
	for i, t := range tokens {
		tokens[i] = &authn.Cached{TTL: authn.DefaultTokenCacheTTL, Next: t}
	}
	a.authn = &authn.Authenticator{Tokens: tokens}
	return a, nil
}

// dial reaches a Service's endpoint for a webhook (admission, or a custom
// resource's conversion), through the API server once it is built.
func (a *apiAuth) dial(ctx context.Context, namespace, name string, port int32) (net.Conn, error) {
	return a.dialService(ctx, namespace, name, port)
}

// mutatingFirst is a plugin's mutating half alone; validatingLast its
// validating half alone.
type (
	mutatingFirst  struct{ admission.Mutator }
	validatingLast struct{ admission.Plugin }
)

func (mutatingFirst) Validate(context.Context, *admission.Attributes) error { return nil }

// shutdown stops the informers and the admission policies' plugins.
func (a *apiAuth) shutdown() {
	close(a.stop)
	a.factory.Shutdown()
}

// start runs the informers until ctx ends and waits for their lists, all
// but the Secrets': Cached reads a Secret its cache lacks through the API,
// and Secrets the server cannot decrypt (encryption at rest without their
// key) fail that list until the key is back, while everything else must
// still be served, as upstream's API server does.
func (a *apiAuth) start(ctx, wait context.Context) error {
	p, core := a.factory.Rbac().V1(), a.factory.Core().V1()
	informers := []cache.SharedIndexInformer{p.Roles().Informer(), p.RoleBindings().Informer(), p.ClusterRoles().Informer(),
		p.ClusterRoleBindings().Informer(), core.ServiceAccounts().Informer(), core.Pods().Informer(), core.Nodes().Informer()}
	informers = append(informers, a.listed...)
	a.factory.Start(ctx.Done())
	for _, inf := range informers {
		if !cache.WaitForCacheSync(wait.Done(), inf.HasSynced) {
			return fmt.Errorf("list for authentication and authorization: %w", wait.Err())
		}
	}
	// The policies compile once listed; writes would wait for them.
	if !a.policies.WaitForReady() {
		return errors.New("admission policies not compiled in time")
	}
	return nil
}
