package builtin

import (
	"context"
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"log"
	"math/big"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// testCA is a root whose intermediate issues leaves, as a pod
// certificate signer does.
type testCA struct {
	root, inter *x509.Certificate
	interKey    crypto.Signer
}

func newTestCA(t *testing.T) *testCA {
	t.Helper()
	rootKey, interKey := ecKey(t), ecKey(t)
	tmpl := func(serial int64) *x509.Certificate {
		return &x509.Certificate{SerialNumber: big.NewInt(serial), NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
			IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign}
	}
	root := createCert(t, tmpl(1), tmpl(1), rootKey.Public(), rootKey)
	return &testCA{root: root, inter: createCert(t, tmpl(2), root, interKey.Public(), rootKey), interKey: interKey}
}

func ecKey(t *testing.T) *ecdsa.PrivateKey {
	t.Helper()
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

func createCert(t *testing.T, tmpl, parent *x509.Certificate, pub crypto.PublicKey, signer crypto.Signer) *x509.Certificate {
	t.Helper()
	der, err := x509.CreateCertificate(rand.Reader, tmpl, parent, pub, signer)
	if err != nil {
		t.Fatal(err)
	}
	c, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func pemOf(blocks ...*pem.Block) []byte {
	var out []byte
	for _, b := range blocks {
		out = append(out, pem.EncodeToMemory(b)...)
	}
	return out
}

// writeFile writes b to a file of dir and returns its path.
func writeFile(t *testing.T, dir, name string, b []byte) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, b, 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// credentialBundleFile writes a podCertificate projection's credential
// bundle of a new key: the key, then the leaf (with the SPIFFE ID and for
// 127.0.0.1) and the intermediate.
func (ca *testCA) credentialBundleFile(t *testing.T, dir, name, spiffeID string) string {
	t.Helper()
	key := ecKey(t)
	id, err := url.Parse(spiffeID)
	if err != nil {
		t.Fatal(err)
	}
	leaf := createCert(t, &x509.Certificate{SerialNumber: big.NewInt(time.Now().UnixNano()), URIs: []*url.URL{id},
		IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)}, NotBefore: time.Now().Add(-time.Minute), NotAfter: time.Now().Add(time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth, x509.ExtKeyUsageServerAuth}},
		ca.inter, key.Public(), ca.interKey)
	der, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	return writeFile(t, dir, name, pemOf(&pem.Block{Type: "PRIVATE KEY", Bytes: der},
		&pem.Block{Type: "CERTIFICATE", Bytes: leaf.Raw}, &pem.Block{Type: "CERTIFICATE", Bytes: ca.inter.Raw}))
}

func (ca *testCA) trustBundleFile(t *testing.T, dir string) string {
	t.Helper()
	return writeFile(t, dir, "trust.pem", pemOf(&pem.Block{Type: "CERTIFICATE", Bytes: ca.root.Raw}))
}

// syncBuffer is a log's output that the test reads while it is written.
type syncBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// agnhost mtlsserver answers a client whose certificate chains to its
// trust bundle with the client's SPIFFE ID, and refuses one of another CA;
// agnhost mtlsclient polls it with its credential bundle and logs the
// answer, as upstream's pod certificate test reads it.
func TestMTLS(t *testing.T) {
	dir := t.TempDir()
	ca, other := newTestCA(t), newTestCA(t)
	trust := ca.trustBundleFile(t, dir)
	serverCreds := ca.credentialBundleFile(t, dir, "server.pem", "spiffe://cluster.local/ns/ns/sa/server")
	clientCreds := ca.credentialBundleFile(t, dir, "client.pem", "spiffe://cluster.local/ns/ns/sa/client")
	strangerCreds := other.credentialBundleFile(t, dir, "stranger.pem", "spiffe://cluster.local/ns/ns/sa/stranger")
	port := freePort(t, "tcp")
	startAgnhost(t, "mtlsserver", fmt.Sprintf("--listen=127.0.0.1:%d", port), "--server-creds="+serverCreds, "--spiffe-trust-bundle="+trust)
	target := fmt.Sprintf("https://127.0.0.1:%d/spiffe-echo", port)

	ctx := context.Background()
	if got, err := fetchMTLS(ctx, target, trust, clientCreds); err != nil || got != "Client Identity: spiffe://cluster.local/ns/ns/sa/client" {
		t.Errorf("the client's identity: %q, %v", got, err)
	}
	if _, err := fetchMTLS(ctx, target, trust, strangerCreds); err == nil || !strings.Contains(err.Error(), "non-2xx status 401") {
		t.Errorf("a client of another CA: %v, want 401", err)
	}
	// The server's certificate is checked too.
	if _, err := fetchMTLS(ctx, target, other.trustBundleFile(t, t.TempDir()), strangerCreds); err == nil || !strings.Contains(err.Error(), "certificate signed by unknown authority") {
		t.Errorf("a server of another CA: %v", err)
	}
	if _, err := fetchMTLS(ctx, target, trust, trust); err == nil || err.Error() != "client credential bundle had no private key" {
		t.Errorf("a bundle without a key: %v", err)
	}

	var logged syncBuffer
	log.SetOutput(&logged)
	t.Cleanup(func() { log.SetOutput(os.Stderr) })
	interval := mtlsPollInterval
	mtlsPollInterval = 10 * time.Millisecond
	t.Cleanup(func() { mtlsPollInterval = interval })
	startAgnhost(t, "mtlsclient", "--fetch-url="+target, "--server-trust-bundle="+trust, "--client-cred-bundle="+clientCreds)
	deadline := time.Now().Add(10 * time.Second)
	for !strings.Contains(logged.String(), "Got response body: Client Identity: spiffe://cluster.local/ns/ns/sa/client\n") {
		if time.Now().After(deadline) {
			t.Fatalf("mtlsclient logged %q", logged.String())
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// Both commands want all their flags.
func TestMTLSFlags(t *testing.T) {
	for _, args := range [][]string{
		{"mtlsserver", "--listen=127.0.0.1:0"},
		{"mtlsclient", "--fetch-url=https://server/spiffe-echo", "--server-trust-bundle=/x"},
	} {
		if err := agnhost(context.Background(), args); err == nil || err.Error() != "missing required flags" {
			t.Errorf("agnhost %v: %v, want missing required flags", args, err)
		}
	}
	err := agnhost(context.Background(), []string{"mtlsclient", "--fetch-url=server", "--server-trust-bundle=/x", "--client-cred-bundle=/y"})
	if err == nil || !strings.HasPrefix(err.Error(), "invalid --fetch-url: ") {
		t.Errorf("a relative URL: %v", err)
	}
}
