package role

import (
	"context"
	"reflect"
	"time"

	rbacv1 "k8s.io/api/rbac/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/validate"
	"k8s.io/apimachinery/pkg/api/validate/content"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/svcnet/svcnet/internal/registry"
)

// This file holds what the four RBAC kinds share.

// ValidateName is upstream's ValidateRBACName, the names of roles,
// bindings and the roles they refer to: a path segment, not "." or ".."
// and without '/' or '%'. A generateName is checked the same way.
func ValidateName(name string, _ bool) []string {
	return content.IsPathSegmentName(name)
}

// ValidateRules checks each rule with ValidatePolicyRule under "rules".
func ValidateRules(rules []rbacv1.PolicyRule, namespaced bool) field.ErrorList {
	var errs field.ErrorList
	for i, rule := range rules {
		errs = append(errs, ValidatePolicyRule(rule, namespaced, field.NewPath("rules").Index(i))...)
	}
	return errs
}

// ValidatePolicyRule is upstream's: a rule needs verbs; a rule of
// non-resource URLs names nothing else and is not allowed in a namespaced
// Role; any other rule needs apiGroups and resources. The verbs error is
// covered by the declarative one (DeclarativeRules).
func ValidatePolicyRule(rule rbacv1.PolicyRule, namespaced bool, path *field.Path) field.ErrorList {
	var errs field.ErrorList
	if len(rule.Verbs) == 0 {
		errs = append(errs, field.Required(path.Child("verbs"), "verbs must contain at least one value").MarkCoveredByDeclarative())
	}
	if len(rule.NonResourceURLs) > 0 {
		if namespaced {
			errs = append(errs, field.Invalid(path.Child("nonResourceURLs"), rule.NonResourceURLs, "namespaced rules cannot apply to non-resource URLs"))
		}
		if len(rule.APIGroups) > 0 || len(rule.Resources) > 0 || len(rule.ResourceNames) > 0 {
			errs = append(errs, field.Invalid(path.Child("nonResourceURLs"), rule.NonResourceURLs, "rules cannot apply to both regular resources and non-resource URLs"))
		}
		return errs
	}
	if len(rule.APIGroups) == 0 {
		errs = append(errs, field.Required(path.Child("apiGroups"), "resource rules must supply at least one api group"))
	}
	if len(rule.Resources) == 0 {
		errs = append(errs, field.Required(path.Child("resources"), "resource rules must supply at least one resource"))
	}
	return errs
}

// DeclarativeRules is upstream's generated validation of the rules of a
// Role or ClusterRole, as enforced (its beta tags): nothing on an update
// that leaves the rules as they were; otherwise every rule, the unchanged
// ones too (the list has no keys to pair old and new rules by), needs
// verbs.
func DeclarativeRules(rules, old []rbacv1.PolicyRule, update bool) field.ErrorList {
	if update && apiequality.Semantic.DeepEqual(rules, old) {
		return nil
	}
	var errs field.ErrorList
	for i, rule := range rules {
		if len(rule.Verbs) == 0 {
			errs = append(errs, field.Required(field.NewPath("rules").Index(i).Child("verbs"), "").MarkBeta())
		}
	}
	return errs
}

// MergeDeclarative is what upstream's ValidateDeclarativelyWithMigrationChecks
// does with the hand-written and the enforced declarative errors when beta
// declarative validation is on: the hand-written errors a declarative one
// covers are dropped, and the declarative ones come last.
func MergeDeclarative(handwritten, declarative field.ErrorList) field.ErrorList {
	errs := validate.FilterCoveredHandwrittenErrors(context.Background(), handwritten, declarative, true)
	return append(errs, declarative...)
}

// IsOnlyMutatingGCFields is upstream's: an update that changes nothing but
// owner references and finalizers (what the garbage collector writes),
// managedFields and selfLink skips the escalation check. It is false on a
// create (no old).
func IsOnlyMutatingGCFields(obj, old runtime.Object) bool {
	if old == nil || reflect.ValueOf(old).IsNil() {
		return false
	}
	copied := obj.DeepCopyObject()
	cm, err := meta.Accessor(copied)
	if err != nil {
		return false
	}
	om, err := meta.Accessor(old)
	if err != nil {
		return false
	}
	cm.SetOwnerReferences(om.GetOwnerReferences())
	cm.SetFinalizers(om.GetFinalizers())
	cm.SetSelfLink(om.GetSelfLink())
	cm.SetManagedFields(om.GetManagedFields())
	return apiequality.Semantic.DeepEqual(copied, old)
}

// DefaultTableColumns is upstream's default table (rest's
// NewDefaultTableConvertor), which Roles and ClusterRoles have for want
// of a printer: NAME and CREATED AT, the creation time in UTC as RFC 3339.
func DefaultTableColumns() []registry.Column {
	doc := metav1.ObjectMeta{}.SwaggerDoc()
	return []registry.Column{
		registry.NameColumn(),
		{TableColumnDefinition: metav1.TableColumnDefinition{Name: "Created At", Type: "date", Description: doc["creationTimestamp"]},
			Cell: func(o runtime.Object) interface{} {
				a, err := meta.Accessor(o)
				if err != nil {
					return ""
				}
				return a.GetCreationTimestamp().Time.UTC().Format(time.RFC3339)
			}},
	}
}
