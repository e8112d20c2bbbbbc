package bootstraptoken

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"

	"github.com/svcnet/svcnet/internal/auth/authn"
)

func TestAuthenticator(t *testing.T) {
	now := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	tok := Token{ID: "abcdef", Secret: "0123456789abcdef", Description: "d", Expires: now.Add(time.Hour),
		Usages: DefaultUsages, Groups: DefaultGroups}
	indexer := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{})
	put := func(s *corev1.Secret) {
		if err := indexer.Update(s); err != nil {
			t.Fatal(err)
		}
	}
	put(tok.SecretObject())
	a := &Authenticator{Secrets: corelisters.NewSecretLister(indexer).Secrets(metav1.NamespaceSystem), Now: func() time.Time { return now }}
	ctx := context.Background()
	u, ok, err := a.AuthenticateToken(ctx, tok.String())
	if !ok || err != nil {
		t.Fatalf("AuthenticateToken = %v, %v", ok, err)
	}
	if u.GetName() != "system:bootstrap:abcdef" || !slices.Equal(u.GetGroups(), []string{"system:bootstrappers", "system:bootstrappers:kubeadm:default-node-token"}) {
		t.Errorf("user = %s %v", u.GetName(), u.GetGroups())
	}

	refused := func(why, token string) {
		t.Helper()
		if u, ok, err := a.AuthenticateToken(ctx, token); ok || err != nil {
			t.Errorf("%s: %v %v %v, want not ok and no error", why, u, ok, err)
		}
	}
	a.Audiences = []string{"https://kubernetes.default.svc.cluster.local"}
	if _, ok, err := a.AuthenticateToken(authn.WithAudiences(ctx, []string{"vault"}), tok.String()); ok || err == nil {
		t.Errorf("TokenReview for other audiences: %v %v, want an error", ok, err)
	}
	if _, ok, err := a.AuthenticateToken(authn.WithAudiences(ctx, a.Audiences), tok.String()); !ok || err != nil {
		t.Errorf("TokenReview for the API's audience: %v %v", ok, err)
	}
	refused("another secret", "abcdef.0123456789abcdee")
	refused("no such id", "zzzzzz.0123456789abcdef")
	refused("not a bootstrap token", "some.jwt.token")
	with := func(change func(*corev1.Secret)) {
		s := tok.SecretObject()
		change(s)
		put(s)
	}
	with(func(s *corev1.Secret) { s.Data["expiration"] = []byte(now.Add(-time.Second).Format(time.RFC3339)) })
	refused("expired", tok.String())
	with(func(s *corev1.Secret) { s.Data["expiration"] = []byte("tomorrow") })
	refused("unreadable expiration", tok.String())
	with(func(s *corev1.Secret) { delete(s.Data, "usage-bootstrap-authentication") })
	refused("not for authentication", tok.String())
	with(func(s *corev1.Secret) { s.Type = corev1.SecretTypeOpaque })
	refused("another type", tok.String())
	with(func(s *corev1.Secret) { s.Data["token-id"] = []byte("ghijkl") })
	refused("another id", tok.String())
	with(func(s *corev1.Secret) { s.Data["auth-extra-groups"] = []byte("system:masters") })
	refused("a group outside system:bootstrappers", tok.String())
	with(func(s *corev1.Secret) { s.DeletionTimestamp = &metav1.Time{Time: now} })
	refused("being deleted", tok.String())
	with(func(s *corev1.Secret) { delete(s.Data, "expiration") })
	if _, ok, _ := a.AuthenticateToken(ctx, tok.String()); !ok {
		t.Error("a token without expiration is refused")
	}
}

func TestSecretRoundTrip(t *testing.T) {
	tok, err := Parse("")
	if err != nil {
		t.Fatal(err)
	}
	if len(tok.ID) != 6 || len(tok.Secret) != 16 {
		t.Fatalf("generated %q", tok)
	}
	tok.Description, tok.Usages, tok.Groups = "for nodes", []string{"authentication", "signing"}, DefaultGroups
	tok.Expires = time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	s := tok.SecretObject()
	if s.Name != "bootstrap-token-"+tok.ID || s.Namespace != "kube-system" || s.Type != "bootstrap.kubernetes.io/token" ||
		string(s.Data["expiration"]) != "2030-01-01T00:00:00Z" || string(s.Data["usage-bootstrap-signing"]) != "true" ||
		string(s.Data["auth-extra-groups"]) != "system:bootstrappers:kubeadm:default-node-token" {
		t.Errorf("secret = %+v", s)
	}
	back, err := FromSecret(s)
	if err != nil {
		t.Fatal(err)
	}
	if back.String() != tok.String() || back.Description != tok.Description || !back.Expires.Equal(tok.Expires) ||
		!slices.Equal(back.Usages, tok.Usages) || !slices.Equal(back.Groups, tok.Groups) {
		t.Errorf("FromSecret = %+v, want %+v", back, tok)
	}
	s.Name = "bootstrap-token-other1"
	if _, err := FromSecret(s); err == nil || !strings.Contains(err.Error(), "not of the form") {
		t.Errorf("misnamed secret: %v", err)
	}
	for _, bad := range []string{"ABCDEF.0123456789abcdef", "abcdef.0123", "abcdef"} {
		if _, err := Parse(bad); err == nil {
			t.Errorf("Parse(%q) accepted", bad)
		}
	}
}

func TestValidate(t *testing.T) {
	for _, c := range []struct {
		tok  Token
		want string
	}{
		{Token{Usages: DefaultUsages, Groups: DefaultGroups}, ""},
		{Token{Usages: []string{"signing", "nope"}}, "invalid bootstrap token usage string: nope"},
		{Token{Usages: DefaultUsages, Groups: []string{"system:masters"}}, "must match"},
		{Token{Usages: []string{"signing"}, Groups: DefaultGroups}, "unless --usages includes"},
	} {
		err := c.tok.Validate()
		if c.want == "" && err != nil || c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)) {
			t.Errorf("%+v: %v, want %q", c.tok, err, c.want)
		}
	}
}
