// Package authn authenticates API requests as kube-apiserver's default
// chain does: a client certificate signed by the cluster CA names the user
// (CN) and groups (O); else a bearer token is asked of each token
// authenticator in turn (a token none accepts is refused, never taken as
// anonymous); else the request is anonymous (system:anonymous in
// system:unauthenticated). Every authenticated user is also in
// system:authenticated. The user travels in the request's context.
package authn

import (
	"context"
	"errors"
	"net/http"
	"slices"
	"strings"

	"k8s.io/apiserver/pkg/authentication/user"
)

// ErrUnauthorized is a request whose credentials are refused.
var ErrUnauthorized = errors.New("Unauthorized")

// TokenAuthenticator recognises bearer tokens of one kind (service
// account JWTs, bootstrap tokens). ok=false with a nil error means the
// token is not of its kind.
type TokenAuthenticator interface {
	AuthenticateToken(ctx context.Context, token string) (u user.Info, ok bool, err error)
}

// Authenticator is the chain.
type Authenticator struct {
	Tokens []TokenAuthenticator
}

// Authenticate returns the request's user, or ErrUnauthorized.
func (a *Authenticator) Authenticate(r *http.Request) (user.Info, error) {
	if r.TLS != nil && len(r.TLS.VerifiedChains) > 0 && len(r.TLS.VerifiedChains[0]) > 0 {
		cert := r.TLS.VerifiedChains[0][0]
		if cert.Subject.CommonName != "" {
			return Authenticated(&user.DefaultInfo{Name: cert.Subject.CommonName, Groups: cert.Subject.Organization}), nil
		}
	}
	if token, ok := bearer(r); ok {
		u, ok, _ := a.AuthenticateToken(r.Context(), token)
		if !ok {
			return nil, ErrUnauthorized
		}
		return Authenticated(u), nil
	}
	return Anonymous(), nil
}

// AuthenticateToken asks each token authenticator in turn (TokenReview's
// question); the error is the last one's that knew the token.
func (a *Authenticator) AuthenticateToken(ctx context.Context, token string) (user.Info, bool, error) {
	var last error
	for _, t := range a.Tokens {
		u, ok, err := t.AuthenticateToken(ctx, token)
		if ok && err == nil {
			return u, true, nil
		}
		if err != nil {
			last = err
		}
	}
	return nil, false, last
}

// bearer is the request's "Authorization: Bearer" token; upstream
// ignores an empty one.
func bearer(r *http.Request) (string, bool) {
	h := strings.TrimSpace(r.Header.Get("Authorization"))
	scheme, token, ok := strings.Cut(h, " ")
	if !ok || !strings.EqualFold(scheme, "bearer") {
		return "", false
	}
	token = strings.TrimSpace(token)
	return token, token != ""
}

// Anonymous is the user of a request without credentials.
func Anonymous() user.Info {
	return &user.DefaultInfo{Name: user.Anonymous, Groups: []string{user.AllUnauthenticated}}
}

// Authenticated adds system:authenticated to u's groups, as upstream's
// authenticated group adder (once; never to system:anonymous).
func Authenticated(u user.Info) user.Info {
	groups := u.GetGroups()
	if u.GetName() == user.Anonymous || slices.Contains(groups, user.AllAuthenticated) {
		return u
	}
	return &user.DefaultInfo{Name: u.GetName(), UID: u.GetUID(), Extra: u.GetExtra(),
		Groups: append(slices.Clip(groups), user.AllAuthenticated)}
}

// Loopback is the API server's own identity on its in-process client, as
// upstream's loopback: system:apiserver, a member of system:masters.
func Loopback() user.Info {
	return &user.DefaultInfo{Name: user.APIServerUser, Groups: []string{user.SystemPrivilegedGroup, user.AllAuthenticated}}
}

type userKey struct{}

type audiencesKey struct{}

// WithAudiences returns ctx asking token authenticators to accept tokens
// for auds instead of the API server's own audiences (TokenReview's
// spec.audiences).
func WithAudiences(ctx context.Context, auds []string) context.Context {
	return context.WithValue(ctx, audiencesKey{}, auds)
}

// AudiencesFrom is the audiences ctx asks for, if any.
func AudiencesFrom(ctx context.Context) ([]string, bool) {
	auds, ok := ctx.Value(audiencesKey{}).([]string)
	return auds, ok
}

// WithUser returns ctx carrying u.
func WithUser(ctx context.Context, u user.Info) context.Context {
	return context.WithValue(ctx, userKey{}, u)
}

// UserFrom is the user in ctx; ok=false when there is none.
func UserFrom(ctx context.Context) (user.Info, bool) {
	u, ok := ctx.Value(userKey{}).(user.Info)
	return u, ok
}
