package rbac

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/component-helpers/auth/rbac/validation"

	"github.com/svcnet/svcnet/internal/auth/authn"
	"github.com/svcnet/svcnet/internal/auth/authz"
)

// Escalation is upstream's escalation prevention as a Guard: a write of
// a role passes for system:masters, for a user allowed the "escalate"
// verb on it, or when the user already holds every rule it grants (an
// aggregating ClusterRole needs every permission); a write of a binding
// passes for system:masters, for a user allowed "bind" on the role, or
// when the user holds every rule of the role.
type Escalation struct {
	rules *Authorizer
	chain authz.Authorizer
}

// NewEscalation reads the writer's rules from rules and asks chain (the
// whole authorization chain) about "escalate" and "bind".
func NewEscalation(rules *Authorizer, chain authz.Authorizer) *Escalation {
	return &Escalation{rules: rules, chain: chain}
}

// fullAuthority is what a writer of an aggregationRule must hold.
var fullAuthority = []rbacv1.PolicyRule{
	{Verbs: []string{"*"}, APIGroups: []string{"*"}, Resources: []string{"*"}},
	{Verbs: []string{"*"}, NonResourceURLs: []string{"*"}},
}

// ConfirmRole implements Guard.
func (e *Escalation) ConfirmRole(ctx context.Context, namespace, name string, rules []rbacv1.PolicyRule, aggregating bool) error {
	gr := rbacv1.Resource("roles")
	if namespace == "" {
		gr = rbacv1.Resource("clusterroles")
	}
	u, done := e.begin(ctx)
	if done {
		return nil
	}
	if e.allowed(ctx, u, "escalate", gr.Resource, namespace, name) {
		return nil
	}
	if aggregating {
		if e.confirm(u, namespace, fullAuthority) != nil {
			return apierrors.NewForbidden(gr, name, errors.New("must have cluster-admin privileges to use the aggregationRule"))
		}
	}
	if err := e.confirm(u, namespace, rules); err != nil {
		return apierrors.NewForbidden(gr, name, err)
	}
	return nil
}

// ConfirmBinding implements Guard. A binding of a role that does not
// exist is that role's NotFound, as upstream's.
func (e *Escalation) ConfirmBinding(ctx context.Context, namespace, name string, ref rbacv1.RoleRef) error {
	gr := rbacv1.Resource("rolebindings")
	if namespace == "" {
		gr = rbacv1.Resource("clusterrolebindings")
	}
	u, done := e.begin(ctx)
	if done {
		return nil
	}
	roleResource := "clusterroles"
	if ref.Kind == "Role" {
		roleResource = "roles"
	}
	if e.allowed(ctx, u, "bind", roleResource, namespace, ref.Name) {
		return nil
	}
	rules, err := e.rules.RoleRefRules(ref, namespace)
	if err != nil {
		return err
	}
	if err := e.confirm(u, namespace, rules); err != nil {
		return apierrors.NewForbidden(gr, name, err)
	}
	return nil
}

// begin is the writer; done when the writer may write anything
// (system:masters, the API server itself).
func (e *Escalation) begin(ctx context.Context) (user.Info, bool) {
	u, ok := authn.UserFrom(ctx)
	if !ok {
		return nil, false
	}
	return u, slices.Contains(u.GetGroups(), user.SystemPrivilegedGroup)
}

func (e *Escalation) allowed(ctx context.Context, u user.Info, verb, resource, namespace, name string) bool {
	d, _, _ := e.chain.Authorize(ctx, authz.Attributes{User: u, Verb: verb, ResourceRequest: true,
		APIGroup: rbacv1.GroupName, APIVersion: "v1", Resource: resource, Namespace: namespace, Name: name})
	return d == authz.Allow
}

// confirm is upstream's ConfirmNoEscalation: the writer's rules in
// namespace must cover rules; the error lists what they lack.
func (e *Escalation) confirm(u user.Info, namespace string, rules []rbacv1.PolicyRule) error {
	if u == nil {
		return errors.New("no user on request")
	}
	own, resolveErr := e.rules.RulesFor(u, namespace)
	covers, missing := validation.Covers(own, rules)
	if covers {
		return nil
	}
	var lines []string
	for _, r := range compact(missing) {
		if s := compactString(r); !slices.Contains(lines, s) {
			lines = append(lines, s)
		}
	}
	slices.Sort(lines)
	msg := fmt.Sprintf("user %q (groups=%q) is attempting to grant RBAC permissions not currently held:\n%s", u.GetName(), u.GetGroups(), strings.Join(lines, "\n"))
	if resolveErr != nil {
		msg += fmt.Sprintf("; resolution errors: %v", []error{resolveErr})
	}
	return errors.New(msg)
}

// compact merges the verbs of rules on one resource of one group (with at
// most one name), as upstream's CompactRules.
func compact(rules []rbacv1.PolicyRule) []rbacv1.PolicyRule {
	type key struct {
		group, resource, name string
		named                 bool
	}
	var out []rbacv1.PolicyRule
	simple := map[key]int{}
	for _, r := range rules {
		if len(r.ResourceNames) > 1 || len(r.NonResourceURLs) > 0 || len(r.APIGroups) != 1 || len(r.Resources) != 1 {
			out = append(out, r)
			continue
		}
		k := key{group: r.APIGroups[0], resource: r.Resources[0]}
		if len(r.ResourceNames) == 1 {
			k.name, k.named = r.ResourceNames[0], true
		}
		if i, ok := simple[k]; ok {
			out[i].Verbs = append(out[i].Verbs, r.Verbs...)
			continue
		}
		simple[k] = len(out)
		out = append(out, *r.DeepCopy())
	}
	return out
}

// compactString is upstream's CompactString of a rule:
// {APIGroups:["apps"], Resources:["deployments"], Verbs:["get"]}.
func compactString(r rbacv1.PolicyRule) string {
	var parts []string
	for _, f := range []struct {
		name string
		v    []string
	}{{"APIGroups", r.APIGroups}, {"Resources", r.Resources}, {"NonResourceURLs", r.NonResourceURLs}, {"ResourceNames", r.ResourceNames}, {"Verbs", r.Verbs}} {
		if len(f.v) > 0 {
			parts = append(parts, fmt.Sprintf("%s:%q", f.name, f.v))
		}
	}
	return "{" + strings.Join(parts, ", ") + "}"
}
