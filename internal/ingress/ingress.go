// Package ingress runs svcnet's Ingress controller: the controller
// (package controller) that turns the Ingresses of its class into a
// routing table, the Gateway API controller (package gateway) that does
// the same for the Gateways of its GatewayClasses and their HTTPRoutes,
// the L7 proxy (package proxy) that serves both tables merged on the
// HTTP and HTTPS ports, and a metrics and health endpoint. It is what
// `svcnet ingress` runs and what the svcnet.io/ingress-controller image
// of the svcnet-ingress add-on plays in its pod.
package ingress

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/spf13/pflag"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/svcnet/svcnet/internal/ingress/controller"
	"github.com/svcnet/svcnet/internal/ingress/gateway"
	"github.com/svcnet/svcnet/internal/ingress/proxy"
	"github.com/svcnet/svcnet/internal/ingress/routes"
)

// Options configure the controller, as its flags.
type Options struct {
	// Kubeconfig reaches the API server; empty: the pod's service account.
	Kubeconfig string
	// HTTPPort and HTTPSPort are the ports the proxy listens on (every
	// address).
	HTTPPort, HTTPSPort int
	// MetricsBindAddress serves /metrics and /healthz (ingress-nginx's
	// 10254); empty: not served.
	MetricsBindAddress string
	// IngressClass is the IngressClass whose Ingresses are served.
	IngressClass string
	// PublishService (namespace/name) is the Service whose addresses the
	// Ingresses' status shows.
	PublishService string
	// ShutdownGrace is how long requests in flight may take to finish
	// once the controller is told to stop.
	ShutdownGrace time.Duration
}

// Pod identity from the downward API, as ingress-nginx reads it.
const (
	podNameEnv      = "POD_NAME"
	podNamespaceEnv = "POD_NAMESPACE"
)

// AddFlags binds the options' flags, shared by `svcnet ingress` and the
// built-in image.
func (o *Options) AddFlags(fs *pflag.FlagSet) {
	fs.StringVar(&o.Kubeconfig, "kubeconfig", "", "kubeconfig to reach the API server with (default: the pod's service account, in-cluster)")
	fs.IntVar(&o.HTTPPort, "http-port", 80, "port to serve HTTP on")
	fs.IntVar(&o.HTTPSPort, "https-port", 443, "port to serve HTTPS on")
	fs.StringVar(&o.MetricsBindAddress, "metrics-bind-address", ":10254", "host:port serving Prometheus metrics on /metrics and health on /healthz (empty: off)")
	fs.StringVar(&o.IngressClass, "ingress-class", "svcnet", "name of the IngressClass (spec.controller "+controller.ControllerName+") whose Ingresses are served")
	fs.StringVar(&o.PublishService, "publish-service", "", "NAMESPACE/NAME of the Service fronting the controller, whose load balancer addresses the Ingresses' status shows (default: the IPs of the nodes the controller's pods run on)")
	fs.DurationVar(&o.ShutdownGrace, "shutdown-grace-period", 10*time.Second, "how long requests in flight may take to finish after SIGTERM")
}

// Run serves until ctx ends.
func Run(ctx context.Context, o Options) error {
	cfg, err := restConfig(o.Kubeconfig)
	if err != nil {
		return err
	}
	cfg.UserAgent = "svcnet-ingress-controller"
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return fmt.Errorf("API client: %w", err)
	}
	def, err := proxy.SelfSigned()
	if err != nil {
		return err
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	p := proxy.New(reg)

	var listeners []proxy.Listener
	closeAll := func() {
		for _, l := range listeners {
			l.Listener.Close()
		}
	}
	for _, l := range []struct {
		name string
		port int
		tls  bool
	}{{controller.HTTP, o.HTTPPort, false}, {controller.HTTPS, o.HTTPSPort, true}} {
		ln, err := net.Listen("tcp", net.JoinHostPort("", strconv.Itoa(l.port)))
		if err != nil {
			closeAll()
			return fmt.Errorf("listen for %s: %w", l.name, err)
		}
		listeners = append(listeners, proxy.Listener{Name: l.name, Listener: ln, Port: l.port, TLS: l.tls})
	}
	var ready atomic.Bool
	var metrics *http.Server
	if o.MetricsBindAddress != "" {
		ln, err := net.Listen("tcp", o.MetricsBindAddress)
		if err != nil {
			closeAll()
			return fmt.Errorf("listen for metrics: %w", err)
		}
		mux := http.NewServeMux()
		mux.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
		mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) {
			if !ready.Load() {
				http.Error(w, "not synced", http.StatusServiceUnavailable)
				return
			}
			fmt.Fprintln(w, "ok")
		})
		metrics = &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
		go func() {
			if err := metrics.Serve(ln); !errors.Is(err, http.ErrServerClosed) {
				slog.Warn("ingress metrics server", "err", err)
			}
		}()
		defer metrics.Close()
	}

	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		closeAll()
		return fmt.Errorf("API client: %w", err)
	}

	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	// The proxy serves the Ingresses' table (source 0) merged with the
	// Gateway API's (source 1), each controller swapping in its own.
	sources := routes.NewSources(2, p.Swap)
	gwDone := make(chan error, 1)
	go func() {
		gwDone <- gateway.Run(ctx, gateway.Config{
			Client:  client,
			Dynamic: dyn,
			Swap:    sources.Swap(1),
			Ports: []gateway.Port{
				{Port: int32(o.HTTPPort), Listener: controller.HTTP},
				{Port: int32(o.HTTPSPort), TLS: true, Listener: controller.HTTPS},
			},
			PublishService: o.PublishService,
		})
		cancel()
	}()
	ctlDone := make(chan error, 1)
	go func() {
		ctlDone <- controller.Run(ctx, controller.Config{
			Client:             client,
			Swap:               sources.Swap(0),
			IngressClass:       o.IngressClass,
			PublishService:     o.PublishService,
			PodNamespace:       os.Getenv(podNamespaceEnv),
			PodName:            os.Getenv(podNameEnv),
			DefaultCertificate: def,
			Metrics:            reg,
			Ready: func() {
				ready.Store(true)
				slog.Info("ingress controller serving", "class", o.IngressClass, "http", o.HTTPPort, "https", o.HTTPSPort)
			},
		})
		cancel()
	}()
	err = p.Serve(ctx, o.ShutdownGrace, listeners...)
	cancel()
	return errors.Join(err, <-ctlDone, <-gwDone)
}

func restConfig(kubeconfig string) (*rest.Config, error) {
	if kubeconfig != "" {
		cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
		if err != nil {
			return nil, fmt.Errorf("kubeconfig %s: %w", kubeconfig, err)
		}
		return cfg, nil
	}
	cfg, err := rest.InClusterConfig()
	if err != nil {
		return nil, fmt.Errorf("in-cluster API access (or give --kubeconfig): %w", err)
	}
	return cfg, nil
}
