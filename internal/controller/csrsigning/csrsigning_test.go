package csrsigning

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	capi "k8s.io/api/certificates/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/svcnet/svcnet/internal/controller"
	"github.com/svcnet/svcnet/internal/controller/controllertest"
)

// testSigner signs with a new CA that expires in caLife.
func testSigner(t *testing.T, caLife, duration time.Duration) *Signer {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "ca"}, NotBefore: time.Now().Add(-time.Hour),
		NotAfter: time.Now().Add(caLife), IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, key.Public(), key)
	if err != nil {
		t.Fatal(err)
	}
	kder, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	o := Options{CertFile: filepath.Join(dir, "ca.crt"), KeyFile: filepath.Join(dir, "ca.key"), Duration: duration}
	if err := os.WriteFile(o.CertFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(o.KeyFile, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kder}), 0o600); err != nil {
		t.Fatal(err)
	}
	s, err := NewSigner(o)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func testRequest(t *testing.T, subject pkix.Name, dns ...string) []byte {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	der, err := x509.CreateCertificateRequest(rand.Reader, &x509.CertificateRequest{Subject: subject, DNSNames: dns}, key)
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE REQUEST", Bytes: der})
}

func parse(t *testing.T, data []byte) *x509.Certificate {
	t.Helper()
	block, _ := pem.Decode(data)
	if block == nil {
		t.Fatalf("no PEM: %q", data)
	}
	c, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func TestDuration(t *testing.T) {
	s := testSigner(t, 24*time.Hour, 10*time.Hour)
	for _, tt := range []struct {
		seconds *int32
		want    time.Duration
	}{
		{nil, 10 * time.Hour},
		{ptr.To[int32](3600), time.Hour},
		{ptr.To[int32](60), 10 * time.Minute},
		{ptr.To[int32](86400), 10 * time.Hour},
	} {
		if got := s.Duration(tt.seconds); got != tt.want {
			t.Errorf("Duration(%v) = %s, want %s", ptr.Deref(tt.seconds, 0), got, tt.want)
		}
	}
}

func TestSign(t *testing.T) {
	s := testSigner(t, 24*time.Hour, DefaultDuration)
	now := time.Now().Truncate(time.Second)
	s.now = func() time.Time { return now }
	der, _ := pem.Decode(testRequest(t, pkix.Name{CommonName: "web", Organization: []string{"dev"}}, "web.example"))
	req, err := x509.ParseCertificateRequest(der.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		name      string
		seconds   *int32
		notBefore time.Time
		notAfter  time.Time
	}{
		{"short: not backdated at its end", ptr.To[int32](3600), now.Add(-backdate), now.Add(time.Hour)},
		{"long: backdated", ptr.To[int32](9 * 3600), now.Add(-backdate), now.Add(9*time.Hour - backdate)},
		{"past the CA: cut", nil, now.Add(-backdate), s.ca.NotAfter},
	} {
		pemCert, err := s.Sign(req, []capi.KeyUsage{capi.UsageDigitalSignature, capi.UsageServerAuth, capi.UsageClientAuth}, tt.seconds)
		if err != nil {
			t.Fatal(err)
		}
		c := parse(t, pemCert)
		if !c.NotBefore.Equal(tt.notBefore) || !c.NotAfter.Equal(tt.notAfter) {
			t.Errorf("%s: from %s to %s, want %s to %s", tt.name, c.NotBefore, c.NotAfter, tt.notBefore, tt.notAfter)
		}
		if c.Subject.CommonName != "web" || !slices.Equal(c.Subject.Organization, []string{"dev"}) || !slices.Equal(c.DNSNames, []string{"web.example"}) || c.IsCA ||
			c.KeyUsage != x509.KeyUsageDigitalSignature || !slices.Equal(c.ExtKeyUsage, []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth}) {
			t.Errorf("%s: certificate %+v", tt.name, c)
		}
		if err := c.CheckSignatureFrom(s.ca); err != nil {
			t.Errorf("%s: not signed by the CA: %v", tt.name, err)
		}
	}
	if _, err := s.Sign(req, []capi.KeyUsage{"fly"}, nil); err == nil || err.Error() != `unrecognized usage values: ["fly"]` {
		t.Errorf("unknown usage: %v", err)
	}
	s.now = func() time.Time { return s.ca.NotAfter.Add(time.Hour) }
	if _, err := s.Sign(req, []capi.KeyUsage{capi.UsageClientAuth}, nil); err == nil {
		t.Error("signed with an expired CA")
	}
}

func csr(name, signer string, req []byte, approved bool, usages ...capi.KeyUsage) *capi.CertificateSigningRequest {
	c := &capi.CertificateSigningRequest{ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: capi.CertificateSigningRequestSpec{Request: req, SignerName: signer, Usages: usages}}
	if approved {
		c.Status.Conditions = []capi.CertificateSigningRequestCondition{{Type: capi.CertificateApproved, Status: corev1.ConditionTrue}}
	}
	return c
}

func TestController(t *testing.T) {
	s := testSigner(t, 24*time.Hour, DefaultDuration)
	user := testRequest(t, pkix.Name{CommonName: "jane"})
	node := testRequest(t, pkix.Name{CommonName: "system:node:a", Organization: []string{"system:nodes"}})
	client := []capi.KeyUsage{capi.UsageDigitalSignature, capi.UsageClientAuth}
	cs := controllertest.NewClient(
		csr("client", capi.KubeAPIServerClientSignerName, user, true, client...),
		csr("kubelet", capi.KubeAPIServerClientKubeletSignerName, node, true, client...),
		csr("not-a-node", capi.KubeAPIServerClientKubeletSignerName, user, true, client...),
		csr("server-usage", capi.KubeAPIServerClientSignerName, user, true, capi.UsageServerAuth),
		csr("pending", capi.KubeAPIServerClientSignerName, user, false, client...),
		csr("other-signer", "example.com/signer", user, true, client...),
	)
	var c *Controller
	controllertest.Start(t, cs, func(_ context.Context, d controller.Deps) []func(context.Context) {
		var err error
		if c, err = New(d, s); err != nil {
			t.Fatal(err)
		}
		return []func(context.Context){c.Run}
	})
	get := func(name string) *capi.CertificateSigningRequest {
		c, err := cs.CertificatesV1().CertificateSigningRequests().Get(context.Background(), name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	failed := func(name, message string) func() string {
		return func() string {
			c := get(name)
			if n := len(c.Status.Conditions); n != 2 || c.Status.Conditions[1].Type != capi.CertificateFailed ||
				c.Status.Conditions[1].Reason != "SignerValidationFailure" || c.Status.Conditions[1].Message != message {
				return name + ": conditions " + c.Status.String()
			}
			return ""
		}
	}
	controllertest.Eventually(t, failed("not-a-node", "subject organization is not system:nodes"))
	controllertest.Eventually(t, failed("server-usage", "invalid usage for client certificate: server auth"))
	for _, name := range []string{"client", "kubelet"} {
		controllertest.Eventually(t, func() string {
			if len(get(name).Status.Certificate) == 0 {
				return name + " not issued"
			}
			return ""
		})
	}
	if c := parse(t, get("kubelet").Status.Certificate); c.Subject.CommonName != "system:node:a" {
		t.Errorf("kubelet certificate for %s", c.Subject)
	}
	for _, name := range []string{"pending", "other-signer"} {
		cs.ClearActions()
		if err := c.handle(context.Background(), get(name)); err != nil {
			t.Errorf("%s: %v", name, err)
		}
		for _, a := range cs.Actions() {
			if a.GetVerb() == "update" {
				t.Errorf("%s: %v", name, a)
			}
		}
	}
}
