// Package rbac is the RBAC authorizer of upstream's
// plugin/pkg/auth/authorizer/rbac: Roles and ClusterRoles bound to users,
// groups and service accounts by RoleBindings and ClusterRoleBindings,
// read from client-go listers; the rules a user holds in a namespace (for
// SelfSubjectRulesReview); and the escalation check that keeps a user from
// writing a role or binding that grants more than they hold.
package rbac

import (
	"context"

	rbacv1 "k8s.io/api/rbac/v1"
)

// Guard is the escalation check the RBAC kinds' strategies run before a
// Role, ClusterRole, RoleBinding or ClusterRoleBinding is stored, with the
// writing user in ctx (authn.UserFrom). It returns upstream's Forbidden
// error, or nil when the write may go on.
type Guard interface {
	// ConfirmRole allows a Role (namespace set) or ClusterRole (namespace
	// "") with these rules; aggregating marks a ClusterRole with an
	// aggregationRule, which only a holder of every permission may write.
	ConfirmRole(ctx context.Context, namespace, name string, rules []rbacv1.PolicyRule, aggregating bool) error
	// ConfirmBinding allows a RoleBinding (namespace set) or
	// ClusterRoleBinding (namespace "") of ref.
	ConfirmBinding(ctx context.Context, namespace, name string, ref rbacv1.RoleRef) error
}
