// Package subjectaccessreview is authorization.k8s.io/v1
// SubjectAccessReview: "may this user do this?", answered by the API
// server's authorization chain for any user, groups and attributes the
// review names (a component checking its callers, `kubectl auth can-i
// --as`). Nothing is stored. ValidateSpec is shared with the local kind.
package subjectaccessreview

import (
	"context"

	authorizationv1 "k8s.io/api/authorization/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/apiserver/pkg/authentication/user"

	"github.com/svcnet/svcnet/internal/auth/authz"
	"github.com/svcnet/svcnet/internal/registry"
)

// Resource describes subjectaccessreviews, answered by chain.
func Resource(chain authz.Authorizer) *registry.Resource {
	return &registry.Resource{
		Kind:     authorizationv1.SchemeGroupVersion.WithKind("SubjectAccessReview"),
		Resource: "subjectaccessreviews",
		Singular: "subjectaccessreview",
		Strategy: strategy{},
		Create: func(ctx context.Context, _ string, obj runtime.Object) (runtime.Object, error) {
			r := obj.(*authorizationv1.SubjectAccessReview)
			r.Status = Review(ctx, chain, r.Spec)
			return r, nil
		},
	}
}

// Review answers spec with chain, as upstream: allowed, denied, the
// authorizers' reason and their error.
func Review(ctx context.Context, chain authz.Authorizer, spec authorizationv1.SubjectAccessReviewSpec) authorizationv1.SubjectAccessReviewStatus {
	u := &user.DefaultInfo{Name: spec.User, UID: spec.UID, Groups: spec.Groups}
	for k, v := range spec.Extra {
		if u.Extra == nil {
			u.Extra = map[string][]string{}
		}
		u.Extra[k] = v
	}
	return Decide(ctx, chain, authz.FromReview(u, spec.ResourceAttributes, spec.NonResourceAttributes))
}

// Decide is a review's status for a.
func Decide(ctx context.Context, chain authz.Authorizer, a authz.Attributes) authorizationv1.SubjectAccessReviewStatus {
	d, reason, err := chain.Authorize(ctx, a)
	st := authorizationv1.SubjectAccessReviewStatus{Allowed: d == authz.Allow, Denied: d == authz.Deny, Reason: reason}
	if err != nil {
		st.EvaluationError = err.Error()
	}
	return st
}

type strategy struct{ registry.Base }

func (strategy) Validate(obj runtime.Object) field.ErrorList {
	r := obj.(*authorizationv1.SubjectAccessReview)
	errs := ValidateSpec(r.Spec)
	if !EmptyMeta(r.ObjectMeta, false) {
		errs = append(errs, field.Invalid(field.NewPath("metadata"), r.ObjectMeta, "must be empty"))
	}
	return errs
}

// ValidateSpec is upstream's ValidateSubjectAccessReviewSpec: exactly one
// kind of attributes, and a user or a group.
func ValidateSpec(spec authorizationv1.SubjectAccessReviewSpec) field.ErrorList {
	errs := Attributes(spec.ResourceAttributes, spec.NonResourceAttributes)
	if spec.User == "" && len(spec.Groups) == 0 {
		errs = append(errs, field.Invalid(field.NewPath("spec", "user"), spec.User, "at least one of user or group must be specified"))
	}
	return errs
}

// Attributes checks that a review names exactly one kind of attributes.
func Attributes(ra *authorizationv1.ResourceAttributes, nra *authorizationv1.NonResourceAttributes) field.ErrorList {
	if (ra == nil) == (nra == nil) {
		return field.ErrorList{field.Invalid(field.NewPath("spec"), nra, "exactly one of nonResourceAttributes or resourceAttributes must be specified")}
	}
	return nil
}

// EmptyMeta reports whether a review's metadata is empty, as upstream
// requires (managed fields aside; the namespace too when keepNamespace).
func EmptyMeta(m metav1.ObjectMeta, keepNamespace bool) bool {
	m.ManagedFields = nil
	if keepNamespace {
		m.Namespace = ""
	}
	return apiequality.Semantic.DeepEqual(metav1.ObjectMeta{}, m)
}
