// Package selfsubjectreview is authentication.k8s.io/v1 SelfSubjectReview,
// upstream's "who am I": a create answers with the requesting user's name,
// UID, groups and extra, as authenticated (`kubectl auth whoami`).
// Nothing is stored.
package selfsubjectreview

import (
	"context"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/svcnet/svcnet/internal/auth/authn"
	"github.com/svcnet/svcnet/internal/registry"
)

// Resource describes selfsubjectreviews.
func Resource() *registry.Resource {
	return &registry.Resource{
		Kind:     authenticationv1.SchemeGroupVersion.WithKind("SelfSubjectReview"),
		Resource: "selfsubjectreviews",
		Singular: "selfsubjectreview",
		Create:   create,
	}
}

func create(ctx context.Context, _ string, _ runtime.Object) (runtime.Object, error) {
	u, ok := authn.UserFrom(ctx)
	if !ok {
		return nil, apierrors.NewBadRequest("no user present on request")
	}
	r := &authenticationv1.SelfSubjectReview{
		ObjectMeta: metav1.ObjectMeta{CreationTimestamp: metav1.NewTime(time.Now())},
		Status: authenticationv1.SelfSubjectReviewStatus{UserInfo: authenticationv1.UserInfo{
			Username: u.GetName(), UID: u.GetUID(), Groups: u.GetGroups(),
		}},
	}
	for k, v := range u.GetExtra() {
		if r.Status.UserInfo.Extra == nil {
			r.Status.UserInfo.Extra = map[string]authenticationv1.ExtraValue{}
		}
		r.Status.UserInfo.Extra[k] = v
	}
	return r, nil
}
