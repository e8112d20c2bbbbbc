package encryption

import (
	"encoding/base64"
	"fmt"
	"strings"

	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/apiserver/pkg/apis/apiserver"
)

// Upstream's messages (k8s.io/apiserver/pkg/apis/apiserver/validation),
// and svcnet's refusal of KMS.
const (
	moreThanOneElementErr    = "more than one provider specified in a single element, should split into different list elements"
	noProviderErr            = "provider does not contain any of the expected providers: KMS, AESGCM, AESCBC, Secretbox, Identity"
	keyLenErrFmt             = "secret is not of the expected length, got %d, expected one of %v"
	atLeastOneRequiredErrFmt = "at least one %s is required"
	mandatoryFieldErrFmt     = "%s is a mandatory field for a %s"
	base64EncodingErr        = "secrets must be base64 encoded"
	eventsGroupErr           = "'*.events.k8s.io' objects are stored using the 'events' API group in etcd. Use 'events' instead in the config file"
	extensionsGroupErr       = "'extensions' group has been removed and cannot be used for encryption"
	starResourceErr          = "use '*.' to encrypt all the resources from core API group or *.* to encrypt all resources"
	overlapErr               = "using overlapping resources such as 'secrets' and '*.' in the same resource list is not allowed as they will be masked"
	nonRESTAPIResourceErr    = "resources which do not have REST API/s cannot be encrypted"
	resourceNameErr          = "resource name should not contain capital letters"
	resourceAcrossGroupErr   = "encrypting the same resource across groups is not supported"
	duplicateResourceErr     = "the same resource cannot be specified multiple times"
	kmsErr                   = "KMS providers are not supported by svcnet: use aescbc, aesgcm, secretbox or identity"
)

// Key sizes in bytes: AES-128, -192 and -256; secretbox's one.
var (
	aesKeySizes       = []int{16, 24, 32}
	secretBoxKeySizes = []int{32}
)

// Validate checks an EncryptionConfiguration as upstream's
// ValidateEncryptionConfiguration does, and refuses KMS providers.
func Validate(c *apiserver.EncryptionConfiguration) field.ErrorList {
	root := field.NewPath("resources")
	var errs field.ErrorList
	if c == nil {
		return append(errs, field.Required(root, "EncryptionConfiguration can't be nil"))
	}
	if len(c.Resources) == 0 {
		return append(errs, field.Required(root, fmt.Sprintf(atLeastOneRequiredErrFmt, root)))
	}
	for i, conf := range c.Resources {
		r := root.Index(i).Child("resources")
		p := root.Index(i).Child("providers")
		if len(conf.Resources) == 0 {
			errs = append(errs, field.Required(r, fmt.Sprintf(atLeastOneRequiredErrFmt, r)))
		}
		errs = append(errs, validateResourceOverlap(conf.Resources, r)...)
		errs = append(errs, validateResourceNames(conf.Resources, r)...)
		if len(conf.Providers) == 0 {
			errs = append(errs, field.Required(p, fmt.Sprintf(atLeastOneRequiredErrFmt, p)))
		}
		for j, provider := range conf.Providers {
			path := p.Index(j)
			errs = append(errs, validateSingleProvider(provider, path)...)
			switch {
			case provider.KMS != nil:
				errs = append(errs, field.Forbidden(path.Child("kms"), kmsErr))
			case provider.AESGCM != nil:
				errs = append(errs, validateKeys(provider.AESGCM.Keys, path.Child("aesgcm").Child("keys"), aesKeySizes)...)
			case provider.AESCBC != nil:
				errs = append(errs, validateKeys(provider.AESCBC.Keys, path.Child("aescbc").Child("keys"), aesKeySizes)...)
			case provider.Secretbox != nil:
				errs = append(errs, validateKeys(provider.Secretbox.Keys, path.Child("secretbox").Child("keys"), secretBoxKeySizes)...)
			}
		}
	}
	return errs
}

// validateResourceOverlap refuses a resource named twice in one list, and
// a wildcard beside resources it covers.
func validateResourceOverlap(resources []string, path *field.Path) field.ErrorList {
	if len(resources) < 2 {
		return nil
	}
	grs := make([]schema.GroupResource, len(resources))
	for i, res := range resources {
		grs[i] = schema.ParseGroupResource(res)
	}
	// Upstream's loop, whose first equal pair counts as a duplicate only.
	var duplicate, overlap bool
	for i, a := range grs {
		for j, b := range grs {
			switch {
			case i == j:
			case a == b && !duplicate:
				duplicate = true
			case overlap:
			case a == anyGroupAnyResource:
				overlap = true
			case a.Group == b.Group && (a.Resource == "*" || b.Resource == "*"):
				overlap = true
			}
		}
	}
	var errs field.ErrorList
	if duplicate {
		errs = append(errs, field.Invalid(path, resources, duplicateResourceErr))
	}
	if overlap {
		errs = append(errs, field.Invalid(path, resources, overlapErr))
	}
	return errs
}

// validateResourceNames refuses names that cannot be stored resources.
func validateResourceNames(resources []string, path *field.Path) field.ErrorList {
	var errs field.ErrorList
	for j, res := range resources {
		jj := path.Index(j)
		gr := schema.ParseGroupResource(res)
		switch {
		case strings.ToLower(res) != res:
			errs = append(errs, field.Invalid(jj, res, resourceNameErr))
		case res == "*":
			errs = append(errs, field.Invalid(jj, res, starResourceErr))
		case res == "apiserveripinfo" || res == "serviceipallocations" || res == "servicenodeportallocations":
			errs = append(errs, field.Invalid(jj, res, nonRESTAPIResourceErr))
		case gr.Group == "events.k8s.io":
			errs = append(errs, field.Invalid(jj, res, eventsGroupErr))
		case gr.Group == "extensions":
			errs = append(errs, field.Invalid(jj, res, extensionsGroupErr))
		case gr.Group == "*" && gr.Resource != "*":
			errs = append(errs, field.Invalid(jj, res, resourceAcrossGroupErr))
		}
	}
	return errs
}

// validateSingleProvider wants exactly one provider in an element.
func validateSingleProvider(p apiserver.ProviderConfiguration, path *field.Path) field.ErrorList {
	found := 0
	for _, set := range []bool{p.KMS != nil, p.AESGCM != nil, p.AESCBC != nil, p.Secretbox != nil, p.Identity != nil} {
		if set {
			found++
		}
	}
	switch {
	case found == 0:
		return field.ErrorList{field.Invalid(path, p, noProviderErr)}
	case found > 1:
		return field.ErrorList{field.Invalid(path, p, moreThanOneElementErr)}
	}
	return nil
}

func validateKeys(keys []apiserver.Key, path *field.Path, sizes []int) field.ErrorList {
	if len(keys) == 0 {
		return field.ErrorList{field.Required(path, fmt.Sprintf(atLeastOneRequiredErrFmt, "keys"))}
	}
	var errs field.ErrorList
	for i, key := range keys {
		errs = append(errs, validateKey(key, path.Index(i), sizes)...)
	}
	return errs
}

func validateKey(key apiserver.Key, path *field.Path, sizes []int) field.ErrorList {
	var errs field.ErrorList
	if key.Name == "" {
		errs = append(errs, field.Required(path.Child("name"), fmt.Sprintf(mandatoryFieldErrFmt, "name", "key")))
	}
	if key.Secret == "" {
		return append(errs, field.Required(path.Child("secret"), fmt.Sprintf(mandatoryFieldErrFmt, "secret", "key")))
	}
	secret, err := base64.StdEncoding.DecodeString(key.Secret)
	if err != nil {
		return append(errs, field.Invalid(path.Child("secret"), "REDACTED", base64EncodingErr))
	}
	for _, l := range sizes {
		if len(secret) == l {
			return errs
		}
	}
	return append(errs, field.Invalid(path.Child("secret"), "REDACTED", fmt.Sprintf(keyLenErrFmt, len(secret), sizes)))
}
