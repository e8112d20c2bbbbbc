package clustertrustbundle

import (
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"strings"

	capi "k8s.io/api/certificates/v1"
	apivalidation "k8s.io/apimachinery/pkg/api/validation"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/svcnet/svcnet/internal/certificates"
)

// maxTrustBundleSize is the most bytes spec.trustBundle may hold
// (upstream's MaxTrustBundleSize, 1 MiB).
const maxTrustBundleSize = 1 << 20

// validate is upstream's ValidateClusterTrustBundle without the metadata
// the API server checks for every kind: the name and generateName as the
// signer requires, the signer's name when there is one, and the trust
// bundle when parse is set.
func validate(b *capi.ClusterTrustBundle, parse bool) field.ErrorList {
	errs := validateName(&b.ObjectMeta, b.Spec.SignerName)
	if b.Spec.SignerName != "" {
		errs = append(errs, certificates.ValidateSignerName(field.NewPath("spec", "signerName"), b.Spec.SignerName)...)
	}
	if parse {
		errs = append(errs, validateTrustBundle(field.NewPath("spec", "trustBundle"), b.Spec.TrustBundle)...)
	}
	return errs
}

// validateUpdate is upstream's ValidateClusterTrustBundleUpdate without
// the metadata: the checks of a create, the trust bundle parsed only when
// it changes (so that a change in Go's PEM or X.509 parsing does not
// strand stored bundles), and a signer that never changes.
func validateUpdate(b, old *capi.ClusterTrustBundle) field.ErrorList {
	errs := validate(b, b.Spec.TrustBundle != old.Spec.TrustBundle)
	return append(errs, apivalidation.ValidateImmutableField(b.Spec.SignerName, old.Spec.SignerName, field.NewPath("spec", "signerName"))...)
}

// validateName checks metadata.generateName and metadata.name (when set;
// the API server requires one) by nameRule.
func validateName(m *metav1.ObjectMeta, signer string) field.ErrorList {
	var errs field.ErrorList
	rule, path := nameRule(signer), field.NewPath("metadata")
	if m.GenerateName != "" {
		for _, msg := range rule(m.GenerateName, true) {
			errs = append(errs, field.Invalid(path.Child("generateName"), m.GenerateName, msg))
		}
	}
	if m.Name != "" {
		for _, msg := range rule(m.Name, false) {
			errs = append(errs, field.Invalid(path.Child("name"), m.Name, msg))
		}
	}
	return errs
}

// nameRule is upstream's ValidateClusterTrustBundleName: the name of a
// bundle of signer starts with the signer's name, slashes turned to
// colons, and a colon, and the rest is a DNS-1123 subdomain; without a
// signer the name is a DNS-1123 subdomain with no colon.
func nameRule(signer string) apivalidation.ValidateNameFunc {
	return func(name string, prefix bool) []string {
		if signer == "" {
			if strings.Contains(name, ":") {
				return []string{`ClusterTrustBundle without signer name must not have ":" in its name`}
			}
			return apivalidation.NameIsDNSSubdomain(name, prefix)
		}
		required := strings.ReplaceAll(signer, "/", ":") + ":"
		rest, ok := strings.CutPrefix(name, required)
		if !ok {
			return []string{fmt.Sprintf("ClusterTrustBundle for signerName %s must be named with prefix %s", signer, required)}
		}
		return apivalidation.NameIsDNSSubdomain(rest, prefix)
	}
}

// omitted stands for the bundle in its errors, as upstream's.
const omitted = "<value omitted>"

// validateTrustBundle is upstream's: at most maxTrustBundleSize bytes,
// then each PEM block, numbered from 0, a CERTIFICATE without headers
// holding a CA certificate; only when every block is, at least one of
// them and no certificate twice. Upstream lists the duplicates in map
// order; here they come in the order of their first block.
func validateTrustBundle(path *field.Path, in string) field.ErrorList {
	if len(in) > maxTrustBundleSize {
		return field.ErrorList{field.TooLong(path, "", maxTrustBundleSize)}
	}
	var errs field.ErrorList
	indices := map[string][]int{}
	var anchors []string // in the order of their first block
	rest := []byte(in)
	for i := 0; ; i++ {
		var b *pem.Block
		if b, rest = pem.Decode(rest); b == nil {
			break
		}
		if msg := blockFault(b); msg != "" {
			errs = append(errs, field.Invalid(path, omitted, fmt.Sprintf("entry %d %s", i, msg)))
			continue
		}
		der := string(b.Bytes)
		if indices[der] == nil {
			anchors = append(anchors, der)
		}
		indices[der] = append(indices[der], i)
	}
	// A malformed block says enough: no errors about what is missing or
	// repeated besides.
	if len(errs) > 0 {
		return errs
	}
	if len(anchors) == 0 {
		return field.ErrorList{field.Invalid(path, omitted, "at least one trust anchor must be provided")}
	}
	for _, der := range anchors {
		if len(indices[der]) > 1 {
			errs = append(errs, field.Invalid(path, omitted, fmt.Sprintf("duplicate trust anchor (indices %v)", indices[der])))
		}
	}
	return errs
}

// blockFault says what is wrong with a block, after its entry number; ""
// when nothing is.
func blockFault(b *pem.Block) string {
	if b.Type != "CERTIFICATE" {
		return "has bad block type: " + b.Type
	}
	if len(b.Headers) != 0 {
		return "has PEM block headers"
	}
	cert, err := x509.ParseCertificate(b.Bytes)
	switch {
	case err != nil:
		return "does not parse as X.509"
	case !cert.IsCA:
		return "does not have the CA bit set"
	case !cert.BasicConstraintsValid:
		return "has invalid basic constraints"
	}
	return ""
}
