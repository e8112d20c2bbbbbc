// Package apiserver serves the Kubernetes REST API over the resources of
// internal/registry, storing objects in etcd through internal/storage: the
// verbs (get, list, watch, create, update, patch, delete, deletecollection),
// status and scale subresources, server-side apply, tables for kubectl,
// discovery and OpenAPI, with upstream's status codes and messages. kubectl
// and client-go talk to it as to kube-apiserver.
package apiserver

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"

	apidiscoveryv2 "k8s.io/api/apidiscovery/v2"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/version"
	"k8s.io/apiserver/pkg/authentication/user"

	"github.com/svcnet/svcnet/internal/admission"
	"github.com/svcnet/svcnet/internal/auth/authn"
	"github.com/svcnet/svcnet/internal/auth/authz"
	"github.com/svcnet/svcnet/internal/auth/serviceaccount"
	"github.com/svcnet/svcnet/internal/httpserve"
	"github.com/svcnet/svcnet/internal/registry"
	"github.com/svcnet/svcnet/internal/storage"
)

// maxBodyBytes is upstream's limit on a request body (3 MiB).
const maxBodyBytes = 3 * 1024 * 1024

// Config assembles a Server.
type Config struct {
	Store     *storage.Store
	Resources *registry.Set
	// OpenAPI serves /openapi/v2 and /openapi/v3...; nil answers 404.
	OpenAPI http.Handler
	Version version.Info
	// KubeletTLS holds the client certificate for node agents (pods/log).
	KubeletTLS *tls.Config
	// Authenticator names the user of each request; nil authenticates
	// client certificates and takes other requests as anonymous.
	Authenticator *authn.Authenticator
	// Authorizer decides on each authenticated request; nil allows
	// everything (upstream's AlwaysAllow).
	Authorizer authz.Authorizer
	// Loopback, if set, reaches this server once built.
	Loopback *Loopback
	// Issuer serves the service account issuer's OpenID discovery
	// document and keys; nil answers 404.
	Issuer http.Handler
	// Admission, if set, may refuse each write before it is stored.
	Admission admission.Plugin
	// Aggregator, if set, serves the group versions of APIServices that
	// name a Service.
	Aggregator Aggregator
	// Pages, if set, serves the paths under PagesPrefix (svcnet's own
	// pages, such as the topology page) to authorized requests, whose
	// context holds the user; nil answers 404.
	Pages http.Handler
}

// PagesPrefix is the path under which Config.Pages serves, and
// TopologyPath the topology page's path, listed at the root.
const (
	PagesPrefix  = "/svcnet/"
	TopologyPath = PagesPrefix + "topology/"
)

// Aggregator is kube-aggregator's part of the server (internal/aggregator).
type Aggregator interface {
	// ServeHTTP proxies an authorized request of user u whose path lies
	// under an aggregated group version, reporting whether it did.
	ServeHTTP(w http.ResponseWriter, r *http.Request, u user.Info) bool
	// Groups is the discovery of the aggregated group versions.
	Groups() []apidiscoveryv2.APIGroupDiscovery
}

// Server is the API server's HTTP handler and write path.
type Server struct {
	store      *storage.Store
	resources  *registry.Set
	namespaces *registry.Resource
	fields     *fieldManagers
	openapi    http.Handler
	version    version.Info
	metrics    *metrics
	discovery  discoveryCache
	kubeletTLS *tls.Config
	kubelet    *http.Client
	authn      *authn.Authenticator
	authz      authz.Authorizer
	issuer     http.Handler
	admission  admission.Plugin
	aggregator Aggregator
	pages      http.Handler
}

// New builds a Server. The resource set must include namespaces.
func New(c Config) (*Server, error) {
	ns := c.Resources.ByGVR(corev1.SchemeGroupVersion.WithResource("namespaces"))
	if ns == nil {
		return nil, errors.New("the resource set lacks namespaces")
	}
	s := &Server{
		store:      c.Store,
		resources:  c.Resources,
		namespaces: ns,
		fields:     newFieldManagers(c.Resources),
		openapi:    c.OpenAPI,
		version:    c.Version,
		metrics:    newMetrics(),
		kubeletTLS: kubeletTLS(c.KubeletTLS),
		authn:      c.Authenticator,
		authz:      c.Authorizer,
		issuer:     c.Issuer,
		admission:  c.Admission,
		aggregator: c.Aggregator,
		pages:      c.Pages,
	}
	s.kubelet = &http.Client{Transport: &http.Transport{TLSClientConfig: s.kubeletTLS}}
	if s.authn == nil {
		s.authn = &authn.Authenticator{}
	}
	if c.Loopback != nil {
		c.Loopback.serve(s)
	}
	return s, nil
}

// Bootstrap creates the namespaces every cluster starts with.
func (s *Server) Bootstrap(ctx context.Context) error {
	for _, name := range []string{metav1.NamespaceDefault, metav1.NamespaceSystem, metav1.NamespacePublic, corev1.NamespaceNodeLease} {
		ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}
		_, err := s.create(ctx, s.namespaces, "", ns, writeOptions{manager: "svcnet-apiserver"})
		if err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("create namespace %s: %w", name, err)
		}
	}
	return nil
}

// Serve answers HTTPS on every listener until ctx ends, then shuts down
// gracefully; a listener that fails stops the others.
// Clients must present a certificate signed by clientCA except for the
// health endpoints.
func (s *Server) Serve(ctx context.Context, tlsConfig *tls.Config, lns ...net.Listener) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	errs := make([]error, len(lns))
	var wg sync.WaitGroup
	for i, ln := range lns {
		wg.Go(func() {
			if err := httpserve.ServeTLS(ctx, ln, s.Handler(), tlsConfig, 5*time.Second); err != nil {
				errs[i] = fmt.Errorf("serve API on %s: %w", ln.Addr(), err)
				cancel() // one listener failing stops them all
			}
		})
	}
	wg.Wait()
	return errors.Join(errs...)
}

// Handler is the full handler: authentication, metrics, authorization,
// then routing.
func (s *Server) Handler() http.Handler {
	return s.metrics.instrument(http.HandlerFunc(s.authenticate))
}

// authenticate names the request's user (401 when its credentials are
// refused), or the user it may impersonate, and passes it on to be
// authorized.
func (s *Server) authenticate(w http.ResponseWriter, r *http.Request) {
	u, err := s.authn.Authenticate(r)
	if err != nil {
		writeJSON(w, http.StatusUnauthorized, &metav1.Status{
			Status: metav1.StatusFailure, Message: "Unauthorized", Reason: metav1.StatusReasonUnauthorized, Code: http.StatusUnauthorized,
		})
		return
	}
	// As upstream's authentication filter: the credentials go no
	// further than here (a proxied pod would see them).
	r.Header.Del("Authorization")
	if u, err = s.impersonate(r, u); err != nil {
		writeError(w, r, err)
		return
	}
	s.authorize(w, r.WithContext(authn.WithUser(r.Context(), u)))
}

// authorize asks the authorizer about the request of the user in its
// context, answering upstream's 403 for what it does not allow, before
// the request is routed: a path the server does not serve is refused to
// whoever may not see it, and found missing only for those who may.
func (s *Server) authorize(w http.ResponseWriter, r *http.Request) {
	if s.authz != nil {
		u, _ := authn.UserFrom(r.Context())
		a := authz.RequestAttributes(r, u)
		d, reason, err := s.authz.Authorize(r.Context(), a)
		if d != authz.Allow {
			if err != nil {
				slog.Error("Authorization error", "user", u.GetName(), "verb", a.Verb, "path", r.URL.Path, "err", err)
			}
			writeError(w, r, authz.Forbidden(a, reason))
			return
		}
	}
	s.ServeHTTP(w, r)
}

// ServeHTTP routes a request that has been authenticated.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	p := r.URL.Path
	switch {
	case p == "/healthz" || p == "/livez" || p == "/readyz" || strings.HasPrefix(p, "/healthz/") || strings.HasPrefix(p, "/livez/") || strings.HasPrefix(p, "/readyz/"):
		s.health(w, r)
		return
	case p == "/metrics":
		s.metrics.ServeHTTP(w, r)
		return
	case p == "/version" || p == "/version/":
		writeRawJSON(w, http.StatusOK, s.version)
		return
	case (p == serviceaccount.OpenIDConfigurationPath || p == serviceaccount.JWKSPath) && s.issuer != nil:
		s.issuer.ServeHTTP(w, r)
		return
	case strings.HasPrefix(p, "/openapi/"):
		if s.openapi != nil {
			s.openapi.ServeHTTP(w, r)
			return
		}
	case strings.HasPrefix(p, PagesPrefix) && s.pages != nil:
		s.pages.ServeHTTP(w, r)
		return
	case p == "/":
		paths := s.discovery.get(s.resources).paths()
		if s.pages != nil {
			paths = withPath(paths, TopologyPath)
		}
		writeRawJSON(w, http.StatusOK, map[string][]string{"paths": paths})
		return
	}
	var aggregated []apidiscoveryv2.APIGroupDiscovery
	if s.aggregator != nil {
		u, _ := authn.UserFrom(r.Context())
		if s.aggregator.ServeHTTP(w, r, u) {
			return
		}
		aggregated = s.aggregator.Groups()
	}
	if s.discovery.get(s.resources).serve(w, r, aggregated) {
		return
	}
	ri, ok := s.resolve(r)
	if !ok {
		s.notFound(w, r)
		return
	}
	setRequestLabels(r, ri)
	s.serveResource(w, r, ri)
}

func (s *Server) health(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := context.WithTimeout(r.Context(), 2*time.Second)
	defer cancel()
	if _, err := s.store.Revision(ctx); err != nil {
		http.Error(w, "[-]etcd failed: "+err.Error(), http.StatusInternalServerError)
		return
	}
	// A full etcd still reads: ready is what takes writes.
	if r.URL.Path == "/readyz" || strings.HasPrefix(r.URL.Path, "/readyz/") {
		if err := storage.NoSpace(ctx, s.store.Client); err != nil {
			http.Error(w, "[-]etcd failed: "+err.Error(), http.StatusInternalServerError)
			return
		}
	}
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	_, _ = w.Write([]byte("ok"))
}
