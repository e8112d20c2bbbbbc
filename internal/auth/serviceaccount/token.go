package serviceaccount

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	jose "github.com/go-jose/go-jose/v4"
	"github.com/go-jose/go-jose/v4/jwt"
	"github.com/google/uuid"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apiserver/pkg/authentication/serviceaccount"
	"k8s.io/apiserver/pkg/authentication/user"

	"github.com/svcnet/svcnet/internal/auth/authn"
)

// DefaultIssuer is kubeadm's --service-account-issuer, which is also the
// API server's audience.
const DefaultIssuer = "https://kubernetes.default.svc.cluster.local"

// Expirations upstream gives tokens.
const (
	// WarnOnlyExpirationSeconds is what the ServiceAccount admission asks
	// for the token of a pod's kube-api-access volume: the token is issued
	// for ExtendedExpiration instead, its "warnafter" at this age, so that
	// clients that never reread it keep working.
	WarnOnlyExpirationSeconds = 3607
	ExtendedExpiration        = 365 * 24 * time.Hour
	// DefaultExpirationSeconds is a TokenRequest's default.
	DefaultExpirationSeconds = 3600
)

// Claims under "kubernetes.io".
type kubernetesClaims struct {
	Namespace string           `json:"namespace,omitempty"`
	Svcacct   ref              `json:"serviceaccount,omitempty"`
	Pod       *ref             `json:"pod,omitempty"`
	Secret    *ref             `json:"secret,omitempty"`
	Node      *ref             `json:"node,omitempty"`
	WarnAfter *jwt.NumericDate `json:"warnafter,omitempty"`
}

type ref struct {
	Name string `json:"name,omitempty"`
	UID  string `json:"uid,omitempty"`
}

// publicClaims are the registered claims as upstream writes them: its
// go-jose v2 writes "aud" as a list even of one audience, where v4's
// jwt.Claims writes a string.
type publicClaims struct {
	Issuer    string           `json:"iss,omitempty"`
	Subject   string           `json:"sub,omitempty"`
	Audience  []string         `json:"aud,omitempty"`
	Expiry    *jwt.NumericDate `json:"exp,omitempty"`
	NotBefore *jwt.NumericDate `json:"nbf,omitempty"`
	IssuedAt  *jwt.NumericDate `json:"iat,omitempty"`
	ID        string           `json:"jti,omitempty"`
}

type privateClaims struct {
	Kubernetes kubernetesClaims `json:"kubernetes.io,omitempty"`
}

// Bound is what a token is bound to: a pod (and its node), a secret, or
// a node.
type Bound struct {
	Pod    *corev1.Pod
	Node   *corev1.Node
	Secret *corev1.Secret
}

// Issuer signs tokens.
type Issuer struct {
	Key    *Key
	Issuer string
}

// Token signs a token of sa bound to b for audiences, expiring after
// expiration; warnAfter, if not zero, is its "warnafter" age.
func (i *Issuer) Token(sa *corev1.ServiceAccount, b Bound, expiration, warnAfter time.Duration, audiences []string) (string, error) {
	signer, err := jose.NewSigner(jose.SigningKey{Algorithm: jose.RS256, Key: i.Key.private},
		(&jose.SignerOptions{}).WithType("JWT").WithHeader("kid", i.Key.id))
	if err != nil {
		return "", fmt.Errorf("service account token signer: %w", err)
	}
	now := time.Now()
	sc := publicClaims{
		Issuer: i.Issuer, Subject: serviceaccount.MakeUsername(sa.Namespace, sa.Name), Audience: audiences,
		IssuedAt: jwt.NewNumericDate(now), NotBefore: jwt.NewNumericDate(now), Expiry: jwt.NewNumericDate(now.Add(expiration)),
		ID: uuid.NewString(),
	}
	k := kubernetesClaims{Namespace: sa.Namespace, Svcacct: ref{Name: sa.Name, UID: string(sa.UID)}}
	switch {
	case b.Pod != nil:
		k.Pod = &ref{Name: b.Pod.Name, UID: string(b.Pod.UID)}
		if b.Node != nil {
			k.Node = &ref{Name: b.Node.Name, UID: string(b.Node.UID)}
		}
	case b.Secret != nil:
		k.Secret = &ref{Name: b.Secret.Name, UID: string(b.Secret.UID)}
	case b.Node != nil:
		k.Node = &ref{Name: b.Node.Name, UID: string(b.Node.UID)}
	}
	if warnAfter != 0 {
		k.WarnAfter = jwt.NewNumericDate(now.Add(warnAfter))
	}
	return jwt.Signed(signer).Claims(sc).Claims(privateClaims{Kubernetes: k}).Serialize()
}

// Objects finds what tokens name; a missing object is an error.
type Objects interface {
	ServiceAccount(ctx context.Context, namespace, name string) (*corev1.ServiceAccount, error)
	Pod(ctx context.Context, namespace, name string) (*corev1.Pod, error)
	Secret(ctx context.Context, namespace, name string) (*corev1.Secret, error)
	Node(ctx context.Context, name string) (*corev1.Node, error)
}

// Authenticator accepts the tokens of an issuer.
type Authenticator struct {
	Issuer    string
	Key       *Key
	Audiences []string
	Objects   Objects
}

// invalidated is upstream's answer for a token whose objects are gone.
var invalidated = errors.New("service account token has been invalidated")

// deletionGrace is how long a token of a pod being deleted still works,
// as upstream's: the pod may still be shutting down.
const deletionGrace = 60 * time.Second

// AuthenticateToken implements authn.TokenAuthenticator: ok=false for a
// token that is not a JWT of this issuer.
func (a *Authenticator) AuthenticateToken(ctx context.Context, token string) (user.Info, bool, error) {
	tok, ok := parseIssued(token, a.Issuer)
	if !ok {
		return nil, false, nil
	}
	var sc jwt.Claims
	var pc privateClaims
	if err := tok.Claims(&a.Key.private.PublicKey, &sc, &pc); err != nil {
		return nil, false, errors.New("invalid signature")
	}
	if err := sc.ValidateWithLeeway(jwt.Expected{Issuer: a.Issuer, Time: time.Now()}, jwt.DefaultLeeway); err != nil {
		return nil, false, err
	}
	want := a.Audiences
	if auds, ok := authn.AudiencesFrom(ctx); ok {
		want = auds
	}
	if !slices.ContainsFunc(want, sc.Audience.Contains) {
		return nil, false, fmt.Errorf("token audiences %q is invalid for the target audiences %q", []string(sc.Audience), want)
	}
	k := pc.Kubernetes
	if k.Namespace == "" || k.Svcacct.Name == "" || sc.Subject != serviceaccount.MakeUsername(k.Namespace, k.Svcacct.Name) {
		return nil, false, errors.New("service account token claims are malformed")
	}
	sa, err := a.Objects.ServiceAccount(ctx, k.Namespace, k.Svcacct.Name)
	if err != nil || string(sa.UID) != k.Svcacct.UID {
		return nil, false, invalidated
	}
	extra := map[string][]string{"authentication.kubernetes.io/credential-id": {"JTI=" + sc.ID}}
	switch {
	case k.Pod != nil:
		pod, err := a.Objects.Pod(ctx, k.Namespace, k.Pod.Name)
		if gone(pod, err, k.Pod.UID) {
			return nil, false, invalidated
		}
		extra["authentication.kubernetes.io/pod-name"] = []string{pod.Name}
		extra["authentication.kubernetes.io/pod-uid"] = []string{string(pod.UID)}
		if k.Node != nil {
			extra["authentication.kubernetes.io/node-name"] = []string{k.Node.Name}
			extra["authentication.kubernetes.io/node-uid"] = []string{k.Node.UID}
		}
	case k.Secret != nil:
		sec, err := a.Objects.Secret(ctx, k.Namespace, k.Secret.Name)
		if gone(sec, err, k.Secret.UID) {
			return nil, false, invalidated
		}
	case k.Node != nil:
		node, err := a.Objects.Node(ctx, k.Node.Name)
		if gone(node, err, k.Node.UID) {
			return nil, false, invalidated
		}
		extra["authentication.kubernetes.io/node-name"] = []string{node.Name}
		extra["authentication.kubernetes.io/node-uid"] = []string{string(node.UID)}
	}
	if sc.ID == "" {
		delete(extra, "authentication.kubernetes.io/credential-id")
	}
	return &user.DefaultInfo{Name: sc.Subject, UID: string(sa.UID),
		Groups: serviceaccount.MakeGroupNames(k.Namespace), Extra: extra}, true, nil
}

// parseIssued parses a JWT signed RS256 whose (unverified) issuer is
// issuer; ok=false for any other token, which is not ours to judge.
func parseIssued(token, issuer string) (*jwt.JSONWebToken, bool) {
	if strings.Count(token, ".") != 2 {
		return nil, false
	}
	tok, err := jwt.ParseSigned(token, []jose.SignatureAlgorithm{jose.RS256})
	if err != nil {
		return nil, false
	}
	var unverified jwt.Claims
	if err := tok.UnsafeClaimsWithoutVerification(&unverified); err != nil || unverified.Issuer != issuer {
		return nil, false
	}
	return tok, true
}

// gone reports whether a token's object is not the one it was bound to:
// missing, another of the same name, or deleted over deletionGrace ago.
func gone(obj metav1.Object, err error, uid string) bool {
	if err != nil || string(obj.GetUID()) != uid {
		return true
	}
	d := obj.GetDeletionTimestamp()
	return d != nil && d.Time.Before(time.Now().Add(-deletionGrace))
}
