package trustbundle

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"slices"
	"strings"
	"testing"
	"time"

	certificatesv1 "k8s.io/api/certificates/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
)

// caPEM is a self-signed CA certificate named cn, as PEM.
func caPEM(t *testing.T, cn string) string {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: cn}, IsCA: true,
		BasicConstraintsValid: true, NotBefore: time.Now(), NotAfter: time.Now().Add(time.Hour)}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	return string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}))
}

func bundle(name, signer string, labels map[string]string, pems ...string) *certificatesv1.ClusterTrustBundle {
	return &certificatesv1.ClusterTrustBundle{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels},
		Spec: certificatesv1.ClusterTrustBundleSpec{SignerName: signer, TrustBundle: strings.Join(pems, "")}}
}

// certs are the PEM blocks of b, in order.
func certs(t *testing.T, b []byte) []string {
	t.Helper()
	var out []string
	for {
		var block *pem.Block
		block, b = pem.Decode(b)
		if block == nil {
			break
		}
		out = append(out, string(pem.EncodeToMemory(block)))
	}
	if len(b) != 0 {
		t.Fatalf("trailing bytes after the certificates: %q", b)
	}
	return out
}

func sorted(s []string) []string {
	s = slices.Clone(s)
	slices.Sort(s)
	return s
}

// waitSynced asks until the informer has read the bundles.
func waitSynced(t *testing.T, m *Manager) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		_, err := m.ByName("any", true)
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatal(err)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestAnchors: by name and by signer and labels, the certificates of the
// matching bundles, each once; a nil selector matches nothing, an empty
// one everything of the signer; what matches nothing is an error unless
// optional.
func TestAnchors(t *testing.T) {
	a, b, c := caPEM(t, "a"), caPEM(t, "b"), caPEM(t, "c")
	cs := fake.NewClientset(
		bundle("plain", "", nil, a, b),
		bundle("example.com:one:1", "example.com/one", map[string]string{"alive": "true"}, a),
		bundle("example.com:one:2", "example.com/one", map[string]string{"alive": "true"}, b, a),
		bundle("example.com:one:3", "example.com/one", map[string]string{"alive": "false"}, c),
		bundle("example.com:two:1", "example.com/two", map[string]string{"alive": "true"}, c),
	)
	ctx, cancel := context.WithCancel(context.Background())
	m := New(ctx, cs)
	t.Cleanup(func() {
		cancel()
		m.Shutdown()
	})
	waitSynced(t, m)

	got, err := m.ByName("plain", false)
	if err != nil || !slices.Equal(sorted(certs(t, got)), sorted([]string{a, b})) {
		t.Errorf("ByName(plain): %v %q", err, got)
	}
	if got, err := m.ByName("missing", true); err != nil || len(got) != 0 {
		t.Errorf("ByName(missing, optional): %v %q, want empty", err, got)
	}
	if _, err := m.ByName("missing", false); err == nil || !strings.Contains(err.Error(), "while getting ClusterTrustBundle") {
		t.Errorf("ByName(missing): %v", err)
	}

	for _, tc := range []struct {
		name     string
		selector *metav1.LabelSelector
		want     []string
	}{
		{"alive", &metav1.LabelSelector{MatchLabels: map[string]string{"alive": "true"}}, []string{a, b}},
		{"all of the signer", &metav1.LabelSelector{}, []string{a, b, c}},
	} {
		got, err := m.BySigner("example.com/one", tc.selector, false)
		if err != nil || !slices.Equal(sorted(certs(t, got)), sorted(tc.want)) {
			t.Errorf("%s: %v %q", tc.name, err, got)
		}
		again, _ := m.BySigner("example.com/one", tc.selector, false)
		if string(again) != string(got) {
			t.Errorf("%s: the order changed from one read to the next", tc.name)
		}
	}
	for _, sel := range []*metav1.LabelSelector{nil, {MatchLabels: map[string]string{"alive": "unknown"}}} {
		if got, err := m.BySigner("example.com/one", sel, true); err != nil || len(got) != 0 {
			t.Errorf("BySigner(%v, optional): %v %q, want empty", sel, err, got)
		}
		if _, err := m.BySigner("example.com/one", sel, false); err == nil || err.Error() != "combination of signerName and labelSelector matched zero ClusterTrustBundles" {
			t.Errorf("BySigner(%v): %v", sel, err)
		}
	}
}
