// Package csrcleaner is upstream's certificatesigningrequest-cleaner-controller
// (kube-controller-manager's csrcleaner, pkg/controller/certificates/cleaner):
// every hour it deletes the CertificateSigningRequests that are done
// with, so that the requests of nodes renewing their certificates do not
// pile up: issued ones an hour after approval, denied and failed ones an
// hour after that condition, pending ones a day after creation, approved
// ones never issued a day after approval, and any whose certificate has
// expired.
package csrcleaner

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	capi "k8s.io/api/certificates/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	certlisters "k8s.io/client-go/listers/certificates/v1"
	"k8s.io/client-go/tools/cache"
	certutil "k8s.io/client-go/util/cert"

	"github.com/svcnet/svcnet/internal/controller"
)

// Upstream's names and times.
const (
	// ControllerName is the --controllers name.
	ControllerName = "certificatesigningrequest-cleaner-controller"
	// Alias is the older --controllers name upstream still accepts.
	Alias = "csrcleaner"

	pollingInterval    = time.Hour
	approvedExpiration = time.Hour
	deniedExpiration   = time.Hour
	pendingExpiration  = 24 * time.Hour
)

// Controller is the cleaner.
type Controller struct {
	client kubernetes.Interface
	lister certlisters.CertificateSigningRequestLister
	synced cache.InformerSynced
}

// New creates the cleaner over the shared CertificateSigningRequest
// informer.
func New(d controller.Deps) *Controller {
	informer := d.Informers.Certificates().V1().CertificateSigningRequests()
	return &Controller{client: d.Client, lister: informer.Lister(), synced: informer.Informer().HasSynced}
}

// Run cleans at once and then every hour, until ctx ends.
func (c *Controller) Run(ctx context.Context) {
	slog.Info("starting controller", "controller", ControllerName)
	defer slog.Info("stopped controller", "controller", ControllerName)
	if !cache.WaitForCacheSync(ctx.Done(), c.synced) {
		return
	}
	wait.UntilWithContext(ctx, func(ctx context.Context) { c.clean(ctx, time.Now()) }, pollingInterval)
}

// clean deletes every request done with at now.
func (c *Controller) clean(ctx context.Context, now time.Time) {
	csrs, err := c.lister.List(labels.Everything())
	if err != nil {
		slog.Error("Unable to list CSRs", "controller", ControllerName, "err", err)
		return
	}
	for _, csr := range csrs {
		why := expired(csr, now)
		if why == "" {
			continue
		}
		err := c.client.CertificatesV1().CertificateSigningRequests().Delete(ctx, csr.Name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &csr.UID}})
		switch {
		case err == nil:
			slog.Info("Cleaning CSR", "controller", ControllerName, "csr", csr.Name, "reason", why)
		case apierrors.IsNotFound(err), apierrors.IsConflict(err):
		default:
			slog.Error("Error while attempting to clean CSR", "controller", ControllerName, "csr", csr.Name,
				"err", fmt.Errorf("unable to delete CSR %q: %w", csr.Name, err))
		}
	}
}

// expired says why the request is done with at now, or "" when it is not.
func expired(csr *capi.CertificateSigningRequest, now time.Time) string {
	older := func(t metav1.Time, d time.Duration) bool { return !t.IsZero() && now.Sub(t.Time) > d }
	issued := len(csr.Status.Certificate) > 0
	for _, c := range csr.Status.Conditions {
		switch {
		case c.Type == capi.CertificateApproved && issued && older(c.LastUpdateTime, approvedExpiration):
			return "issued more than an hour ago"
		case c.Type == capi.CertificateDenied && older(c.LastUpdateTime, deniedExpiration):
			return "denied more than an hour ago"
		case c.Type == capi.CertificateFailed && older(c.LastUpdateTime, deniedExpiration):
			return "failed more than an hour ago"
		case c.Type == capi.CertificateApproved && issued && certificateExpired(csr.Status.Certificate, now):
			return "its certificate has expired"
		case c.Type == capi.CertificateApproved && !issued && older(c.LastUpdateTime, pendingExpiration):
			return "approved but not issued for more than a day"
		}
	}
	if len(csr.Status.Conditions) == 0 && older(csr.CreationTimestamp, pendingExpiration) {
		return "pending for more than a day"
	}
	return ""
}

// certificateExpired: the first certificate of the PEM has passed its
// NotAfter.
func certificateExpired(data []byte, now time.Time) bool {
	certs, err := certutil.ParseCertsPEM(data)
	return err == nil && len(certs) > 0 && now.After(certs[0].NotAfter)
}
