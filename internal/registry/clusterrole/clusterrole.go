// Package clusterrole is the rbac.authorization.k8s.io/v1 ClusterRole
// strategy, after upstream's pkg/registry/rbac/clusterrole and
// ValidateClusterRole: the rules of a Role (non-resource URLs allowed), and
// an aggregationRule with at least one valid label selector, whose rules
// the clusterrole-aggregation controller fills in. Before a ClusterRole is
// stored the RBAC escalation check (rbac.Guard) confirms that the writer
// holds every rule it grants, and every permission when it aggregates, as
// upstream's policybased storage. `kubectl get` shows NAME and CREATED AT.
package clusterrole

import (
	"context"

	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	metav1validation "k8s.io/apimachinery/pkg/apis/meta/v1/validation"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/svcnet/svcnet/internal/auth/rbac"
	"github.com/svcnet/svcnet/internal/registry"
	"github.com/svcnet/svcnet/internal/registry/role"
	"github.com/svcnet/svcnet/internal/storage"
)

// Resource describes clusterroles. guard, when not nil, is the escalation
// check every create and update passes before it is stored.
func Resource(guard rbac.Guard) *registry.Resource {
	// Upstream returns a Status on delete and has no short names.
	return &registry.Resource{
		Kind:           rbacv1.SchemeGroupVersion.WithKind("ClusterRole"),
		Resource:       "clusterroles",
		Singular:       "clusterrole",
		NameValidation: role.ValidateName,
		Strategy:       strategy{guard: guard},
		Columns:        role.DefaultTableColumns(),
	}
}

type strategy struct {
	registry.Base
	guard rbac.Guard
}

// Validate follows upstream's ValidateClusterRole (metadata is the API
// server's), merged with the enforced declarative checks as a Role's.
func (strategy) Validate(obj runtime.Object) field.ErrorList {
	cr := obj.(*rbacv1.ClusterRole)
	return role.MergeDeclarative(validate(cr, false), role.DeclarativeRules(cr.Rules, nil, false))
}

// ValidateUpdate follows upstream's ValidateClusterRoleUpdate: the checks
// of a create, except that label values the stored selectors already got
// wrong are let be.
func (strategy) ValidateUpdate(obj, old runtime.Object) field.ErrorList {
	cr, o := obj.(*rbacv1.ClusterRole), old.(*rbacv1.ClusterRole)
	return role.MergeDeclarative(validate(cr, hasInvalidLabelValueInLabelSelector(o)), role.DeclarativeRules(cr.Rules, o.Rules, true))
}

// validate is upstream's ValidateClusterRole without the metadata.
func validate(cr *rbacv1.ClusterRole, allowInvalidLabelValue bool) field.ErrorList {
	errs := role.ValidateRules(cr.Rules, false)
	if cr.AggregationRule == nil {
		return errs
	}
	path := field.NewPath("aggregationRule", "clusterRoleSelectors")
	if len(cr.AggregationRule.ClusterRoleSelectors) == 0 {
		errs = append(errs, field.Required(path, "at least one clusterRoleSelector required if aggregationRule is non-nil"))
	}
	opts := metav1validation.LabelSelectorValidationOptions{AllowInvalidLabelValueInSelector: allowInvalidLabelValue}
	for i := range cr.AggregationRule.ClusterRoleSelectors {
		selector := &cr.AggregationRule.ClusterRoleSelectors[i]
		errs = append(errs, metav1validation.ValidateLabelSelector(selector, opts, path.Index(i))...)
		// Upstream reports the selector it failed to build, which is
		// nil: "Invalid value: null".
		if _, err := metav1.LabelSelectorAsSelector(selector); err != nil {
			errs = append(errs, field.Invalid(path.Index(i), nil, "invalid label selector."))
		}
	}
	return errs
}

// hasInvalidLabelValueInLabelSelector is upstream's: whether a stored
// ClusterRole has a selector that strict validation refuses.
func hasInvalidLabelValueInLabelSelector(cr *rbacv1.ClusterRole) bool {
	if cr.AggregationRule == nil {
		return false
	}
	opts := metav1validation.LabelSelectorValidationOptions{AllowInvalidLabelValueInSelector: false}
	for i := range cr.AggregationRule.ClusterRoleSelectors {
		if len(metav1validation.ValidateLabelSelector(&cr.AggregationRule.ClusterRoleSelectors[i], opts, nil)) > 0 {
			return true
		}
	}
	return false
}

// hasAggregationRule is upstream's: an aggregationRule with selectors.
func hasAggregationRule(cr *rbacv1.ClusterRole) bool {
	return cr != nil && cr.AggregationRule != nil && len(cr.AggregationRule.ClusterRoleSelectors) > 0
}

// PrepareWrite implements registry.Writer: it is upstream's policybased
// ClusterRole storage. A create, and an update that changes more than what
// the garbage collector changes, must pass the escalation check, dry runs
// too; deletes are not checked. Setting an aggregationRule, keeping one or
// removing one (an update of an aggregating ClusterRole) needs every
// permission.
func (s strategy) PrepareWrite(ctx context.Context, obj, old runtime.Object, _ bool) (storage.Extra, func(error), error) {
	cr, ok := obj.(*rbacv1.ClusterRole)
	if s.guard == nil || !ok || role.IsOnlyMutatingGCFields(obj, old) {
		return storage.Extra{}, func(error) {}, nil
	}
	prev, _ := old.(*rbacv1.ClusterRole)
	aggregating := hasAggregationRule(cr) || hasAggregationRule(prev)
	if err := s.guard.ConfirmRole(ctx, "", cr.Name, cr.Rules, aggregating); err != nil {
		return storage.Extra{}, func(error) {}, err
	}
	return storage.Extra{}, func(error) {}, nil
}
