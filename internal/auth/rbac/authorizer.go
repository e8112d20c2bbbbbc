package rbac

import (
	"context"
	"fmt"
	"slices"
	"strings"

	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/labels"
	utilerrors "k8s.io/apimachinery/pkg/util/errors"
	"k8s.io/apiserver/pkg/authentication/serviceaccount"
	"k8s.io/apiserver/pkg/authentication/user"
	rbaclisters "k8s.io/client-go/listers/rbac/v1"

	"github.com/svcnet/svcnet/internal/auth/authz"
)

// Listers are where the authorizer reads the policy: client-go listers of
// the four kinds, which the API server fills through its loopback.
type Listers struct {
	Roles               rbaclisters.RoleLister
	RoleBindings        rbaclisters.RoleBindingLister
	ClusterRoles        rbaclisters.ClusterRoleLister
	ClusterRoleBindings rbaclisters.ClusterRoleBindingLister
}

// Authorizer allows what some binding of the user grants; it never
// denies, so a request it does not allow goes to the next authorizer.
type Authorizer struct{ l Listers }

// New is an Authorizer reading the policy from l.
func New(l Listers) *Authorizer { return &Authorizer{l: l} }

// Authorize implements authz.Authorizer with upstream's reasons: "RBAC:
// allowed by ClusterRoleBinding ..." when allowed, and the roles it could
// not find when not.
func (a *Authorizer) Authorize(_ context.Context, attrs authz.Attributes) (authz.Decision, string, error) {
	var errs []error
	allowed := ""
	a.visit(attrs.User, attrs.Namespace, func(source fmt.Stringer, rule *rbacv1.PolicyRule, err error) bool {
		if rule != nil && RuleAllows(attrs, rule) {
			allowed = "RBAC: allowed by " + source.String()
			return false
		}
		if err != nil {
			errs = append(errs, err)
		}
		return true
	})
	if allowed != "" {
		return authz.Allow, allowed, nil
	}
	if len(errs) > 0 {
		return authz.NoOpinion, fmt.Sprintf("RBAC: %v", utilerrors.NewAggregate(errs)), nil
	}
	return authz.NoOpinion, "", nil
}

// RulesFor is every rule bound to u in namespace (cluster-wide ones
// included), with the errors of bindings whose roles are missing.
func (a *Authorizer) RulesFor(u user.Info, namespace string) ([]rbacv1.PolicyRule, error) {
	var rules []rbacv1.PolicyRule
	var errs []error
	a.visit(u, namespace, func(_ fmt.Stringer, rule *rbacv1.PolicyRule, err error) bool {
		if rule != nil {
			rules = append(rules, *rule)
		}
		if err != nil {
			errs = append(errs, err)
		}
		return true
	})
	return rules, utilerrors.NewAggregate(errs)
}

// visit calls f with each rule bound to u, ClusterRoleBindings first,
// until f returns false, as upstream's VisitRulesFor.
func (a *Authorizer) visit(u user.Info, namespace string, f func(source fmt.Stringer, rule *rbacv1.PolicyRule, err error) bool) {
	l := &a.l
	if u == nil {
		return
	}
	crbs, err := l.ClusterRoleBindings.List(labels.Everything())
	if err != nil && !f(nil, nil, err) {
		return
	}
	for _, b := range crbs {
		i := appliesTo(u, b.Subjects, "")
		if i < 0 {
			continue
		}
		rules, err := a.RoleRefRules(b.RoleRef, "")
		if err != nil {
			if !f(nil, nil, err) {
				return
			}
			continue
		}
		src := bindingSource{kind: "ClusterRoleBinding", name: b.Name, ref: b.RoleRef, subject: &b.Subjects[i]}
		for j := range rules {
			if !f(src, &rules[j], nil) {
				return
			}
		}
	}
	if namespace == "" {
		return
	}
	rbs, err := l.RoleBindings.RoleBindings(namespace).List(labels.Everything())
	if err != nil && !f(nil, nil, err) {
		return
	}
	for _, b := range rbs {
		i := appliesTo(u, b.Subjects, namespace)
		if i < 0 {
			continue
		}
		rules, err := a.RoleRefRules(b.RoleRef, namespace)
		if err != nil {
			if !f(nil, nil, err) {
				return
			}
			continue
		}
		src := bindingSource{kind: "RoleBinding", name: b.Name + "/" + namespace, ref: b.RoleRef, subject: &b.Subjects[i], namespace: namespace}
		for j := range rules {
			if !f(src, &rules[j], nil) {
				return
			}
		}
	}
}

// RoleRefRules are the rules of the role a binding in namespace ("" for a
// ClusterRoleBinding) refers to; a missing role is the lister's NotFound
// error, as upstream's.
func (a *Authorizer) RoleRefRules(ref rbacv1.RoleRef, namespace string) ([]rbacv1.PolicyRule, error) {
	l := &a.l
	switch ref.Kind {
	case "Role":
		r, err := l.Roles.Roles(namespace).Get(ref.Name)
		if err != nil {
			return nil, err
		}
		return r.Rules, nil
	case "ClusterRole":
		r, err := l.ClusterRoles.Get(ref.Name)
		if err != nil {
			return nil, err
		}
		return r.Rules, nil
	}
	return nil, fmt.Errorf("unsupported role reference kind: %q", ref.Kind)
}

// bindingSource names the binding that granted a rule, as upstream's
// describers.
type bindingSource struct {
	kind, name, namespace string
	ref                   rbacv1.RoleRef
	subject               *rbacv1.Subject
}

func (b bindingSource) String() string {
	s := b.subject
	who := fmt.Sprintf("%s %q", s.Kind, s.Name)
	if s.Kind == rbacv1.ServiceAccountKind {
		ns := s.Namespace
		if ns == "" {
			ns = b.namespace
		}
		who = fmt.Sprintf("%s %q", s.Kind, s.Name+"/"+ns)
	}
	return fmt.Sprintf("%s %q of %s %q to %s", b.kind, b.name, b.ref.Kind, b.ref.Name, who)
}

// appliesTo is the index of the first subject naming u, or -1; a service
// account subject without a namespace is in the binding's.
func appliesTo(u user.Info, subjects []rbacv1.Subject, namespace string) int {
	for i, s := range subjects {
		switch s.Kind {
		case rbacv1.UserKind:
			if u.GetName() == s.Name {
				return i
			}
		case rbacv1.GroupKind:
			if slices.Contains(u.GetGroups(), s.Name) {
				return i
			}
		case rbacv1.ServiceAccountKind:
			ns := s.Namespace
			if ns == "" {
				ns = namespace
			}
			if ns != "" && serviceaccount.MatchesUsername(ns, s.Name, u.GetName()) {
				return i
			}
		}
	}
	return -1
}

// RuleAllows reports whether rule grants the request, as upstream's: "*"
// matches any verb, group, resource or URL; "*/<sub>" any resource's
// subresource; a URL ending in "*" is a prefix; resourceNames, when set,
// must name the object.
func RuleAllows(a authz.Attributes, rule *rbacv1.PolicyRule) bool {
	if !matches(rule.Verbs, a.Verb) {
		return false
	}
	if !a.ResourceRequest {
		for _, u := range rule.NonResourceURLs {
			if u == rbacv1.NonResourceAll || u == a.Path || strings.HasSuffix(u, "*") && strings.HasPrefix(a.Path, strings.TrimSuffix(u, "*")) {
				return true
			}
		}
		return false
	}
	if !matches(rule.APIGroups, a.APIGroup) {
		return false
	}
	resource := a.Resource
	if a.Subresource != "" {
		resource += "/" + a.Subresource
	}
	ok := slices.ContainsFunc(rule.Resources, func(r string) bool {
		return r == rbacv1.ResourceAll || r == resource || a.Subresource != "" && r == "*/"+a.Subresource
	})
	return ok && (len(rule.ResourceNames) == 0 || slices.Contains(rule.ResourceNames, a.Name))
}

func matches(list []string, v string) bool {
	return slices.Contains(list, "*") || slices.Contains(list, v)
}
