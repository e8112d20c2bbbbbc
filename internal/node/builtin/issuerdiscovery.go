package builtin

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net/http"
	"os"

	"github.com/coreos/go-oidc/v3/oidc"
	"github.com/go-jose/go-jose/v4"
	"github.com/go-jose/go-jose/v4/jwt"
	"k8s.io/client-go/rest"
)

// issuerAlgorithms are the signatures a service account token may carry.
var issuerAlgorithms = []string{oidc.RS256, oidc.ES256, oidc.ES384, oidc.ES512}

// issuerDiscovery is agnhost test-service-account-issuer-discovery: the
// token at --token-path is validated through OIDC discovery of its issuer
// (the discovery document, then the keys at its jwks_uri), with
// go-oidc, as upstream's command does: first as a client of the cluster
// (its CA, the pod's credentials), then as an outside one; it fails when
// neither validates the token for --audience.
func issuerDiscovery(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("test-service-account-issuer-discovery", flag.ContinueOnError)
	tokenPath := fs.String("token-path", "", "Path to read service account token from.")
	audience := fs.String("audience", "", "Audience to check on received token.")
	if err := fs.Parse(args); err != nil {
		return err
	}
	raw, err := os.ReadFile(*tokenPath)
	if err != nil {
		return fmt.Errorf("read the token: %w", err)
	}
	slog.Info("OK: Got token")
	cfg, err := rest.InClusterConfig()
	if err != nil {
		return err
	}
	rt, err := rest.TransportFor(cfg)
	if err != nil {
		return fmt.Errorf("could not get roundtripper: %w", err)
	}
	slog.Info("validating with in-cluster discovery")
	inCluster := validateIssuerToken(oidc.ClientContext(ctx, &http.Client{Transport: rt}), string(raw), *audience)
	if inCluster == nil {
		return nil
	}
	slog.Info("failed to validate with in-cluster discovery", "err", inCluster)
	slog.Info("falling back to validating with external discovery")
	return validateIssuerToken(oidc.ClientContext(ctx, http.DefaultClient), string(raw), *audience)
}

// validateIssuerToken checks raw's signature with the keys its issuer
// publishes, and its audience and expiry.
func validateIssuerToken(ctx context.Context, raw, audience string) error {
	algs := make([]jose.SignatureAlgorithm, len(issuerAlgorithms))
	for i, a := range issuerAlgorithms {
		algs[i] = jose.SignatureAlgorithm(a)
	}
	tok, err := jwt.ParseSigned(raw, algs)
	if err != nil {
		return fmt.Errorf("parse the token: %w", err)
	}
	var unsafe jwt.Claims
	if err := tok.UnsafeClaimsWithoutVerification(&unsafe); err != nil {
		return fmt.Errorf("read the token's claims: %w", err)
	}
	slog.Info("OK: got issuer", "issuer", unsafe.Issuer)
	provider, err := oidc.NewProvider(ctx, unsafe.Issuer)
	if err != nil {
		return err
	}
	slog.Info("OK: Constructed OIDC provider", "issuer", unsafe.Issuer)
	valid, err := provider.Verifier(&oidc.Config{ClientID: audience, SupportedSigningAlgs: issuerAlgorithms}).Verify(ctx, raw)
	if err != nil {
		return err
	}
	slog.Info("OK: Validated signature on JWT")
	var claims struct {
		jwt.Claims
		Kubernetes struct {
			Namespace      string `json:"namespace"`
			ServiceAccount struct {
				Name string `json:"name"`
			} `json:"serviceaccount"`
		} `json:"kubernetes.io"`
	}
	if err := valid.Claims(&claims); err != nil {
		return err
	}
	if claims.Kubernetes.ServiceAccount.Name == "" {
		return errors.New("the token names no service account")
	}
	slog.Info("OK: Got valid claims from token!", "namespace", claims.Kubernetes.Namespace,
		"serviceaccount", claims.Kubernetes.ServiceAccount.Name, "audience", claims.Audience)
	return nil
}
