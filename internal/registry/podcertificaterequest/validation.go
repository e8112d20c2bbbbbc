package podcertificaterequest

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rsa"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"net/mail"
	"strconv"
	"strings"
	"time"

	capi "k8s.io/api/certificates/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apivalidation "k8s.io/apimachinery/pkg/api/validation"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	metav1validation "k8s.io/apimachinery/pkg/apis/meta/v1/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/svcnet/svcnet/internal/certificates"
)

// Upstream's bounds (pkg/apis/certificates).
const (
	maxUIDLength           = 128
	maxStubRequestSize     = 10 * 1024
	maxCertificateChain    = 100 * 1024
	minMaxExpiration       = 60 * 60
	maxMaxExpiration       = 91 * 24 * 60 * 60
	kubernetesMaxExpiation = 24 * 60 * 60
)

var (
	specPath         = field.NewPath("spec")
	stubPath         = specPath.Child("stubPKCS10Request")
	pkixPath         = specPath.Child("pkixPublicKey")
	certChainPath    = field.NewPath("status", "certificateChain")
	notBeforePath    = field.NewPath("status", "notBefore")
	notAfterPath     = field.NewPath("status", "notAfter")
	beginRefreshPath = field.NewPath("status", "beginRefreshAt")
	terminal         = []string{capi.PodCertificateRequestConditionTypeIssued, capi.PodCertificateRequestConditionTypeDenied, capi.PodCertificateRequestConditionTypeFailed}
)

// validateCreate is upstream's ValidatePodCertificateRequestCreate
// without the metadata, in its order. v1 has only the stub PKCS#10
// request: the pkixPublicKey and proofOfPossession of v1beta1 are never
// set, so a request without the stub is told that one of them must be.
func validateCreate(r *capi.PodCertificateRequest) field.ErrorList {
	errs := certificates.ValidateSignerName(specPath.Child("signerName"), r.Spec.SignerName)
	if r.Spec.UnverifiedUserAnnotations != nil {
		errs = append(errs, certificates.ValidateUserAnnotations(r.Spec.UnverifiedUserAnnotations, specPath.Child("unverifiedUserAnnotations"))...)
	}
	for _, msg := range apivalidation.NameIsDNSSubdomain(r.Spec.PodName, false) {
		errs = append(errs, field.Invalid(specPath.Child("podName"), r.Spec.PodName, msg))
	}
	errs = append(errs, validateUID(specPath.Child("podUID"), string(r.Spec.PodUID))...)
	for _, msg := range apivalidation.NameIsDNSSubdomain(r.Spec.ServiceAccountName, false) {
		errs = append(errs, field.Invalid(specPath.Child("serviceAccountName"), r.Spec.ServiceAccountName, msg))
	}
	errs = append(errs, validateUID(specPath.Child("serviceAccountUID"), string(r.Spec.ServiceAccountUID))...)
	for _, msg := range apivalidation.NameIsDNSSubdomain(string(r.Spec.NodeName), false) {
		errs = append(errs, field.Invalid(specPath.Child("nodeName"), r.Spec.NodeName, msg))
	}
	errs = append(errs, validateUID(specPath.Child("nodeUID"), string(r.Spec.NodeUID))...)

	m := r.Spec.MaxExpirationSeconds
	if m == nil {
		return append(errs, field.Required(specPath.Child("maxExpirationSeconds"), "must be set"))
	}
	most := int32(maxMaxExpiration)
	if certificates.IsKubernetesSigner(r.Spec.SignerName) {
		most = kubernetesMaxExpiation
	}
	if *m < minMaxExpiration || *m > most {
		errs = append(errs, field.Invalid(specPath.Child("maxExpirationSeconds"), m, fmt.Sprintf("must be in the range [%d, %d]", minMaxExpiration, most)))
	}

	if len(r.Spec.StubPKCS10Request) == 0 {
		return append(errs, field.Invalid(specPath, field.OmitValueType{}, "exactly one of (stubPKCS10Request) or (pkixPublicKey, proofOfPossession) must be set"))
	}
	return append(errs, validateStubRequest(r.Spec.StubPKCS10Request)...)
}

// validateUID: a UID of the pod, service account or node is set, and 128
// bytes at most.
func validateUID(path *field.Path, uid string) field.ErrorList {
	var errs field.ErrorList
	if uid == "" {
		errs = append(errs, field.Invalid(path, uid, "must not be empty"))
	}
	if len(uid) > maxUIDLength {
		errs = append(errs, field.TooLong(path, uid, maxUIDLength))
	}
	return errs
}

// validateStubRequest is upstream's validateStubPKCS10Request: a PKCS#10
// request of an Ed25519 key, an ECDSA key on P-256, P-384 or P-521, or a
// 3072- or 4096-bit RSA key, whose signature verifies (the proof that the
// requester holds the private key). Its contents are not checked.
func validateStubRequest(der []byte) field.ErrorList {
	if len(der) > maxStubRequestSize {
		return field.ErrorList{field.TooLong(stubPath, der, maxStubRequestSize)}
	}
	req, err := x509.ParseCertificateRequest(der)
	if err != nil {
		return field.ErrorList{field.Invalid(stubPath, field.OmitValueType{}, "must be a valid PKCS#10 CSR")}
	}
	switch pub := req.PublicKey.(type) {
	case ed25519.PublicKey:
	case *ecdsa.PublicKey:
		if pub.Curve != elliptic.P256() && pub.Curve != elliptic.P384() && pub.Curve != elliptic.P521() {
			return field.ErrorList{field.Invalid(stubPath, "curve "+pub.Curve.Params().Name, "elliptic public keys must use curve P256, P384, or P521")}
		}
	case *rsa.PublicKey:
		if bits := pub.Size() * 8; bits != 3072 && bits != 4096 {
			return field.ErrorList{field.Invalid(stubPath, fmt.Sprintf("%d-bit modulus", bits), "RSA keys must have modulus size 3072 or 4096")}
		}
	default:
		return field.ErrorList{field.Invalid(stubPath, field.OmitValueType{}, "unknown public key type; supported types are Ed25519, ECDSA, and RSA")}
	}
	if err := req.CheckSignature(); err != nil {
		return field.ErrorList{field.Invalid(stubPath, field.OmitValueType{}, "invalid signature")}
	}
	return nil
}

// validateSpecUpdate is upstream's ValidatePodCertificateRequestUpdate
// without the metadata: the spec never changes.
func validateSpecUpdate(r, old *capi.PodCertificateRequest) field.ErrorList {
	return apivalidation.ValidateImmutableField(r.Spec, old.Spec, specPath)
}

// validateStatusUpdate is upstream's
// ValidatePodCertificateRequestStatusUpdate without the metadata, now
// being the API server's time.
func validateStatusUpdate(r, old *capi.PodCertificateRequest, now time.Time) field.ErrorList {
	var errs field.ErrorList
	known := 0
	for i, c := range r.Status.Conditions {
		switch c.Type {
		case capi.PodCertificateRequestConditionTypeIssued, capi.PodCertificateRequestConditionTypeDenied, capi.PodCertificateRequestConditionTypeFailed:
			known++
			if known > 1 {
				errs = append(errs, field.Invalid(field.NewPath("status", "conditions", "["+strconv.Itoa(i)+"]", "type"), c.Type,
					`There may be at most one condition with type "Issued", "Denied", or "Failed"`))
			}
			if c.Status != metav1.ConditionTrue {
				errs = append(errs, field.NotSupported(field.NewPath("status", "conditions", "["+strconv.Itoa(i)+"]", "status"), c.Status, []metav1.ConditionStatus{metav1.ConditionTrue}))
			}
		default:
			errs = append(errs, field.NotSupported(field.NewPath("status", "conditions", "["+strconv.Itoa(i)+"]", "type"), c.Type, terminal))
		}
	}
	errs = append(errs, metav1validation.ValidateConditions(r.Status.Conditions, field.NewPath("status", "conditions"))...)
	// The conditions drive the rest: stop at a fault in them.
	if len(errs) > 0 {
		return errs
	}

	if isTrue(old, capi.PodCertificateRequestConditionTypeIssued) || isTrue(old, capi.PodCertificateRequestConditionTypeDenied) || isTrue(old, capi.PodCertificateRequestConditionTypeFailed) {
		return sameStatus(r.Status, old.Status, "immutable after PodCertificateRequest is issued, denied, or failed")
	}
	if isTrue(r, capi.PodCertificateRequestConditionTypeDenied) || isTrue(r, capi.PodCertificateRequestConditionTypeFailed) {
		return sameStatus(r.Status, capi.PodCertificateRequestStatus{Conditions: r.Status.Conditions},
			"non-condition status fields must be empty when denying or failing the PodCertificateRequest")
	}
	if isTrue(r, capi.PodCertificateRequestConditionTypeIssued) {
		return validateIssued(r, old, now)
	}
	return sameStatus(r.Status, old.Status, `status is immutable unless transitioning to "Issued", "Denied", or "Failed"`)
}

// validateIssued checks an issued certificate chain: PEM CERTIFICATE
// blocks, the leaf for the requested key with sound names, the times
// those of the leaf (notBefore within five minutes of now), a life
// between an hour and spec.maxExpirationSeconds, and the refresh at least
// ten minutes from either end.
func validateIssued(r, old *capi.PodCertificateRequest, now time.Time) field.ErrorList {
	chain := r.Status.CertificateChain
	invalid := func(path *field.Path, value any, msg string) field.ErrorList {
		return field.ErrorList{field.Invalid(path, value, msg)}
	}
	if len(chain) > maxCertificateChain {
		return field.ErrorList{field.TooLong(certChainPath, chain, maxCertificateChain)}
	}
	leafBlock, rest := pem.Decode([]byte(chain))
	if leafBlock == nil {
		return invalid(certChainPath, chain, "issued certificate chain must contain at least one certificate")
	}
	if leafBlock.Type != "CERTIFICATE" {
		return invalid(certChainPath, chain, "issued certificate chain must consist entirely of CERTIFICATE PEM blocks")
	}
	leaf, err := x509.ParseCertificate(leafBlock.Bytes)
	if err != nil {
		return invalid(certChainPath, chain, "leaf certificate does not parse as valid X.509")
	}
	var errs field.ErrorList
	for _, name := range leaf.DNSNames {
		if name == "" {
			errs = append(errs, field.Invalid(certChainPath, name, "leaf certificate should not contain empty DNSName"))
		}
		if strings.Contains(name, "..") {
			errs = append(errs, field.Invalid(certChainPath, name, "leaf certificate's DNSName should not contain '..'"))
		}
		if strings.HasPrefix(name, ".") || strings.HasSuffix(name, ".") {
			errs = append(errs, field.Invalid(certChainPath, name, "leaf certificate's DNSName should not start or end with '.'"))
		}
	}
	for _, addr := range leaf.EmailAddresses {
		if _, err := mail.ParseAddress(addr); err != nil {
			errs = append(errs, field.Invalid(certChainPath, addr, "leaf certificate should not contain invalid EmailAddress"))
		}
	}

	// The requested key is the stub request's (v1beta1's pkixPublicKey
	// otherwise, never set in v1).
	if len(old.Spec.StubPKCS10Request) == 0 {
		return append(errs, field.Invalid(pkixPath, field.OmitValueType{}, "must be a valid PKIX-serialized public key"))
	}
	req, err := x509.ParseCertificateRequest(old.Spec.StubPKCS10Request)
	if err != nil {
		return append(errs, field.Invalid(stubPath, field.OmitValueType{}, "must be a valid PKCS#10 CSR"))
	}
	if k, ok := req.PublicKey.(interface{ Equal(crypto.PublicKey) bool }); ok && !k.Equal(leaf.PublicKey) {
		return append(errs, field.Invalid(certChainPath, chain, "leaf certificate was not issued to the requested public key"))
	}

	st := r.Status
	if st.NotBefore == nil {
		errs = append(errs, field.Required(notBeforePath, "must be present and consistent with the issued certificate"))
	}
	if st.NotAfter == nil {
		errs = append(errs, field.Required(notAfterPath, "must be present and consistent with the issued certificate"))
	}
	if st.BeginRefreshAt == nil {
		errs = append(errs, field.Required(beginRefreshPath, "must be present and in the range [notbefore+10min, notafter-10min]"))
	}
	if len(errs) > 0 {
		return errs
	}
	if !st.NotBefore.Time.Equal(leaf.NotBefore) {
		return invalid(notBeforePath, st.NotBefore.Time, "must be set to the NotBefore time encoded in the leaf certificate")
	}
	if skew := 5 * time.Minute; !(st.NotBefore.Time.After(now.Add(-skew)) && st.NotBefore.Time.Before(now.Add(skew))) {
		return invalid(notBeforePath, st.NotBefore.Time, "must be set to within 5 minutes of kube-apiserver's current time")
	}
	if !st.NotAfter.Time.Equal(leaf.NotAfter) {
		return invalid(notAfterPath, st.NotAfter.Time, "must be set to the NotAfter time encoded in the leaf certificate")
	}
	life := leaf.NotAfter.Sub(leaf.NotBefore)
	if life < time.Hour {
		return invalid(certChainPath, life, "leaf certificate lifetime must be >= 1 hour")
	}
	if m := *r.Spec.MaxExpirationSeconds; life > time.Duration(m)*time.Second {
		return invalid(certChainPath, life, fmt.Sprintf("leaf certificate lifetime must be <= spec.maxExpirationSeconds (%v)", m))
	}
	if st.BeginRefreshAt.Time.Before(st.NotBefore.Time.Add(10 * time.Minute)) {
		return invalid(beginRefreshPath, st.BeginRefreshAt.Time, "must be at least 10 minutes after status.notBefore")
	}
	if st.BeginRefreshAt.Time.After(st.NotAfter.Time.Add(-10 * time.Minute)) {
		return invalid(beginRefreshPath, st.BeginRefreshAt.Time, "must be at least 10 minutes before status.notAfter")
	}
	// The rest of the chain cannot be verified without its root: each
	// must at least be a certificate. (Upstream's message misspells
	// CERTIFICATE here.)
	for {
		var b *pem.Block
		if b, rest = pem.Decode(rest); b == nil {
			return nil
		}
		if b.Type != "CERTIFICATE" {
			return invalid(certChainPath, chain, "issued certificate chain must consist entirely of CERTFICATE PEM blocks")
		}
		if _, err := x509.ParseCertificate(b.Bytes); err != nil {
			return invalid(certChainPath, chain, "intermediate certificate does not parse as valid X.509")
		}
	}
}

func isTrue(r *capi.PodCertificateRequest, t string) bool {
	for _, c := range r.Status.Conditions {
		if c.Type == t && c.Status == metav1.ConditionTrue {
			return true
		}
	}
	return false
}

// sameStatus refuses a status other than want, without its value.
func sameStatus(got, want capi.PodCertificateRequestStatus, msg string) field.ErrorList {
	if apiequality.Semantic.DeepEqual(got, want) {
		return nil
	}
	return field.ErrorList{field.Invalid(field.NewPath("status"), field.OmitValueType{}, msg)}
}
