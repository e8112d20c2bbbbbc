// Package bootstraptoken is bootstrap tokens, as kube-apiserver's
// bootstrap token authenticator and kubeadm's token commands know them: a
// token "<id>.<secret>" ([a-z0-9]{6}.[a-z0-9]{16}) lives in the Secret
// kube-system/bootstrap-token-<id> of type bootstrap.kubernetes.io/token,
// whose data say what it may be used for (usage-bootstrap-authentication,
// usage-bootstrap-signing), until when (expiration, RFC 3339) and which
// groups it adds (auth-extra-groups). A token that authenticates is the
// user system:bootstrap:<id> in system:bootstrappers and its extra groups;
// joining nodes use one to ask for their certificate, and its signing
// usage lets them trust the cluster-info ConfigMap (package bootstrapsigner
// of the controllers).
package bootstraptoken

import (
	"context"
	"crypto/subtle"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apiserver/pkg/authentication/user"
	corelisters "k8s.io/client-go/listers/core/v1"
	bootstrapapi "k8s.io/cluster-bootstrap/token/api"
	bootstraputil "k8s.io/cluster-bootstrap/token/util"
	bootstrapsecretutil "k8s.io/cluster-bootstrap/util/secrets"
	"k8s.io/cluster-bootstrap/util/tokens"

	"github.com/svcnet/svcnet/internal/auth/authn"
)

// Authenticator accepts bootstrap tokens whose Secret, read through a
// lister of kube-system's Secrets, is marked for authentication and has
// not expired, as upstream's: a token of another form, or whose Secret is
// missing, being deleted, of another type, holding another secret or ID,
// expired or not for authentication, is not its own (ok=false without an
// error), so the chain goes on and the request is refused.
type Authenticator struct {
	Secrets corelisters.SecretNamespaceLister
	// Audiences are the API server's: a bootstrap token is for them
	// alone, so a TokenReview asking for none of them is refused, as
	// upstream's audience-agnostic wrapper does.
	Audiences []string
	// Now is the clock expirations are read against (time.Now if nil).
	Now func() time.Time
}

// AuthenticateToken implements authn.TokenAuthenticator.
func (a *Authenticator) AuthenticateToken(ctx context.Context, token string) (user.Info, bool, error) {
	id, secretValue, err := tokens.ParseToken(token)
	if err != nil {
		return nil, false, nil
	}
	if want, ok := authn.AudiencesFrom(ctx); ok && len(a.Audiences) > 0 &&
		!slices.ContainsFunc(want, func(w string) bool { return slices.Contains(a.Audiences, w) }) {
		return nil, false, fmt.Errorf("token audiences %q is invalid for the target audiences %q", a.Audiences, want)
	}
	name := bootstraputil.BootstrapTokenSecretName(id)
	secret, err := a.Secrets.Get(name)
	if apierrors.IsNotFound(err) {
		slog.Debug("no secret to match the bootstrap bearer token", "secret", name)
		return nil, false, nil
	}
	if err != nil {
		return nil, false, fmt.Errorf("bootstrap token secret %s: %w", name, err)
	}
	refuse := func(why string) (user.Info, bool, error) {
		slog.Debug("bootstrap secret matching bearer token "+why, "secret", metav1.NamespaceSystem+"/"+name)
		return nil, false, nil
	}
	switch {
	case secret.DeletionTimestamp != nil:
		return refuse("is deleted and awaiting removal")
	case secret.Type != bootstrapapi.SecretTypeBootstrapToken || secret.Data == nil:
		return refuse("has invalid type")
	case subtle.ConstantTimeCompare([]byte(bootstrapsecretutil.GetData(secret, bootstrapapi.BootstrapTokenSecretKey)), []byte(secretValue)) != 1:
		return refuse("has invalid value for key " + bootstrapapi.BootstrapTokenSecretKey)
	case bootstrapsecretutil.GetData(secret, bootstrapapi.BootstrapTokenIDKey) != id:
		return refuse("has invalid value for key " + bootstrapapi.BootstrapTokenIDKey)
	case bootstrapsecretutil.HasExpired(secret, a.now()):
		return refuse("has expired")
	case bootstrapsecretutil.GetData(secret, bootstrapapi.BootstrapTokenUsageAuthentication) != "true":
		return refuse("is not marked " + bootstrapapi.BootstrapTokenUsageAuthentication + "=true")
	}
	groups, err := bootstrapsecretutil.GetGroups(secret)
	if err != nil {
		return refuse("has invalid value for key " + bootstrapapi.BootstrapTokenExtraGroupsKey + ": " + err.Error())
	}
	return &user.DefaultInfo{Name: bootstrapapi.BootstrapUserPrefix + id, Groups: groups}, true, nil
}

func (a *Authenticator) now() time.Time {
	if a.Now != nil {
		return a.Now()
	}
	return time.Now()
}

// DefaultUsages are kubeadm's usages of a token.
var DefaultUsages = []string{"signing", "authentication"}

// DefaultGroups are kubeadm's extra groups of a token for joining nodes.
var DefaultGroups = []string{"system:bootstrappers:kubeadm:default-node-token"}

// Token is one bootstrap token and what its Secret says of it, kubeadm's
// BootstrapToken.
type Token struct {
	ID, Secret  string
	Description string
	// Expires is when it expires; zero: never.
	Expires time.Time
	Usages  []string
	Groups  []string
}

// String is the token as a bearer token: "<id>.<secret>".
func (t Token) String() string { return bootstraputil.TokenFromIDAndSecret(t.ID, t.Secret) }

// Parse reads "<id>.<secret>", or generates a token when s is empty.
func Parse(s string) (Token, error) {
	if s == "" {
		g, err := bootstraputil.GenerateBootstrapToken()
		if err != nil {
			return Token{}, fmt.Errorf("generate a bootstrap token: %w", err)
		}
		s = g
	}
	id, secret, err := tokens.ParseToken(s)
	if err != nil {
		return Token{}, err
	}
	return Token{ID: id, Secret: secret}, nil
}

// Validate checks usages and groups as kubeadm does.
func (t Token) Validate() error {
	if err := bootstraputil.ValidateUsages(t.Usages); err != nil {
		return err
	}
	for _, g := range t.Groups {
		if err := bootstraputil.ValidateBootstrapGroupName(g); err != nil {
			return err
		}
	}
	if len(t.Groups) > 0 && !slices.Contains(t.Usages, "authentication") {
		return fmt.Errorf("token groups cannot be specified unless --usages includes %q", "authentication")
	}
	return nil
}

// SecretObject is the Secret that holds t, as kubeadm writes it.
func (t Token) SecretObject() *corev1.Secret {
	data := map[string][]byte{
		bootstrapapi.BootstrapTokenIDKey:     []byte(t.ID),
		bootstrapapi.BootstrapTokenSecretKey: []byte(t.Secret),
	}
	if t.Description != "" {
		data[bootstrapapi.BootstrapTokenDescriptionKey] = []byte(t.Description)
	}
	if !t.Expires.IsZero() {
		data[bootstrapapi.BootstrapTokenExpirationKey] = []byte(t.Expires.UTC().Format(time.RFC3339))
	}
	for _, u := range t.Usages {
		data[bootstrapapi.BootstrapTokenUsagePrefix+u] = []byte("true")
	}
	if len(t.Groups) > 0 {
		data[bootstrapapi.BootstrapTokenExtraGroupsKey] = []byte(strings.Join(t.Groups, ","))
	}
	return &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: bootstraputil.BootstrapTokenSecretName(t.ID), Namespace: metav1.NamespaceSystem},
		Type:       bootstrapapi.SecretTypeBootstrapToken,
		Data:       data,
	}
}

// FromSecret reads the token a Secret holds, with kubeadm's checks.
func FromSecret(s *corev1.Secret) (Token, error) {
	id := bootstrapsecretutil.GetData(s, bootstrapapi.BootstrapTokenIDKey)
	if id == "" {
		return Token{}, fmt.Errorf("bootstrap Token Secret has no token-id data: %s", s.Name)
	}
	if want := bootstraputil.BootstrapTokenSecretName(id); s.Name != want {
		return Token{}, fmt.Errorf("bootstrap token name is not of the form '%s(token-id)'. Actual: %q. Expected: %q",
			bootstrapapi.BootstrapTokenSecretPrefix, s.Name, want)
	}
	secret := bootstrapsecretutil.GetData(s, bootstrapapi.BootstrapTokenSecretKey)
	if secret == "" {
		return Token{}, fmt.Errorf("bootstrap Token Secret has no token-secret data: %s", s.Name)
	}
	if !bootstraputil.IsValidBootstrapToken(bootstraputil.TokenFromIDAndSecret(id, secret)) {
		return Token{}, fmt.Errorf("bootstrap Token Secret is invalid and couldn't be parsed: %s", s.Name)
	}
	t := Token{ID: id, Secret: secret, Description: bootstrapsecretutil.GetData(s, bootstrapapi.BootstrapTokenDescriptionKey)}
	if exp := bootstrapsecretutil.GetData(s, bootstrapapi.BootstrapTokenExpirationKey); exp != "" {
		e, err := time.Parse(time.RFC3339, exp)
		if err != nil {
			return Token{}, fmt.Errorf("can't parse expiration time of bootstrap token %q: %w", s.Name, err)
		}
		t.Expires = e
	}
	for k, v := range s.Data {
		if u, ok := strings.CutPrefix(k, bootstrapapi.BootstrapTokenUsagePrefix); ok && string(v) == "true" {
			t.Usages = append(t.Usages, u)
		}
	}
	slices.Sort(t.Usages)
	if g := bootstrapsecretutil.GetData(s, bootstrapapi.BootstrapTokenExtraGroupsKey); g != "" {
		t.Groups = strings.Split(g, ",")
	}
	return t, nil
}
