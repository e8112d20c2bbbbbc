package serviceaccount

// Legacy service account tokens, as upstream's pkg/serviceaccount/legacy.go:
// the tokens the serviceaccount-token-controller writes into Secrets of
// type kubernetes.io/service-account-token. They are signed with the same
// key as bound tokens, under the issuer "kubernetes/serviceaccount", with
// no audience and no expiry; one is accepted while its Secret exists and
// holds it, and its ServiceAccount exists with the UID it names.

import (
	"context"
	"crypto/subtle"
	"errors"
	"fmt"
	"slices"

	jose "github.com/go-jose/go-jose/v4"
	"github.com/go-jose/go-jose/v4/jwt"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apiserver/pkg/authentication/serviceaccount"
	"k8s.io/apiserver/pkg/authentication/user"

	"github.com/svcnet/svcnet/internal/auth/authn"
)

// LegacyIssuer is the issuer of legacy tokens, upstream's.
const LegacyIssuer = "kubernetes/serviceaccount"

// InvalidSinceLabelKey marks a Secret whose legacy token is refused, as
// upstream's legacy token cleaner labels it.
const InvalidSinceLabelKey = "kubernetes.io/legacy-token-invalid-since"

// legacyClaims are upstream's legacy claims, beside iss and sub.
type legacyClaims struct {
	ServiceAccountName string `json:"kubernetes.io/serviceaccount/service-account.name"`
	ServiceAccountUID  string `json:"kubernetes.io/serviceaccount/service-account.uid"`
	SecretName         string `json:"kubernetes.io/serviceaccount/secret.name"`
	Namespace          string `json:"kubernetes.io/serviceaccount/namespace"`
}

// LegacyToken signs the legacy token of sa kept in secret, as upstream's
// tokens controller: issuer LegacyIssuer, no audience, no expiry. The
// issuer's own Issuer is not used.
func (i *Issuer) LegacyToken(sa *corev1.ServiceAccount, secret *corev1.Secret) (string, error) {
	// As upstream's signer: the key ID in the header, no "typ".
	signer, err := jose.NewSigner(jose.SigningKey{Algorithm: jose.RS256, Key: i.Key.private},
		(&jose.SignerOptions{}).WithHeader("kid", i.Key.id))
	if err != nil {
		return "", fmt.Errorf("service account token signer: %w", err)
	}
	return jwt.Signed(signer).
		Claims(publicClaims{Issuer: LegacyIssuer, Subject: serviceaccount.MakeUsername(sa.Namespace, sa.Name)}).
		Claims(legacyClaims{Namespace: sa.Namespace, ServiceAccountName: sa.Name, ServiceAccountUID: string(sa.UID), SecretName: secret.Name}).
		Serialize()
}

// LegacyAuthenticator accepts legacy tokens.
type LegacyAuthenticator struct {
	Key     *Key
	Objects Objects
	// Audiences are the API server's, which a legacy token (having none)
	// is taken to be for; empty accepts any requested audience.
	Audiences []string
}

// AuthenticateToken implements authn.TokenAuthenticator: ok=false for a
// token that is not a JWT of LegacyIssuer. The checks and their errors are
// upstream's legacy validator's.
func (a *LegacyAuthenticator) AuthenticateToken(ctx context.Context, token string) (user.Info, bool, error) {
	tok, ok := parseIssued(token, LegacyIssuer)
	if !ok {
		return nil, false, nil
	}
	var sc jwt.Claims
	var lc legacyClaims
	if err := tok.Claims(&a.Key.private.PublicKey, &sc, &lc); err != nil {
		return nil, false, errors.New("invalid signature")
	}
	auds := []string(sc.Audience)
	if len(auds) == 0 {
		auds = a.Audiences
	}
	want := a.Audiences
	if r, ok := authn.AudiencesFrom(ctx); ok {
		want = r
	}
	if len(a.Audiences) != 0 && !slices.ContainsFunc(want, func(w string) bool { return slices.Contains(auds, w) }) {
		return nil, false, fmt.Errorf("token audiences %q is invalid for the target audiences %q", auds, want)
	}
	switch {
	case sc.Subject == "":
		return nil, false, errors.New("sub claim is missing")
	case lc.Namespace == "":
		return nil, false, errors.New("namespace claim is missing")
	case lc.SecretName == "":
		return nil, false, errors.New("secretName claim is missing")
	case lc.ServiceAccountName == "":
		return nil, false, errors.New("serviceAccountName claim is missing")
	case lc.ServiceAccountUID == "":
		return nil, false, errors.New("serviceAccountUID claim is missing")
	}
	if ns, name, err := serviceaccount.SplitUsername(sc.Subject); err != nil || ns != lc.Namespace || name != lc.ServiceAccountName {
		return nil, false, errors.New("sub claim is invalid")
	}
	secret, err := a.Objects.Secret(ctx, lc.Namespace, lc.SecretName)
	if err != nil || secret.DeletionTimestamp != nil {
		return nil, false, errors.New("Token has been invalidated") //nolint:staticcheck // upstream's text
	}
	if subtle.ConstantTimeCompare(secret.Data[corev1.ServiceAccountTokenKey], []byte(token)) == 0 {
		return nil, false, errors.New("Token does not match server's copy") //nolint:staticcheck // upstream's text
	}
	sa, err := a.Objects.ServiceAccount(ctx, lc.Namespace, lc.ServiceAccountName)
	if err != nil {
		return nil, false, err
	}
	if sa.DeletionTimestamp != nil {
		return nil, false, fmt.Errorf("ServiceAccount %s/%s has been deleted", lc.Namespace, lc.ServiceAccountName)
	}
	if string(sa.UID) != lc.ServiceAccountUID {
		return nil, false, fmt.Errorf("ServiceAccount UID (%s) does not match claim (%s)", sa.UID, lc.ServiceAccountUID)
	}
	if secret.Labels[InvalidSinceLabelKey] != "" {
		return nil, false, fmt.Errorf("the token in secret %s/%s for service account %s/%s has been marked invalid. Use tokens from the TokenRequest API or manually created secret-based tokens, or remove the '%s' label from the secret to temporarily allow use of this token",
			lc.Namespace, lc.SecretName, lc.Namespace, lc.ServiceAccountName, InvalidSinceLabelKey)
	}
	// As upstream, a legacy token has no credential ID: no extra.
	return &user.DefaultInfo{Name: sc.Subject, UID: lc.ServiceAccountUID,
		Groups: serviceaccount.MakeGroupNames(lc.Namespace)}, true, nil
}
