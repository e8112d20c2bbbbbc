package serviceaccount

import (
	"encoding/json"
	"net/http"
)

// Paths of upstream's service account issuer discovery.
const (
	OpenIDConfigurationPath = "/.well-known/openid-configuration"
	JWKSPath                = "/openid/v1/jwks"
)

// Discovery serves the OpenID Connect discovery document and the key set
// of the issuer at OpenIDConfigurationPath and JWKSPath, as upstream's
// ServiceAccountIssuerDiscovery, so that others can check its tokens.
func Discovery(issuer string, key *Key) http.Handler {
	config, _ := json.Marshal(map[string]any{
		"issuer":                                issuer,
		"jwks_uri":                              issuer + JWKSPath,
		"response_types_supported":              []string{"id_token"},
		"subject_types_supported":               []string{"public"},
		"id_token_signing_alg_values_supported": []string{"RS256"},
	})
	jwks, _ := json.Marshal(key.JWKS())
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, typ := config, "application/json"
		if r.URL.Path == JWKSPath {
			body, typ = jwks, "application/jwk-set+json"
		}
		w.Header().Set("Content-Type", typ)
		w.Header().Set("Cache-Control", "public, max-age=3600")
		_, _ = w.Write(body)
	})
}
