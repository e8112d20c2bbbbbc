// Package admissionwebhook holds what the two admissionregistration.k8s.io/v1
// webhook configuration kinds (ValidatingWebhookConfiguration and
// MutatingWebhookConfiguration) share: the defaults of a webhook's client
// config and rules, and upstream's validation of a list of webhooks
// (pkg/apis/admissionregistration/validation), with its messages, field
// paths and the relaxations an update gets for a configuration stored
// under older rules. The two kinds' own folders hold their strategies.
// The admission policies (internal/registry/admissionpolicy) share its
// rule and match condition checks, its CEL compiler and its enums.
package admissionwebhook

import (
	"fmt"
	"strings"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	metav1validation "k8s.io/apimachinery/pkg/apis/meta/v1/validation"
	"k8s.io/apimachinery/pkg/util/sets"
	utilvalidation "k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
	webhookutil "k8s.io/apiserver/pkg/util/webhook"
	"k8s.io/utils/ptr"

	"github.com/svcnet/svcnet/internal/registry/validate"
)

// StaticConfigSuffix ends the names upstream reserves for admission
// configurations read from manifests (ManifestBasedAdmissionControlConfig,
// beta and on by default in v1.37): the API refuses to create them.
const StaticConfigSuffix = ".static.k8s.io"

// Webhook is what a ValidatingWebhook and a MutatingWebhook have in common,
// with the mutating one's reinvocationPolicy: the view validation reads.
type Webhook struct {
	Name                    string
	ClientConfig            admissionregistrationv1.WebhookClientConfig
	Rules                   []admissionregistrationv1.RuleWithOperations
	FailurePolicy           *admissionregistrationv1.FailurePolicyType
	MatchPolicy             *admissionregistrationv1.MatchPolicyType
	NamespaceSelector       *metav1.LabelSelector
	ObjectSelector          *metav1.LabelSelector
	SideEffects             *admissionregistrationv1.SideEffectClass
	TimeoutSeconds          *int32
	AdmissionReviewVersions []string
	MatchConditions         []admissionregistrationv1.MatchCondition
	// Mutating means a MutatingWebhook, whose ReinvocationPolicy is
	// checked.
	Mutating           bool
	ReinvocationPolicy *admissionregistrationv1.ReinvocationPolicyType
}

// Options are upstream's validationOptions for webhook configurations: a
// create gets CreateOptions; an update gets UpdateOptions, which keep
// accepting what the stored configuration already held.
type Options struct {
	// IgnoreMatchConditions skips the match conditions (an update that
	// changes none of them).
	IgnoreMatchConditions bool
	// RequireNoSideEffects allows only None and NoneOnDryRun.
	RequireNoSideEffects bool
	// RequireRecognizedAdmissionReviewVersion requires v1 or v1beta1 in
	// admissionReviewVersions.
	RequireRecognizedAdmissionReviewVersion bool
	// RequireUniqueWebhookNames refuses two webhooks of one name.
	RequireUniqueWebhookNames bool
	// AllowInvalidLabelValueInSelector accepts selector values that are
	// not label values.
	AllowInvalidLabelValueInSelector bool
	// StoredExpressions are the stored configuration's match condition
	// expressions, compiled in CEL's stored-expression environment.
	StoredExpressions sets.Set[string]
}

// CreateOptions are the options of a new configuration.
func CreateOptions() Options {
	return Options{
		RequireNoSideEffects:                    true,
		RequireRecognizedAdmissionReviewVersion: true,
		RequireUniqueWebhookNames:               true,
	}
}

// UpdateOptions are the options of an update from old to hooks.
func UpdateOptions(hooks, old []Webhook) Options {
	opts := Options{
		IgnoreMatchConditions:                   sameMatchConditions(hooks, old),
		RequireNoSideEffects:                    true,
		RequireRecognizedAdmissionReviewVersion: true,
		RequireUniqueWebhookNames:               true,
		StoredExpressions:                       sets.New[string](),
	}
	names := sets.New[string]()
	for _, h := range old {
		if h.SideEffects == nil || !noSideEffectClasses.Has(string(*h.SideEffects)) {
			opts.RequireNoSideEffects = false
		}
		if len(h.AdmissionReviewVersions) > 0 && !hasAcceptedVersion(h.AdmissionReviewVersions) {
			opts.RequireRecognizedAdmissionReviewVersion = false
		}
		if names.Has(h.Name) {
			opts.RequireUniqueWebhookNames = false
		}
		names.Insert(h.Name)
		if invalidSelectorValue(h.NamespaceSelector) || invalidSelectorValue(h.ObjectSelector) {
			opts.AllowInvalidLabelValueInSelector = true
		}
		for _, mc := range h.MatchConditions {
			opts.StoredExpressions.Insert(mc.Expression)
		}
	}
	return opts
}

// sameMatchConditions reports whether an update keeps every webhook's
// match conditions as they were, position by position.
func sameMatchConditions(hooks, old []Webhook) bool {
	if len(hooks) != len(old) {
		return false
	}
	for i := range old {
		if !equalConditions(hooks[i].MatchConditions, old[i].MatchConditions) {
			return false
		}
	}
	return true
}

// equalConditions is reflect.DeepEqual for match conditions: nil and
// empty differ, as upstream's comparison.
func equalConditions(a, b []admissionregistrationv1.MatchCondition) bool {
	if (a == nil) != (b == nil) || len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// invalidSelectorValue reports whether a stored selector holds a value the
// strict label selector check refuses.
func invalidSelectorValue(s *metav1.LabelSelector) bool {
	return s != nil && len(metav1validation.ValidateLabelSelector(s, metav1validation.LabelSelectorValidationOptions{}, nil)) > 0
}

// DefaultClientConfig sets the service port to 443, as upstream's
// SetDefaults_ServiceReference.
func DefaultClientConfig(cc *admissionregistrationv1.WebhookClientConfig) {
	if cc.Service != nil && cc.Service.Port == nil {
		cc.Service.Port = ptr.To[int32](443)
	}
}

// DefaultRules sets each rule's scope to "*", as upstream's
// SetDefaults_Rule.
func DefaultRules(rules []admissionregistrationv1.RuleWithOperations) {
	for i := range rules {
		if rules[i].Scope == nil {
			rules[i].Scope = ptr.To(admissionregistrationv1.AllScopes)
		}
	}
}

// ValidateName refuses, on create, the names reserved for static
// configurations.
func ValidateName(name string) field.ErrorList {
	if strings.HasSuffix(name, StaticConfigSuffix) {
		return field.ErrorList{field.Invalid(field.NewPath("metadata", "name"), name,
			fmt.Sprintf("names ending with %q are reserved for static manifest-based configurations and cannot be managed via the API", StaticConfigSuffix))}
	}
	return nil
}

// Validate checks the webhooks of a configuration, as upstream's
// validate{Validating,Mutating}WebhookConfiguration after the object
// metadata (which the API server checks).
func Validate(hooks []Webhook, opts Options) field.ErrorList {
	var errs field.ErrorList
	names := sets.New[string]()
	for i := range hooks {
		h := &hooks[i]
		path := field.NewPath("webhooks").Index(i)
		errs = append(errs, validateWebhook(h, opts, path)...)
		errs = append(errs, validateAdmissionReviewVersions(h.AdmissionReviewVersions, opts.RequireRecognizedAdmissionReviewVersion, path.Child("admissionReviewVersions"))...)
		if opts.RequireUniqueWebhookNames && h.Name != "" {
			if names.Has(h.Name) {
				errs = append(errs, field.Duplicate(path.Child("name"), h.Name))
			} else {
				names.Insert(h.Name)
			}
		}
	}
	return errs
}

// The values upstream supports, in the sorted order of its messages. The
// failure, match and reinvocation policies are those of admission policies
// too (internal/registry/admissionpolicy).
var (
	FailurePolicies      = sets.New(string(admissionregistrationv1.Ignore), string(admissionregistrationv1.Fail))
	MatchPolicies        = sets.New(string(admissionregistrationv1.Exact), string(admissionregistrationv1.Equivalent))
	allSideEffectClasses = sets.New(
		string(admissionregistrationv1.SideEffectClassUnknown),
		string(admissionregistrationv1.SideEffectClassNone),
		string(admissionregistrationv1.SideEffectClassSome),
		string(admissionregistrationv1.SideEffectClassNoneOnDryRun))
	noSideEffectClasses = sets.New(
		string(admissionregistrationv1.SideEffectClassNone),
		string(admissionregistrationv1.SideEffectClassNoneOnDryRun))
	ReinvocationPolicies = sets.New(
		string(admissionregistrationv1.NeverReinvocationPolicy),
		string(admissionregistrationv1.IfNeededReinvocationPolicy))
	supportedOperations = sets.New(
		string(admissionregistrationv1.OperationAll),
		string(admissionregistrationv1.Create),
		string(admissionregistrationv1.Update),
		string(admissionregistrationv1.Delete),
		string(admissionregistrationv1.Connect))
	supportedScopes = sets.New(
		string(admissionregistrationv1.ClusterScope),
		string(admissionregistrationv1.NamespacedScope),
		string(admissionregistrationv1.AllScopes))
)

// acceptedAdmissionReviewVersions are the AdmissionReview versions the API
// server speaks.
var acceptedAdmissionReviewVersions = []string{"v1", "v1beta1"}

func hasAcceptedVersion(versions []string) bool {
	for _, v := range versions {
		for _, a := range acceptedAdmissionReviewVersions {
			if v == a {
				return true
			}
		}
	}
	return false
}

// validateWebhook follows upstream's validate{Validating,Mutating}Webhook,
// in its order.
func validateWebhook(h *Webhook, opts Options, path *field.Path) field.ErrorList {
	errs := utilvalidation.IsFullyQualifiedName(path.Child("name"), h.Name)
	for i := range h.Rules {
		errs = append(errs, ValidateRuleWithOperations(&h.Rules[i], path.Child("rules").Index(i))...)
	}
	if h.FailurePolicy != nil && !FailurePolicies.Has(string(*h.FailurePolicy)) {
		errs = append(errs, field.NotSupported(path.Child("failurePolicy"), *h.FailurePolicy, sets.List(FailurePolicies)))
	}
	if h.MatchPolicy != nil && !MatchPolicies.Has(string(*h.MatchPolicy)) {
		errs = append(errs, field.NotSupported(path.Child("matchPolicy"), *h.MatchPolicy, sets.List(MatchPolicies)))
	}
	allowedSideEffects := allSideEffectClasses
	if opts.RequireNoSideEffects {
		allowedSideEffects = noSideEffectClasses
	}
	if h.SideEffects == nil {
		errs = append(errs, field.Required(path.Child("sideEffects"), "must specify one of "+strings.Join(sets.List(allowedSideEffects), ", ")))
	} else if !allowedSideEffects.Has(string(*h.SideEffects)) {
		errs = append(errs, field.NotSupported(path.Child("sideEffects"), *h.SideEffects, sets.List(allowedSideEffects)))
	}
	if h.TimeoutSeconds != nil && (*h.TimeoutSeconds > 30 || *h.TimeoutSeconds < 1) {
		errs = append(errs, field.Invalid(path.Child("timeoutSeconds"), *h.TimeoutSeconds, "the timeout value must be between 1 and 30 seconds"))
	}
	selectorOpts := metav1validation.LabelSelectorValidationOptions{AllowInvalidLabelValueInSelector: opts.AllowInvalidLabelValueInSelector}
	if h.NamespaceSelector != nil {
		errs = append(errs, metav1validation.ValidateLabelSelector(h.NamespaceSelector, selectorOpts, path.Child("namespaceSelector"))...)
	}
	if h.ObjectSelector != nil {
		errs = append(errs, metav1validation.ValidateLabelSelector(h.ObjectSelector, selectorOpts, path.Child("objectSelector"))...)
	}
	if h.Mutating && h.ReinvocationPolicy != nil && !ReinvocationPolicies.Has(string(*h.ReinvocationPolicy)) {
		errs = append(errs, field.NotSupported(path.Child("reinvocationPolicy"), *h.ReinvocationPolicy, sets.List(ReinvocationPolicies)))
	}
	cc, ccPath := &h.ClientConfig, path.Child("clientConfig")
	switch {
	case (cc.URL == nil) == (cc.Service == nil):
		errs = append(errs, field.Required(ccPath, "exactly one of url or service is required"))
	case cc.URL != nil:
		errs = append(errs, webhookutil.ValidateWebhookURL(ccPath.Child("url"), *cc.URL, true)...)
	default:
		errs = append(errs, webhookutil.ValidateWebhookService(ccPath.Child("service"), cc.Service.Namespace, cc.Service.Name, cc.Service.Path, ptr.Deref(cc.Service.Port, 0))...)
	}
	if !opts.IgnoreMatchConditions {
		errs = append(errs, ValidateMatchConditions(h.MatchConditions, false, opts.StoredExpressions, path.Child("matchConditions"))...)
	}
	return errs
}

// ValidateRuleWithOperations follows upstream's validateRuleWithOperations:
// operations, then the rule, whose resources may name subresources.
func ValidateRuleWithOperations(r *admissionregistrationv1.RuleWithOperations, path *field.Path) field.ErrorList {
	var errs field.ErrorList
	opsPath := path.Child("operations")
	if len(r.Operations) == 0 {
		errs = append(errs, field.Required(opsPath, ""))
	}
	if len(r.Operations) > 1 && hasWildcard(r.Operations) {
		errs = append(errs, field.Invalid(opsPath, r.Operations, "if '*' is present, must not specify other operations"))
	}
	for i, op := range r.Operations {
		if !supportedOperations.Has(string(op)) {
			errs = append(errs, field.NotSupported(opsPath.Index(i), op, sets.List(supportedOperations)))
		}
	}
	return append(errs, validateRule(&r.Rule, path)...)
}

func hasWildcard[T ~string](values []T) bool {
	for _, v := range values {
		if v == "*" {
			return true
		}
	}
	return false
}

func validateRule(r *admissionregistrationv1.Rule, path *field.Path) field.ErrorList {
	var errs field.ErrorList
	if len(r.APIGroups) == 0 {
		errs = append(errs, field.Required(path.Child("apiGroups"), ""))
	}
	if len(r.APIGroups) > 1 && hasWildcard(r.APIGroups) {
		errs = append(errs, field.Invalid(path.Child("apiGroups"), r.APIGroups, "if '*' is present, must not specify other API groups"))
	}
	// A group may be empty (the core group); a version may not.
	if len(r.APIVersions) == 0 {
		errs = append(errs, field.Required(path.Child("apiVersions"), ""))
	}
	if len(r.APIVersions) > 1 && hasWildcard(r.APIVersions) {
		errs = append(errs, field.Invalid(path.Child("apiVersions"), r.APIVersions, "if '*' is present, must not specify other API versions"))
	}
	for i, v := range r.APIVersions {
		if v == "" {
			errs = append(errs, field.Required(path.Child("apiVersions").Index(i), ""))
		}
	}
	errs = append(errs, validateResources(r.Resources, path.Child("resources"))...)
	if r.Scope != nil && !supportedScopes.Has(string(*r.Scope)) {
		errs = append(errs, field.NotSupported(path.Child("scope"), *r.Scope, sets.List(supportedScopes)))
	}
	return errs
}

// validateResources checks "resource", "resource/subresource" and their
// wildcards, as upstream's validateResources.
func validateResources(resources []string, path *field.Path) field.ErrorList {
	var errs field.ErrorList
	if len(resources) == 0 {
		errs = append(errs, field.Required(path, ""))
	}
	wildcardSub := sets.New[string]() // "x/*" seen, by x
	wildcardRes := sets.New[string]() // "*/x" seen, by x
	doubleWildcard, singleWildcard := false, false
	// withoutSub is whether the last resource without a subresource was
	// not "*": upstream keeps only the last one's answer, and so does this.
	withoutSub := false
	for i, rs := range resources {
		if rs == "" {
			errs = append(errs, field.Required(path.Index(i), ""))
			continue
		}
		if rs == "*/*" {
			doubleWildcard = true
		}
		if rs == "*" {
			singleWildcard = true
		}
		res, sub, found := strings.Cut(rs, "/")
		if !found {
			withoutSub = rs != "*"
			continue
		}
		if wildcardSub.Has(res) {
			errs = append(errs, field.Invalid(path.Index(i), rs, fmt.Sprintf("if '%s/*' is present, must not specify %s", res, rs)))
		}
		if wildcardRes.Has(sub) {
			errs = append(errs, field.Invalid(path.Index(i), rs, fmt.Sprintf("if '*/%s' is present, must not specify %s", sub, rs)))
		}
		if sub == "*" {
			wildcardSub.Insert(res)
		}
		if res == "*" {
			wildcardRes.Insert(sub)
		}
	}
	if len(resources) > 1 && doubleWildcard {
		errs = append(errs, field.Invalid(path, resources, "if '*/*' is present, must not specify other resources"))
	}
	if singleWildcard && withoutSub {
		errs = append(errs, field.Invalid(path, resources, "if '*' is present, must not specify other resources without subresources"))
	}
	return errs
}

func validateAdmissionReviewVersions(versions []string, requireRecognized bool, path *field.Path) field.ErrorList {
	accepted := strings.Join(acceptedAdmissionReviewVersions, ", ")
	if len(versions) == 0 {
		return field.ErrorList{field.Required(path, "must specify one of "+accepted)}
	}
	var errs field.ErrorList
	seen := sets.New[string]()
	for i, v := range versions {
		if seen.Has(v) {
			errs = append(errs, field.Invalid(path.Index(i), v, "duplicate version"))
			continue
		}
		seen.Insert(v)
		errs = append(errs, validate.Invalid(path.Index(i), v, utilvalidation.IsDNS1035Label(v))...)
	}
	if requireRecognized && !hasAcceptedVersion(versions) {
		errs = append(errs, field.Invalid(path, versions, "must include at least one of "+accepted))
	}
	return errs
}

// maxMatchConditions is upstream's limit on a webhook's matchConditions.
const maxMatchConditions = 64

// ValidateMatchConditions follows upstream's validateMatchConditions: at
// most 64 conditions of unique, qualified names, each a bool expression
// compiled with params declared when params is set (an admission policy
// with a paramKind). An expression among stored, the stored object's, is
// compiled in CEL's stored-expression environment.
func ValidateMatchConditions(conditions []admissionregistrationv1.MatchCondition, params bool, stored sets.Set[string], path *field.Path) field.ErrorList {
	var errs field.ErrorList
	if len(conditions) > maxMatchConditions {
		errs = append(errs, field.TooMany(path, len(conditions), maxMatchConditions))
	}
	names := sets.New[string]()
	for i := range conditions {
		mc := &conditions[i]
		errs = append(errs, validateMatchCondition(mc, params, stored, path.Index(i))...)
		if mc.Name != "" {
			if names.Has(mc.Name) {
				errs = append(errs, field.Duplicate(path.Index(i).Child("name"), mc.Name))
			} else {
				names.Insert(mc.Name)
			}
		}
	}
	return errs
}

func validateMatchCondition(mc *admissionregistrationv1.MatchCondition, params bool, stored sets.Set[string], path *field.Path) field.ErrorList {
	var errs field.ErrorList
	if expr := strings.TrimSpace(mc.Expression); expr == "" {
		errs = append(errs, field.Required(path.Child("expression"), ""))
	} else {
		// Upstream looks the trimmed expression up among the stored,
		// untrimmed ones.
		errs = append(errs, compileMatchCondition(expr, params, stored.Has(expr), path.Child("expression"))...)
	}
	if mc.Name == "" {
		errs = append(errs, field.Required(path.Child("name"), ""))
	} else {
		errs = append(errs, validate.QualifiedName(mc.Name, path.Child("name"))...)
	}
	return errs
}
