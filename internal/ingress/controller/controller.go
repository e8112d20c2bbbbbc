// Package controller is the Ingress controller: it watches Ingresses,
// IngressClasses, Services, EndpointSlices and Secrets through client-go
// informers and turns the Ingresses of its class into the routes.Table
// the proxy serves, sending requests straight to Ready endpoints. It
// writes the served Ingresses' status.loadBalancer as ingress-nginx does
// (the published Service's load balancer addresses, else the addresses
// of the nodes its own pods run on) and records events on them.
//
// An Ingress is served when its spec.ingressClassName (or the older
// kubernetes.io/ingress.class annotation) names the controller's
// IngressClass, an IngressClass whose spec.controller is the controller's
// name, or when it names no class and that IngressClass is marked the
// default (ingressclass.kubernetes.io/is-default-class: "true").
//
// Every change rebuilds the whole table from the informers' caches, one
// build at a time through a workqueue (internal/controller's) that folds
// bursts of events into one build; the proxy swaps tables atomically.
package controller

import (
	"cmp"
	"context"
	"crypto/tls"
	"fmt"
	"log/slog"
	"maps"
	"math"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	networkinglisters "k8s.io/client-go/listers/networking/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"

	ctrl "github.com/svcnet/svcnet/internal/controller"
	"github.com/svcnet/svcnet/internal/ingress/routes"
)

// Names and annotations of the Ingress API that the controller reads.
const (
	// ControllerName is svcnet's IngressClass spec.controller.
	ControllerName = "svcnet.io/ingress"
	// DefaultClassAnnotation marks the IngressClass of Ingresses that name
	// none.
	DefaultClassAnnotation = networkingv1.AnnotationIsDefaultIngressClass
	// legacyClassAnnotation named the class before ingressClassName.
	legacyClassAnnotation = "kubernetes.io/ingress.class"
	// statusResync is how often the status addresses are checked even
	// when nothing the controller watches changed (nodes can change
	// their addresses), as ingress-nginx's periodic status update.
	statusResync = 30 * time.Second
)

// Config says what the controller serves and where it publishes.
type Config struct {
	Client kubernetes.Interface
	// Swap receives each new table.
	Swap func(*routes.Table)
	// IngressClass is the name of the controller's IngressClass.
	IngressClass string
	// PublishService (namespace/name) is the Service whose load balancer
	// addresses the served Ingresses' status shows; empty: the nodes of
	// the controller's pods.
	PublishService string
	// PodNamespace and PodName are the controller's own pod (from the
	// downward API), whose siblings' nodes are the addresses without
	// PublishService.
	PodNamespace, PodName string
	// DefaultCertificate is served to names no TLS Secret covers.
	DefaultCertificate *tls.Certificate
	// Ready is called once the first table is served.
	Ready func()
	// Metrics registers the controller's queue metrics (nil: none kept).
	Metrics prometheus.Registerer
}

type controller struct {
	Config
	queue     *ctrl.Queue[string]
	ingresses networkinglisters.IngressLister
	classes   networkinglisters.IngressClassLister
	services  corelisters.ServiceLister
	world     *world
	recorder  record.EventRecorder
	// reported remembers, per Ingress UID, the generation and problems
	// last reported, so that events are not repeated at every build.
	reported map[string]string
}

// syncKey is the queue's only key: every change rebuilds the whole table.
const syncKey = "table"

// Run serves Ingresses until ctx ends.
func Run(ctx context.Context, c Config) error {
	if c.Metrics == nil {
		c.Metrics = prometheus.NewRegistry()
	}
	factory := informers.NewSharedInformerFactory(c.Client, 0)
	nw, core, disc := factory.Networking().V1(), factory.Core().V1(), factory.Discovery().V1()
	ctl := &controller{
		Config:    c,
		ingresses: nw.Ingresses().Lister(),
		classes:   nw.IngressClasses().Lister(),
		services:  core.Services().Lister(),
		world: &world{
			services:    core.Services().Lister(),
			slices:      disc.EndpointSlices().Lister(),
			secrets:     core.Secrets().Lister(),
			certs:       &certCache{},
			defaultCert: c.DefaultCertificate,
		},
		recorder: ctrl.NewRecorder(ctx, c.Client, "svcnet-ingress-controller"),
		reported: map[string]string{},
	}
	var once sync.Once
	ctl.queue = ctrl.NewQueue(ctrl.NewMetrics(c.Metrics), ctrl.QueueConfig[string]{
		Name: "ingress",
		// A failing status write must not keep the table from following
		// changes: retries go on (the periodic resync) past the default
		// bound.
		MaxRetries: math.MaxInt32,
		Sync: func(ctx context.Context, _ string) error {
			err := ctl.sync(ctx)
			if c.Ready != nil {
				// Served even if a status write failed.
				once.Do(c.Ready)
			}
			return err
		},
	})
	handler := cache.ResourceEventHandlerFuncs{
		AddFunc:    func(any) { ctl.queue.Add(syncKey) },
		UpdateFunc: func(any, any) { ctl.queue.Add(syncKey) },
		DeleteFunc: func(any) { ctl.queue.Add(syncKey) },
	}
	var hs []ctrl.Handler
	for _, inf := range []cache.SharedIndexInformer{
		nw.Ingresses().Informer(), nw.IngressClasses().Informer(), core.Services().Informer(),
		disc.EndpointSlices().Informer(), core.Secrets().Informer(),
	} {
		hs = append(hs, ctrl.Handler{Informer: inf, Handler: handler})
	}
	synced, err := ctrl.Register(hs...)
	if err != nil {
		return fmt.Errorf("watch for the ingress controller: %w", err)
	}
	factory.Start(ctx.Done())
	defer factory.Shutdown()
	go func() {
		t := time.NewTicker(statusResync)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
				ctl.queue.Add(syncKey)
			}
		}
	}()
	ctl.queue.Add(syncKey)
	// One worker: builds are serial, each from the latest caches.
	ctl.queue.Run(ctx, 1, synced...)
	return nil
}

// sync rebuilds and swaps the table, then brings the served Ingresses'
// status and events up to date.
func (c *controller) sync(ctx context.Context) error {
	served, err := c.served()
	if err != nil {
		return err
	}
	t, problems := c.world.build(served)
	c.Swap(t)
	c.report(served, problems)
	return c.updateStatus(ctx, served)
}

// served lists the Ingresses of the controller's class.
func (c *controller) served() ([]*networkingv1.Ingress, error) {
	class, err := c.classes.Get(c.IngressClass)
	if apierrors.IsNotFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("ingress class %s: %w", c.IngressClass, err)
	}
	if class.Spec.Controller != ControllerName {
		slog.Warn("ingress class belongs to another controller; serving nothing", "class", class.Name, "controller", class.Spec.Controller)
		return nil, nil
	}
	isDefault := class.Annotations[DefaultClassAnnotation] == "true"
	all, err := c.ingresses.List(labels.Everything())
	if err != nil {
		return nil, fmt.Errorf("list ingresses: %w", err)
	}
	var out []*networkingv1.Ingress
	for _, ing := range all {
		if Serves(ing, class.Name, isDefault) {
			out = append(out, ing)
		}
	}
	return out, nil
}

// Serves says whether an Ingress belongs to the class named class, which
// is the default class or not.
func Serves(ing *networkingv1.Ingress, class string, isDefault bool) bool {
	if n := ing.Spec.IngressClassName; n != nil {
		return *n == class
	}
	if a, ok := ing.Annotations[legacyClassAnnotation]; ok {
		return a == class
	}
	return isDefault
}

// report records a Sync event when an Ingress is first served or changes,
// and a warning for each problem (a missing Service or Secret) once.
func (c *controller) report(served []*networkingv1.Ingress, problems map[*networkingv1.Ingress][]string) {
	keep := map[string]bool{}
	for _, ing := range served {
		uid := string(ing.UID)
		keep[uid] = true
		state := fmt.Sprint(ing.Generation, problems[ing])
		if c.reported[uid] == state {
			continue
		}
		c.reported[uid] = state
		c.recorder.Eventf(ing, corev1.EventTypeNormal, "Sync", "Scheduled for sync")
		for _, p := range problems[ing] {
			c.recorder.Eventf(ing, corev1.EventTypeWarning, "BackendError", "%s", p)
		}
	}
	maps.DeleteFunc(c.reported, func(uid, _ string) bool { return !keep[uid] })
}

// updateStatus writes the load balancer addresses into the served
// Ingresses whose status differs.
func (c *controller) updateStatus(ctx context.Context, served []*networkingv1.Ingress) error {
	addrs, err := c.addresses(ctx)
	if err != nil {
		return err
	}
	var errs []string
	for _, ing := range served {
		if apiequality.Semantic.DeepEqual(ing.Status.LoadBalancer.Ingress, addrs) {
			continue
		}
		up := ing.DeepCopy()
		up.Status.LoadBalancer.Ingress = addrs
		_, err := c.Client.NetworkingV1().Ingresses(ing.Namespace).UpdateStatus(ctx, up, metav1.UpdateOptions{})
		if err != nil && !apierrors.IsNotFound(err) {
			errs = append(errs, fmt.Sprintf("%s/%s: %v", ing.Namespace, ing.Name, err))
		}
	}
	if len(errs) > 0 {
		return fmt.Errorf("update ingress status: %s", strings.Join(errs, "; "))
	}
	return nil
}

// addresses are what the served Ingresses' status.loadBalancer.ingress
// shows: with a published Service, what ingress-nginx's --publish-service
// gives (a LoadBalancer's status addresses and external IPs, a
// ClusterIP's cluster IP); else the nodes of the controller's pods.
func (c *controller) addresses(ctx context.Context) ([]networkingv1.IngressLoadBalancerIngress, error) {
	if c.PublishService != "" {
		ns, name, _ := strings.Cut(c.PublishService, "/")
		svc, err := c.services.Services(ns).Get(name)
		if apierrors.IsNotFound(err) {
			return nil, nil
		}
		if err != nil {
			return nil, fmt.Errorf("published service %s: %w", c.PublishService, err)
		}
		return serviceAddresses(svc), nil
	}
	if c.PodName == "" {
		return nil, nil
	}
	return c.nodeAddresses(ctx)
}

func serviceAddresses(svc *corev1.Service) []networkingv1.IngressLoadBalancerIngress {
	var out []networkingv1.IngressLoadBalancerIngress
	switch svc.Spec.Type {
	case corev1.ServiceTypeExternalName:
		out = append(out, networkingv1.IngressLoadBalancerIngress{Hostname: svc.Spec.ExternalName})
	case corev1.ServiceTypeLoadBalancer:
		for _, lb := range svc.Status.LoadBalancer.Ingress {
			out = append(out, networkingv1.IngressLoadBalancerIngress{IP: lb.IP, Hostname: lb.Hostname})
		}
		for _, ip := range svc.Spec.ExternalIPs {
			out = append(out, networkingv1.IngressLoadBalancerIngress{IP: ip})
		}
	default:
		for _, ip := range svc.Spec.ExternalIPs {
			out = append(out, networkingv1.IngressLoadBalancerIngress{IP: ip})
		}
		if len(out) == 0 && svc.Spec.ClusterIP != "" && svc.Spec.ClusterIP != corev1.ClusterIPNone {
			out = append(out, networkingv1.IngressLoadBalancerIngress{IP: svc.Spec.ClusterIP})
		}
	}
	return sortAddresses(out)
}

// nodeAddresses are the external (else internal) IPs of the nodes that
// run the controller's pods: those labelled as its own pod.
func (c *controller) nodeAddresses(ctx context.Context) ([]networkingv1.IngressLoadBalancerIngress, error) {
	pods := c.Client.CoreV1().Pods(c.PodNamespace)
	self, err := pods.Get(ctx, c.PodName, metav1.GetOptions{})
	if err != nil {
		return nil, fmt.Errorf("the controller's pod %s/%s: %w", c.PodNamespace, c.PodName, err)
	}
	sel := maps.Clone(self.Labels)
	delete(sel, "pod-template-hash")
	list, err := pods.List(ctx, metav1.ListOptions{LabelSelector: labels.SelectorFromSet(sel).String()})
	if err != nil {
		return nil, fmt.Errorf("the controller's pods: %w", err)
	}
	seen := map[string]bool{}
	var out []networkingv1.IngressLoadBalancerIngress
	for _, p := range list.Items {
		if p.Spec.NodeName == "" || p.Status.Phase != corev1.PodRunning || seen[p.Spec.NodeName] {
			continue
		}
		seen[p.Spec.NodeName] = true
		node, err := c.Client.CoreV1().Nodes().Get(ctx, p.Spec.NodeName, metav1.GetOptions{})
		if err != nil {
			return nil, fmt.Errorf("node %s: %w", p.Spec.NodeName, err)
		}
		if ip := nodeIP(node); ip != "" {
			out = append(out, networkingv1.IngressLoadBalancerIngress{IP: ip})
		}
	}
	return sortAddresses(out), nil
}

func nodeIP(n *corev1.Node) string {
	for _, t := range []corev1.NodeAddressType{corev1.NodeExternalIP, corev1.NodeInternalIP} {
		for _, a := range n.Status.Addresses {
			if a.Type == t {
				return a.Address
			}
		}
	}
	return ""
}

func sortAddresses(a []networkingv1.IngressLoadBalancerIngress) []networkingv1.IngressLoadBalancerIngress {
	slices.SortFunc(a, func(x, y networkingv1.IngressLoadBalancerIngress) int {
		return cmp.Or(cmp.Compare(x.IP, y.IP), cmp.Compare(x.Hostname, y.Hostname))
	})
	return slices.CompactFunc(a, func(x, y networkingv1.IngressLoadBalancerIngress) bool {
		return x.IP == y.IP && x.Hostname == y.Hostname
	})
}
