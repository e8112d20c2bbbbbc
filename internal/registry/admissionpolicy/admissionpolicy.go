// Package admissionpolicy holds what the admission policy kinds of
// admissionregistration.k8s.io/v1 share (ValidatingAdmissionPolicy,
// MutatingAdmissionPolicy and their bindings): upstream's defaults of a
// policy's failurePolicy and match resources, its validation of param
// kinds, param references, match resources and expressions
// (pkg/apis/admissionregistration/validation, with its messages and field
// paths), the CEL compilation of those expressions (cel.go) and the
// authorization of a paramKind or paramRef (authz.go). The four kinds' own
// folders hold their strategies; the rule and match condition checks are
// the webhooks' (internal/registry/admissionwebhook).
package admissionpolicy

import (
	"fmt"
	"strings"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	"k8s.io/apimachinery/pkg/api/validate/content"
	apivalidation "k8s.io/apimachinery/pkg/api/validation"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	metav1validation "k8s.io/apimachinery/pkg/apis/meta/v1/validation"
	"k8s.io/apimachinery/pkg/util/sets"
	utilvalidation "k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/utils/ptr"

	"github.com/svcnet/svcnet/internal/registry/admissionwebhook"
)

// mutatingOperations are the operations a mutating policy may match:
// upstream's supportedMutatingOperations (no DELETE), sorted.
var mutatingOperations = sets.New(
	string(admissionregistrationv1.OperationAll),
	string(admissionregistrationv1.Create),
	string(admissionregistrationv1.Update),
	string(admissionregistrationv1.Connect))

// DefaultFailurePolicy sets a policy's failurePolicy to Fail, as upstream's
// SetDefaults_{Validating,Mutating}AdmissionPolicySpec.
func DefaultFailurePolicy(p **admissionregistrationv1.FailurePolicyType) {
	if *p == nil {
		*p = ptr.To(admissionregistrationv1.Fail)
	}
}

// DefaultMatchResources follows upstream's SetDefaults_MatchResources
// (matchPolicy Equivalent, empty selectors) and SetDefaults_Rule of each
// rule (scope "*").
func DefaultMatchResources(m *admissionregistrationv1.MatchResources) {
	if m == nil {
		return
	}
	if m.MatchPolicy == nil {
		m.MatchPolicy = ptr.To(admissionregistrationv1.Equivalent)
	}
	if m.NamespaceSelector == nil {
		m.NamespaceSelector = &metav1.LabelSelector{}
	}
	if m.ObjectSelector == nil {
		m.ObjectSelector = &metav1.LabelSelector{}
	}
	for _, rules := range [][]admissionregistrationv1.NamedRuleWithOperations{m.ResourceRules, m.ExcludeResourceRules} {
		for i := range rules {
			if rules[i].Scope == nil {
				rules[i].Scope = ptr.To(admissionregistrationv1.AllScopes)
			}
		}
	}
}

// ValidateFailurePolicy requires a policy's failurePolicy to be Fail or
// Ignore.
func ValidateFailurePolicy(p *admissionregistrationv1.FailurePolicyType, path *field.Path) field.ErrorList {
	switch {
	case p == nil:
		return field.ErrorList{field.Required(path, "")}
	case !admissionwebhook.FailurePolicies.Has(string(*p)):
		return field.ErrorList{field.NotSupported(path, *p, sets.List(admissionwebhook.FailurePolicies))}
	}
	return nil
}

// ValidateParamKind follows upstream's validateParamKind: the apiVersion's
// group is checked as an APIService's group, its version as an
// APIService's version, and the kind as a DNS-1035 label of any case.
func ValidateParamKind(pk admissionregistrationv1.ParamKind, path *field.Path) field.ErrorList {
	var errs field.ErrorList
	versionPath := path.Child("apiVersion")
	if pk.APIVersion == "" {
		errs = append(errs, field.Required(versionPath, ""))
	} else if group, version, err := parseGroupVersion(pk.APIVersion); err != nil {
		errs = append(errs, field.Invalid(versionPath, pk.APIVersion, err.Error()))
	} else {
		if group != "" {
			if msgs := utilvalidation.IsDNS1123Subdomain(group); len(msgs) > 0 {
				errs = append(errs, field.Invalid(versionPath, group, strings.Join(msgs, ",")))
			}
		}
		if version == "" {
			errs = append(errs, field.Invalid(versionPath, pk.APIVersion, "version must be specified"))
		} else if msgs := utilvalidation.IsDNS1035Label(version); len(msgs) > 0 {
			errs = append(errs, field.Invalid(versionPath, version, strings.Join(msgs, ",")))
		}
	}
	if pk.Kind == "" {
		errs = append(errs, field.Required(path.Child("kind"), ""))
	} else if msgs := utilvalidation.IsDNS1035Label(strings.ToLower(pk.Kind)); len(msgs) > 0 {
		errs = append(errs, field.Invalid(path.Child("kind"), pk.Kind, "may have mixed case, but should otherwise match: "+strings.Join(msgs, ",")))
	}
	return errs
}

// parseGroupVersion splits "group/version" as upstream's validation does
// (its own parser, not schema.ParseGroupVersion).
func parseGroupVersion(gv string) (group, version string, err error) {
	if gv == "" || gv == "/" {
		return "", "", nil
	}
	switch strings.Count(gv, "/") {
	case 0:
		return "", gv, nil
	case 1:
		group, version, _ = strings.Cut(gv, "/")
		return group, version, nil
	}
	return "", "", fmt.Errorf("unexpected GroupVersion string: %v", gv)
}

// ValidateMatchConstraints checks a policy's matchConstraints, which it
// must have, with at least one resource rule to give its expressions
// types.
func ValidateMatchConstraints(mc *admissionregistrationv1.MatchResources, path *field.Path) field.ErrorList {
	if mc == nil {
		return field.ErrorList{field.Required(path, "")}
	}
	errs := ValidateMatchResources(mc, path)
	if len(mc.ResourceRules) == 0 {
		errs = append(errs, field.Required(path.Child("resourceRules"), ""))
	}
	return errs
}

// ValidateMatchResources follows upstream's validateMatchResources: a
// match policy, both selectors (checked strictly: the type came after
// https://issues.k8s.io/99139) and the named rules.
func ValidateMatchResources(mc *admissionregistrationv1.MatchResources, path *field.Path) field.ErrorList {
	if mc == nil {
		return nil
	}
	var errs field.ErrorList
	if mc.MatchPolicy == nil {
		errs = append(errs, field.Required(path.Child("matchPolicy"), ""))
	} else if !admissionwebhook.MatchPolicies.Has(string(*mc.MatchPolicy)) {
		errs = append(errs, field.NotSupported(path.Child("matchPolicy"), *mc.MatchPolicy, sets.List(admissionwebhook.MatchPolicies)))
	}
	for _, s := range []struct {
		name     string
		selector *metav1.LabelSelector
	}{{"namespaceSelector", mc.NamespaceSelector}, {"objectSelector", mc.ObjectSelector}} {
		if s.selector == nil {
			errs = append(errs, field.Required(path.Child(s.name), ""))
		} else {
			errs = append(errs, metav1validation.ValidateLabelSelector(s.selector, metav1validation.LabelSelectorValidationOptions{}, path.Child(s.name))...)
		}
	}
	for i := range mc.ResourceRules {
		errs = append(errs, validateNamedRule(&mc.ResourceRules[i], path.Child("resourceRules").Index(i))...)
	}
	for i := range mc.ExcludeResourceRules {
		errs = append(errs, validateNamedRule(&mc.ExcludeResourceRules[i], path.Child("excludeResourceRules").Index(i))...)
	}
	return errs
}

// validateNamedRule follows upstream's validateNamedRuleWithOperations.
func validateNamedRule(n *admissionregistrationv1.NamedRuleWithOperations, path *field.Path) field.ErrorList {
	var errs field.ErrorList
	names := sets.New[string]()
	for i, name := range n.ResourceNames {
		namePath := path.Child("resourceNames").Index(i)
		for _, msg := range content.IsPathSegmentName(name) {
			errs = append(errs, field.Invalid(namePath, name, msg))
		}
		if names.Has(name) {
			errs = append(errs, field.Duplicate(namePath, name))
		} else {
			names.Insert(name)
		}
	}
	return append(errs, admissionwebhook.ValidateRuleWithOperations(&n.RuleWithOperations, path)...)
}

// ValidateMutatingOperations refuses DELETE in a mutating policy's or
// binding's resource rules. As upstream, the error names the operations
// of no rule in particular (path is ".../resourceRules/operations").
func ValidateMutatingOperations(mc *admissionregistrationv1.MatchResources, path *field.Path) field.ErrorList {
	if mc == nil {
		return nil
	}
	var errs field.ErrorList
	for _, rule := range mc.ResourceRules {
		for _, op := range rule.Operations {
			if !mutatingOperations.Has(string(op)) {
				errs = append(errs, field.NotSupported(path, op, sets.List(mutatingOperations)))
			}
		}
	}
	return errs
}

// ValidatePolicyName checks a binding's policyName; required says whether
// the missing name is reported here (a ValidatingAdmissionPolicyBinding's
// is reported by declarative validation in its stead).
func ValidatePolicyName(name string, required bool, path *field.Path) field.ErrorList {
	if name == "" {
		if required {
			return field.ErrorList{field.Required(path, "")}
		}
		return nil
	}
	var errs field.ErrorList
	for _, msg := range apivalidation.NameIsDNSSubdomain(name, false) {
		errs = append(errs, field.Invalid(path, name, msg))
	}
	return errs
}

// ValidateParamRef follows upstream's validateParamRef: a name (a path
// segment) or a selector, not both, and what to do when the parameter is
// missing.
func ValidateParamRef(pr *admissionregistrationv1.ParamRef, path *field.Path) field.ErrorList {
	if pr == nil {
		return nil
	}
	const exclusive = "name and selector are mutually exclusive"
	var errs field.ErrorList
	if pr.Name != "" {
		for _, msg := range content.IsPathSegmentName(pr.Name) {
			errs = append(errs, field.Invalid(path.Child("name"), pr.Name, msg))
		}
		if pr.Selector != nil {
			errs = append(errs, field.Forbidden(path.Child("name"), exclusive))
		}
	}
	if pr.Selector != nil {
		errs = append(errs, metav1validation.ValidateLabelSelector(pr.Selector, metav1validation.LabelSelectorValidationOptions{}, path.Child("selector"))...)
		if pr.Name != "" {
			errs = append(errs, field.Forbidden(path.Child("selector"), exclusive))
		}
	}
	if pr.Name == "" && pr.Selector == nil {
		errs = append(errs, field.Required(path, "one of name or selector must be specified"))
	}
	actionPath := path.Child("parameterNotFoundAction")
	switch action := pr.ParameterNotFoundAction; {
	case action == nil || *action == "":
		errs = append(errs, field.Required(actionPath, ""))
	case *action != admissionregistrationv1.DenyAction && *action != admissionregistrationv1.AllowAction:
		// Upstream lists them unsorted.
		errs = append(errs, field.NotSupported(actionPath, action,
			[]string{string(admissionregistrationv1.DenyAction), string(admissionregistrationv1.AllowAction)}))
	}
	return errs
}

// ParamRefCell is a binding's PARAMREF column, as upstream's printer:
// namespace/name ("*/name" without a namespace), the selector, or
// <unset>.
func ParamRefCell(pr *admissionregistrationv1.ParamRef) string {
	switch {
	case pr == nil:
	case pr.Name != "" && pr.Namespace != "":
		return pr.Namespace + "/" + pr.Name
	case pr.Name != "":
		// Upstream cannot tell here whether the param is cluster-scoped.
		return "*/" + pr.Name
	case pr.Selector != nil:
		return pr.Selector.String()
	}
	return "<unset>"
}

// ParamKindCell is a policy's PARAMKIND column: apiVersion/kind, or
// <unset>.
func ParamKindCell(pk *admissionregistrationv1.ParamKind) string {
	if pk == nil {
		return "<unset>"
	}
	return pk.APIVersion + "/" + pk.Kind
}
