package cluster

import (
	"bytes"
	"context"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/svcnet/svcnet/internal/pki"
)

func TestTokens(t *testing.T) {
	ctx := context.Background()
	cs := fake.NewClientset()
	tok, err := CreateToken(ctx, cs, TokenOptions{Token: "abcdef.0123456789abcdef", TTL: time.Hour, Description: "for nodes",
		Usages: []string{"signing", "authentication"}, Groups: []string{"system:bootstrappers:kubeadm:default-node-token"}})
	if err != nil {
		t.Fatal(err)
	}
	s, err := cs.CoreV1().Secrets("kube-system").Get(ctx, "bootstrap-token-abcdef", metav1.GetOptions{})
	if err != nil || string(s.Data["token-secret"]) != "0123456789abcdef" || string(s.Data["usage-bootstrap-authentication"]) != "true" {
		t.Fatalf("secret = %+v, %v", s, err)
	}
	if _, err := CreateToken(ctx, cs, TokenOptions{Token: tok.String(), Usages: []string{"signing"}}); err != nil {
		t.Fatalf("create again: %v", err)
	}
	if _, err := CreateToken(ctx, cs, TokenOptions{Usages: []string{"signing"}, Groups: []string{"system:bootstrappers:x"}}); err == nil {
		t.Error("groups without authentication accepted")
	}
	var out, errOut bytes.Buffer
	if err := ListTokens(ctx, cs, &out, &errOut); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	if len(lines) != 2 || !strings.HasPrefix(lines[0], "TOKEN") || !strings.Contains(lines[0], "EXTRA GROUPS") ||
		!strings.HasPrefix(lines[1], "abcdef.0123456789abcdef") || !strings.Contains(lines[1], "<forever>") || !strings.Contains(lines[1], "<never>") {
		t.Errorf("list:\n%s", out.String())
	}

	// The join command names cluster-info's server and its CA's pin.
	ca, err := pki.LoadOrCreateCA(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	if err := ensureJoinObjects(ctx, cs, "https://10.0.0.1:6443", ca.CertPEM); err != nil {
		t.Fatal(err)
	}
	line, err := JoinCommand(ctx, cs, tok)
	if err != nil {
		t.Fatal(err)
	}
	block, _ := pem.Decode(ca.CertPEM)
	cert, _ := x509.ParseCertificate(block.Bytes)
	if want := fmt.Sprintf("svcnet node --server https://10.0.0.1:6443 --token abcdef.0123456789abcdef --discovery-token-ca-cert-hash %s", pki.PublicKeyPin(cert)); line != want {
		t.Errorf("join command %q, want %q", line, want)
	}
	if !strings.HasPrefix(pki.PublicKeyPin(cert), "sha256:") || len(pki.PublicKeyPin(cert)) != len("sha256:")+64 {
		t.Errorf("pin %q", pki.PublicKeyPin(cert))
	}

	out.Reset()
	if err := DeleteTokens(ctx, cs, &out, []string{"abcdef"}); err != nil || out.String() != "bootstrap token \"abcdef\" deleted\n" {
		t.Errorf("delete: %q %v", out.String(), err)
	}
	if err := DeleteTokens(ctx, cs, &out, []string{"not-a-token"}); err == nil {
		t.Error("delete of a malformed token accepted")
	}
}
