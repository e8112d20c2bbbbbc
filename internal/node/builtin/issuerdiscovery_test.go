package builtin

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/coreos/go-oidc/v3/oidc"
	"github.com/go-jose/go-jose/v4"
	"github.com/go-jose/go-jose/v4/jwt"
)

// TestValidateIssuerToken: a token signed by a key its issuer's discovery
// publishes is valid for its audience; another audience, or a key the
// issuer does not publish, is refused.
func TestValidateIssuerToken(t *testing.T) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	other, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	srv := httptest.NewTLSServer(mux)
	defer srv.Close()
	mux.HandleFunc("/.well-known/openid-configuration", func(w http.ResponseWriter, _ *http.Request) {
		_ = json.NewEncoder(w).Encode(map[string]any{"issuer": srv.URL, "jwks_uri": srv.URL + "/openid/v1/jwks",
			"response_types_supported": []string{"id_token"}, "subject_types_supported": []string{"public"},
			"id_token_signing_alg_values_supported": []string{"ES256"}})
	})
	mux.HandleFunc("/openid/v1/jwks", func(w http.ResponseWriter, _ *http.Request) {
		_ = json.NewEncoder(w).Encode(jose.JSONWebKeySet{Keys: []jose.JSONWebKey{{Key: &key.PublicKey, KeyID: "k", Algorithm: "ES256", Use: "sig"}}})
	})
	token := func(signer *ecdsa.PrivateKey) string {
		s, err := jose.NewSigner(jose.SigningKey{Algorithm: jose.ES256, Key: jose.JSONWebKey{Key: signer, KeyID: "k"}}, nil)
		if err != nil {
			t.Fatal(err)
		}
		claims := map[string]any{"iss": srv.URL, "aud": []string{"oidc-discovery-test"}, "sub": "system:serviceaccount:ns:default",
			"exp": time.Now().Add(time.Hour).Unix(), "iat": time.Now().Unix(),
			"kubernetes.io": map[string]any{"namespace": "ns", "serviceaccount": map[string]string{"name": "default"}}}
		raw, err := jwt.Signed(s).Claims(claims).Serialize()
		if err != nil {
			t.Fatal(err)
		}
		return raw
	}
	ctx := oidc.ClientContext(context.Background(), srv.Client())
	if err := validateIssuerToken(ctx, token(key), "oidc-discovery-test"); err != nil {
		t.Errorf("a token the issuer signed: %v", err)
	}
	if err := validateIssuerToken(ctx, token(key), "another"); err == nil || !strings.Contains(err.Error(), "audience") {
		t.Errorf("another audience: %v", err)
	}
	if err := validateIssuerToken(ctx, token(other), "oidc-discovery-test"); err == nil || !strings.Contains(err.Error(), "signature") {
		t.Errorf("a key the issuer does not publish: %v", err)
	}
}
