// Package rolebinding is the rbac.authorization.k8s.io/v1 RoleBinding
// strategy, after upstream's pkg/registry/rbac/rolebinding and
// ValidateRoleBinding: roleRef names a Role or ClusterRole of the RBAC
// group and never changes, subjects are ServiceAccounts, Users or Groups,
// and apiGroups are defaulted as upstream's SetDefaults_*. Before a
// RoleBinding is stored the RBAC escalation check (rbac.Guard) confirms
// that the writer may bind the role, as upstream's policybased storage.
// `kubectl get` shows NAME, ROLE and AGE, and -o wide the USERS, GROUPS
// and SERVICEACCOUNTS bound. The package also holds what
// ClusterRoleBindings share with it.
package rolebinding

import (
	"context"

	rbacv1 "k8s.io/api/rbac/v1"
	rbacv1beta1 "k8s.io/api/rbac/v1beta1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/svcnet/svcnet/internal/auth/rbac"
	"github.com/svcnet/svcnet/internal/registry"
	"github.com/svcnet/svcnet/internal/registry/role"
	"github.com/svcnet/svcnet/internal/storage"
)

// Resource describes rolebindings. guard, when not nil, is the escalation
// check every create and update passes before it is stored.
func Resource(guard rbac.Guard) *registry.Resource {
	// Upstream returns a Status on delete and has no short names.
	return &registry.Resource{
		Kind:           rbacv1.SchemeGroupVersion.WithKind("RoleBinding"),
		Resource:       "rolebindings",
		Singular:       "rolebinding",
		Namespaced:     true,
		NameValidation: role.ValidateName,
		Strategy:       strategy{guard: guard},
		Columns: Columns(rbacv1beta1.RoleBinding{}.SwaggerDoc()["roleRef"], "roleBinding", func(o runtime.Object) (rbacv1.RoleRef, []rbacv1.Subject) {
			b := o.(*rbacv1.RoleBinding)
			return b.RoleRef, b.Subjects
		}),
	}
}

type strategy struct {
	registry.Base
	guard rbac.Guard
}

// Default is upstream's SetObjectDefaults_RoleBinding.
func (strategy) Default(obj runtime.Object) {
	b := obj.(*rbacv1.RoleBinding)
	Default(&b.RoleRef, b.Subjects)
}

// roleKinds are the kinds a RoleBinding may refer to.
var roleKinds = []string{"Role", "ClusterRole"}

// Validate follows upstream's ValidateRoleBinding (metadata is the API
// server's), merged with the enforced declarative checks.
func (strategy) Validate(obj runtime.Object) field.ErrorList {
	b := obj.(*rbacv1.RoleBinding)
	errs := append(ValidateRoleRef(b.RoleRef, roleKinds), ValidateSubjects(b.Subjects, true)...)
	return role.MergeDeclarative(errs, Declarative(b.RoleRef, b.Subjects, nil, false))
}

// ValidateUpdate follows upstream's ValidateRoleBindingUpdate: the checks
// of a create, and roleRef stays as it was.
func (strategy) ValidateUpdate(obj, old runtime.Object) field.ErrorList {
	b, o := obj.(*rbacv1.RoleBinding), old.(*rbacv1.RoleBinding)
	errs := append(ValidateRoleRef(b.RoleRef, roleKinds), ValidateSubjects(b.Subjects, true)...)
	errs = append(errs, ValidateRoleRefUpdate(b.RoleRef, o.RoleRef).MarkAlpha()...)
	return role.MergeDeclarative(errs, Declarative(b.RoleRef, b.Subjects, o.Subjects, true))
}

// PrepareWrite implements registry.Writer: it is upstream's policybased
// RoleBinding storage. A create, and an update that changes more than
// what the garbage collector changes, must pass the escalation check, dry
// runs too; deletes are not checked.
func (s strategy) PrepareWrite(ctx context.Context, obj, old runtime.Object, _ bool) (storage.Extra, func(error), error) {
	b, ok := obj.(*rbacv1.RoleBinding)
	if s.guard == nil || !ok || role.IsOnlyMutatingGCFields(obj, old) {
		return storage.Extra{}, func(error) {}, nil
	}
	if err := s.guard.ConfirmBinding(ctx, b.Namespace, b.Name, b.RoleRef); err != nil {
		return storage.Extra{}, func(error) {}, err
	}
	return storage.Extra{}, func(error) {}, nil
}
