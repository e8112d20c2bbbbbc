// Package localsubjectaccessreview is authorization.k8s.io/v1
// LocalSubjectAccessReview: a SubjectAccessReview posted in a namespace,
// about resources of that namespace only (so a namespace admin may ask
// it). Nothing is stored.
package localsubjectaccessreview

import (
	"context"
	"fmt"

	authorizationv1 "k8s.io/api/authorization/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/svcnet/svcnet/internal/auth/authz"
	"github.com/svcnet/svcnet/internal/registry"
	"github.com/svcnet/svcnet/internal/registry/subjectaccessreview"
)

// Resource describes localsubjectaccessreviews, answered by chain.
func Resource(chain authz.Authorizer) *registry.Resource {
	return &registry.Resource{
		Kind:       authorizationv1.SchemeGroupVersion.WithKind("LocalSubjectAccessReview"),
		Resource:   "localsubjectaccessreviews",
		Singular:   "localsubjectaccessreview",
		Namespaced: true,
		Strategy:   strategy{},
		Create: func(ctx context.Context, namespace string, obj runtime.Object) (runtime.Object, error) {
			r := obj.(*authorizationv1.LocalSubjectAccessReview)
			if r.Namespace != namespace {
				return nil, apierrors.NewBadRequest(fmt.Sprintf("spec.resourceAttributes.namespace must match namespace: %v", namespace))
			}
			r.Status = subjectaccessreview.Review(ctx, chain, r.Spec)
			return r, nil
		},
	}
}

type strategy struct{ registry.Base }

func (strategy) Validate(obj runtime.Object) field.ErrorList {
	r := obj.(*authorizationv1.LocalSubjectAccessReview)
	errs := subjectaccessreview.ValidateSpec(r.Spec)
	if !subjectaccessreview.EmptyMeta(r.ObjectMeta, true) {
		errs = append(errs, field.Invalid(field.NewPath("metadata"), r.ObjectMeta, "must be empty except for namespace"))
	}
	if ra := r.Spec.ResourceAttributes; ra != nil && ra.Namespace != r.Namespace {
		errs = append(errs, field.Invalid(field.NewPath("spec.resourceAttributes.namespace"), ra.Namespace, "must match metadata.namespace"))
	}
	if r.Spec.NonResourceAttributes != nil {
		errs = append(errs, field.Invalid(field.NewPath("spec.nonResourceAttributes"), r.Spec.NonResourceAttributes, "disallowed on this kind of request"))
	}
	return errs
}
