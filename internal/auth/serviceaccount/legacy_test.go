package serviceaccount

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/svcnet/svcnet/internal/auth/authn"
)

// legacyObjects is an Objects over maps of ServiceAccounts and Secrets.
type legacyObjects struct {
	objects
	secrets map[string]*corev1.Secret
}

func (o legacyObjects) Secret(_ context.Context, ns, name string) (*corev1.Secret, error) {
	if s, ok := o.secrets[ns+"/"+name]; ok {
		return s, nil
	}
	return nil, apierrors.NewNotFound(corev1.Resource("secrets"), name)
}

func TestLegacyToken(t *testing.T) {
	dir := t.TempDir()
	key, err := LoadOrCreateKey(dir)
	if err != nil {
		t.Fatal(err)
	}
	if k, err := LoadKeyFile(filepath.Join(dir, "sa.key")); err != nil || k.ID() != key.ID() {
		t.Fatalf("LoadKeyFile: %v", err)
	}
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "default", Namespace: "ns", UID: "sa-uid"}}
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "tok", Namespace: "ns", UID: "secret-uid"},
		Type: corev1.SecretTypeServiceAccountToken}
	iss := &Issuer{Key: key, Issuer: DefaultIssuer}
	token, err := iss.LegacyToken(sa, secret)
	if err != nil {
		t.Fatal(err)
	}
	parts := strings.Split(token, ".")
	var header, claims map[string]any
	for i, into := range []*map[string]any{&header, &claims} {
		b, err := base64.RawURLEncoding.DecodeString(parts[i])
		if err != nil {
			t.Fatal(err)
		}
		if err := json.Unmarshal(b, into); err != nil {
			t.Fatal(err)
		}
	}
	if header["alg"] != "RS256" || header["kid"] != key.ID() {
		t.Errorf("header = %v", header)
	}
	want := map[string]any{
		"iss": "kubernetes/serviceaccount", "sub": "system:serviceaccount:ns:default",
		"kubernetes.io/serviceaccount/namespace":            "ns",
		"kubernetes.io/serviceaccount/secret.name":          "tok",
		"kubernetes.io/serviceaccount/service-account.name": "default",
		"kubernetes.io/serviceaccount/service-account.uid":  "sa-uid",
	}
	if len(claims) != len(want) {
		t.Errorf("claims = %v, want %v", claims, want)
	}
	for k, v := range want {
		if claims[k] != v {
			t.Errorf("claim %s = %v, want %v", k, claims[k], v)
		}
	}

	secret.Data = map[string][]byte{"token": []byte(token)}
	objs := legacyObjects{objects: objects{sas: map[string]*corev1.ServiceAccount{"ns/default": sa}},
		secrets: map[string]*corev1.Secret{"ns/tok": secret}}
	a := &LegacyAuthenticator{Key: key, Objects: objs, Audiences: []string{DefaultIssuer}}
	ctx := context.Background()
	u, ok, err := a.AuthenticateToken(ctx, token)
	if err != nil || !ok {
		t.Fatalf("AuthenticateToken = %v, %v", ok, err)
	}
	if u.GetName() != "system:serviceaccount:ns:default" || u.GetUID() != "sa-uid" ||
		strings.Join(u.GetGroups(), ",") != "system:serviceaccounts,system:serviceaccounts:ns" || len(u.GetExtra()) != 0 {
		t.Errorf("user = %+v", u)
	}

	// Not a legacy token: someone else's.
	bound, err := iss.Token(sa, Bound{}, 3600e9, 0, []string{DefaultIssuer})
	if err != nil {
		t.Fatal(err)
	}
	for _, tok := range []string{"opaque", "a.b.c", bound} {
		if _, ok, err := a.AuthenticateToken(ctx, tok); ok || err != nil {
			t.Errorf("%.20s: ok=%v err=%v, want neither", tok, ok, err)
		}
	}
	// A bound authenticator does not take legacy tokens.
	if _, ok, err := (&Authenticator{Issuer: DefaultIssuer, Key: key, Audiences: []string{DefaultIssuer}, Objects: objs}).AuthenticateToken(ctx, token); ok || err != nil {
		t.Errorf("bound authenticator: ok=%v err=%v", ok, err)
	}
	// Another key's signature.
	other, err := LoadOrCreateKey(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	forged, _ := (&Issuer{Key: other}).LegacyToken(sa, secret)
	refuse(t, a, ctx, forged, "invalid signature")
	// Other audiences than the API server's.
	refuse(t, a, authn.WithAudiences(ctx, []string{"vault"}), token, "token audiences")

	// The Secret holds another token, is deleted or being deleted, or
	// marked invalid; the ServiceAccount is gone or another.
	secret.Data["token"] = []byte("other")
	refuse(t, a, ctx, token, "Token does not match server's copy")
	secret.Data["token"] = []byte(token)
	secret.Labels = map[string]string{InvalidSinceLabelKey: "2024-01-01"}
	refuse(t, a, ctx, token, "has been marked invalid")
	secret.Labels = nil
	now := metav1.Now()
	secret.DeletionTimestamp = &now
	refuse(t, a, ctx, token, "Token has been invalidated")
	secret.DeletionTimestamp = nil
	objs.sas["ns/default"] = &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "default", Namespace: "ns", UID: "new"}}
	refuse(t, a, ctx, token, "ServiceAccount UID (new) does not match claim (sa-uid)")
	delete(objs.sas, "ns/default")
	refuse(t, a, ctx, token, "not found")
	objs.sas["ns/default"] = sa
	delete(objs.secrets, "ns/tok")
	refuse(t, a, ctx, token, "Token has been invalidated")
}

func refuse(t *testing.T, a *LegacyAuthenticator, ctx context.Context, token, want string) {
	t.Helper()
	if _, ok, err := a.AuthenticateToken(ctx, token); ok || err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("AuthenticateToken: ok=%v err=%v, want an error with %q", ok, err, want)
	}
}
