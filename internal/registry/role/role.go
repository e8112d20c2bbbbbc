// Package role is the rbac.authorization.k8s.io/v1 Role strategy, after
// upstream's pkg/registry/rbac/role and the Role half of
// pkg/apis/rbac/validation: names are path segments, every rule needs
// verbs, a resource rule needs apiGroups and resources, and a namespaced
// rule cannot name non-resource URLs. Before a Role is stored the RBAC
// escalation check (rbac.Guard) confirms that the writer holds every rule
// it grants, as upstream's policybased storage. `kubectl get` shows NAME
// and CREATED AT, upstream's default table. The package also holds what the
// other RBAC kinds share with it: rule validation, the merge with
// declarative validation, the garbage-collector exemption of the
// escalation check and the default table.
package role

import (
	"context"

	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/svcnet/svcnet/internal/auth/rbac"
	"github.com/svcnet/svcnet/internal/registry"
	"github.com/svcnet/svcnet/internal/storage"
)

// Resource describes roles. guard, when not nil, is the escalation check
// every create and update passes before it is stored.
func Resource(guard rbac.Guard) *registry.Resource {
	// Upstream returns a Status on delete, and has neither short names
	// nor categories for the RBAC kinds.
	return &registry.Resource{
		Kind:           rbacv1.SchemeGroupVersion.WithKind("Role"),
		Resource:       "roles",
		Singular:       "role",
		Namespaced:     true,
		NameValidation: ValidateName,
		Strategy:       strategy{guard: guard},
		Columns:        DefaultTableColumns(),
	}
}

type strategy struct {
	registry.Base
	guard rbac.Guard
}

// Upstream validates Roles by hand (ValidateRole) and declaratively from
// the +k8s: tags of k8s.io/api, whose beta tags are enforced
// (DeclarativeValidationBeta is on by default): a rule's verbs are
// required. The hand-written error those tags cover gives way to the
// declarative one, which comes last, as MergeDeclarative does.

// Validate follows upstream's ValidateRole (metadata is the API server's).
func (strategy) Validate(obj runtime.Object) field.ErrorList {
	r := obj.(*rbacv1.Role)
	return MergeDeclarative(ValidateRules(r.Rules, true), DeclarativeRules(r.Rules, nil, false))
}

// ValidateUpdate follows upstream's ValidateRoleUpdate: the same checks
// as on create; the declarative ones only when the rules changed.
func (strategy) ValidateUpdate(obj, old runtime.Object) field.ErrorList {
	r, o := obj.(*rbacv1.Role), old.(*rbacv1.Role)
	return MergeDeclarative(ValidateRules(r.Rules, true), DeclarativeRules(r.Rules, o.Rules, true))
}

// PrepareWrite implements registry.Writer: it is upstream's policybased
// Role storage. A create, and an update that changes more than what the
// garbage collector changes, must pass the escalation check, dry runs
// too; deletes are not checked.
func (s strategy) PrepareWrite(ctx context.Context, obj, old runtime.Object, _ bool) (storage.Extra, func(error), error) {
	r, ok := obj.(*rbacv1.Role)
	if s.guard == nil || !ok || IsOnlyMutatingGCFields(obj, old) {
		return storage.Extra{}, func(error) {}, nil
	}
	if err := s.guard.ConfirmRole(ctx, r.Namespace, r.Name, r.Rules, false); err != nil {
		return storage.Extra{}, func(error) {}, err
	}
	return storage.Extra{}, func(error) {}, nil
}
