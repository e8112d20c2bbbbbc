package e2e

import (
	"encoding/base64"
	"strings"
	"testing"
	"time"
)

// TestLegacyServiceAccountToken: a Secret of type
// kubernetes.io/service-account-token gets a legacy token of its
// ServiceAccount, which authenticates until the Secret is deleted.
func TestLegacyServiceAccountToken(t *testing.T) {
	t.Parallel()
	c := startCluster(t)
	eventually(t, 5*time.Second, func() string {
		if sa, _ := c.kubectl("", "get", "serviceaccount", "default", "-o", "name"); strings.TrimSpace(sa) != "serviceaccount/default" {
			return "no default ServiceAccount: " + sa
		}
		return ""
	})
	c.withStdin(`apiVersion: v1
kind: Secret
metadata:
  name: default-token
  annotations:
    kubernetes.io/service-account.name: default
type: kubernetes.io/service-account-token
`, "apply", "-f", "-")
	var token, ca, ns string
	eventually(t, 10*time.Second, func() string {
		out := c.must("get", "secret", "default-token", "-o", `jsonpath={.data.token} {.data.ca\.crt} {.data.namespace}`)
		f := strings.Fields(out)
		if len(f) != 3 {
			return "the Secret is not filled in: " + out
		}
		for i, into := range []*string{&token, &ca, &ns} {
			b, err := base64.StdEncoding.DecodeString(f[i])
			if err != nil {
				t.Fatal(err)
			}
			*into = string(b)
		}
		return ""
	})
	sauid := c.must("get", "serviceaccount", "default", "-o", "jsonpath={.metadata.uid}")
	if got := c.must("get", "secret", "default-token", "-o", `jsonpath={.metadata.annotations.kubernetes\.io/service-account\.uid}`); got != sauid {
		t.Errorf("service-account.uid annotation %q, want %q", got, sauid)
	}
	if ns != "default" || !strings.HasPrefix(ca, "-----BEGIN CERTIFICATE-----") {
		t.Errorf("namespace %q, ca.crt %q", ns, ca)
	}
	claims := jwtClaims(t, token)
	if claims["iss"] != "kubernetes/serviceaccount" || claims["sub"] != "system:serviceaccount:default:default" ||
		claims["kubernetes.io/serviceaccount/secret.name"] != "default-token" ||
		claims["kubernetes.io/serviceaccount/service-account.uid"] != sauid || claims["exp"] != nil {
		t.Errorf("legacy token claims: %v", claims)
	}

	whoami := func() (string, error) {
		return c.kubectl("", "--kubeconfig=/dev/null", "--server=https://"+c.apiAddr, "--insecure-skip-tls-verify", "--token="+token, "auth", "whoami")
	}
	if out, err := whoami(); err != nil || !strings.Contains(out, "system:serviceaccount:default:default") {
		t.Fatalf("whoami with the legacy token: %v %s", err, out)
	}
	c.must("delete", "secret", "default-token")
	// Allow for the API server's 10 s token cache.
	eventually(t, 20*time.Second, func() string {
		if out, err := whoami(); err == nil || !strings.Contains(out, "Unauthorized") {
			return "the deleted Secret's token still works: " + out
		}
		return ""
	})
}
