// Package servicecidrs is upstream's service-cidr-controller
// (kube-controller-manager's pkg/controller/servicecidrs): it protects the
// networking.k8s.io/v1 ServiceCIDRs the cluster IPs are allocated from.
// Every ServiceCIDR that is not being deleted gets the
// networking.k8s.io/service-cidr-finalizer and the condition Ready=True,
// the default `kubernetes` one included. When one is deleted, the
// controller keeps the finalizer, and sets Ready=False with reason
// Terminating, as long as an IPAddress of the API server's allocator lies
// in one of its CIDRs and in no other ServiceCIDR (one being deleted too
// counts, as upstream's); once none does, and ten seconds after the
// deletion (for every API server to stop allocating from it), it removes
// the finalizer and the ServiceCIDR goes.
// IPAddress deletions and new ServiceCIDRs bring a blocked deletion back
// for another look.
package servicecidrs

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/netip"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	metav1apply "k8s.io/client-go/applyconfigurations/meta/v1"
	networkingv1apply "k8s.io/client-go/applyconfigurations/networking/v1"
	"k8s.io/client-go/kubernetes"
	networkinglisters "k8s.io/client-go/listers/networking/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"

	"github.com/svcnet/svcnet/internal/controller"
	"github.com/svcnet/svcnet/internal/events"
	"github.com/svcnet/svcnet/internal/informer"
	"github.com/svcnet/svcnet/internal/netaddr"
)

// Upstream's names.
const (
	// ControllerName is the --controllers name, the field manager of the
	// Ready condition and the source of the events.
	ControllerName = "service-cidr-controller"
	// Finalizer keeps a ServiceCIDR while IPAddresses depend on it.
	Finalizer = "networking.k8s.io/service-cidr-finalizer"
	// readyMessage is the message of Ready=True (which has no reason).
	readyMessage = "Kubernetes Service CIDR is ready"
	// terminatingMessage is the message of Ready=False, reason
	// Terminating, on a deletion the IPAddresses block.
	terminatingMessage = "There are still IPAddresses referencing the ServiceCIDR, please remove them or create a new ServiceCIDR"
	// managedBy is the ipaddress.kubernetes.io/managed-by label of the
	// IPAddresses the API server's Service allocator creates (upstream's
	// ipallocator.ControllerName, svcnet's allocator.ManagedBy); others,
	// created by hand, do not block a deletion.
	managedBy = "ipallocator.k8s.io"
	// queueName labels the queue's metrics, as upstream's.
	queueName = "ipaddresses"
	// workers is how many ServiceCIDRs are synced at once; upstream has
	// no flag for it.
	workers = 5
)

// deletionGracePeriod is how long after its deletion a ServiceCIDR that
// nothing blocks keeps its finalizer, as upstream: long enough for every
// API server to see the deletion and stop allocating from it. Tests
// shorten it.
var deletionGracePeriod = 10 * time.Second

// Controller is the ServiceCIDR controller.
type Controller struct {
	client    kubernetes.Interface
	cidrs     networkinglisters.ServiceCIDRLister
	addresses networkinglisters.IPAddressLister
	synced    []cache.InformerSynced
	queue     *controller.Queue[string]
	recorder  record.EventRecorder
}

// New creates the controller and registers its informer handlers; its
// Events are recorded until ctx ends.
func New(ctx context.Context, d controller.Deps) (*Controller, error) {
	nw := d.Informers.Networking().V1()
	c := &Controller{
		client:    d.Client,
		cidrs:     nw.ServiceCIDRs().Lister(),
		addresses: nw.IPAddresses().Lister(),
		recorder:  events.NewRecorder(ctx, d.Client, ControllerName),
	}
	c.queue = controller.NewQueue(d.Metrics, controller.QueueConfig[string]{Name: queueName, Sync: c.sync})
	synced, err := informer.Register(
		informer.Handler{Informer: nw.ServiceCIDRs().Informer(), Handler: cache.ResourceEventHandlerFuncs{
			AddFunc:    c.onServiceCIDRAdd,
			UpdateFunc: func(_, cur any) { c.enqueue(cur) },
			DeleteFunc: c.enqueue,
		}},
		informer.Handler{Informer: nw.IPAddresses().Informer(), Handler: cache.ResourceEventHandlerFuncs{
			// A new address may block a deletion, a deleted one unblock it.
			AddFunc:    c.onIPAddress,
			DeleteFunc: c.onIPAddress,
		}},
	)
	if err != nil {
		return nil, fmt.Errorf("service cidr controller: %w", err)
	}
	c.synced = synced
	return c, nil
}

// Run keeps the ServiceCIDRs until ctx ends.
func (c *Controller) Run(ctx context.Context) {
	c.queue.Run(ctx, workers, c.synced...)
}

func (c *Controller) enqueue(obj any) {
	if key, ok := informer.Key(obj); ok {
		c.queue.Add(key)
	}
}

// onServiceCIDRAdd queues a new ServiceCIDR and those it overlaps: it may
// cover the addresses that block their deletion.
func (c *Controller) onServiceCIDRAdd(obj any) {
	sc, ok := informer.Object[*networkingv1.ServiceCIDR](obj)
	if !ok {
		return
	}
	c.queue.Add(sc.Name)
	all, err := c.cidrs.List(labels.Everything())
	if err != nil {
		return
	}
	for _, p := range prefixes(sc) {
		for _, other := range all {
			if other.Name != sc.Name && slices.ContainsFunc(prefixes(other), p.Overlaps) {
				c.queue.Add(other.Name)
			}
		}
	}
}

// onIPAddress queues the ServiceCIDRs holding an allocator's IPAddress.
func (c *Controller) onIPAddress(obj any) {
	ip, ok := informer.Object[*networkingv1.IPAddress](obj)
	if !ok || ip.Labels[networkingv1.LabelManagedBy] != managedBy {
		return
	}
	addr, err := netip.ParseAddr(ip.Name)
	if err != nil {
		return
	}
	all, err := c.cidrs.List(labels.Everything())
	if err != nil {
		return
	}
	for _, sc := range all {
		if holds(sc, addr) {
			c.queue.Add(sc.Name)
		}
	}
}

// prefixes are a ServiceCIDR's CIDRs; validation makes them parse.
func prefixes(sc *networkingv1.ServiceCIDR) []netip.Prefix {
	var out []netip.Prefix
	for _, cidr := range sc.Spec.CIDRs {
		if p, err := netip.ParsePrefix(cidr); err == nil {
			out = append(out, p)
		}
	}
	return out
}

// holds says whether addr is one of the addresses a ServiceCIDR hands
// out: in one of its CIDRs, and not a CIDR's network address nor, for
// IPv4, its broadcast address, as upstream.
func holds(sc *networkingv1.ServiceCIDR, addr netip.Addr) bool {
	return slices.ContainsFunc(prefixes(sc), func(p netip.Prefix) bool {
		if !p.Contains(addr) || addr == p.Masked().Addr() {
			return false
		}
		return !addr.Is4() || addr != netaddr.LastAddr(p)
	})
}

// contains says whether p lies within q.
func contains(q, p netip.Prefix) bool {
	return q.Bits() <= p.Bits() && q.Overlaps(p)
}

func (c *Controller) sync(ctx context.Context, name string) error {
	sc, err := c.cidrs.Get(name)
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("get ServiceCIDR %s: %w", name, err)
	}
	if sc.DeletionTimestamp != nil {
		return c.syncDeleting(ctx, sc)
	}
	if err := c.addFinalizer(ctx, sc); err != nil {
		return err
	}
	ready := metav1.Condition{Type: networkingv1.ServiceCIDRConditionReady, Status: metav1.ConditionTrue, Message: readyMessage}
	if err := c.setReady(ctx, sc, ready); err != nil {
		slog.Info("error updating ServiceCIDR status", "serviceCIDR", name, "err", err)
		c.recorder.Eventf(sc, corev1.EventTypeWarning, "KubernetesServiceCIDRError", "The ServiceCIDR Status can not be set to Ready=True")
		return err
	}
	return nil
}

// syncDeleting marks a deleted ServiceCIDR whose addresses would be
// orphaned Ready=False, or else removes its finalizer once the grace
// period has passed.
func (c *Controller) syncDeleting(ctx context.Context, sc *networkingv1.ServiceCIDR) error {
	blocked, err := c.blocked(sc)
	if err != nil {
		return err
	}
	if blocked {
		// An IPAddress deletion or a new ServiceCIDR brings it back.
		return c.setReady(ctx, sc, metav1.Condition{Type: networkingv1.ServiceCIDRConditionReady, Status: metav1.ConditionFalse,
			Reason: networkingv1.ServiceCIDRReasonTerminating, Message: terminatingMessage})
	}
	if wait := deletionGracePeriod - time.Since(sc.DeletionTimestamp.Time); wait > 0 {
		c.queue.AddAfter(sc.Name, wait)
		return nil
	}
	return c.removeFinalizer(ctx, sc)
}

// blocked says whether deleting sc would orphan an IPAddress of the
// allocator: one that sc holds and no other ServiceCIDR, not itself being
// deleted, does.
func (c *Controller) blocked(sc *networkingv1.ServiceCIDR) (bool, error) {
	all, err := c.cidrs.List(labels.Everything())
	if err != nil {
		return false, fmt.Errorf("list ServiceCIDRs: %w", err)
	}
	others := slices.DeleteFunc(all, func(o *networkingv1.ServiceCIDR) bool {
		return o.Name == sc.Name
	})
	own := prefixes(sc)
	// Each CIDR within another ServiceCIDR's: every address stays held.
	if len(own) > 0 && !slices.ContainsFunc(own, func(p netip.Prefix) bool {
		return !slices.ContainsFunc(others, func(o *networkingv1.ServiceCIDR) bool {
			return slices.ContainsFunc(prefixes(o), func(q netip.Prefix) bool { return contains(q, p) })
		})
	}) {
		slog.Info("Deleting ServiceCIDR contained in other ServiceCIDR", "serviceCIDR", sc.Name)
		return false, nil
	}
	for _, p := range own {
		family := corev1.IPv4Protocol
		if p.Addr().Is6() {
			family = corev1.IPv6Protocol
		}
		ips, err := c.addresses.List(labels.SelectorFromValidatedSet(labels.Set{
			networkingv1.LabelIPAddressFamily: string(family),
			networkingv1.LabelManagedBy:       managedBy,
		}))
		if err != nil {
			return false, fmt.Errorf("list IPAddresses: %w", err)
		}
		for _, ip := range ips {
			addr, err := netip.ParseAddr(ip.Name)
			if err != nil || !holds(sc, addr) {
				continue
			}
			if !slices.ContainsFunc(others, func(o *networkingv1.ServiceCIDR) bool { return holds(o, addr) }) {
				slog.Info("Deleting ServiceCIDR blocked by IP address", "serviceCIDR", sc.Name, "ipAddress", ip.Name)
				return true, nil
			}
		}
	}
	slog.Info("Deleting ServiceCIDR no longer have orphan IPs", "serviceCIDR", sc.Name)
	return false, nil
}

// patchFinalizers sends a strategic merge patch of metadata.finalizers; a
// ServiceCIDR gone already is no error.
func (c *Controller) patchFinalizers(ctx context.Context, name, directive string) error {
	patch, err := json.Marshal(map[string]any{"metadata": map[string]any{directive: []string{Finalizer}}})
	if err != nil {
		return err
	}
	_, err = c.client.NetworkingV1().ServiceCIDRs().Patch(ctx, name, types.StrategicMergePatchType, patch, metav1.PatchOptions{})
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("patch finalizers of ServiceCIDR %s: %w", name, err)
	}
	return nil
}

func (c *Controller) addFinalizer(ctx context.Context, sc *networkingv1.ServiceCIDR) error {
	if slices.Contains(sc.Finalizers, Finalizer) {
		return nil
	}
	// finalizers merge: the patch adds to those there are.
	if err := c.patchFinalizers(ctx, sc.Name, "finalizers"); err != nil {
		return err
	}
	slog.Debug("Added protection finalizer to ServiceCIDR", "serviceCIDR", sc.Name)
	return nil
}

func (c *Controller) removeFinalizer(ctx context.Context, sc *networkingv1.ServiceCIDR) error {
	if !slices.Contains(sc.Finalizers, Finalizer) {
		return nil
	}
	if err := c.patchFinalizers(ctx, sc.Name, "$deleteFromPrimitiveList/finalizers"); err != nil {
		return err
	}
	slog.Debug("Removed protection finalizer from ServiceCIDR", "serviceCIDR", sc.Name)
	return nil
}

// setReady applies the Ready condition through the status subresource,
// as its owner, unless the ServiceCIDR has it already (status, reason and
// message alike).
func (c *Controller) setReady(ctx context.Context, sc *networkingv1.ServiceCIDR, cond metav1.Condition) error {
	if cur := apimeta.FindStatusCondition(sc.Status.Conditions, cond.Type); cur != nil &&
		cur.Status == cond.Status && cur.Reason == cond.Reason && cur.Message == cond.Message {
		return nil
	}
	slog.Debug("Updating ServiceCIDR condition", "serviceCIDR", sc.Name, "conditionType", cond.Type, "status", cond.Status, "reason", cond.Reason)
	status := networkingv1apply.ServiceCIDRStatus().WithConditions(metav1apply.Condition().
		WithType(cond.Type).
		WithStatus(cond.Status).
		WithReason(cond.Reason).
		WithMessage(cond.Message).
		WithLastTransitionTime(metav1.Now()))
	_, err := c.client.NetworkingV1().ServiceCIDRs().ApplyStatus(ctx, networkingv1apply.ServiceCIDR(sc.Name).WithStatus(status),
		metav1.ApplyOptions{FieldManager: ControllerName, Force: true})
	if err != nil {
		return fmt.Errorf("set condition %s=%s of ServiceCIDR %s: %w", cond.Type, cond.Status, sc.Name, err)
	}
	return nil
}
