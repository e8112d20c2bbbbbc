// Package tokenreview is authentication.k8s.io/v1 TokenReview: "who is
// this token?", answered by the API server's token authenticators for the
// audiences the review names (the API server's own by default), so that
// a component can check the tokens its callers present. Nothing is
// stored.
package tokenreview

import (
	"context"
	"slices"

	jose "github.com/go-jose/go-jose/v4"
	"github.com/go-jose/go-jose/v4/jwt"

	authenticationv1 "k8s.io/api/authentication/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/svcnet/svcnet/internal/auth/authn"
	"github.com/svcnet/svcnet/internal/registry"
)

// Resource describes tokenreviews, answered by tokens for the API
// server's audiences apiAudiences unless a review names others.
func Resource(tokens authn.TokenAuthenticator, apiAudiences []string) *registry.Resource {
	return &registry.Resource{
		Kind:     authenticationv1.SchemeGroupVersion.WithKind("TokenReview"),
		Resource: "tokenreviews",
		Singular: "tokenreview",
		Create: func(ctx context.Context, _ string, obj runtime.Object) (runtime.Object, error) {
			r := obj.(*authenticationv1.TokenReview)
			if r.Spec.Token == "" {
				return nil, apierrors.NewBadRequest("token is required for TokenReview in authentication")
			}
			auds := r.Spec.Audiences
			if len(auds) == 0 {
				auds = apiAudiences
			}
			u, ok, err := tokens.AuthenticateToken(authn.WithAudiences(ctx, auds), r.Spec.Token)
			r.Status = authenticationv1.TokenReviewStatus{Authenticated: ok}
			if err != nil {
				r.Status.Error = err.Error()
			}
			if !ok {
				return r, nil
			}
			u = authn.Authenticated(u)
			r.Status.User = authenticationv1.UserInfo{Username: u.GetName(), UID: u.GetUID(), Groups: u.GetGroups(), Extra: map[string]authenticationv1.ExtraValue{}}
			for k, v := range u.GetExtra() {
				r.Status.User.Extra[k] = v
			}
			r.Status.Audiences = slices.DeleteFunc(slices.Clone(auds), func(a string) bool { return !slices.Contains(tokenAudiences(r.Spec.Token), a) })
			return r, nil
		},
	}
}

// tokenAudiences reads the "aud" of a JWT already authenticated.
func tokenAudiences(token string) []string {
	tok, err := jwt.ParseSigned(token, []jose.SignatureAlgorithm{jose.RS256})
	if err != nil {
		return nil
	}
	var c jwt.Claims
	if tok.UnsafeClaimsWithoutVerification(&c) != nil {
		return nil
	}
	return c.Audience
}
