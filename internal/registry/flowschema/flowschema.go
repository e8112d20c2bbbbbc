// Package flowschema is the flowcontrol.apiserver.k8s.io/v1 FlowSchema
// strategy, as kube-apiserver's (pkg/registry/flowcontrol/flowschema and
// pkg/apis/flowcontrol/validation): matchingPrecedence defaults to 1000 and
// must be in 1..10000 (1 only for "exempt"), a priority level must be
// named, distinguisher methods, subjects and rules are checked, and the
// mandatory FlowSchemas ("exempt", "catch-all") must keep their fixed
// spec. Status is a subresource; spec changes bump the generation. The
// columns are upstream's: PRIORITYLEVEL, MATCHINGPRECEDENCE,
// DISTINGUISHERMETHOD, AGE and MISSINGPL (the Dangling condition's status).
//
// The objects are served only: svcnet's API server does no API Priority
// and Fairness, so nothing reads them and no status is written for them.
package flowschema

import (
	"fmt"
	"slices"
	"strings"

	flowcontrolv1 "k8s.io/api/flowcontrol/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apimachineryvalidation "k8s.io/apimachinery/pkg/api/validation"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/apiserver/pkg/apis/flowcontrol/bootstrap"

	"github.com/svcnet/svcnet/internal/registry"
)

// DefaultMatchingPrecedence is upstream's default matchingPrecedence.
const DefaultMatchingPrecedence int32 = 1000

// Resource describes flowschemas.
func Resource() *registry.Resource {
	return &registry.Resource{
		Kind:       flowcontrolv1.SchemeGroupVersion.WithKind("FlowSchema"),
		Resource:   "flowschemas",
		Singular:   "flowschema",
		Status:     true,
		Generation: true,
		Strategy:   strategy{},
		Columns: []registry.Column{
			registry.NameColumn(),
			{TableColumnDefinition: metav1.TableColumnDefinition{Name: "PriorityLevel", Type: "string",
				Description: flowcontrolv1.PriorityLevelConfigurationReference{}.SwaggerDoc()["name"]},
				Cell: func(o runtime.Object) interface{} {
					return o.(*flowcontrolv1.FlowSchema).Spec.PriorityLevelConfiguration.Name
				}},
			{TableColumnDefinition: metav1.TableColumnDefinition{Name: "MatchingPrecedence", Type: "string",
				Description: flowcontrolv1.FlowSchemaSpec{}.SwaggerDoc()["matchingPrecedence"]},
				Cell: func(o runtime.Object) interface{} {
					return int64(o.(*flowcontrolv1.FlowSchema).Spec.MatchingPrecedence)
				}},
			{TableColumnDefinition: metav1.TableColumnDefinition{Name: "DistinguisherMethod", Type: "string",
				Description: flowcontrolv1.FlowSchemaSpec{}.SwaggerDoc()["distinguisherMethod"]},
				Cell: func(o runtime.Object) interface{} {
					if dm := o.(*flowcontrolv1.FlowSchema).Spec.DistinguisherMethod; dm != nil {
						return string(dm.Type)
					}
					return "<none>"
				}},
			registry.AgeColumn(),
			{TableColumnDefinition: metav1.TableColumnDefinition{Name: "MissingPL", Type: "string",
				Description: "references a broken or non-existent PriorityLevelConfiguration"},
				Cell: func(o runtime.Object) interface{} { return missingPL(o.(*flowcontrolv1.FlowSchema)) }},
		},
	}
}

// missingPL is the status of the Dangling condition, "?" without one.
func missingPL(fs *flowcontrolv1.FlowSchema) string {
	for _, c := range fs.Status.Conditions {
		if c.Type == flowcontrolv1.FlowSchemaConditionDangling {
			return string(c.Status)
		}
	}
	return "?"
}

type strategy struct{ registry.Base }

// Default is upstream's SetObjectDefaults_FlowSchema.
func (strategy) Default(obj runtime.Object) {
	SetDefaults(&obj.(*flowcontrolv1.FlowSchema).Spec)
}

// SetDefaults is upstream's SetDefaults_FlowSchemaSpec: matchingPrecedence
// 0 becomes 1000.
func SetDefaults(spec *flowcontrolv1.FlowSchemaSpec) {
	if spec.MatchingPrecedence == 0 {
		spec.MatchingPrecedence = DefaultMatchingPrecedence
	}
}

// PrepareForStatusUpdate keeps the stored labels, annotations, finalizers
// and owner references: upstream's status strategy keeps all the stored
// metadata but the managed fields.
func (strategy) PrepareForStatusUpdate(obj, old runtime.Object) {
	m, prev := &obj.(*flowcontrolv1.FlowSchema).ObjectMeta, &old.(*flowcontrolv1.FlowSchema).ObjectMeta
	m.Labels, m.Annotations, m.Finalizers, m.OwnerReferences = prev.Labels, prev.Annotations, prev.Finalizers, prev.OwnerReferences
}

// Validate is upstream's ValidateFlowSchema without the object metadata,
// which the API server checks for every kind.
func (strategy) Validate(obj runtime.Object) field.ErrorList {
	return Validate(obj.(*flowcontrolv1.FlowSchema))
}

// ValidateUpdate is ValidateFlowSchema of the new object, as upstream's
// ValidateFlowSchemaUpdate; status writes are checked the same way (the
// spec they keep is the stored one).
func (strategy) ValidateUpdate(obj, _ runtime.Object) field.ErrorList {
	return Validate(obj.(*flowcontrolv1.FlowSchema))
}

// mandatory are the spec-fixed FlowSchemas by name.
var mandatory = func() map[string]*flowcontrolv1.FlowSchema {
	m := map[string]*flowcontrolv1.FlowSchema{}
	for _, fs := range bootstrap.MandatoryFlowSchemas {
		m[fs.Name] = fs
	}
	return m
}()

// Validate checks the spec and status of fs as upstream's
// ValidateFlowSchema.
func Validate(fs *flowcontrolv1.FlowSchema) field.ErrorList {
	specPath := field.NewPath("spec")
	errs := validateSpec(fs.Name, &fs.Spec, specPath)
	if mand, ok := mandatory[fs.Name]; ok {
		want := mand.Spec.DeepCopy()
		SetDefaults(want)
		if !apiequality.Semantic.DeepEqual(&fs.Spec, want) {
			errs = append(errs, field.Invalid(specPath, fs.Spec, fmt.Sprintf("spec of '%s' must equal the fixed value", fs.Name)))
		}
	}
	return append(errs, validateStatus(&fs.Status, field.NewPath("status"))...)
}

var (
	supportedDistinguisherMethods = []string{
		string(flowcontrolv1.FlowDistinguisherMethodByNamespaceType),
		string(flowcontrolv1.FlowDistinguisherMethodByUserType),
	}
	supportedVerbs        = []string{"create", "delete", "deletecollection", "get", "list", "patch", "proxy", "update", "watch"}
	supportedSubjectKinds = []string{
		string(flowcontrolv1.SubjectKindGroup),
		string(flowcontrolv1.SubjectKindServiceAccount),
		string(flowcontrolv1.SubjectKindUser),
	}
)

func validateSpec(name string, spec *flowcontrolv1.FlowSchemaSpec, path *field.Path) field.ErrorList {
	var errs field.ErrorList
	mp := path.Child("matchingPrecedence")
	if spec.MatchingPrecedence <= 0 {
		errs = append(errs, field.Invalid(mp, spec.MatchingPrecedence, "must be a positive value"))
	}
	if spec.MatchingPrecedence > flowcontrolv1.FlowSchemaMaxMatchingPrecedence {
		errs = append(errs, field.Invalid(mp, spec.MatchingPrecedence, fmt.Sprintf("must not be greater than %v", flowcontrolv1.FlowSchemaMaxMatchingPrecedence)))
	}
	if spec.MatchingPrecedence == 1 && name != flowcontrolv1.FlowSchemaNameExempt {
		errs = append(errs, field.Invalid(mp, spec.MatchingPrecedence, "only the schema named 'exempt' may have matchingPrecedence 1"))
	}
	if dm := spec.DistinguisherMethod; dm != nil && !slices.Contains(supportedDistinguisherMethods, string(dm.Type)) {
		// Upstream reports the whole method, as its internal type.
		errs = append(errs, field.NotSupported(path.Child("distinguisherMethod", "type"), internalDistinguisher{Type: string(dm.Type)}, supportedDistinguisherMethods))
	}
	plName := path.Child("priorityLevelConfiguration", "name")
	if n := spec.PriorityLevelConfiguration.Name; n != "" {
		for _, msg := range apimachineryvalidation.NameIsDNSSubdomain(n, false) {
			errs = append(errs, field.Invalid(plName, n, msg))
		}
	} else {
		errs = append(errs, field.Required(plName, "must reference a priority level"))
	}
	for i := range spec.Rules {
		errs = append(errs, validateRule(&spec.Rules[i], path.Child("rules").Index(i))...)
	}
	return errs
}

// internalDistinguisher has the fields, and so the untagged JSON, of
// upstream's internal FlowDistinguisherMethod.
type internalDistinguisher struct{ Type string }

func validateRule(rule *flowcontrolv1.PolicyRulesWithSubjects, path *field.Path) field.ErrorList {
	var errs field.ErrorList
	if len(rule.Subjects) == 0 {
		errs = append(errs, field.Required(path.Child("subjects"), "subjects must contain at least one value"))
	}
	for i := range rule.Subjects {
		errs = append(errs, validateSubject(&rule.Subjects[i], path.Child("subjects").Index(i))...)
	}
	if len(rule.ResourceRules) == 0 && len(rule.NonResourceRules) == 0 {
		errs = append(errs, field.Required(path, "at least one of resourceRules and nonResourceRules has to be non-empty"))
	}
	for i := range rule.ResourceRules {
		errs = append(errs, validateResourceRule(&rule.ResourceRules[i], path.Child("resourceRules").Index(i))...)
	}
	for i := range rule.NonResourceRules {
		errs = append(errs, validateNonResourceRule(&rule.NonResourceRules[i], path.Child("nonResourceRules").Index(i))...)
	}
	return errs
}

func validateSubject(s *flowcontrolv1.Subject, path *field.Path) field.ErrorList {
	var errs field.ErrorList
	forbidUser := func() {
		if s.User != nil {
			errs = append(errs, field.Forbidden(path.Child("user"), "user is forbidden when subject kind is not 'User'"))
		}
	}
	forbidGroup := func() {
		if s.Group != nil {
			errs = append(errs, field.Forbidden(path.Child("group"), "group is forbidden when subject kind is not 'Group'"))
		}
	}
	forbidSA := func() {
		if s.ServiceAccount != nil {
			errs = append(errs, field.Forbidden(path.Child("serviceAccount"), "serviceAccount is forbidden when subject kind is not 'ServiceAccount'"))
		}
	}
	switch s.Kind {
	case flowcontrolv1.SubjectKindServiceAccount:
		p := path.Child("serviceAccount")
		if sa := s.ServiceAccount; sa == nil {
			errs = append(errs, field.Required(p, "serviceAccount is required when subject kind is 'ServiceAccount'"))
		} else {
			if sa.Name == "" {
				errs = append(errs, field.Required(p.Child("name"), ""))
			} else if sa.Name != flowcontrolv1.NameAll {
				for _, msg := range apimachineryvalidation.ValidateServiceAccountName(sa.Name, false) {
					errs = append(errs, field.Invalid(p.Child("name"), sa.Name, msg))
				}
			}
			if sa.Namespace != "" {
				for _, msg := range apimachineryvalidation.ValidateNamespaceName(sa.Namespace, false) {
					errs = append(errs, field.Invalid(p.Child("namespace"), sa.Namespace, msg))
				}
			} else {
				errs = append(errs, field.Required(p.Child("namespace"), "must specify namespace for service account"))
			}
		}
		forbidUser()
		forbidGroup()
	case flowcontrolv1.SubjectKindUser:
		if s.User == nil {
			errs = append(errs, field.Required(path.Child("user"), "user is required when subject kind is 'User'"))
		} else if s.User.Name == "" {
			errs = append(errs, field.Required(path.Child("user", "name"), ""))
		}
		forbidSA()
		forbidGroup()
	case flowcontrolv1.SubjectKindGroup:
		if s.Group == nil {
			errs = append(errs, field.Required(path.Child("group"), "group is required when subject kind is 'Group'"))
		} else if s.Group.Name == "" {
			errs = append(errs, field.Required(path.Child("group", "name"), ""))
		}
		forbidSA()
		forbidUser()
	default:
		errs = append(errs, field.NotSupported(path.Child("kind"), s.Kind, supportedSubjectKinds))
	}
	return errs
}

// validateVerbs is the verbs check both kinds of rule share.
func validateVerbs(verbs []string, path *field.Path) field.ErrorList {
	switch {
	case len(verbs) == 0:
		return field.ErrorList{field.Required(path, "verbs must contain at least one value")}
	case slices.Contains(verbs, "*"):
		if len(verbs) > 1 {
			return field.ErrorList{field.Invalid(path, verbs, "if '*' is present, must not specify other verbs")}
		}
	default:
		for _, v := range verbs {
			if !slices.Contains(supportedVerbs, v) {
				return field.ErrorList{field.NotSupported(path, verbs, supportedVerbs)}
			}
		}
	}
	return nil
}

const nsErrIntro = "each member of this list must be '*' or a DNS-1123 label; "

func validateResourceRule(rule *flowcontrolv1.ResourcePolicyRule, path *field.Path) field.ErrorList {
	errs := validateVerbs(rule.Verbs, path.Child("verbs"))
	if len(rule.APIGroups) == 0 {
		errs = append(errs, field.Required(path.Child("apiGroups"), "resource rules must supply at least one api group"))
	} else if len(rule.APIGroups) > 1 && slices.Contains(rule.APIGroups, "*") {
		errs = append(errs, field.Invalid(path.Child("apiGroups"), rule.APIGroups, "if '*' is present, must not specify other api groups"))
	}
	if len(rule.Resources) == 0 {
		errs = append(errs, field.Required(path.Child("resources"), "resource rules must supply at least one resource"))
	} else if len(rule.Resources) > 1 && slices.Contains(rule.Resources, "*") {
		errs = append(errs, field.Invalid(path.Child("resources"), rule.Resources, "if '*' is present, must not specify other resources"))
	}
	switch {
	case len(rule.Namespaces) == 0 && !rule.ClusterScope:
		errs = append(errs, field.Required(path.Child("namespaces"), "resource rules that are not cluster scoped must supply at least one namespace"))
	case slices.Contains(rule.Namespaces, "*"):
		if len(rule.Namespaces) > 1 {
			errs = append(errs, field.Invalid(path.Child("namespaces"), rule.Namespaces, "if '*' is present, must not specify other namespaces"))
		}
	default:
		for i, ns := range rule.Namespaces {
			for _, msg := range apimachineryvalidation.ValidateNamespaceName(ns, false) {
				errs = append(errs, field.Invalid(path.Child("namespaces").Index(i), ns, nsErrIntro+msg))
			}
		}
	}
	return errs
}

func validateNonResourceRule(rule *flowcontrolv1.NonResourcePolicyRule, path *field.Path) field.ErrorList {
	errs := validateVerbs(rule.Verbs, path.Child("verbs"))
	urls := path.Child("nonResourceURLs")
	switch {
	case len(rule.NonResourceURLs) == 0:
		errs = append(errs, field.Required(urls, "nonResourceURLs must contain at least one value"))
	case slices.Contains(rule.NonResourceURLs, "*"):
		if len(rule.NonResourceURLs) > 1 {
			errs = append(errs, field.Invalid(urls, rule.NonResourceURLs, "if '*' is present, must not specify other non-resource URLs"))
		}
	default:
		for i, u := range rule.NonResourceURLs {
			if err := validateNonResourceURL(u, urls.Index(i)); err != nil {
				errs = append(errs, err)
			}
		}
	}
	return errs
}

// validateNonResourceURL is upstream's ValidateNonResourceURLPath.
func validateNonResourceURL(p string, path *field.Path) *field.Error {
	switch {
	case p == "":
		return field.Invalid(path, p, "must not be empty")
	case p == "/":
		return nil
	case !strings.HasPrefix(p, "/"):
		return field.Invalid(path, p, "must start with slash")
	case strings.Contains(p, " "):
		return field.Invalid(path, p, "must not contain white-space")
	case strings.Contains(p, "//"):
		return field.Invalid(path, p, "must not contain double slash")
	}
	if n := strings.Count(p, "*"); n > 1 || (n == 1 && p[len(p)-2:] != "/*") {
		return field.Invalid(path, p, "wildcard can only do suffix matching")
	}
	return nil
}

func validateStatus(status *flowcontrolv1.FlowSchemaStatus, path *field.Path) field.ErrorList {
	var errs field.ErrorList
	seen := map[flowcontrolv1.FlowSchemaConditionType]bool{}
	for i, c := range status.Conditions {
		p := path.Child("conditions").Index(i)
		if seen[c.Type] {
			errs = append(errs, field.Duplicate(p.Child("type"), c.Type))
		}
		seen[c.Type] = true
		if c.Type == "" {
			errs = append(errs, field.Required(p.Child("type"), ""))
		}
	}
	return errs
}
