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
