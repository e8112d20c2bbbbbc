// Package dns is a node's cluster DNS, what CoreDNS with the kubernetes,
// forward and cache plugins is to a Kubernetes cluster: client-go
// informers on Namespaces, Services and EndpointSlices feed the record
// index (records), the server (server) answers on the node's pod bridge
// address, port 53, UDP and TCP, and forwards other names upstream
// (forward), the node's address is listed behind the kube-dns Service
// (publish), and metrics are served on port 9153 of the same address.
// Everything it knows comes from the API server; a change to an
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
	"strconv"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"

	"github.com/svcnet/svcnet/internal/controller"
	"github.com/svcnet/svcnet/internal/dns/forward"
	"github.com/svcnet/svcnet/internal/dns/publish"
	"github.com/svcnet/svcnet/internal/dns/records"
	"github.com/svcnet/svcnet/internal/dns/server"
)

// Config configures a node's cluster DNS.
type Config struct {
	Client   kubernetes.Interface
	NodeName string
	// Zone is the cluster domain (cluster.local).
	Zone string
	// ServiceIP is the kube-dns Service's cluster IP (10.96.0.10).
	ServiceIP string
	// Address is where the server listens: the node's pod bridge address.
	Address netip.Addr
	// Port and MetricsPort default to 53 and 9153.
	Port, MetricsPort int
	// Upstreams are the resolvers for other names, host or host:port.
	Upstreams []string
	// Listen and ListenPacket open the server's sockets, and Dial the
	// connections to the upstreams: in the node's network namespace.
	Listen       func(network, address string) (net.Listener, error)
	ListenPacket func(network, address string) (net.PacketConn, error)
	Dial         func(ctx context.Context, network, address string) (net.Conn, error)
	// Publish lists the address behind the kube-dns Service.
	Publish bool
}

// ttl is the TTL of cluster answers, CoreDNS's default.
const ttl = 5

// Run serves cluster DNS until ctx ends.
func Run(ctx context.Context, c Config) error {
	if c.Port == 0 {
		c.Port = publish.DNSPort
	}
	if c.MetricsPort == 0 {
		c.MetricsPort = publish.MetricsPort
	}
	var nameServers []netip.Addr
	if ip, err := netip.ParseAddr(c.ServiceIP); err == nil {
		nameServers = append(nameServers, ip)
	}
	ix := records.New(records.Config{Zone: c.Zone, TTL: ttl, NameServers: nameServers})
	reg := prometheus.NewRegistry()
	upstreams := make([]string, len(c.Upstreams))
	for i, u := range c.Upstreams {
		upstreams[i] = withPort(u)
	}
	fwd, err := forward.New(forward.Config{Upstreams: upstreams, Dial: c.Dial, Registerer: reg})
	if err != nil {
		return err
	}
	srv, err := server.New(ix, fwd, reg)
	if err != nil {
		return err
	}

	addr := net.JoinHostPort(c.Address.String(), strconv.Itoa(c.Port))
	pc, err := c.ListenPacket("udp", addr)
	if err != nil {
		return fmt.Errorf("listen for DNS on udp %s: %w", addr, err)
	}
	ln, err := c.Listen("tcp", addr)
	if err != nil {
		pc.Close()
		return fmt.Errorf("listen for DNS on tcp %s: %w", addr, err)
	}
	metricsAddr := net.JoinHostPort(c.Address.String(), strconv.Itoa(c.MetricsPort))
	mln, err := c.Listen("tcp", metricsAddr)
	if err != nil {
		pc.Close()
		ln.Close()
		return fmt.Errorf("listen for DNS metrics on %s: %w", metricsAddr, err)
	}

	factory := informers.NewSharedInformerFactory(c.Client, 0)
	synced, err := feed(ix, factory)
	if err != nil {
		pc.Close()
		ln.Close()
		mln.Close()
		return err
	}
	factory.Start(ctx.Done())
	defer factory.Shutdown()

	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var wg sync.WaitGroup
	errc := make(chan error, 2)
	wg.Go(func() { fwd.Run(ctx) })
	// Until the caches are filled the server would deny names that exist:
	// serve, but publish the address only once synced.
	wg.Go(func() {
		if err := srv.Serve(ctx, pc, ln); err != nil {
			errc <- err
			cancel()
		}
	})
	metrics := &http.Server{Handler: promhttp.HandlerFor(reg, promhttp.HandlerOpts{}), ReadHeaderTimeout: 10 * time.Second}
	wg.Go(func() {
		if err := metrics.Serve(mln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			errc <- fmt.Errorf("serve DNS metrics: %w", err)
			cancel()
		}
	})
	context.AfterFunc(ctx, func() { _ = metrics.Close() })
	if cache.WaitForCacheSync(ctx.Done(), synced...) {
		slog.Info("cluster DNS serving", "address", addr, "zone", c.Zone, "upstreams", upstreams)
		if c.Publish {
			wg.Go(func() {
				publish.Run(ctx, publish.Config{Client: c.Client, NodeName: c.NodeName, ServiceIP: c.ServiceIP, Address: c.Address})
			})
		}
	}
	<-ctx.Done()
	wg.Wait()
	select {
	case err := <-errc:
		return err
	default:
		return nil
	}
}

// withPort adds the DNS port to an upstream given without one.
func withPort(u string) string {
	if _, _, err := net.SplitHostPort(u); err == nil {
		return u
	}
	return net.JoinHostPort(u, "53")
}

// feed keeps the index in step with the informers' objects.
func feed(ix *records.Index, f informers.SharedInformerFactory) ([]cache.InformerSynced, error) {
	return controller.Register(
		controller.Handler{Informer: f.Core().V1().Namespaces().Informer(), Handler: handlers(
			func(ns *corev1.Namespace) { ix.SetNamespace(ns.Name) },
			func(ns *corev1.Namespace) { ix.DeleteNamespace(ns.Name) })},
		controller.Handler{Informer: f.Core().V1().Services().Informer(), Handler: handlers(
			ix.SetService,
			func(s *corev1.Service) { ix.DeleteService(s.Namespace, s.Name) })},
		controller.Handler{Informer: f.Discovery().V1().EndpointSlices().Informer(), Handler: handlers(
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
	if o, ok := controller.Object[T](obj); ok {
		f(o)
	}
}
