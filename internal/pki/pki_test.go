package pki

import (
	"bytes"
	"crypto/x509"
	"net"
	"testing"
)

func TestCertificatesPersistAndVerify(t *testing.T) {
	dir := t.TempDir()
	ca, err := LoadOrCreateCA(dir)
	if err != nil {
		t.Fatal(err)
	}
	again, err := LoadOrCreateCA(dir)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(ca.CertPEM, again.CertPEM) {
		t.Fatal("CA was regenerated on the second load")
	}
	srv, err := ca.Serving(dir, "apiserver", []string{"localhost"}, []net.IP{net.ParseIP("127.0.0.1")})
	if err != nil {
		t.Fatal(err)
	}
	tc, err := srv.TLS()
	if err != nil {
		t.Fatal(err)
	}
	leaf, _ := x509.ParseCertificate(tc.Certificate[0])
	if _, err := leaf.Verify(x509.VerifyOptions{Roots: ca.Pool(), DNSName: "127.0.0.1"}); err != nil {
		t.Fatalf("serving certificate does not verify for 127.0.0.1: %v", err)
	}
	// A new name makes a new serving certificate; the same names reuse it.
	same, _ := ca.Serving(dir, "apiserver", []string{"localhost"}, []net.IP{net.ParseIP("127.0.0.1")})
	wider, _ := ca.Serving(dir, "apiserver", []string{"localhost", "api.example"}, nil)
	if !bytes.Equal(same.CertPEM, srv.CertPEM) || bytes.Equal(wider.CertPEM, srv.CertPEM) {
		t.Fatal("serving certificate reuse is wrong")
	}
	admin, err := ca.Client(dir, "admin", "svcnet-admin", []string{"system:masters"})
	if err != nil {
		t.Fatal(err)
	}
	ac, _ := admin.TLS()
	cert, _ := x509.ParseCertificate(ac.Certificate[0])
	if cert.Subject.CommonName != "svcnet-admin" || cert.Subject.Organization[0] != "system:masters" {
		t.Fatalf("client subject = %v", cert.Subject)
	}
	if _, err := cert.Verify(x509.VerifyOptions{Roots: ca.Pool(), KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}); err != nil {
		t.Fatalf("client certificate does not verify: %v", err)
	}
}

// TestMemberAndReissue: a member certificate is for server and client use
// under its common name; files another CA signed are issued anew.
func TestMemberAndReissue(t *testing.T) {
	dir := t.TempDir()
	ca, err := LoadOrCreateCA(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	p, err := ca.Member(dir, "server", "svcnet", []string{"localhost"}, []net.IP{net.ParseIP("127.0.0.1")})
	if err != nil {
		t.Fatal(err)
	}
	tc, _ := p.TLS()
	leaf, _ := x509.ParseCertificate(tc.Certificate[0])
	if leaf.Subject.CommonName != "svcnet" {
		t.Errorf("common name %q", leaf.Subject.CommonName)
	}
	for _, u := range []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth} {
		if _, err := leaf.Verify(x509.VerifyOptions{Roots: ca.Pool(), DNSName: "127.0.0.1", KeyUsages: []x509.ExtKeyUsage{u}}); err != nil {
			t.Errorf("usage %v: %v", u, err)
		}
	}
	client, err := ca.Client(dir, "client", "someone", nil)
	if err != nil {
		t.Fatal(err)
	}
	other, err := LoadOrCreateCA(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	if again, _ := other.Member(dir, "server", "svcnet", []string{"localhost"}, nil); bytes.Equal(again.CertPEM, p.CertPEM) {
		t.Error("another CA reused the member certificate")
	}
	reissued, _ := other.Client(dir, "client", "someone", nil)
	if bytes.Equal(reissued.CertPEM, client.CertPEM) {
		t.Error("another CA reused the client certificate")
	}
	if again, _ := other.Client(dir, "client", "someone", nil); !bytes.Equal(again.CertPEM, reissued.CertPEM) {
		t.Error("the reissued client certificate is not reused")
	}
}
