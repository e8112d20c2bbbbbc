package certificatesigningrequest

import (
	"bytes"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"slices"

	capi "k8s.io/api/certificates/v1"
	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/util/diff"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/svcnet/svcnet/internal/certificates"
)

// options are upstream's certificateValidationOptions: what a write path
// may change, and the faults tolerated because the stored object already
// has them.
type options struct {
	setApproval, setCertificate bool

	bothApprovedAndDenied, legacySigner, duplicateConditions, emptyConditionType,
	anyCertificate, unknownUsages, duplicateUsages bool
}

// optionsFor are the tolerances of a write of csr over old (nil on create).
func optionsFor(csr, old *capi.CertificateSigningRequest) options {
	if old == nil {
		return options{}
	}
	approved, denied := certificates.Approval(&old.Status)
	return options{
		bothApprovedAndDenied: approved && denied,
		legacySigner:          old.Spec.SignerName == certificates.LegacyUnknownSignerName,
		duplicateConditions:   hasDuplicateConditionTypes(old),
		emptyConditionType:    slices.ContainsFunc(old.Status.Conditions, func(c capi.CertificateSigningRequestCondition) bool { return c.Type == "" }),
		anyCertificate:        bytes.Equal(csr.Status.Certificate, old.Status.Certificate) || validateCertificate(old.Status.Certificate) != nil,
		unknownUsages:         slices.ContainsFunc(old.Spec.Usages, func(u capi.KeyUsage) bool { return !slices.Contains(validUsages, string(u)) }),
		duplicateUsages:       len(compact(old.Spec.Usages)) != len(old.Spec.Usages),
	}
}

func hasDuplicateConditionTypes(csr *capi.CertificateSigningRequest) bool {
	seen := map[capi.RequestConditionType]bool{}
	for _, c := range csr.Status.Conditions {
		if seen[c.Type] {
			return true
		}
		seen[c.Type] = true
	}
	return false
}

func compact(usages []capi.KeyUsage) []capi.KeyUsage {
	set := slices.Clone(usages)
	slices.Sort(set)
	return slices.Compact(set)
}

// validUsages are the usages upstream knows, sorted as its error lists them.
var validUsages = func() []string {
	all := []capi.KeyUsage{
		capi.UsageSigning, capi.UsageDigitalSignature, capi.UsageContentCommitment, capi.UsageKeyEncipherment,
		capi.UsageKeyAgreement, capi.UsageDataEncipherment, capi.UsageCertSign, capi.UsageCRLSign,
		capi.UsageEncipherOnly, capi.UsageDecipherOnly, capi.UsageAny, capi.UsageServerAuth, capi.UsageClientAuth,
		capi.UsageCodeSigning, capi.UsageEmailProtection, capi.UsageSMIME, capi.UsageIPsecEndSystem,
		capi.UsageIPsecTunnel, capi.UsageIPsecUser, capi.UsageTimestamping, capi.UsageOCSPSigning,
		capi.UsageMicrosoftSGC, capi.UsageNetscapeSGC,
	}
	out := make([]string, len(all))
	for i, u := range all {
		out[i] = string(u)
	}
	slices.Sort(out)
	return out
}()

// minExpirationSeconds is the shortest certificate a request may ask for.
const minExpirationSeconds = 600

// validate is upstream's validateCertificateSigningRequest without the
// object metadata, which the API server checks.
func validate(csr *capi.CertificateSigningRequest, o options) field.ErrorList {
	var errs field.ErrorList
	spec := field.NewPath("spec")
	if err := checkRequest(csr.Spec.Request); err != nil {
		errs = append(errs, field.Invalid(spec.Child("request"), csr.Spec.Request, err.Error()))
	}
	usages := spec.Child("usages")
	if len(csr.Spec.Usages) == 0 {
		errs = append(errs, field.Required(usages, ""))
	}
	seen := map[capi.KeyUsage]bool{}
	for i, u := range csr.Spec.Usages {
		if !o.unknownUsages && !slices.Contains(validUsages, string(u)) {
			errs = append(errs, field.NotSupported(usages.Index(i), u, validUsages))
		}
		if !o.duplicateUsages && seen[u] {
			errs = append(errs, field.Duplicate(usages.Index(i), u))
		}
		seen[u] = true
	}
	signer := spec.Child("signerName")
	if !o.legacySigner && csr.Spec.SignerName == certificates.LegacyUnknownSignerName {
		errs = append(errs, field.Invalid(signer, csr.Spec.SignerName, "the legacy signerName is not allowed via this API version"))
	} else {
		errs = append(errs, certificates.ValidateSignerName(signer, csr.Spec.SignerName)...)
	}
	if s := csr.Spec.ExpirationSeconds; s != nil && *s < minExpirationSeconds {
		errs = append(errs, field.Invalid(spec.Child("expirationSeconds"), *s, "may not specify a duration less than 600 seconds (10 minutes)"))
	}
	errs = append(errs, validateConditions(field.NewPath("status", "conditions"), csr, o)...)
	if !o.anyCertificate {
		if err := validateCertificate(csr.Status.Certificate); err != nil {
			errs = append(errs, field.Invalid(field.NewPath("status", "certificate"), "<certificate data>", err.Error()))
		}
	}
	return errs
}

// checkRequest parses the request and checks its signature.
func checkRequest(data []byte) error {
	req, err := certificates.ParseCSR(data)
	if err != nil {
		return err
	}
	return req.CheckSignature()
}

// validateCertificate accepts nothing, or CERTIFICATE blocks only, without
// headers, each holding certificates.
func validateCertificate(data []byte) error {
	if len(data) == 0 {
		return nil
	}
	blocks := 0
	for {
		block, rest := pem.Decode(data)
		if block == nil {
			break
		}
		if block.Type != "CERTIFICATE" {
			return fmt.Errorf("only CERTIFICATE PEM blocks are allowed, found %q", block.Type)
		}
		if len(block.Headers) != 0 {
			return errors.New("no PEM block headers are permitted")
		}
		blocks++
		certs, err := x509.ParseCertificates(block.Bytes)
		if err != nil {
			return err
		}
		if len(certs) == 0 {
			return errors.New("found CERTIFICATE PEM block containing 0 certificates")
		}
		data = rest
	}
	if blocks == 0 {
		return errors.New("must contain at least one CERTIFICATE PEM block")
	}
	return nil
}

// onlyTrue are the condition types whose status may only be True.
var onlyTrue = []capi.RequestConditionType{capi.CertificateApproved, capi.CertificateDenied, capi.CertificateFailed}

func validateConditions(path *field.Path, csr *capi.CertificateSigningRequest, o options) field.ErrorList {
	var errs field.ErrorList
	seen := map[capi.RequestConditionType]bool{}
	approved, denied := false, false
	for i, c := range csr.Status.Conditions {
		if !o.emptyConditionType && c.Type == "" {
			errs = append(errs, field.Required(path.Index(i).Child("type"), ""))
		}
		allowed := []string{string(corev1.ConditionFalse), string(corev1.ConditionTrue), string(corev1.ConditionUnknown)}
		if slices.Contains(onlyTrue, c.Type) {
			allowed = []string{string(corev1.ConditionTrue)}
		}
		switch {
		case c.Status == "":
			errs = append(errs, field.Required(path.Index(i).Child("status"), ""))
		case !slices.Contains(allowed, string(c.Status)):
			errs = append(errs, field.NotSupported(path.Index(i).Child("status"), c.Status, allowed))
		}
		if !o.bothApprovedAndDenied {
			switch c.Type {
			case capi.CertificateApproved:
				approved = true
				if denied {
					errs = append(errs, field.Invalid(path, c.Type, "Approved and Denied conditions are mutually exclusive"))
				}
			case capi.CertificateDenied:
				denied = true
				if approved {
					errs = append(errs, field.Invalid(path, c.Type, "Approved and Denied conditions are mutually exclusive"))
				}
			}
		}
		if !o.duplicateConditions && seen[c.Type] {
			errs = append(errs, field.Duplicate(path.Index(i).Child("type"), c.Type))
		}
		seen[c.Type] = true
	}
	return errs
}

// validateUpdate is upstream's validateCertificateSigningRequestUpdate
// without the metadata: the checks of a create, no condition removed, the
// approval conditions changed only through approval, and the certificate
// set only through status, once.
func validateUpdate(csr, old *capi.CertificateSigningRequest, o options) field.ErrorList {
	errs := validate(csr, o)
	conditions := field.NewPath("status", "conditions")
	for _, t := range onlyTrue {
		if len(findConditions(csr, t)) < len(findConditions(old, t)) {
			errs = append(errs, field.Forbidden(conditions, fmt.Sprintf("updates may not remove a condition of type %q", t)))
		}
	}
	if !o.setApproval {
		for _, t := range []capi.RequestConditionType{capi.CertificateApproved, capi.CertificateDenied} {
			was, is := findConditions(old, t), findConditions(csr, t)
			switch {
			case len(is) < len(was): // refused above
			case len(is) > len(was):
				errs = append(errs, field.Forbidden(conditions, fmt.Sprintf("updates may not add a condition of type %q", t)))
			case !apiequality.Semantic.DeepEqual(was, is):
				errs = append(errs, field.Forbidden(conditions, fmt.Sprintf("updates may not modify a condition of type %q\n%v", t, diff.Diff(was, is))))
			}
		}
	}
	if !bytes.Equal(csr.Status.Certificate, old.Status.Certificate) {
		switch {
		case !o.setCertificate:
			errs = append(errs, field.Forbidden(field.NewPath("status", "certificate"), "updates may not set certificate content"))
		case len(old.Status.Certificate) > 0:
			errs = append(errs, field.Forbidden(field.NewPath("status", "certificate"), "updates may not modify existing certificate content"))
		}
	}
	return errs
}

func findConditions(csr *capi.CertificateSigningRequest, t capi.RequestConditionType) []capi.CertificateSigningRequestCondition {
	var out []capi.CertificateSigningRequestCondition
	for _, c := range csr.Status.Conditions {
		if c.Type == t {
			out = append(out, c)
		}
	}
	return out
}
