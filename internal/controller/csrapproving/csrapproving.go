// Package csrapproving is upstream's certificatesigningrequest-approving-controller
// (kube-controller-manager's csrapproving, pkg/controller/certificates/approver):
// it approves the kubernetes.io/kube-apiserver-client-kubelet requests of
// requestors allowed to have them, which TLS bootstrapping of nodes
// relies on. A request for a kubelet client certificate (see
// certificates.ValidateKubeletClient) is approved, reason AutoApproved,
// when a SubjectAccessReview of its requestor allows "create" on
// certificatesigningrequests/selfnodeclient, for a node renewing its own
// certificate (the subject's common name is the requestor), or on
// certificatesigningrequests/nodeclient, for a new one. A request it
// recognizes but may not approve is looked at again with backoff, so that
// a binding made later still approves it.
package csrapproving

import (
	"context"
	"crypto/x509"
	"fmt"
	"log/slog"

	authorizationv1 "k8s.io/api/authorization/v1"
	capi "k8s.io/api/certificates/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/svcnet/svcnet/internal/certificates"
	"github.com/svcnet/svcnet/internal/controller"
	csrcontroller "github.com/svcnet/svcnet/internal/controller/certificates"
)

// Upstream's names.
const (
	// ControllerName is the --controllers name.
	ControllerName = "certificatesigningrequest-approving-controller"
	// Alias is the older --controllers name upstream still accepts.
	Alias = "csrapproving"
	// workers is how many requests are looked at at once, as upstream.
	workers = 5
)

// recognizer is a kind of request that may be approved, and the
// permission its requestor needs.
type recognizer struct {
	recognize   func(csr *capi.CertificateSigningRequest, req *x509.CertificateRequest) bool
	subresource string
	message     string
}

// recognizers are upstream's, in its order.
var recognizers = []recognizer{
	{recognize: isSelfNodeClient, subresource: "selfnodeclient",
		message: "Auto approving self kubelet client certificate after SubjectAccessReview."},
	{recognize: isNodeClient, subresource: "nodeclient",
		message: "Auto approving kubelet client certificate after SubjectAccessReview."},
}

func isNodeClient(csr *capi.CertificateSigningRequest, req *x509.CertificateRequest) bool {
	return csr.Spec.SignerName == capi.KubeAPIServerClientKubeletSignerName &&
		certificates.ValidateKubeletClient(req, csr.Spec.Usages) == nil
}

func isSelfNodeClient(csr *capi.CertificateSigningRequest, req *x509.CertificateRequest) bool {
	return csr.Spec.Username == req.Subject.CommonName && isNodeClient(csr, req)
}

// Controller is the approving controller.
type Controller struct {
	*csrcontroller.Controller
	client kubernetes.Interface
}

// New creates the controller.
func New(d controller.Deps) (*Controller, error) {
	c := &Controller{client: d.Client}
	var err error
	c.Controller, err = csrcontroller.New(d, "csrapproving", workers, c.handle)
	return c, err
}

// handle approves a request neither approved nor denied that a recognizer
// knows and whose requestor holds its permission.
func (c *Controller) handle(ctx context.Context, csr *capi.CertificateSigningRequest) error {
	if approved, denied := certificates.Approval(&csr.Status); approved || denied {
		return nil
	}
	req, err := certificates.ParseCSR(csr.Spec.Request)
	if err != nil {
		return fmt.Errorf("unable to parse csr %q: %w", csr.Name, err)
	}
	var tried []string
	for _, r := range recognizers {
		if !r.recognize(csr, req) {
			continue
		}
		tried = append(tried, r.subresource)
		allowed, err := c.authorize(ctx, csr, r.subresource)
		if err != nil {
			return err
		}
		if !allowed {
			continue
		}
		csr.Status.Conditions = append(csr.Status.Conditions, capi.CertificateSigningRequestCondition{
			Type:    capi.CertificateApproved,
			Status:  corev1.ConditionTrue,
			Reason:  "AutoApproved",
			Message: r.message,
		})
		_, err = c.client.CertificatesV1().CertificateSigningRequests().UpdateApproval(ctx, csr.Name, csr, metav1.UpdateOptions{})
		switch {
		case err == nil:
			slog.Info("approved certificate signing request", "controller", ControllerName, "csr", csr.Name, "requestor", csr.Spec.Username, "as", r.subresource)
			return nil
		case apierrors.IsNotFound(err):
			return nil
		case apierrors.IsConflict(err):
			return fmt.Errorf("%w: error updating approval for csr: %w", controller.ErrStale, err)
		}
		return fmt.Errorf("error updating approval for csr: %w", err)
	}
	if len(tried) > 0 {
		return fmt.Errorf("recognized csr %q as %v but subject access review was not approved", csr.Name, tried)
	}
	return nil
}

// authorize asks whether the requestor may create
// certificatesigningrequests/<subresource>.
func (c *Controller) authorize(ctx context.Context, csr *capi.CertificateSigningRequest, subresource string) (bool, error) {
	extra := map[string]authorizationv1.ExtraValue{}
	for k, v := range csr.Spec.Extra {
		extra[k] = authorizationv1.ExtraValue(v)
	}
	sar := &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
		User: csr.Spec.Username, UID: csr.Spec.UID, Groups: csr.Spec.Groups, Extra: extra,
		ResourceAttributes: &authorizationv1.ResourceAttributes{
			Group: capi.GroupName, Version: "*", Resource: "certificatesigningrequests", Subresource: subresource, Verb: "create",
		},
	}}
	out, err := c.client.AuthorizationV1().SubjectAccessReviews().Create(ctx, sar, metav1.CreateOptions{})
	if err != nil {
		return false, fmt.Errorf("subject access review of csr %q: %w", csr.Name, err)
	}
	return out.Status.Allowed, nil
}
