// Package selfsubjectaccessreview is authorization.k8s.io/v1
// SelfSubjectAccessReview: "may I do this?", answered by the
// authorization chain for the requesting user (`kubectl auth can-i`).
// Nothing is stored.
package selfsubjectaccessreview

import (
	"context"

	authorizationv1 "k8s.io/api/authorization/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/svcnet/svcnet/internal/auth/authn"
	"github.com/svcnet/svcnet/internal/auth/authz"
	"github.com/svcnet/svcnet/internal/registry"
	"github.com/svcnet/svcnet/internal/registry/subjectaccessreview"
)

// Resource describes selfsubjectaccessreviews, answered by chain.
func Resource(chain authz.Authorizer) *registry.Resource {
	return &registry.Resource{
		Kind:     authorizationv1.SchemeGroupVersion.WithKind("SelfSubjectAccessReview"),
		Resource: "selfsubjectaccessreviews",
		Singular: "selfsubjectaccessreview",
		Strategy: strategy{},
		Create: func(ctx context.Context, _ string, obj runtime.Object) (runtime.Object, error) {
			u, ok := authn.UserFrom(ctx)
			if !ok {
				return nil, apierrors.NewBadRequest("no user present on request")
			}
			r := obj.(*authorizationv1.SelfSubjectAccessReview)
			r.Status = subjectaccessreview.Decide(ctx, chain, authz.FromReview(u, r.Spec.ResourceAttributes, r.Spec.NonResourceAttributes))
			return r, nil
		},
	}
}

type strategy struct{ registry.Base }

func (strategy) Validate(obj runtime.Object) field.ErrorList {
	r := obj.(*authorizationv1.SelfSubjectAccessReview)
	errs := subjectaccessreview.Attributes(r.Spec.ResourceAttributes, r.Spec.NonResourceAttributes)
	if !subjectaccessreview.EmptyMeta(r.ObjectMeta, false) {
		errs = append(errs, field.Invalid(field.NewPath("metadata"), r.ObjectMeta, "must be empty"))
	}
	return errs
}
