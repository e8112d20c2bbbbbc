// Package selfsubjectrulesreview is authorization.k8s.io/v1
// SelfSubjectRulesReview: every rule the requesting user holds in a
// namespace, as the RBAC authorizer resolves them (`kubectl auth can-i
// --list`). Nothing is stored.
package selfsubjectrulesreview

import (
	"context"

	authorizationv1 "k8s.io/api/authorization/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apiserver/pkg/authentication/user"

	"github.com/svcnet/svcnet/internal/auth/authn"
	"github.com/svcnet/svcnet/internal/registry"
)

// Rules resolves the rules a user holds in a namespace; the error tells
// of bindings it could not follow.
type Rules interface {
	RulesFor(u user.Info, namespace string) ([]rbacv1.PolicyRule, error)
}

// Resource describes selfsubjectrulesreviews, answered from rules.
func Resource(rules Rules) *registry.Resource {
	return &registry.Resource{
		Kind:     authorizationv1.SchemeGroupVersion.WithKind("SelfSubjectRulesReview"),
		Resource: "selfsubjectrulesreviews",
		Singular: "selfsubjectrulesreview",
		Create: func(ctx context.Context, _ string, obj runtime.Object) (runtime.Object, error) {
			return review(ctx, rules, obj)
		},
	}
}

func review(ctx context.Context, rules Rules, obj runtime.Object) (runtime.Object, error) {
	u, ok := authn.UserFrom(ctx)
	if !ok {
		return nil, apierrors.NewBadRequest("no user present on request")
	}
	r := obj.(*authorizationv1.SelfSubjectRulesReview)
	if r.Spec.Namespace == "" {
		return nil, apierrors.NewBadRequest("no namespace on request")
	}
	held, err := rules.RulesFor(u, r.Spec.Namespace)
	st := authorizationv1.SubjectRulesReviewStatus{ResourceRules: []authorizationv1.ResourceRule{}, NonResourceRules: []authorizationv1.NonResourceRule{}}
	for _, p := range held {
		if len(p.Resources) > 0 {
			st.ResourceRules = append(st.ResourceRules, authorizationv1.ResourceRule{Verbs: p.Verbs, APIGroups: p.APIGroups, Resources: p.Resources, ResourceNames: p.ResourceNames})
		}
		if len(p.NonResourceURLs) > 0 {
			st.NonResourceRules = append(st.NonResourceRules, authorizationv1.NonResourceRule{Verbs: p.Verbs, NonResourceURLs: p.NonResourceURLs})
		}
	}
	if err != nil {
		st.EvaluationError = err.Error()
	}
	r.Status = st
	return r, nil
}
