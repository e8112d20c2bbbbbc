// Package defaultservicecidr keeps the default ServiceCIDR, `kubernetes`,
// as upstream's kube-apiserver controller of the same name
// (pkg/controlplane/controller/defaultservicecidr) does: it creates it
// from --service-cluster-ip-range, adds the second family when the flags
// turn a single-stack cluster dual-stack, and sets its Ready condition to
// True. It never overwrites a `kubernetes` ServiceCIDR whose CIDRs differ
// from the flags (another API server's, or one changed by hand); it logs
// that and records a Warning event once. A deleted one is created again at
// the next sync.
//
// The controller manager's service-cidr-controller
// (internal/controller/servicecidrs) adds the networking.k8s.io/
// service-cidr-finalizer to every ServiceCIDR, this one included, removes
// it once no IPAddress depends on it, and sets Ready=True in its own words;
// as upstream, this controller then finds Ready=True and leaves it.
package defaultservicecidr

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	metav1apply "k8s.io/client-go/applyconfigurations/meta/v1"
	networkingv1apply "k8s.io/client-go/applyconfigurations/networking/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/record"
)

// Upstream's names and timings.
const (
	// ControllerName is the field manager of the status and the source
	// of the events.
	ControllerName = "kubernetes-service-cidr-controller"
	// Name is the default ServiceCIDR's.
	Name = "kubernetes"
	// Interval is how often the ServiceCIDR is checked, as the kubernetes
	// Service's endpoints.
	Interval = 10 * time.Second
	// startPoll is how often Start tries until the first sync succeeds.
	startPoll = 100 * time.Millisecond
	// readyMessage is the Ready condition's message.
	readyMessage = "Kubernetes default Service CIDR is ready"
	// fieldManager writes the spec, as kube-apiserver's loopback client.
	fieldManager = "kube-apiserver"
)

// Controller keeps the default ServiceCIDR. One serves one API server; its
// reports of a mismatch are once per process, as upstream's.
type Controller struct {
	client kubernetes.Interface
	events record.EventRecorder
	cidrs  []string // the flags', the primary first

	reportedMismatch, reportedNotReady bool
}

// New returns a controller that keeps the ServiceCIDR with cidrs (one, or
// two of different families: the primary first), writing through client
// and recording events with events.
func New(client kubernetes.Interface, cidrs []string, events record.EventRecorder) *Controller {
	return &Controller{client: client, events: events, cidrs: slices.Clone(cidrs)}
}

// Start syncs until it succeeds once or ctx ends, as upstream's blocks the
// API server's start until the default ServiceCIDR exists.
func (c *Controller) Start(ctx context.Context) error {
	t := time.NewTicker(startPoll)
	defer t.Stop()
	for {
		err := c.sync(ctx)
		if err == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("create the default ServiceCIDR: %w", err)
		case <-t.C:
		}
	}
}

// Run syncs every Interval until ctx ends.
func (c *Controller) Run(ctx context.Context) {
	t := time.NewTicker(Interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			if err := c.sync(ctx); err != nil && ctx.Err() == nil {
				slog.Error("error trying to sync the default ServiceCIDR", "err", err)
			}
		}
	}
}

func (c *Controller) sync(ctx context.Context) error {
	cidrs := c.client.NetworkingV1().ServiceCIDRs()
	cur, err := cidrs.Get(ctx, Name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		slog.Info("Creating default ServiceCIDR", "CIDRs", c.cidrs)
		want := &networkingv1.ServiceCIDR{ObjectMeta: metav1.ObjectMeta{Name: Name},
			Spec: networkingv1.ServiceCIDRSpec{CIDRs: slices.Clone(c.cidrs)}}
		created, err := cidrs.Create(ctx, want, metav1.CreateOptions{FieldManager: fieldManager})
		if err == nil {
			c.syncStatus(ctx, created)
			return nil
		}
		if !apierrors.IsAlreadyExists(err) {
			c.events.Eventf(want, corev1.EventTypeWarning, "KubernetesDefaultServiceCIDRError", "The default ServiceCIDR can not be created")
			return err
		}
		// Another API server created it first.
		cur, err = cidrs.Get(ctx, Name, metav1.GetOptions{})
	}
	if err != nil {
		return err
	}
	if len(c.cidrs) == 2 && len(cur.Spec.CIDRs) == 1 && c.cidrs[0] == cur.Spec.CIDRs[0] {
		slog.Info("Updating default ServiceCIDR from single-stack to dual-stack", "from", cur.Spec.CIDRs, "to", c.cidrs)
		next := cur.DeepCopy()
		next.Spec.CIDRs = slices.Clone(c.cidrs)
		if _, err := cidrs.Update(ctx, next, metav1.UpdateOptions{FieldManager: fieldManager}); err != nil {
			slog.Error("The default ServiceCIDR can not be updated to dual stack", "from", c.cidrs[0], "to", c.cidrs, "err", err)
			c.events.Eventf(cur, corev1.EventTypeWarning, "KubernetesDefaultServiceCIDRError",
				"The default ServiceCIDR can not be upgraded from %s to dual stack %v : %v", c.cidrs[0], c.cidrs, err)
		}
		return nil
	}
	c.syncStatus(ctx, cur)
	return nil
}

// syncStatus sets Ready=True when the ServiceCIDR has the flags' CIDRs and
// no Ready condition (or an Unknown one). It leaves a ServiceCIDR being
// deleted, one with other CIDRs, and one that some other component marked
// Ready=False alone, reporting the latter two once.
func (c *Controller) syncStatus(ctx context.Context, sc *networkingv1.ServiceCIDR) {
	if sc.DeletionTimestamp != nil {
		return
	}
	if !slices.Equal(c.cidrs, sc.Spec.CIDRs) {
		if !c.reportedMismatch {
			slog.Info("Inconsistent ServiceCIDR status", "serviceCIDR", sc.Name, "controllerCIDRs", c.cidrs, "serviceCIDRs", sc.Spec.CIDRs)
			c.events.Eventf(sc, corev1.EventTypeWarning, "KubernetesDefaultServiceCIDRInconsistent",
				"The default ServiceCIDR %v does not match the controller flag configurations %s", sc.Spec.CIDRs, c.cidrs)
			c.reportedMismatch = true
		}
		return
	}
	ready := apimeta.FindStatusCondition(sc.Status.Conditions, networkingv1.ServiceCIDRConditionReady)
	switch {
	case ready != nil && ready.Status == metav1.ConditionFalse:
		if !c.reportedNotReady {
			slog.Info("Default ServiceCIDR condition Ready is False, but controller configuration matches. Please validate your cluster's network configuration.",
				"serviceCIDR", sc.Name, "status", ready.Status, "reason", ready.Reason, "message", ready.Message)
			c.events.Eventf(sc, corev1.EventTypeWarning, ready.Reason, "Configuration matches, but %s", ready.Message)
			c.reportedNotReady = true
		}
	case ready != nil && ready.Status == metav1.ConditionTrue:
	default:
		slog.Info("Setting default ServiceCIDR condition Ready to True")
		status := networkingv1apply.ServiceCIDRStatus().WithConditions(metav1apply.Condition().
			WithType(networkingv1.ServiceCIDRConditionReady).
			WithStatus(metav1.ConditionTrue).
			WithMessage(readyMessage).
			WithLastTransitionTime(metav1.Now()))
		apply := networkingv1apply.ServiceCIDR(Name).WithStatus(status)
		if _, err := c.client.NetworkingV1().ServiceCIDRs().ApplyStatus(ctx, apply,
			metav1.ApplyOptions{FieldManager: ControllerName, Force: true}); err != nil {
			slog.Error("error updating default ServiceCIDR status", "err", err)
			c.events.Eventf(sc, corev1.EventTypeWarning, "KubernetesDefaultServiceCIDRError", "The default ServiceCIDR Status can not be set to Ready=True")
		}
	}
}
