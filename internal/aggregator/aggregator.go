// Package aggregator is kube-aggregator's part of the API server: an
// APIService that names a Service hands its group version to the server
// behind that Service (an extension API server such as upstream's
// sample-apiserver or metrics-server).
//
//   - Proxy: a request under /apis/<group>/<version> of such an
//     APIService, once authenticated and authorized by svcnet, goes to a
//     ready endpoint of the Service over TLS, verified against the
//     APIService's caBundle for the name <service>.<namespace>.svc,
//     presenting the front-proxy client certificate, with the user in
//     X-Remote-User, X-Remote-Uid, X-Remote-Group and X-Remote-Extra-*
//     (the request header authentication the extension server reads from
//     kube-system/extension-apiserver-authentication). While the
//     APIService is not Available the answer is 503 "service unavailable".
//   - Availability: upstream's remote availability controller sets the
//     Available condition: ServiceNotFound, ServicePortError,
//     EndpointsNotFound, MissingEndpoints or FailedDiscoveryCheck with
//     upstream's messages, else Passed, "all checks passed". Each
//     APIService is checked when it, its Service or the Service's
//     EndpointSlices change, and every 30 seconds.
//   - Discovery: the group versions of such APIServices join /apis (plain
//     and aggregated), and /apis/<group>; each version's resources are
//     those the server listed at its last successful check (Stale once a
//     check fails).
//
// Not done: the extension servers' OpenAPI documents are not merged into
// /openapi/v2 and /openapi/v3.
package aggregator

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"net"
	"net/http"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	apidiscoveryv2 "k8s.io/api/apidiscovery/v2"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apimachinery/pkg/version"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	discoverylisters "k8s.io/client-go/listers/discovery/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"
	apiregistrationv1 "k8s.io/kube-aggregator/pkg/apis/apiregistration/v1"
	aggregatorclient "k8s.io/kube-aggregator/pkg/client/clientset_generated/clientset"
	aggregatorinformers "k8s.io/kube-aggregator/pkg/client/informers/externalversions"
	listers "k8s.io/kube-aggregator/pkg/client/listers/apiregistration/v1"

	"github.com/svcnet/svcnet/internal/controller"
)

// Dialer connects to a ready endpoint of a Service's port.
type Dialer func(ctx context.Context, namespace, name string, port int32) (net.Conn, error)

// Config assembles an Aggregator.
type Config struct {
	// Client and Kube reach the API server (its loopback).
	Client aggregatorclient.Interface
	Kube   kubernetes.Interface
	// Dial reaches a Service's endpoints (the API server's DialService).
	Dial Dialer
	// ProxyClientCert is the front-proxy client certificate presented to
	// extension servers.
	ProxyClientCert tls.Certificate
	// Metrics exports the availability queue's metrics.
	Metrics *controller.Metrics
}

// Aggregator proxies to the APIServices that name a Service and keeps
// their availability and discovery.
type Aggregator struct {
	cfg         Config
	factories   []interface{ Start(<-chan struct{}) }
	shutdown    []func()
	apiServices listers.APIServiceLister
	services    corelisters.ServiceLister
	slices      discoverylisters.EndpointSliceLister
	synced      []cache.InformerSynced
	queue       *controller.Queue[string]

	mu       sync.RWMutex
	backends map[string]*backend // by APIService name
}

// backend is what the proxy and discovery know of one APIService that
// names a Service. It is not changed once stored: setBackend stores a new
// one, so a request holds a consistent view.
type backend struct {
	spec      apiregistrationv1.APIServiceSpec
	available bool
	transport *http.Transport
	// resources are the version's resources as the server listed them at
	// the last check that reached it; fresh says whether the latest did.
	resources []apidiscoveryv2.APIResourceDiscovery
	fresh     bool
}

// New builds the aggregator; Run starts it.
func New(cfg Config) (*Aggregator, error) {
	af := aggregatorinformers.NewSharedInformerFactory(cfg.Client, 0)
	kf := informers.NewSharedInformerFactory(cfg.Kube, 0)
	a := &Aggregator{
		cfg:         cfg,
		factories:   []interface{ Start(<-chan struct{}) }{af, kf},
		shutdown:    []func(){af.Shutdown, kf.Shutdown},
		apiServices: af.Apiregistration().V1().APIServices().Lister(),
		services:    kf.Core().V1().Services().Lister(),
		slices:      kf.Discovery().V1().EndpointSlices().Lister(),
		backends:    map[string]*backend{},
	}
	a.queue = controller.NewQueue(cfg.Metrics, controller.QueueConfig[string]{
		Name: "RemoteAvailability", Sync: a.sync,
		// As upstream's: a failing check is tried again soon, and at
		// least every 30 seconds.
		RateLimiter: workqueue.NewTypedItemExponentialFailureRateLimiter[string](5*time.Millisecond, 30*time.Second),
	})
	synced, err := a.watch(af, kf)
	if err != nil {
		return nil, err
	}
	a.synced = synced
	return a, nil
}

// Run starts the informers and checks availability until ctx ends.
func (a *Aggregator) Run(ctx context.Context) {
	for _, f := range a.factories {
		f.Start(ctx.Done())
	}
	defer func() {
		for _, stop := range a.shutdown {
			stop()
		}
	}()
	var wg sync.WaitGroup
	defer wg.Wait()
	wg.Go(func() { wait.UntilWithContext(ctx, a.resync, resyncPeriod) })
	a.queue.Run(ctx, 2, a.synced...)
}

// resync queues every APIService; Run calls it every resyncPeriod.
func (a *Aggregator) resync(ctx context.Context) {
	all, err := a.apiServices.List(labels.Everything())
	if err != nil {
		return
	}
	for _, s := range all {
		a.queue.Add(s.Name)
	}
}

// resyncPeriod is how often every APIService is checked again (upstream:
// 30 seconds).
const resyncPeriod = 30 * time.Second

// backendFor is the backend serving version.group, nil for none.
func (a *Aggregator) backendFor(group, version string) *backend {
	a.mu.RLock()
	defer a.mu.RUnlock()
	return a.backends[version+"."+group]
}

// setBackend stores the backend of an APIService with spec, a copy of
// the stored one changed by update (nil: none), with a new transport when
// the spec changed, and returns it; a spec without a Service forgets it.
func (a *Aggregator) setBackend(name string, spec *apiregistrationv1.APIServiceSpec, update func(b *backend)) (*backend, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	old := a.backends[name]
	if spec == nil || spec.Service == nil {
		if old != nil {
			old.transport.CloseIdleConnections()
			delete(a.backends, name)
		}
		return nil, nil
	}
	var b backend
	if old != nil && reflect.DeepEqual(old.spec, *spec) {
		b = *old
	} else {
		t, err := a.transport(spec)
		if err != nil {
			return nil, err
		}
		if old != nil {
			old.transport.CloseIdleConnections()
		}
		b = backend{spec: *spec.DeepCopy(), transport: t}
	}
	if update != nil {
		update(&b)
	}
	a.backends[name] = &b
	return &b, nil
}

// transport reaches the APIService's Service as upstream's
// BuildTransportConfig: the caBundle (or no verification when
// insecureSkipTLSVerify), the server name <service>.<namespace>.svc, the
// front-proxy client certificate.
func (a *Aggregator) transport(spec *apiregistrationv1.APIServiceSpec) (*http.Transport, error) {
	svc := spec.Service
	tc := &tls.Config{
		ServerName:         svc.Name + "." + svc.Namespace + ".svc",
		InsecureSkipVerify: spec.InsecureSkipTLSVerify, //nolint:gosec // the APIService asks for it
		Certificates:       []tls.Certificate{a.cfg.ProxyClientCert},
		MinVersion:         tls.VersionTLS12,
	}
	if len(spec.CABundle) > 0 {
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(spec.CABundle) {
			return nil, errors.New("unable to load root certificates: no valid certificate authority data")
		}
		tc.RootCAs = pool
	}
	port := int32(443)
	if svc.Port != nil {
		port = *svc.Port
	}
	return &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			return a.cfg.Dial(ctx, svc.Namespace, svc.Name, port)
		},
		TLSClientConfig:     tc,
		TLSHandshakeTimeout: 10 * time.Second,
		IdleConnTimeout:     90 * time.Second,
		MaxIdleConnsPerHost: 25,
	}, nil
}

// serviceHost is the host of the URLs sent to an APIService's Service
// (the connection goes where Dial takes it).
func serviceHost(s *apiregistrationv1.ServiceReference) string {
	port := int32(443)
	if s.Port != nil {
		port = *s.Port
	}
	return net.JoinHostPort(s.Name+"."+s.Namespace+".svc", strconv.Itoa(int(port)))
}

// Groups is the discovery of the aggregated group versions, a group's
// versions in upstream's order (highest versionPriority first, then by
// kube-aware version), groups by their highest groupPriorityMinimum.
func (a *Aggregator) Groups() []apidiscoveryv2.APIGroupDiscovery {
	a.mu.RLock()
	type entry struct {
		spec apiregistrationv1.APIServiceSpec
		vd   apidiscoveryv2.APIVersionDiscovery
	}
	byGroup := map[string][]entry{}
	for _, b := range a.backends {
		freshness := apidiscoveryv2.DiscoveryFreshnessCurrent
		if !b.fresh {
			freshness = apidiscoveryv2.DiscoveryFreshnessStale
		}
		byGroup[b.spec.Group] = append(byGroup[b.spec.Group], entry{b.spec, apidiscoveryv2.APIVersionDiscovery{
			Version: b.spec.Version, Resources: b.resources, Freshness: freshness}})
	}
	a.mu.RUnlock()
	var out []apidiscoveryv2.APIGroupDiscovery
	priority := map[string]int32{}
	for group, entries := range byGroup {
		slices.SortFunc(entries, func(x, y entry) int { return compareVersions(x.spec, y.spec) })
		g := apidiscoveryv2.APIGroupDiscovery{}
		g.Name = group
		for _, e := range entries {
			g.Versions = append(g.Versions, e.vd)
			priority[group] = max(priority[group], e.spec.GroupPriorityMinimum)
		}
		out = append(out, g)
	}
	slices.SortFunc(out, func(x, y apidiscoveryv2.APIGroupDiscovery) int {
		if p, q := priority[x.Name], priority[y.Name]; p != q {
			return int(q - p)
		}
		return strings.Compare(x.Name, y.Name)
	})
	return out
}

// compareVersions orders a group's versions as upstream's
// SortedByGroupAndVersion: higher versionPriority first, then the
// kube-aware version order (v2 before v1 before v1beta1).
func compareVersions(x, y apiregistrationv1.APIServiceSpec) int {
	if x.VersionPriority != y.VersionPriority {
		return int(y.VersionPriority - x.VersionPriority)
	}
	return -version.CompareKubeAwareVersionStrings(x.Version, y.Version)
}
