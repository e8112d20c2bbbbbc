// Package dns is svcnet's cluster DNS, what CoreDNS with the kubernetes,
// forward, cache, health, ready and prometheus plugins is to a Kubernetes
// cluster: client-go informers on Namespaces, Services and EndpointSlices
// feed the record index (records), the server (server) answers on port 53,
// UDP and TCP, and forwards other names upstream (forward). It runs as the
// coredns pods of kube-system, behind the kube-dns Service (svcnet's
// built-in coredns image, configured by the coredns ConfigMap's Corefile,
// read by corefile), so that it is published, scheduled and replaced as
// any pod. Everything it knows comes from the API server; a change to an
// EndpointSlice is in the answers as soon as the watch delivers it.
package dns

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"

	"github.com/svcnet/svcnet/internal/dns/forward"
	"github.com/svcnet/svcnet/internal/dns/hosts"
	"github.com/svcnet/svcnet/internal/dns/records"
	"github.com/svcnet/svcnet/internal/dns/server"
	"github.com/svcnet/svcnet/internal/informer"
)

// Config configures a cluster DNS server.
type Config struct {
	// Client reads the cluster's Services and endpoints for the records
	// of Zone; nil serves no cluster domain (a Corefile without the
	// kubernetes plugin).
	Client kubernetes.Interface
	// Zone is the cluster domain (cluster.local); TTL the answers' TTL
	// (default 5, CoreDNS's).
	Zone string
	TTL  uint32
	// NameServers answer ns.dns.<zone>: the kube-dns Service's cluster IP.
	NameServers []netip.Addr
	// Address is host:port the server answers on, UDP and TCP (":53").
	Address string
	// Upstreams are the resolvers for other names, host:port.
	Upstreams []string
	// CacheTTL caps how long forwarded answers are kept (0: their TTL).
	CacheTTL time.Duration
	// Hosts answers the names it holds before anything else.
	Hosts *hosts.Table
	// Health, Ready and Metrics are the listen addresses of the HTTP
	// servers of CoreDNS's health (/health), ready (/ready) and prometheus
	// (/metrics) plugins; empty serves none. Lameduck keeps /health
	// answering that long after ctx ends, while queries are still served.
	Health, Ready, Metrics string
	Lameduck               time.Duration
}

// Run serves cluster DNS until ctx ends.
func Run(ctx context.Context, c Config) error {
	if c.TTL == 0 {
		c.TTL = 5
	}
	var ix *records.Index
	if c.Client != nil {
		ix = records.New(records.Config{Zone: c.Zone, TTL: c.TTL, NameServers: c.NameServers})
	}
	reg := prometheus.NewRegistry()
	fwd, err := forward.New(forward.Config{Upstreams: c.Upstreams, Registerer: reg, MaxTTL: c.CacheTTL})
	if err != nil {
		return err
	}
	srv, err := server.New(c.Hosts, ix, fwd, reg)
	if err != nil {
		return err
	}

	var closers []func() error
	closeAll := func() {
		for _, f := range closers {
			_ = f()
		}
	}
	pc, err := net.ListenPacket("udp", c.Address)
	if err != nil {
		return fmt.Errorf("listen for DNS on udp %s: %w", c.Address, err)
	}
	closers = append(closers, pc.Close)
	ln, err := net.Listen("tcp", c.Address)
	if err != nil {
		closeAll()
		return fmt.Errorf("listen for DNS on tcp %s: %w", c.Address, err)
	}
	closers = append(closers, ln.Close)
	var synced atomic.Bool
	var https []*http.Server
	var httpListeners []net.Listener
	for _, s := range []struct {
		addr, path string
		h          http.Handler
	}{
		{c.Health, "/health", okHandler(func() bool { return true })},
		{c.Ready, "/ready", okHandler(synced.Load)},
		{c.Metrics, "/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{})},
	} {
		if s.addr == "" {
			continue
		}
		l, err := net.Listen("tcp", s.addr)
		if err != nil {
			closeAll()
			return fmt.Errorf("listen for %s on %s: %w", s.path, s.addr, err)
		}
		closers = append(closers, l.Close)
		mux := http.NewServeMux()
		mux.Handle(s.path, s.h)
		https = append(https, &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second})
		httpListeners = append(httpListeners, l)
	}

	var informersSynced []cache.InformerSynced
	if ix != nil {
		factory := informers.NewSharedInformerFactory(c.Client, 0)
		if informersSynced, err = feed(ix, factory); err != nil {
			closeAll()
			return err
		}
		factory.Start(ctx.Done())
		defer factory.Shutdown()
	}

	// Queries go on during the lame duck period after ctx ends.
	serveCtx, stopServing := context.WithCancel(context.WithoutCancel(ctx))
	defer stopServing()
	var wg sync.WaitGroup
	errc := make(chan error, 1+len(https))
	wg.Go(func() { fwd.Run(serveCtx) })
	wg.Go(func() {
		if err := srv.Serve(serveCtx, pc, ln); err != nil {
			errc <- err
			stopServing()
		}
	})
	for i, h := range https {
		wg.Go(func() {
			if err := h.Serve(httpListeners[i]); err != nil && !errors.Is(err, http.ErrServerClosed) {
				errc <- fmt.Errorf("serve %s: %w", httpListeners[i].Addr(), err)
				stopServing()
			}
		})
	}
	// Until the caches are filled the server would deny names that
	// exist: it serves, but reports ready only once synced.
	if cache.WaitForCacheSync(ctx.Done(), informersSynced...) {
		synced.Store(true)
		slog.Info("cluster DNS serving", "address", c.Address, "zone", c.Zone, "upstreams", c.Upstreams)
	}
	select {
	case <-ctx.Done():
		if c.Lameduck > 0 {
			select {
			case <-time.After(c.Lameduck):
			case <-serveCtx.Done():
			}
		}
	case <-serveCtx.Done():
	}
	stopServing()
	for _, h := range https {
		_ = h.Close()
	}
	wg.Wait()
	select {
	case err := <-errc:
		return err
	default:
		return nil
	}
}

// okHandler answers 200 OK while ok holds, else 503.
func okHandler(ok func() bool) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		if !ok() {
			http.Error(w, "not ready", http.StatusServiceUnavailable)
			return
		}
		_, _ = w.Write([]byte("OK"))
	})
}

// feed keeps the index in step with the informers' objects.
func feed(ix *records.Index, f informers.SharedInformerFactory) ([]cache.InformerSynced, error) {
	return informer.Register(
		informer.Handler{Informer: f.Core().V1().Namespaces().Informer(), Handler: handlers(
			func(ns *corev1.Namespace) { ix.SetNamespace(ns.Name) },
			func(ns *corev1.Namespace) { ix.DeleteNamespace(ns.Name) })},
		informer.Handler{Informer: f.Core().V1().Services().Informer(), Handler: handlers(
			ix.SetService,
			func(s *corev1.Service) { ix.DeleteService(s.Namespace, s.Name) })},
		informer.Handler{Informer: f.Discovery().V1().EndpointSlices().Informer(), Handler: handlers(
			ix.SetEndpointSlice,
			func(es *discoveryv1.EndpointSlice) { ix.DeleteEndpointSlice(es.Namespace, es.Name) })},
	)
}

// handlers calls set on adds and updates and del on deletes.
func handlers[T any](set, del func(T)) cache.ResourceEventHandler {
	return cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { call(set, obj) },
		UpdateFunc: func(_, obj any) { call(set, obj) },
		DeleteFunc: func(obj any) { call(del, obj) },
	}
}

func call[T any](f func(T), obj any) {
	if o, ok := informer.Object[T](obj); ok {
		f(o)
	}
}
