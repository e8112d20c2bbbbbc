package noderestriction

import (
	"context"
	"fmt"
	"strings"

	certificatesv1 "k8s.io/api/certificates/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"github.com/svcnet/svcnet/internal/admission"
	"github.com/svcnet/svcnet/internal/auth/authz"
)

// admitPodCertificateRequest lets a node create a PodCertificateRequest
// only for a pod bound to itself (not a mirror pod), naming itself, the
// pod and the pod's service account with their UIDs, for a signer one of
// the pod's podCertificate projections names (or that the authorizer lets
// the node request for the service account). A UID that differs from the
// cache's may be the cache's lag: that refusal is no Forbidden, so that
// the node tries again.
func (p *Plugin) admitPodCertificateRequest(ctx context.Context, node string, a *admission.Attributes) error {
	if a.Operation != admission.Create {
		return admission.Forbidden(a, fmt.Errorf("unexpected operation %v", a.Operation))
	}
	if a.Subresource != "" {
		return admission.Forbidden(a, fmt.Errorf("unexpected subresource %v", a.Subresource))
	}
	req, ok := a.Object.(*certificatesv1.PodCertificateRequest)
	if !ok {
		return unexpected(a, a.Object)
	}
	spec := &req.Spec
	podName := a.Namespace + "/" + spec.PodName
	if string(spec.NodeName) != node {
		return admission.Forbidden(a, fmt.Errorf("PodCertificateRequest.Spec.NodeName=%q, which is not the requesting node %q", spec.NodeName, node))
	}
	n, err := p.nodes.Get(node)
	switch {
	case apierrors.IsNotFound(err):
		return fmt.Errorf("while retrieving node %q named in the PodCertificateRequest: %w", node, err)
	case err != nil:
		return admission.Forbidden(a, fmt.Errorf("while retrieving node %q named in the PodCertificateRequest: %w", node, err))
	case n.UID != spec.NodeUID:
		return fmt.Errorf("PodCertificateRequest for pod %q names node UID %q, inconsistent with the running node (%q)", podName, spec.NodeUID, n.UID)
	}
	pod, err := p.pods.Pods(a.Namespace).Get(spec.PodName)
	switch {
	case apierrors.IsNotFound(err):
		return fmt.Errorf("while retrieving pod %q named in the PodCertificateRequest: %w", podName, err)
	case err != nil:
		return admission.Forbidden(a, fmt.Errorf("while retrieving pod %q named in the PodCertificateRequest: %w", podName, err))
	case pod.UID != spec.PodUID:
		return fmt.Errorf("PodCertificateRequest for pod %q contains pod UID (%q) which differs from running pod %q", podName, spec.PodUID, pod.UID)
	case pod.Spec.NodeName != node:
		return admission.Forbidden(a, fmt.Errorf("pod %q is not running on node %q named in the PodCertificateRequest", podName, spec.NodeName))
	}
	if _, mirror := pod.Annotations[corev1.MirrorPodAnnotationKey]; mirror {
		return admission.Forbidden(a, fmt.Errorf("pod %q is a mirror pod", podName))
	}
	if spec.ServiceAccountName != pod.Spec.ServiceAccountName {
		return admission.Forbidden(a, fmt.Errorf("PodCertificateRequest for pod %q contains serviceAccountName (%q) that differs from running pod (%q)",
			podName, spec.ServiceAccountName, pod.Spec.ServiceAccountName))
	}
	saName := a.Namespace + "/" + spec.ServiceAccountName
	sa, err := p.serviceAccounts.ServiceAccounts(a.Namespace).Get(spec.ServiceAccountName)
	switch {
	case apierrors.IsNotFound(err):
		return fmt.Errorf("while retrieving service account %q named in the PodCertificateRequest: %w", saName, err)
	case err != nil:
		return admission.Forbidden(a, fmt.Errorf("while retrieving service account %q named in the PodCertificateRequest: %w", saName, err))
	case sa.UID != spec.ServiceAccountUID:
		return fmt.Errorf("PodCertificateRequest for pod %q names service account UID %q, which differs from the running service account (%q)",
			podName, spec.ServiceAccountUID, sa.UID)
	}
	if err := p.signerAllowed(ctx, a, pod, req); err != nil {
		return admission.Forbidden(a, err)
	}
	return nil
}

// signerAllowed: the pod has a podCertificate projection for the
// request's signer, or the authorizer lets the node
// "request-serviceaccounts-podcertificate-signer" the service account (by
// name) of the resource named after the signer with ':' for '/', as an
// RBAC resource holds no slash.
func (p *Plugin) signerAllowed(ctx context.Context, a *admission.Attributes, pod *corev1.Pod, req *certificatesv1.PodCertificateRequest) error {
	signer := req.Spec.SignerName
	if projects(pod, func(s *corev1.VolumeProjection) bool {
		return s.PodCertificate != nil && s.PodCertificate.SignerName == signer
	}) {
		return nil
	}
	if p.authorizer != nil {
		d, _, err := p.authorizer.Authorize(ctx, authz.Attributes{User: a.User, Verb: "request-serviceaccounts-podcertificate-signer",
			ResourceRequest: true, APIGroup: a.Resource.Group, APIVersion: a.Version, Resource: strings.ReplaceAll(signer, "/", ":"),
			Namespace: a.Namespace, Name: req.Spec.ServiceAccountName})
		// An authorizer may allow despite an error (RBAC with a rule it
		// could not read): the decision first.
		if d == authz.Allow {
			return nil
		}
		if err != nil {
			return fmt.Errorf("error authorizing %s to request podcertificaterequests for signer %q: %w", a.User.GetName(), signer, err)
		}
	}
	return fmt.Errorf("pod %q does not mount a podCertificate projected volume for signer %q", a.Namespace+"/"+req.Spec.PodName, signer)
}
