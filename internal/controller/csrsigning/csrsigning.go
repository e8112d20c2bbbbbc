// Package csrsigning is upstream's certificatesigningrequest-signing-controller
// (kube-controller-manager's csrsigning, pkg/controller/certificates/signer):
// it issues the approved CertificateSigningRequests of the built-in
// signers kubernetes.io/kube-apiserver-client,
// kubernetes.io/kube-apiserver-client-kubelet, kubernetes.io/kubelet-serving
// and kubernetes.io/legacy-unknown with the cluster CA
// (--cluster-signing-cert-file, --cluster-signing-key-file). A request the
// signer's rules refuse (a kubelet client certificate not for
// O=system:nodes, CN=system:node:<name>, say) gets a Failed condition,
// reason SignerValidationFailure. As upstream's local signer, a
// certificate lives --cluster-signing-duration (a year by default), or
// what spec.expirationSeconds asks when that is shorter (10 minutes at
// least); it starts 5 minutes back, and one of 8 hours or more ends 5
// minutes early, never after the CA does; it keeps the request's subject
// and subject alternative names, has the requested key usages, and no
// other extension.
package csrsigning

import (
	"context"
	"crypto"
	"crypto/rand"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"log/slog"
	"math/big"
	"os"
	"slices"
	"time"

	capi "k8s.io/api/certificates/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	certutil "k8s.io/client-go/util/cert"
	"k8s.io/client-go/util/keyutil"

	"github.com/svcnet/svcnet/internal/certificates"
	"github.com/svcnet/svcnet/internal/controller"
	csrcontroller "github.com/svcnet/svcnet/internal/controller/certificates"
)

// Upstream's names.
const (
	// ControllerName is the --controllers name.
	ControllerName = "certificatesigningrequest-signing-controller"
	// Alias is the older --controllers name upstream still accepts.
	Alias = "csrsigning"
	// DefaultDuration is --cluster-signing-duration's default.
	DefaultDuration = 365 * 24 * time.Hour
	// workers is how many requests are signed at once, as upstream.
	workers = 5
)

// The local signer's times, upstream's.
const (
	backdate    = 5 * time.Minute
	short       = 8 * time.Hour
	minDuration = 10 * time.Minute
)

// Options are kube-controller-manager's signing flags.
type Options struct {
	// CertFile and KeyFile are --cluster-signing-cert-file and
	// --cluster-signing-key-file: the PEM CA that signs; without both
	// the controller does not run.
	CertFile, KeyFile string
	// Duration is --cluster-signing-duration, the longest certificate.
	Duration time.Duration
}

// rules are the checks of each signer this controller serves: a request
// they refuse fails.
var rules = map[string]func(req *x509.CertificateRequest, usages []capi.KeyUsage) error{
	capi.KubeAPIServerClientSignerName: func(_ *x509.CertificateRequest, usages []capi.KeyUsage) error {
		return certificates.ValidateAPIServerClient(usages)
	},
	capi.KubeAPIServerClientKubeletSignerName: certificates.ValidateKubeletClient,
	capi.KubeletServingSignerName:             certificates.ValidateKubeletServing,
	// No rules, for compatibility, as upstream.
	certificates.LegacyUnknownSignerName: func(*x509.CertificateRequest, []capi.KeyUsage) error { return nil },
}

// Signer signs requests with a CA.
type Signer struct {
	ca       *x509.Certificate
	key      crypto.Signer
	duration time.Duration
	now      func() time.Time
}

// NewSigner reads the CA of o.
func NewSigner(o Options) (*Signer, error) {
	certPEM, err := os.ReadFile(o.CertFile)
	if err != nil {
		return nil, fmt.Errorf("error reading CA cert file %q: %w", o.CertFile, err)
	}
	keyPEM, err := os.ReadFile(o.KeyFile)
	if err != nil {
		return nil, fmt.Errorf("error reading CA key file %q: %w", o.KeyFile, err)
	}
	certs, err := certutil.ParseCertsPEM(certPEM)
	if err != nil {
		return nil, fmt.Errorf("error reading CA cert file %q: %w", o.CertFile, err)
	}
	if len(certs) != 1 {
		return nil, fmt.Errorf("error reading CA cert file %q: expected 1 certificate, found %d", o.CertFile, len(certs))
	}
	key, err := keyutil.ParsePrivateKeyPEM(keyPEM)
	if err != nil {
		return nil, fmt.Errorf("error reading CA key file %q: %w", o.KeyFile, err)
	}
	signer, ok := key.(crypto.Signer)
	if !ok {
		return nil, fmt.Errorf("error reading CA key file %q: key did not implement crypto.Signer", o.KeyFile)
	}
	d := o.Duration
	if d == 0 {
		d = DefaultDuration
	}
	return &Signer{ca: certs[0], key: signer, duration: d, now: time.Now}, nil
}

// Controller is the signing controller.
type Controller struct {
	*csrcontroller.Controller
	client kubernetes.Interface
	signer *Signer
}

// New creates the controller, which signs with signer.
func New(d controller.Deps, signer *Signer) (*Controller, error) {
	c := &Controller{client: d.Client, signer: signer}
	var err error
	c.Controller, err = csrcontroller.New(d, "csrsigning", workers, c.handle)
	return c, err
}

// handle issues an approved, not failed request of a served signer, or
// marks it failed when the signer's rules refuse it.
func (c *Controller) handle(ctx context.Context, csr *capi.CertificateSigningRequest) error {
	check, served := rules[csr.Spec.SignerName]
	if !served || !certificates.IsApproved(csr) || certificates.HasTrueCondition(csr, capi.CertificateFailed) {
		return nil
	}
	req, err := certificates.ParseCSR(csr.Spec.Request)
	if err != nil {
		return fmt.Errorf("unable to parse csr %q: %w", csr.Name, err)
	}
	if err := check(req, csr.Spec.Usages); err != nil {
		csr.Status.Conditions = append(csr.Status.Conditions, capi.CertificateSigningRequestCondition{
			Type:           capi.CertificateFailed,
			Status:         corev1.ConditionTrue,
			Reason:         "SignerValidationFailure",
			Message:        err.Error(),
			LastUpdateTime: metav1.Now(),
		})
		slog.Info("request refused by its signer", "controller", ControllerName, "csr", csr.Name, "signer", csr.Spec.SignerName, "err", err)
		return c.updateStatus(ctx, csr, "error adding failure condition for csr")
	}
	cert, err := c.signer.Sign(req, csr.Spec.Usages, csr.Spec.ExpirationSeconds)
	if err != nil {
		return fmt.Errorf("error auto signing csr: %w", err)
	}
	csr.Status.Certificate = cert
	slog.Debug("issued certificate", "controller", ControllerName, "csr", csr.Name, "signer", csr.Spec.SignerName)
	return c.updateStatus(ctx, csr, "error updating signature for csr")
}

func (c *Controller) updateStatus(ctx context.Context, csr *capi.CertificateSigningRequest, what string) error {
	_, err := c.client.CertificatesV1().CertificateSigningRequests().UpdateStatus(ctx, csr, metav1.UpdateOptions{})
	switch {
	case err == nil, apierrors.IsNotFound(err):
		return nil
	case apierrors.IsConflict(err):
		return fmt.Errorf("%w: %s: %w", controller.ErrStale, what, err)
	}
	return fmt.Errorf("%s: %w", what, err)
}

// Duration is how long a certificate for a request asking expirationSeconds
// lives.
func (s *Signer) Duration(expirationSeconds *int32) time.Duration {
	if expirationSeconds == nil {
		return s.duration
	}
	return min(max(time.Duration(*expirationSeconds)*time.Second, minDuration), s.duration)
}

// Sign issues a PEM certificate for req with usages, as upstream's
// PermissiveSigningPolicy.
func (s *Signer) Sign(req *x509.CertificateRequest, usages []capi.KeyUsage, expirationSeconds *int32) ([]byte, error) {
	if err := req.CheckSignature(); err != nil {
		return nil, fmt.Errorf("unable to verify certificate request signature: %w", err)
	}
	keyUsage, extUsages, err := keyUsages(usages)
	if err != nil {
		return nil, err
	}
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 128))
	if err != nil {
		return nil, fmt.Errorf("unable to generate a serial number for %s: %w", req.Subject.CommonName, err)
	}
	now := s.now()
	ttl := s.Duration(expirationSeconds)
	tmpl := &x509.Certificate{
		SerialNumber:          serial,
		Subject:               req.Subject,
		DNSNames:              req.DNSNames,
		IPAddresses:           req.IPAddresses,
		EmailAddresses:        req.EmailAddresses,
		URIs:                  req.URIs,
		KeyUsage:              keyUsage,
		ExtKeyUsage:           extUsages,
		BasicConstraintsValid: true,
		NotBefore:             now.Add(-backdate),
		NotAfter:              now.Add(ttl),
	}
	if ttl >= short {
		tmpl.NotAfter = now.Add(ttl - backdate)
	}
	caEnd := s.ca.NotAfter
	if !tmpl.NotAfter.Before(caEnd) {
		tmpl.NotAfter = caEnd
	}
	if !tmpl.NotBefore.Before(caEnd) {
		return nil, fmt.Errorf("the signer has expired: NotAfter=%v", caEnd)
	}
	if !now.Before(caEnd) {
		return nil, fmt.Errorf("refusing to sign a certificate that expired in the past: NotAfter=%v", caEnd)
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, s.ca, req.PublicKey, s.key)
	if err != nil {
		return nil, fmt.Errorf("failed to sign certificate: %w", err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), nil
}

var keyUsageOf = map[capi.KeyUsage]x509.KeyUsage{
	capi.UsageSigning:           x509.KeyUsageDigitalSignature,
	capi.UsageDigitalSignature:  x509.KeyUsageDigitalSignature,
	capi.UsageContentCommitment: x509.KeyUsageContentCommitment,
	capi.UsageKeyEncipherment:   x509.KeyUsageKeyEncipherment,
	capi.UsageKeyAgreement:      x509.KeyUsageKeyAgreement,
	capi.UsageDataEncipherment:  x509.KeyUsageDataEncipherment,
	capi.UsageCertSign:          x509.KeyUsageCertSign,
	capi.UsageCRLSign:           x509.KeyUsageCRLSign,
	capi.UsageEncipherOnly:      x509.KeyUsageEncipherOnly,
	capi.UsageDecipherOnly:      x509.KeyUsageDecipherOnly,
}

var extKeyUsageOf = map[capi.KeyUsage]x509.ExtKeyUsage{
	capi.UsageAny:             x509.ExtKeyUsageAny,
	capi.UsageServerAuth:      x509.ExtKeyUsageServerAuth,
	capi.UsageClientAuth:      x509.ExtKeyUsageClientAuth,
	capi.UsageCodeSigning:     x509.ExtKeyUsageCodeSigning,
	capi.UsageEmailProtection: x509.ExtKeyUsageEmailProtection,
	capi.UsageSMIME:           x509.ExtKeyUsageEmailProtection,
	capi.UsageIPsecEndSystem:  x509.ExtKeyUsageIPSECEndSystem,
	capi.UsageIPsecTunnel:     x509.ExtKeyUsageIPSECTunnel,
	capi.UsageIPsecUser:       x509.ExtKeyUsageIPSECUser,
	capi.UsageTimestamping:    x509.ExtKeyUsageTimeStamping,
	capi.UsageOCSPSigning:     x509.ExtKeyUsageOCSPSigning,
	capi.UsageMicrosoftSGC:    x509.ExtKeyUsageMicrosoftServerGatedCrypto,
	capi.UsageNetscapeSGC:     x509.ExtKeyUsageNetscapeServerGatedCrypto,
}

// keyUsages turns usages into the certificate's key usage bits and its
// extended key usages, sorted.
func keyUsages(usages []capi.KeyUsage) (x509.KeyUsage, []x509.ExtKeyUsage, error) {
	var bits x509.KeyUsage
	var ext []x509.ExtKeyUsage
	var unknown []capi.KeyUsage
	for _, u := range usages {
		if b, ok := keyUsageOf[u]; ok {
			bits |= b
		} else if e, ok := extKeyUsageOf[u]; ok {
			ext = append(ext, e)
		} else {
			unknown = append(unknown, u)
		}
	}
	if len(unknown) > 0 {
		return 0, nil, fmt.Errorf("unrecognized usage values: %q", unknown)
	}
	slices.Sort(ext)
	return bits, slices.Compact(ext), nil
}
