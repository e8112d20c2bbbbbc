// Package clusterrolebinding is the rbac.authorization.k8s.io/v1
// ClusterRoleBinding strategy, after upstream's
// pkg/registry/rbac/clusterrolebinding and ValidateClusterRoleBinding: a
// RoleBinding's rules (internal/registry/rolebinding), except that roleRef
// names a ClusterRole and a ServiceAccount subject needs its namespace.
// Before a ClusterRoleBinding is stored the RBAC escalation check
// (rbac.Guard) confirms that the writer may bind the role, as upstream's
// policybased storage. `kubectl get` shows NAME, ROLE and AGE, and -o wide
// the USERS, GROUPS and SERVICEACCOUNTS bound.
package clusterrolebinding

import (
	"context"

	rbacv1 "k8s.io/api/rbac/v1"
	rbacv1beta1 "k8s.io/api/rbac/v1beta1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/svcnet/svcnet/internal/auth/rbac"
	"github.com/svcnet/svcnet/internal/registry"
	"github.com/svcnet/svcnet/internal/registry/role"
	"github.com/svcnet/svcnet/internal/registry/rolebinding"
	"github.com/svcnet/svcnet/internal/storage"
)

// Resource describes clusterrolebindings. guard, when not nil, is the
// escalation check every create and update passes before it is stored.
func Resource(guard rbac.Guard) *registry.Resource {
	// Upstream returns a Status on delete and has no short names.
	return &registry.Resource{
		Kind:           rbacv1.SchemeGroupVersion.WithKind("ClusterRoleBinding"),
		Resource:       "clusterrolebindings",
		Singular:       "clusterrolebinding",
		NameValidation: role.ValidateName,
		Strategy:       strategy{guard: guard},
		Columns: rolebinding.Columns(rbacv1beta1.ClusterRoleBinding{}.SwaggerDoc()["roleRef"], "clusterRoleBinding",
			func(o runtime.Object) (rbacv1.RoleRef, []rbacv1.Subject) {
				b := o.(*rbacv1.ClusterRoleBinding)
				return b.RoleRef, b.Subjects
			}),
	}
}

type strategy struct {
	registry.Base
	guard rbac.Guard
}

// Default is upstream's SetObjectDefaults_ClusterRoleBinding.
func (strategy) Default(obj runtime.Object) {
	b := obj.(*rbacv1.ClusterRoleBinding)
	rolebinding.Default(&b.RoleRef, b.Subjects)
}

// roleKinds are the kinds a ClusterRoleBinding may refer to.
var roleKinds = []string{"ClusterRole"}

// Validate follows upstream's ValidateClusterRoleBinding (metadata is the
// API server's), merged with the enforced declarative checks.
func (strategy) Validate(obj runtime.Object) field.ErrorList {
	b := obj.(*rbacv1.ClusterRoleBinding)
	errs := append(rolebinding.ValidateRoleRef(b.RoleRef, roleKinds), rolebinding.ValidateSubjects(b.Subjects, false)...)
	return role.MergeDeclarative(errs, rolebinding.Declarative(b.RoleRef, b.Subjects, nil, false))
}

// ValidateUpdate follows upstream's ValidateClusterRoleBindingUpdate: the
// checks of a create, and roleRef stays as it was.
func (strategy) ValidateUpdate(obj, old runtime.Object) field.ErrorList {
	b, o := obj.(*rbacv1.ClusterRoleBinding), old.(*rbacv1.ClusterRoleBinding)
	errs := append(rolebinding.ValidateRoleRef(b.RoleRef, roleKinds), rolebinding.ValidateSubjects(b.Subjects, false)...)
	errs = append(errs, rolebinding.ValidateRoleRefUpdate(b.RoleRef, o.RoleRef)...)
	return role.MergeDeclarative(errs, rolebinding.Declarative(b.RoleRef, b.Subjects, o.Subjects, true))
}

// PrepareWrite implements registry.Writer: it is upstream's policybased
// ClusterRoleBinding storage. A create, and an update that changes more
// than what the garbage collector changes, must pass the escalation check,
// dry runs too; deletes are not checked.
func (s strategy) PrepareWrite(ctx context.Context, obj, old runtime.Object, _ bool) (storage.Extra, func(error), error) {
	b, ok := obj.(*rbacv1.ClusterRoleBinding)
	if s.guard == nil || !ok || role.IsOnlyMutatingGCFields(obj, old) {
		return storage.Extra{}, func(error) {}, nil
	}
	if err := s.guard.ConfirmBinding(ctx, "", b.Name, b.RoleRef); err != nil {
		return storage.Extra{}, func(error) {}, err
	}
	return storage.Extra{}, func(error) {}, nil
}
