// Package ipam is svcnet's LoadBalancer IPAM, MetalLB's controller
// (metallb-controller) rebuilt on client-go: it gives every Service of
// type LoadBalancer without a spec.loadBalancerClass addresses from
// MetalLB's IPAddressPools in metallb-system, as MetalLB v0.16 does, and
// publishes them in status.loadBalancer.ingress (ipMode VIP) with the
// pool's name in the metallb.io/ip-allocated-from-pool annotation.
//
// What a Service gets follows MetalLB: the addresses it asks for
// (spec.loadBalancerIP or the metallb.io/loadBalancerIPs annotation), else
// the lowest free address of the pool it names (metallb.io/address-pool),
// else of the best pool: first those whose serviceAllocation names its
// namespace or selects it (by priority), then the others that assign
// automatically (autoAssign, by name, which MetalLB leaves to chance).
// avoidBuggyIPs skips .0 and .255; dual-stack Services get one address of
// each family from one pool as ipFamilyPolicy says. Services with the same
// metallb.io/allow-shared-ip key share an address when their ports do not
// clash (and, with externalTrafficPolicy Local, their selectors are the
// same). The older metallb.universe.tf/ spellings of the annotations work
// too, with MetalLB's warning event.
//
// The allocation lives in memory, as MetalLB's: on start, and whenever
// the pools change, every Service is converged again, those that hold
// addresses first, so that a restart keeps every address where it was and
// a pool change takes back what no pool owns any more. The events are
// MetalLB's (IPAllocated, AllocationFailed, ClearAssignment, ...) from its
// source, metallb-controller; the pools' status counts their addresses,
// and the ConfigurationState controller says whether the pools are valid
// (an invalid set leaves the last valid one in force), as MetalLB's do.
package ipam

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/netip"
	"reflect"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/utils/ptr"

	"github.com/svcnet/svcnet/internal/controller"
	"github.com/svcnet/svcnet/internal/events"
	"github.com/svcnet/svcnet/internal/informer"
	"github.com/svcnet/svcnet/internal/lb/metallb"
)

// ControllerName is the --controllers name and MetalLB's event source.
const ControllerName = "metallb-controller"

// key is one item of the queue: a Service, the whole configuration
// (parse the pools, converge every Service), or one pool's status.
type key struct {
	kind keyKind
	name string
}

type keyKind int

func (k key) String() string {
	switch k.kind {
	case configKey:
		return "configuration"
	case poolStatusKey:
		return "IPAddressPool " + k.name
	}
	return "Service " + k.name
}

const (
	serviceKey keyKind = iota
	configKey
	poolStatusKey
)

// Controller is the LoadBalancer IPAM controller.
type Controller struct {
	client     kubernetes.Interface
	dynamic    dynamic.Interface
	config     *metallb.Config
	services   corelisters.ServiceLister
	namespaces corelisters.NamespaceLister
	synced     []cache.InformerSynced
	queue      *controller.Queue[key]
	recorder   record.EventRecorder

	// Only the queue's one worker touches these.
	alloc *allocator
	// pools is the configuration in force, nil until it is first read;
	// Services wait until then.
	pools *pools
	// written are the Services as the controller last wrote them, by
	// key, until the informer's cache shows a version other than the one
	// written over: converging a Service from the cache's older copy
	// (without its new addresses) could give its addresses to another.
	written map[string]written
	// reported is the configuration state last written.
	reported string
}

// written is a Service as written, and the version it was written over.
type written struct {
	over string
	svc  *corev1.Service
}

// New creates the controller and registers its handlers on the Service
// and Namespace informers of d and on config's, which Run starts; its
// events are recorded until ctx ends.
func New(ctx context.Context, d controller.Deps, dyn dynamic.Interface, config *metallb.Config) (*Controller, error) {
	core := d.Informers.Core().V1()
	c := &Controller{
		client: d.Client, dynamic: dyn, config: config,
		services: core.Services().Lister(), namespaces: core.Namespaces().Lister(),
		recorder: events.NewRecorder(ctx, d.Client, ControllerName),
		alloc:    newAllocator(), written: map[string]written{},
	}
	// One worker: the allocation is one state, converged in order.
	c.queue = controller.NewQueue(d.Metrics, controller.QueueConfig[key]{Name: ControllerName, Sync: c.sync})
	all := func(any) { c.queue.Add(key{kind: configKey}) }
	synced, err := informer.Register(
		informer.Handler{Informer: core.Services().Informer(), Handler: cache.ResourceEventHandlerFuncs{
			AddFunc:    c.enqueueService,
			UpdateFunc: func(_, cur any) { c.enqueueService(cur) },
			DeleteFunc: c.enqueueService,
		}},
		informer.Handler{Informer: core.Namespaces().Informer(), Handler: cache.ResourceEventHandlerFuncs{
			// namespaceSelectors choose by the namespaces' labels.
			AddFunc: all,
			UpdateFunc: func(old, cur any) {
				o, ok1 := old.(*corev1.Namespace)
				n, ok2 := cur.(*corev1.Namespace)
				if !ok1 || !ok2 || !reflect.DeepEqual(o.Labels, n.Labels) {
					all(cur)
				}
			},
			DeleteFunc: all,
		}},
	)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", ControllerName, err)
	}
	err = config.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: all,
		UpdateFunc: func(old, cur any) {
			// A status write (ours) leaves the generation alone.
			o, err1 := meta.Accessor(old)
			n, err2 := meta.Accessor(cur)
			if err1 != nil || err2 != nil || o.GetGeneration() != n.GetGeneration() || !reflect.DeepEqual(o.GetLabels(), n.GetLabels()) {
				all(cur)
			}
		},
		DeleteFunc: all,
	})
	if err != nil {
		return nil, fmt.Errorf("%s: %w", ControllerName, err)
	}
	c.synced = append(synced, config.HasSynced)
	return c, nil
}

// Run starts the configuration's informers once MetalLB's definitions
// are served (svcnet up installs them beside the controllers' start) and
// allocates until ctx ends.
func (c *Controller) Run(ctx context.Context) {
	if c.config.WaitServed(ctx, c.client.Discovery()) == nil {
		c.config.Start(ctx.Done())
		defer c.config.Shutdown()
	}
	c.queue.Add(key{kind: configKey})
	c.queue.Run(ctx, 1, c.synced...)
}

func (c *Controller) enqueueService(obj any) {
	if k, ok := informer.Key(obj); ok {
		c.queue.Add(key{kind: serviceKey, name: k})
	}
}

func (c *Controller) sync(ctx context.Context, k key) error {
	switch k.kind {
	case configKey:
		return c.syncConfig(ctx)
	case poolStatusKey:
		return c.syncPoolStatus(ctx, k.name)
	}
	if c.pools == nil {
		return nil // the configuration's first sync converges every Service
	}
	ns, name, err := cache.SplitMetaNamespaceKey(k.name)
	if err != nil {
		return nil //nolint:nilerr // not a key of ours
	}
	svc, err := c.services.Services(ns).Get(name)
	if apierrors.IsNotFound(err) {
		svc = nil
	} else if err != nil {
		return fmt.Errorf("get service %s: %w", k.name, err)
	}
	again, err := c.converge(ctx, k.name, svc)
	if again {
		c.queue.Add(key{kind: configKey})
	}
	return err
}

// syncConfig reads the pools and converges every Service, those with
// addresses first (then by age), as MetalLB's controller on a new
// configuration and after a release. An invalid configuration is logged
// and leaves the one in force, as MetalLB's.
func (c *Controller) syncConfig(ctx context.Context) error {
	nss, err := c.namespaces.List(labels.Everything())
	if err != nil {
		return fmt.Errorf("list namespaces: %w", err)
	}
	ps, err := parsePools(c.config.Pools(), nss)
	// The state is reported beside the allocation, which does not wait
	// for it (nor for metallb-system, whose creation brings it back here).
	errs := []error{c.reportState(ctx, err)}
	if err != nil {
		slog.Error("failed to parse the configuration", "controller", ControllerName, "err", err)
	} else if c.pools == nil || c.pools.String() != ps.String() {
		old := c.pools
		c.alloc.setPools(ps)
		c.pools = ps
		for _, n := range ps.names {
			c.queue.Add(key{kind: poolStatusKey, name: n})
		}
		slog.Info("config reloaded", "controller", ControllerName, "pools", len(ps.names), "first", old == nil)
	}
	if c.pools == nil {
		return errors.Join(errs...)
	}
	svcs, err := c.services.List(labels.Everything())
	if err != nil {
		return fmt.Errorf("list services: %w", err)
	}
	convergeOrder(svcs)
	for _, svc := range svcs {
		if _, err := c.converge(ctx, svc.Namespace+"/"+svc.Name, svc); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// convergeOrder sorts Services as syncConfig converges them: those with
// more addresses first, so that none loses its address to one converged
// before it, then the older first, as they were created.
func convergeOrder(svcs []*corev1.Service) {
	slices.SortStableFunc(svcs, func(a, b *corev1.Service) int {
		if n := cmp.Compare(len(b.Status.LoadBalancer.Ingress), len(a.Status.LoadBalancer.Ingress)); n != 0 {
			return n
		}
		if n := a.CreationTimestamp.Compare(b.CreationTimestamp.Time); n != 0 {
			return n
		}
		return cmp.Compare(a.Namespace+"/"+a.Name, b.Namespace+"/"+b.Name)
	})
}

// ours says whether the controller handles svc: MetalLB without
// --lb-class takes Services of no class.
func ours(svc *corev1.Service) bool { return svc.Spec.LoadBalancerClass == nil }

// converge brings one Service (nil once deleted) in line with the
// allocation and writes its status; again says other Services may now
// converge differently (an address was freed, or a sharing changed).
func (c *Controller) converge(ctx context.Context, svcKey string, svcRO *corev1.Service) (again bool, err error) {
	if w, ok := c.written[svcKey]; ok && svcRO != nil && svcRO.ResourceVersion == w.over {
		svcRO = w.svc // the cache has not seen the last write yet
	} else {
		delete(c.written, svcKey)
	}
	if svcRO == nil {
		if c.alloc.pool(svcKey) == "" {
			return false, nil
		}
		c.release(svcKey)
		slog.Info("service deleted", "controller", ControllerName, "service", svcKey)
		return true, nil
	}
	if !ours(svcRO) {
		return false, nil
	}
	prevIPs, prevPool, prevSharing := c.alloc.ips(svcKey), c.alloc.pool(svcKey), c.alloc.sharingOf(svcKey)
	svc := svcRO.DeepCopy()
	c.balance(svcKey, svc)
	pool := c.alloc.pool(svcKey)
	again = c.alloc.sharingOf(svcKey) != prevSharing
	if len(prevIPs) > 0 && pool == "" && c.pools.poolFor(prevIPs) != nil {
		again = true // freed an address another may be waiting for
	}
	if prevPool != pool || !slices.Equal(prevIPs, c.alloc.ips(svcKey)) {
		for _, p := range []string{prevPool, pool} {
			if p != "" {
				c.queue.Add(key{kind: poolStatusKey, name: p})
			}
		}
	}
	if reflect.DeepEqual(svcRO.Status, svc.Status) && reflect.DeepEqual(svcRO.Annotations, svc.Annotations) {
		return again, nil
	}
	for a := range svcRO.Annotations {
		if strings.HasPrefix(a, deprecatedPrefix) {
			c.recorder.Eventf(svcRO, corev1.EventTypeWarning, "deprecatedAnnotation", "Service uses deprecated annotation %s", a)
		}
	}
	out, err := c.client.CoreV1().Services(svc.Namespace).UpdateStatus(ctx, svc, metav1.UpdateOptions{})
	if err != nil {
		if apierrors.IsConflict(err) || apierrors.IsNotFound(err) {
			return again, fmt.Errorf("%w: update status of service %s: %w", controller.ErrStale, svcKey, err)
		}
		return again, fmt.Errorf("update status of service %s: %w", svcKey, err)
	}
	c.written[svcKey] = written{over: svcRO.ResourceVersion, svc: out}
	slog.Info("updated service object", "controller", ControllerName, "service", svcKey, "ips", c.alloc.ips(svcKey))
	return again, nil
}

// release frees a Service's addresses and has its pool's status counted.
func (c *Controller) release(svcKey string) {
	if p := c.alloc.pool(svcKey); p != "" {
		c.queue.Add(key{kind: poolStatusKey, name: p})
	}
	c.alloc.unassign(svcKey)
}

// clear drops svc's addresses and what the controller wrote on it.
func (c *Controller) clear(svcKey string, svc *corev1.Service) {
	c.alloc.unassign(svcKey)
	delete(svc.Annotations, AnnotationIPAllocateFromPool)
	delete(svc.Annotations, deprecatedAnnotationIPAllocateFromPool)
	svc.Status.LoadBalancer = corev1.LoadBalancerStatus{}
}

// balance is MetalLB's convergeBalancer: it leaves on svc (a copy) the
// status and annotations its allocation calls for, emitting MetalLB's
// events on the way.
func (c *Controller) balance(svcKey string, svc *corev1.Service) {
	if svc.Spec.Type != corev1.ServiceTypeLoadBalancer {
		c.clear(svcKey, svc)
		return
	}
	if len(c.pools.names) == 0 || (len(svc.Spec.ClusterIPs) == 0 && svc.Spec.ClusterIP == "") {
		c.clear(svcKey, svc)
		return
	}
	var lbIPs []netip.Addr
	for _, ing := range svc.Status.LoadBalancer.Ingress {
		if ip, err := netip.ParseAddr(ing.IP); err == nil {
			lbIPs = append(lbIPs, ip)
		}
	}
	policy := policyOf(svc)
	if policy == corev1.IPFamilyPolicyRequireDualStack && len(svc.Spec.ClusterIPs) < 2 {
		c.recorder.Eventf(svc, corev1.EventTypeWarning, "not enough clusterips", "Service requires dual stack but not enough clusterips %v", svc.Spec.ClusterIPs)
		c.clear(svcKey, svc)
		return
	}
	u := useOf(svc)
	if len(lbIPs) == 0 {
		c.clear(svcKey, svc)
	} else {
		lbFamily, err := familyOf(addrStrings(lbIPs))
		if err != nil {
			c.recorder.Eventf(svc, corev1.EventTypeWarning, "nolbIPsIPFamily", "Failed to retrieve LBIPs IPFamily for %s: %s", quoted(lbIPs), err)
		}
		svcFamily, err := serviceFamily(svc)
		if err != nil {
			c.recorder.Eventf(svc, corev1.EventTypeWarning, "noclusterIPsIPFamily", "Failed to retrieve ClusterIPs IPFamily for %q %s: %s", svc.Spec.ClusterIPs, svc.Spec.ClusterIP, err)
			return
		}
		if lbFamily == "" || familyChanged(lbFamily, svcFamily, policy) {
			c.clear(svcKey, svc)
			lbIPs = nil
		}
	}
	if len(lbIPs) > 0 {
		// Still allowed by the configuration? Assigning again is a no-op
		// if so, and says why not otherwise.
		if err := c.alloc.assign(svcKey, svc, lbIPs, u); err != nil {
			c.recorder.Eventf(svc, corev1.EventTypeNormal, "ClearAssignment", "current IP for %q not allowed by config, will attempt for new IP assignment: %s", svcKey, err)
			c.clear(svcKey, svc)
			lbIPs = nil
		}
		if want := annotation(svc, AnnotationAddressPool, deprecatedAnnotationAddressPool); len(lbIPs) > 0 && want != "" && c.alloc.pool(svcKey) != want {
			c.clear(svcKey, svc)
			lbIPs = nil
		}
		desired, _, err := desiredIPs(svc)
		if err != nil {
			c.recorder.Eventf(svc, corev1.EventTypeWarning, "LoadBalancerFailed", "invalid requested loadbalancer IPs: %s", err)
			return
		}
		if len(desired) > 0 && !sameIPs(lbIPs, desired) {
			c.clear(svcKey, svc)
			lbIPs = nil
		}
	}
	if len(lbIPs) == 1 && policy == corev1.IPFamilyPolicyPreferDualStack {
		ip, err := c.alloc.allocateOtherFamily(svcKey, svc, lbIPs[0], c.alloc.pool(svcKey), u)
		if err != nil {
			c.recorder.Eventf(svc, corev1.EventTypeNormal, "AdditionalAssignFailed", "cannot assign additional IP in PreferDualStack: %s", err)
		} else {
			lbIPs = append(lbIPs, ip)
			c.recorder.Eventf(svc, corev1.EventTypeNormal, "IPAllocated", "Assigned additional IP %q", ip)
		}
	}
	if len(lbIPs) == 0 {
		var err error
		lbIPs, err = c.allocateIPs(svcKey, svc, u)
		if err != nil {
			slog.Info("IP allocation failed", "controller", ControllerName, "service", svcKey, "err", err)
			c.recorder.Eventf(svc, corev1.EventTypeWarning, "AllocationFailed", "Failed to allocate IP for %q: %s", svcKey, err)
			return
		}
		slog.Info("IP address assigned by controller", "controller", ControllerName, "service", svcKey, "ips", lbIPs)
		c.recorder.Eventf(svc, corev1.EventTypeNormal, "IPAllocated", "Assigned IP %s", quoted(lbIPs))
	}
	ingress := make([]corev1.LoadBalancerIngress, len(lbIPs))
	for i, ip := range lbIPs {
		ingress[i] = corev1.LoadBalancerIngress{IP: ip.String(), IPMode: ptr.To(corev1.LoadBalancerIPModeVIP)}
	}
	svc.Status.LoadBalancer.Ingress = ingress
	if svc.Annotations == nil {
		svc.Annotations = map[string]string{}
	}
	svc.Annotations[AnnotationIPAllocateFromPool] = c.alloc.pool(svcKey)
	delete(svc.Annotations, deprecatedAnnotationIPAllocateFromPool)
}

// familyChanged says whether addresses of family lb no longer fit a
// Service of family svc (a PreferDualStack Service may have one family).
func familyChanged(lb, svc family, policy corev1.IPFamilyPolicy) bool {
	return lb != svc && (svc != dualStack || policy != corev1.IPFamilyPolicyPreferDualStack)
}

// allocateIPs finds svc new addresses: those it asks for, else from the
// pool it names, else from the best pool.
func (c *Controller) allocateIPs(svcKey string, svc *corev1.Service, u use) ([]netip.Addr, error) {
	f, err := serviceFamily(svc)
	if err != nil {
		return nil, err
	}
	desired, desiredFamily, err := desiredIPs(svc)
	if err != nil {
		return nil, err
	}
	pool := annotation(svc, AnnotationAddressPool, deprecatedAnnotationAddressPool)
	if len(desired) > 0 {
		if f != desiredFamily {
			return nil, fmt.Errorf("requested loadBalancer IP(s) %s does not match the ipFamily of the service", quoted(desired))
		}
		if err := c.alloc.assign(svcKey, svc, desired, u); err != nil {
			return nil, err
		}
		if pool != "" && c.alloc.pool(svcKey) != pool {
			c.alloc.unassign(svcKey)
			return nil, fmt.Errorf("requested loadBalancer IP(s) %s is not compatible with requested address pool %s", quoted(desired), pool)
		}
		return desired, nil
	}
	if pool != "" {
		return c.alloc.allocateFromPool(svcKey, svc, f, pool, u)
	}
	return c.alloc.allocate(svcKey, svc, f, u)
}

// sameIPs says whether a and b hold the same addresses in any order.
func sameIPs(a, b []netip.Addr) bool {
	x, y := slices.Clone(a), slices.Clone(b)
	slices.SortFunc(x, netip.Addr.Compare)
	slices.SortFunc(y, netip.Addr.Compare)
	return slices.Equal(x, y)
}
