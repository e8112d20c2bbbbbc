package certificates

import (
	"context"
	"fmt"
	"strings"

	capi "k8s.io/api/certificates/v1"
	apivalidation "k8s.io/apimachinery/pkg/api/validation"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/apiserver/pkg/authentication/user"

	"github.com/svcnet/svcnet/internal/auth/authz"
)

// AuthorizedForSigner is upstream's IsAuthorizedForSignerName
// (pkg/certauthorization): whether u may verb ("approve", "sign",
// "attest") the signers resource of certificates.k8s.io named signer, or
// failing that the one named <domain>/*, which stands for every signer of
// the domain. An authorizer's error counts as no. A nil authorizer or
// user allows nothing.
func AuthorizedForSigner(ctx context.Context, a authz.Authorizer, u user.Info, verb, signer string) bool {
	if a == nil || u == nil {
		return false
	}
	domain, _, _ := strings.Cut(signer, "/")
	for _, name := range []string{signer, domain + "/*"} {
		d, _, err := a.Authorize(ctx, authz.Attributes{User: u, Verb: verb, ResourceRequest: true,
			APIGroup: capi.GroupName, APIVersion: "*", Resource: "signers", Name: name})
		if err == nil && d == authz.Allow {
			return true
		}
	}
	return false
}

// ValidateSignerName is upstream's (pkg/apis/core/validation): a fully
// qualified domain, a slash, and a path of DNS subdomains separated by
// dots, 571 characters at most. CertificateSigningRequests and
// ClusterTrustBundles name their signers by it.
func ValidateSignerName(path *field.Path, name string) field.ErrorList {
	if name == "" {
		return field.ErrorList{field.Required(path, "")}
	}
	domain, rest, ok := strings.Cut(name, "/")
	if !ok || strings.Contains(rest, "/") {
		return field.ErrorList{field.Invalid(path, name, "must be a fully qualified domain and path of the form 'example.com/signer-name'")}
	}
	var errs field.ErrorList
	if len(domain) > validation.DNS1123SubdomainMaxLength {
		errs = append(errs, field.TooLong(path, "", validation.DNS1123SubdomainMaxLength))
	}
	labels := strings.Split(domain, ".")
	errs = append(errs, firstLabelErrors(path, domain, labels, validation.IsDNS1123Label)...)
	if len(labels) < 2 {
		errs = append(errs, field.Invalid(path, domain, "should be a domain with at least two segments separated by dots"))
	}
	errs = append(errs, firstLabelErrors(path, rest, strings.Split(rest, "."), validation.IsDNS1123Subdomain)...)
	if limit := 2*validation.DNS1123SubdomainMaxLength + validation.DNS1123LabelMaxLength + 2; len(name) > limit {
		errs = append(errs, field.TooLong(path, "", limit))
	}
	return errs
}

// IsKubernetesSigner is upstream's IsKubernetesSignerName: a signer of
// the kubernetes.io domain or one of its subdomains, whose pod
// certificates live a day at most.
func IsKubernetesSigner(signer string) bool {
	host, _, _ := strings.Cut(signer, "/")
	return host == "kubernetes.io" || strings.HasSuffix(host, ".kubernetes.io")
}

// ValidateUserAnnotations is upstream's (pkg/apis/core/validation): the
// user annotations of a podCertificate projection, copied into a
// PodCertificateRequest's spec.unverifiedUserAnnotations, have
// domain-prefixed keys of any case, and fit in an object's annotations.
func ValidateUserAnnotations(annotations map[string]string, path *field.Path) field.ErrorList {
	var errs field.ErrorList
	for k := range annotations {
		errs = append(errs, validation.IsDomainPrefixedKey(path, strings.ToLower(k))...)
	}
	if err := apivalidation.ValidateAnnotationsSize(annotations); err != nil {
		errs = append(errs, field.TooLong(path, "", apivalidation.TotalAnnotationSizeLimitB))
	}
	return errs
}

// firstLabelErrors reports the faults of the first label check refuses,
// as upstream stops there.
func firstLabelErrors(path *field.Path, segment string, labels []string, check func(string) []string) field.ErrorList {
	for _, l := range labels {
		msgs := check(l)
		if len(msgs) == 0 {
			continue
		}
		var errs field.ErrorList
		for _, m := range msgs {
			errs = append(errs, field.Invalid(path, segment, fmt.Sprintf("validating label %q: %s", l, m)))
		}
		return errs
	}
	return nil
}
