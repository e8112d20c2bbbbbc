package bootstrappolicy

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"
	rbacv1client "k8s.io/client-go/kubernetes/typed/rbac/v1"
	"k8s.io/client-go/util/retry"
	"k8s.io/component-helpers/auth/rbac/reconciliation"
)

// Ensure reconciles the default policy into the cluster as upstream's
// rbac/bootstrap-roles hook does. Missing objects are created; an existing
// object annotated rbac.authorization.kubernetes.io/autoupdate=true gains
// the rules (or aggregation selectors), subjects, labels and annotations it
// lacks and keeps any extra ones; one annotated autoupdate=false is left
// alone. A binding whose roleRef differs is deleted and recreated. Conflicts
// are retried. Like upstream, Ensure goes on past a failed object and
// reports all failures at the end; the caller (the API server's post-start
// hook) calls it again until it succeeds, as upstream polls. First, as
// upstream, it carries an administrator's rules and subjects over from the
// layouts before aggregated roles (1.9) and system:public-info-viewer (1.14).
func Ensure(ctx context.Context, client kubernetes.Interface) error {
	rbac := client.RbacV1()
	if err := primeAggregated(ctx, rbac); err != nil {
		return fmt.Errorf("bootstrap RBAC policy: migrate aggregated cluster roles: %w", err)
	}
	if err := primeSplitBindings(ctx, rbac); err != nil {
		return fmt.Errorf("bootstrap RBAC policy: migrate split cluster role bindings: %w", err)
	}

	namespaces := client.CoreV1().Namespaces()
	clusterRoles := store[*rbacv1.ClusterRole, reconciliation.RuleOwner]{
		ctx:    ctx,
		client: func(string) crud[*rbacv1.ClusterRole] { return rbac.ClusterRoles() },
		wrap: func(r *rbacv1.ClusterRole) reconciliation.RuleOwner {
			return reconciliation.ClusterRoleRuleOwner{ClusterRole: r}
		},
	}
	clusterBindings := store[*rbacv1.ClusterRoleBinding, reconciliation.RoleBinding]{
		ctx:    ctx,
		client: func(string) crud[*rbacv1.ClusterRoleBinding] { return rbac.ClusterRoleBindings() },
		wrap: func(b *rbacv1.ClusterRoleBinding) reconciliation.RoleBinding {
			return reconciliation.ClusterRoleBindingAdapter{ClusterRoleBinding: b}
		},
	}
	roles := store[*rbacv1.Role, reconciliation.RuleOwner]{
		ctx:        ctx,
		client:     func(ns string) crud[*rbacv1.Role] { return rbac.Roles(ns) },
		namespaces: namespaces,
		wrap:       func(r *rbacv1.Role) reconciliation.RuleOwner { return reconciliation.RoleRuleOwner{Role: r} },
	}
	roleBindings := store[*rbacv1.RoleBinding, reconciliation.RoleBinding]{
		ctx:        ctx,
		client:     func(ns string) crud[*rbacv1.RoleBinding] { return rbac.RoleBindings(ns) },
		namespaces: namespaces,
		wrap: func(b *rbacv1.RoleBinding) reconciliation.RoleBinding {
			return reconciliation.RoleBindingAdapter{RoleBinding: b}
		},
	}

	// Like upstream, go on past a failed object; stop once ctx is done.
	var errs []error
	do := func(f func() error) {
		if ctx.Err() == nil {
			errs = append(errs, f())
		}
	}
	for _, r := range ClusterRoles() {
		do(func() error {
			return ensureRole("clusterrole", r.Name, reconciliation.ClusterRoleRuleOwner{ClusterRole: &r}, clusterRoles)
		})
	}
	for _, b := range ClusterRoleBindings() {
		do(func() error {
			return ensureBinding("clusterrolebinding", b.Name, reconciliation.ClusterRoleBindingAdapter{ClusterRoleBinding: &b}, clusterBindings)
		})
	}
	nsRoles, nsBindings := NamespaceRoles(), NamespaceRoleBindings()
	for _, ns := range slices.Sorted(maps.Keys(nsRoles)) {
		for _, r := range nsRoles[ns] {
			do(func() error { return ensureRole("role", ns+"/"+r.Name, reconciliation.RoleRuleOwner{Role: &r}, roles) })
		}
	}
	for _, ns := range slices.Sorted(maps.Keys(nsBindings)) {
		for _, b := range nsBindings[ns] {
			do(func() error {
				return ensureBinding("rolebinding", ns+"/"+b.Name, reconciliation.RoleBindingAdapter{RoleBinding: &b}, roleBindings)
			})
		}
	}
	if err := ctx.Err(); err != nil {
		errs = append(errs, err)
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("bootstrap RBAC policy: %w", err)
	}
	return nil
}

func ensureRole(kind, name string, want reconciliation.RuleOwner, client reconciliation.RuleOwnerModifier) error {
	opts := reconciliation.ReconcileRoleOptions{Role: want, Client: client, Confirm: true}
	var res *reconciliation.ReconcileClusterRoleResult
	err := retryConflicts(func() (err error) { res, err = opts.Run(); return err })
	if err != nil {
		return fmt.Errorf("reconcile %s %s: %w", kind, name, err)
	}
	logResult(kind, name, res.Operation, res.Protected, "missingRules", res.MissingRules)
	return nil
}

func ensureBinding(kind, name string, want reconciliation.RoleBinding, client reconciliation.RoleBindingModifier) error {
	opts := reconciliation.ReconcileRoleBindingOptions{RoleBinding: want, Client: client, Confirm: true}
	var res *reconciliation.ReconcileClusterRoleBindingResult
	err := retryConflicts(func() (err error) { res, err = opts.Run(); return err })
	if err != nil {
		return fmt.Errorf("reconcile %s %s: %w", kind, name, err)
	}
	logResult(kind, name, res.Operation, res.Protected, "missingSubjects", res.MissingSubjects)
	return nil
}

// retryConflicts retries what upstream retries: a conflicting update, and
// an API server briefly unavailable while it updates storage versions.
func retryConflicts(fn func() error) error {
	return retry.OnError(retry.DefaultBackoff, func(err error) bool {
		return apierrors.IsConflict(err) || apierrors.IsServiceUnavailable(err)
	}, fn)
}

func logResult(kind, name string, op reconciliation.ReconcileOperation, protected bool, missingKey string, missing any) {
	switch {
	case protected && op != reconciliation.ReconcileNone:
		slog.Warn("bootstrap RBAC: left alone, annotated autoupdate=false", "kind", kind, "name", name, missingKey, missing)
	case op != reconciliation.ReconcileNone:
		slog.Debug("bootstrap RBAC: reconciled", "kind", kind, "name", name, "op", op, missingKey, missing)
	}
}

// crud is the part of a client-go typed client the reconciler needs.
type crud[T any] interface {
	Get(ctx context.Context, name string, opts metav1.GetOptions) (T, error)
	Create(ctx context.Context, obj T, opts metav1.CreateOptions) (T, error)
	Update(ctx context.Context, obj T, opts metav1.UpdateOptions) (T, error)
	Delete(ctx context.Context, name string, opts metav1.DeleteOptions) error
}

// store adapts a client-go typed client of T to the reconciliation
// library: with W = RuleOwner it is a RuleOwnerModifier (Roles,
// ClusterRoles), with W = RoleBinding a RoleBindingModifier. Unlike the
// library's own adapters it carries the caller's context.
type store[T runtime.Object, W interface {
	GetObject() runtime.Object
	GetNamespace() string
}] struct {
	ctx    context.Context
	client func(namespace string) crud[T]
	wrap   func(T) W
	// namespaces, if set, creates a missing namespace before an object in it,
	// as upstream does for kube-system and kube-public.
	namespaces corev1client.NamespaceInterface
}

func (s store[T, W]) result(obj T, err error) (W, error) {
	if err != nil {
		var zero W
		return zero, err
	}
	return s.wrap(obj), nil
}

func (s store[T, W]) Get(namespace, name string) (W, error) {
	return s.result(s.client(namespace).Get(s.ctx, name, metav1.GetOptions{}))
}

func (s store[T, W]) Create(in W) (W, error) {
	if s.namespaces != nil {
		if err := ensureNamespace(s.ctx, s.namespaces, in.GetNamespace()); err != nil {
			var zero W
			return zero, err
		}
	}
	return s.result(s.client(in.GetNamespace()).Create(s.ctx, in.GetObject().(T), metav1.CreateOptions{}))
}

func (s store[T, W]) Update(in W) (W, error) {
	return s.result(s.client(in.GetNamespace()).Update(s.ctx, in.GetObject().(T), metav1.UpdateOptions{}))
}

func (s store[T, W]) Delete(namespace, name string, uid types.UID) error {
	return s.client(namespace).Delete(s.ctx, name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &uid}})
}

// ensureNamespace creates namespace if it is missing. Like upstream it is
// best effort: a client that may not read or create namespaces goes on.
func ensureNamespace(ctx context.Context, client corev1client.NamespaceInterface, name string) error {
	_, err := client.Get(ctx, name, metav1.GetOptions{})
	if err == nil {
		return nil
	}
	if !apierrors.IsNotFound(err) && !apierrors.IsForbidden(err) {
		return err
	}
	_, err = client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{})
	if err != nil && !apierrors.IsAlreadyExists(err) && !apierrors.IsForbidden(err) {
		return err
	}
	return nil
}

// primeAggregated is upstream's migration to aggregated roles (1.9): when
// system:aggregate-to-<role> is missing and <role> exists without an
// aggregationRule, its rules (perhaps edited by an administrator) are
// copied into the new role before reconciliation, so they are kept.
func primeAggregated(ctx context.Context, rbac rbacv1client.ClusterRolesGetter) error {
	for _, old := range []string{"admin", "edit", "view"} {
		name := "system:aggregate-to-" + old
		_, err := rbac.ClusterRoles().Get(ctx, name, metav1.GetOptions{})
		if !apierrors.IsNotFound(err) {
			if err != nil {
				return err
			}
			continue
		}
		existing, err := rbac.ClusterRoles().Get(ctx, old, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			continue
		}
		if err != nil {
			return err
		}
		if existing.AggregationRule != nil {
			continue
		}
		migrated := &rbacv1.ClusterRole{
			ObjectMeta: metav1.ObjectMeta{Name: name, Labels: existing.Labels, Annotations: existing.Annotations},
			Rules:      existing.Rules,
		}
		if _, err := rbac.ClusterRoles().Create(ctx, migrated, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			return err
		}
	}
	return nil
}

// primeSplitBindings is upstream's split of system:discovery (1.14): when
// system:public-info-viewer is missing but system:discovery exists, the new
// binding starts with the old one's subjects, labels and annotations.
func primeSplitBindings(ctx context.Context, rbac rbacv1client.ClusterRoleBindingsGetter) error {
	const from, to = "system:discovery", "system:public-info-viewer"
	existing, err := rbac.ClusterRoleBindings().Get(ctx, from, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return err
	}
	if _, err := rbac.ClusterRoleBindings().Get(ctx, to, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		return err
	}
	split := clusterBinding(to, existing.Subjects...)
	split.Labels, split.Annotations = existing.Labels, existing.Annotations
	if _, err := rbac.ClusterRoleBindings().Create(ctx, &split, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return err
	}
	return nil
}
