// Package gateway is svcnet's Gateway API controller: it serves the
// Gateways of the GatewayClasses whose spec.controllerName is
// svcnet.io/gateway-controller, and the HTTPRoutes attached to them, on
// the Ingress controller's proxy. It watches the Gateway API's kinds
// (gateway.networking.k8s.io/v1 GatewayClass, Gateway, HTTPRoute and
// v1beta1 ReferenceGrant, read through dynamic informers as the
// project's own Go types) and the Services, EndpointSlices, Secrets and
// Namespaces they refer to, translates them into a routes.Table (one
// table listener per proxy port, requests sent straight to Ready
// endpoints), and writes their status as the Gateway API specifies:
// GatewayClass Accepted and supportedFeatures; Gateway Accepted and
// Programmed, the controller Service's addresses and each listener's
// conditions, supported kinds and attached routes; HTTPRoute parents
// with Accepted and ResolvedRefs.
//
// All Gateways share the proxy: a listener is served when its port and
// protocol are those of one of the proxy's ports (HTTP on 80, HTTPS on
// 443, the controller Service's), and listeners of one port from all
// Gateways are served together, as one merged Gateway. Other listeners
// are not accepted (reason PortUnavailable or UnsupportedProtocol).
//
// The table is one of the proxy's two sources (routes.Sources): the
// runner gives the Ingress controller one Swap and this controller the
// other. Every change rebuilds the whole table, one build at a time, as
// the Ingress controller does.
package gateway

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/dynamic/dynamicinformer"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"
	gatewayv1beta1 "sigs.k8s.io/gateway-api/apis/v1beta1"

	"github.com/svcnet/svcnet/internal/informer"
	"github.com/svcnet/svcnet/internal/ingress/controller"
	"github.com/svcnet/svcnet/internal/ingress/routes"
)

// ControllerName is the GatewayClass spec.controllerName svcnet serves.
const ControllerName gatewayv1.GatewayController = "svcnet.io/gateway-controller"

// The resources of the Gateway API kinds the controller reads.
var (
	GatewayClasses  = gatewayv1.SchemeGroupVersion.WithResource("gatewayclasses")
	Gateways        = gatewayv1.SchemeGroupVersion.WithResource("gateways")
	HTTPRoutes      = gatewayv1.SchemeGroupVersion.WithResource("httproutes")
	ReferenceGrants = gatewayv1beta1.SchemeGroupVersion.WithResource("referencegrants")
)

// Config says what the controller serves and where.
type Config struct {
	Client  kubernetes.Interface
	Dynamic dynamic.Interface
	// Swap receives each new table (a routes.Sources source).
	Swap func(*routes.Table)
	// Ports are the proxy's listeners.
	Ports []Port
	// PublishService (namespace/name) is the Service whose load balancer
	// addresses the Gateways' status shows.
	PublishService string
}

type gwController struct {
	Config
	queue    workqueue.TypedRateLimitingInterface[string]
	classes  cache.SharedIndexInformer
	gateways cache.SharedIndexInformer
	routes   cache.SharedIndexInformer
	grants   cache.SharedIndexInformer
	services corelisters.ServiceLister
	world    world
}

const syncKey = "table"

// Run serves Gateways until ctx ends, once the API serves the Gateway
// API's kinds (their definitions may come after the controller starts).
func Run(ctx context.Context, c Config) error {
	if waitForDefinitions(ctx, c.Client.Discovery()) != nil {
		return nil // ctx ended
	}
	factory := informers.NewSharedInformerFactory(c.Client, 0)
	core, disc := factory.Core().V1(), factory.Discovery().V1()
	dyn := dynamicinformer.NewDynamicSharedInformerFactory(c.Dynamic, 0)
	ctl := &gwController{
		Config:   c,
		queue:    workqueue.NewTypedRateLimitingQueueWithConfig(workqueue.DefaultTypedControllerRateLimiter[string](), workqueue.TypedRateLimitingQueueConfig[string]{Name: "gateway"}),
		classes:  dyn.ForResource(GatewayClasses).Informer(),
		gateways: dyn.ForResource(Gateways).Informer(),
		routes:   dyn.ForResource(HTTPRoutes).Informer(),
		grants:   dyn.ForResource(ReferenceGrants).Informer(),
		services: core.Services().Lister(),
		world: world{
			namespaces: core.Namespaces().Lister(),
			services:   core.Services().Lister(),
			slices:     disc.EndpointSlices().Lister(),
			secrets:    core.Secrets().Lister(),
			certs:      &controller.Certificates{},
			ports:      c.Ports,
		},
	}
	defer ctl.queue.ShutDown()
	for inf, transform := range map[cache.SharedIndexInformer]cache.TransformFunc{
		ctl.classes: informer.Typed[gatewayv1.GatewayClass], ctl.gateways: informer.Typed[gatewayv1.Gateway],
		ctl.routes: informer.Typed[gatewayv1.HTTPRoute], ctl.grants: informer.Typed[gatewayv1beta1.ReferenceGrant],
	} {
		if err := inf.SetTransform(transform); err != nil {
			return fmt.Errorf("gateway API informer: %w", err)
		}
	}
	handler := cache.ResourceEventHandlerFuncs{
		AddFunc:    func(any) { ctl.queue.Add(syncKey) },
		UpdateFunc: func(any, any) { ctl.queue.Add(syncKey) },
		DeleteFunc: func(any) { ctl.queue.Add(syncKey) },
	}
	var synced []cache.InformerSynced
	for _, inf := range []cache.SharedIndexInformer{
		ctl.classes, ctl.gateways, ctl.routes, ctl.grants,
		core.Services().Informer(), disc.EndpointSlices().Informer(), core.Secrets().Informer(), core.Namespaces().Informer(),
	} {
		if _, err := inf.AddEventHandler(handler); err != nil {
			return fmt.Errorf("watch for the gateway controller: %w", err)
		}
		synced = append(synced, inf.HasSynced)
	}
	factory.Start(ctx.Done())
	defer factory.Shutdown()
	dyn.Start(ctx.Done())
	defer dyn.Shutdown()
	if !cache.WaitForCacheSync(ctx.Done(), synced...) {
		return ctx.Err()
	}
	go func() {
		<-ctx.Done()
		ctl.queue.ShutDown()
	}()
	ctl.queue.Add(syncKey)
	for {
		key, quit := ctl.queue.Get()
		if quit {
			return nil
		}
		if err := ctl.sync(ctx); err != nil {
			slog.Warn("gateway controller sync", "err", err)
			ctl.queue.AddRateLimited(key)
		} else {
			ctl.queue.Forget(key)
		}
		ctl.queue.Done(key)
	}
}

// waitForDefinitions returns once both versions the controller reads are
// served, or with ctx's error when it ends first.
func waitForDefinitions(ctx context.Context, d discovery.DiscoveryInterface) error {
	logged := false
	return wait.PollUntilContextCancel(ctx, 2*time.Second, true, func(context.Context) (bool, error) {
		for _, gv := range []schema.GroupVersion{gatewayv1.SchemeGroupVersion, gatewayv1beta1.SchemeGroupVersion} {
			if _, err := d.ServerResourcesForGroupVersion(gv.String()); err != nil {
				if !logged {
					logged = true
					slog.Info("gateway controller waits for the Gateway API's definitions", "groupVersion", gv, "err", err)
				}
				return false, nil
			}
		}
		return true, nil
	})
}

// sync rebuilds and swaps the table, then writes the status that
// differs.
func (c *gwController) sync(ctx context.Context) error {
	w := c.world
	w.classes = informer.List[gatewayv1.GatewayClass](c.classes.GetStore())
	w.gateways = informer.List[gatewayv1.Gateway](c.gateways.GetStore())
	w.routes = informer.List[gatewayv1.HTTPRoute](c.routes.GetStore())
	w.grants = informer.List[gatewayv1beta1.ReferenceGrant](c.grants.GetStore())
	w.addresses = c.addresses()
	b := w.build()
	c.Swap(b.table)
	return c.writeStatus(ctx, &w, b, metav1.Now())
}

// addresses are the published Service's, as Gateway status addresses.
func (c *gwController) addresses() []gatewayv1.GatewayStatusAddress {
	if c.PublishService == "" {
		return nil
	}
	ns, name, _ := strings.Cut(c.PublishService, "/")
	svc, err := c.services.Services(ns).Get(name)
	if err != nil {
		return nil // not there yet
	}
	var out []gatewayv1.GatewayStatusAddress
	for _, a := range controller.ServiceAddresses(svc) {
		if a.IP != "" {
			out = append(out, gatewayv1.GatewayStatusAddress{Type: ptrTo(gatewayv1.IPAddressType), Value: a.IP})
		} else if a.Hostname != "" {
			out = append(out, gatewayv1.GatewayStatusAddress{Type: ptrTo(gatewayv1.HostnameAddressType), Value: a.Hostname})
		}
	}
	return out
}
