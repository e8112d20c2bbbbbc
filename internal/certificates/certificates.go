// Package certificates holds what the certificates.k8s.io/v1 strategies
// (CertificateSigningRequests, ClusterTrustBundles) and the CSR
// controllers share: reading the PEM request, the approval conditions, the
// form of a signer's name and who may act for a signer (the "approve",
// "sign" and "attest" verbs on signers), and the rules upstream's signers
// hold requests to (k8s.io/kubernetes pkg/apis/certificates helpers):
// which subjects, subject alternative names and key usages a kubelet
// client, a kubelet serving and an API server client certificate may have.
package certificates

import (
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"slices"
	"strings"

	capi "k8s.io/api/certificates/v1"
	corev1 "k8s.io/api/core/v1"
)

// LegacyUnknownSignerName is the signer of requests made through
// certificates.k8s.io/v1beta1 without one; v1 refuses it on create.
const LegacyUnknownSignerName = "kubernetes.io/legacy-unknown"

// ParseCSR reads a PEM "CERTIFICATE REQUEST" block as a PKCS#10 request,
// with upstream's errors.
func ParseCSR(data []byte) (*x509.CertificateRequest, error) {
	block, _ := pem.Decode(data)
	if block == nil || block.Type != "CERTIFICATE REQUEST" {
		return nil, errors.New("PEM block type must be CERTIFICATE REQUEST")
	}
	return x509.ParseCertificateRequest(block.Bytes)
}

// Approval reports whether the request has an Approved and a Denied
// condition, whatever their status, as upstream reads them.
func Approval(status *capi.CertificateSigningRequestStatus) (approved, denied bool) {
	for _, c := range status.Conditions {
		switch c.Type {
		case capi.CertificateApproved:
			approved = true
		case capi.CertificateDenied:
			denied = true
		}
	}
	return approved, denied
}

// IsApproved: Approved and not Denied.
func IsApproved(csr *capi.CertificateSigningRequest) bool {
	approved, denied := Approval(&csr.Status)
	return approved && !denied
}

// HasTrueCondition reports a condition of type t whose status is True or
// empty.
func HasTrueCondition(csr *capi.CertificateSigningRequest, t capi.RequestConditionType) bool {
	return slices.ContainsFunc(csr.Status.Conditions, func(c capi.CertificateSigningRequestCondition) bool {
		return c.Type == t && (c.Status == "" || c.Status == corev1.ConditionTrue)
	})
}

// The errors of upstream's signer rules.
var (
	errNotSystemNodes   = errors.New("subject organization is not system:nodes")
	errNotSystemNode    = errors.New("subject common name does not begin with system:node:")
	errDNSOrIPRequired  = errors.New("DNS or IP subjectAltName is required")
	errDNSNotAllowed    = errors.New("DNS subjectAltNames are not allowed")
	errEmailNotAllowed  = errors.New("Email subjectAltNames are not allowed")
	errIPNotAllowed     = errors.New("IP subjectAltNames are not allowed")
	errURINotAllowed    = errors.New("URI subjectAltNames are not allowed")
	kubeletClientUsages = [][]capi.KeyUsage{
		{capi.UsageClientAuth, capi.UsageDigitalSignature, capi.UsageKeyEncipherment},
		{capi.UsageClientAuth, capi.UsageDigitalSignature},
	}
	kubeletServingUsages = [][]capi.KeyUsage{
		{capi.UsageDigitalSignature, capi.UsageKeyEncipherment, capi.UsageServerAuth},
		{capi.UsageDigitalSignature, capi.UsageServerAuth},
	}
)

// NodePrefix starts the user name of a node, system:node:<name>.
const NodePrefix = "system:node:"

// NodesGroup is the group of every node, system:nodes.
const NodesGroup = "system:nodes"

// ValidateKubeletClient checks a kubernetes.io/kube-apiserver-client-kubelet
// request: subject O=system:nodes and CN=system:node:<name>, no subject
// alternative names, and the usages client auth and digital signature,
// with key encipherment or without.
func ValidateKubeletClient(req *x509.CertificateRequest, usages []capi.KeyUsage) error {
	if !slices.Equal(req.Subject.Organization, []string{NodesGroup}) {
		return errNotSystemNodes
	}
	switch {
	case len(req.DNSNames) > 0:
		return errDNSNotAllowed
	case len(req.EmailAddresses) > 0:
		return errEmailNotAllowed
	case len(req.IPAddresses) > 0:
		return errIPNotAllowed
	case len(req.URIs) > 0:
		return errURINotAllowed
	}
	if !strings.HasPrefix(req.Subject.CommonName, NodePrefix) {
		return errNotSystemNode
	}
	if !usagesAre(usages, kubeletClientUsages) {
		return fmt.Errorf("usages did not match %v", kubeletClientUsages[0])
	}
	return nil
}

// ValidateKubeletServing checks a kubernetes.io/kubelet-serving request:
// subject O=system:nodes, a DNS or IP subject alternative name and no
// others, the usages server auth and digital signature, with key
// encipherment or without, and CN=system:node:<name>.
func ValidateKubeletServing(req *x509.CertificateRequest, usages []capi.KeyUsage) error {
	if !slices.Equal(req.Subject.Organization, []string{NodesGroup}) {
		return errNotSystemNodes
	}
	switch {
	case len(req.DNSNames) == 0 && len(req.IPAddresses) == 0:
		return errDNSOrIPRequired
	case len(req.EmailAddresses) > 0:
		return errEmailNotAllowed
	case len(req.URIs) > 0:
		return errURINotAllowed
	}
	if !usagesAre(usages, kubeletServingUsages) {
		return fmt.Errorf("usages did not match %v", kubeletServingUsages[0])
	}
	if !strings.HasPrefix(req.Subject.CommonName, NodePrefix) {
		return errNotSystemNode
	}
	return nil
}

// ValidateAPIServerClient checks the usages of a
// kubernetes.io/kube-apiserver-client request: client auth, and only
// digital signature and key encipherment besides.
func ValidateAPIServerClient(usages []capi.KeyUsage) error {
	clientAuth := false
	for _, u := range usages {
		switch u {
		case capi.UsageDigitalSignature, capi.UsageKeyEncipherment:
		case capi.UsageClientAuth:
			clientAuth = true
		default:
			return fmt.Errorf("invalid usage for client certificate: %s", u)
		}
	}
	if !clientAuth {
		return fmt.Errorf("missing required usage for client certificate: %s", capi.UsageClientAuth)
	}
	return nil
}

// usagesAre: the set of usages is one of the sorted sets allowed.
func usagesAre(usages []capi.KeyUsage, allowed [][]capi.KeyUsage) bool {
	set := slices.Clone(usages)
	slices.Sort(set)
	set = slices.Compact(set)
	return slices.ContainsFunc(allowed, func(a []capi.KeyUsage) bool { return slices.Equal(set, a) })
}
