// Package pki creates and keeps the cluster's certificates in the data dir:
// a CA, serving certificates (the API server's, the embedded etcd member's)
// and client certificates (the admin's, written into the kubeconfig). Files
// are reused across restarts, as long as the CA signed them, so that a
// kubeconfig stays valid for the life of the data dir.
package pki

import (
	"bytes"
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/hex"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"time"
)

// validity of every certificate svcnet issues.
const validity = 10 * 365 * 24 * time.Hour

// CA is a certificate authority with its key.
type CA struct {
	Cert    *x509.Certificate
	Key     crypto.Signer
	CertPEM []byte
}

// Pair is an issued certificate and key, PEM-encoded.
type Pair struct {
	CertPEM, KeyPEM []byte
}

// TLS returns the pair as a tls.Certificate.
func (p Pair) TLS() (tls.Certificate, error) { return tls.X509KeyPair(p.CertPEM, p.KeyPEM) }

// LoadOrCreateCA reads dir/ca.crt and dir/ca.key, creating them if absent.
func LoadOrCreateCA(dir string) (*CA, error) { return LoadOrCreateNamedCA(dir, "ca", "svcnet-ca") }

// LoadOrCreateNamedCA reads dir/name.crt and dir/name.key, creating a CA
// named cn there if absent (kubeadm's front-proxy-ca beside its ca).
func LoadOrCreateNamedCA(dir, name, cn string) (*CA, error) {
	p, err := loadPair(dir, name)
	if err == nil {
		return parseCA(p)
	}
	if !errors.Is(err, os.ErrNotExist) {
		return nil, err
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("generate CA key: %w", err)
	}
	tmpl := &x509.Certificate{
		SerialNumber:          serial(),
		Subject:               pkix.Name{CommonName: cn},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(validity),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, key.Public(), key)
	if err != nil {
		return nil, fmt.Errorf("self-sign CA: %w", err)
	}
	pair, err := encode(der, key)
	if err != nil {
		return nil, err
	}
	if err := savePair(dir, name, pair); err != nil {
		return nil, err
	}
	return parseCA(pair)
}

func parseCA(p Pair) (*CA, error) {
	tc, err := p.TLS()
	if err != nil {
		return nil, fmt.Errorf("parse CA: %w", err)
	}
	cert, err := x509.ParseCertificate(tc.Certificate[0])
	if err != nil {
		return nil, fmt.Errorf("parse CA certificate: %w", err)
	}
	signer, ok := tc.PrivateKey.(crypto.Signer)
	if !ok {
		return nil, errors.New("CA key cannot sign")
	}
	return &CA{Cert: cert, Key: signer, CertPEM: p.CertPEM}, nil
}

// Pool returns a pool holding only this CA.
func (ca *CA) Pool() *x509.CertPool {
	pool := x509.NewCertPool()
	pool.AddCert(ca.Cert)
	return pool
}

// Serving returns dir/name.crt/.key for a server with the given names and
// IPs, issuing a new pair when absent or when it no longer covers them.
func (ca *CA) Serving(dir, name string, dnsNames []string, ips []net.IP) (Pair, error) {
	return ca.named(dir, name, name, dnsNames, ips, x509.ExtKeyUsageServerAuth)
}

// Member returns dir/name.crt/.key for a member of a cluster such as
// etcd's, which serves as cn on the names and IPs and is also a client of
// its peers (and of itself): the certificate is for both, as kubeadm's etcd
// server and peer certificates. Issued as Serving's.
func (ca *CA) Member(dir, name, cn string, dnsNames []string, ips []net.IP) (Pair, error) {
	return ca.named(dir, name, cn, dnsNames, ips, x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth)
}

func (ca *CA) named(dir, name, cn string, dnsNames []string, ips []net.IP, usages ...x509.ExtKeyUsage) (Pair, error) {
	if p, err := loadPair(dir, name); err == nil && covers(ca.signed(p), dnsNames, ips) {
		return p, nil
	}
	tmpl := &x509.Certificate{
		Subject:     pkix.Name{CommonName: cn},
		DNSNames:    dnsNames,
		IPAddresses: ips,
		ExtKeyUsage: usages,
	}
	return ca.issue(dir, name, tmpl)
}

// Client returns dir/name.crt/.key for a client certificate of user and
// groups, issuing it when absent.
func (ca *CA) Client(dir, name, user string, groups []string) (Pair, error) {
	if p, err := loadPair(dir, name); err == nil && ca.signed(p) != nil {
		return p, nil
	}
	tmpl := &x509.Certificate{
		Subject:     pkix.Name{CommonName: user, Organization: groups},
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	}
	return ca.issue(dir, name, tmpl)
}

// WriteCert writes the CA's certificate (not its key) to path, as a
// bundle for a program that trusts it, unless path holds it already.
func (ca *CA) WriteCert(path string) error {
	if old, err := os.ReadFile(path); err == nil && bytes.Equal(old, ca.CertPEM) {
		return nil
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return fmt.Errorf("create %s: %w", filepath.Dir(path), err)
	}
	if err := os.WriteFile(path, ca.CertPEM, 0o644); err != nil {
		return fmt.Errorf("write the CA certificate to %s: %w", path, err)
	}
	return nil
}

func (ca *CA) issue(dir, name string, tmpl *x509.Certificate) (Pair, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return Pair{}, fmt.Errorf("generate %s key: %w", name, err)
	}
	tmpl.SerialNumber = serial()
	tmpl.NotBefore = time.Now().Add(-time.Hour)
	tmpl.NotAfter = time.Now().Add(validity)
	tmpl.KeyUsage = x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.Cert, key.Public(), ca.Key)
	if err != nil {
		return Pair{}, fmt.Errorf("sign %s: %w", name, err)
	}
	p, err := encode(der, key)
	if err != nil {
		return Pair{}, err
	}
	return p, savePair(dir, name, p)
}

// signed is p's certificate if it is valid now and this CA signed it
// (files of another CA, say before --ca-dir named a shared one, are
// issued anew), else nil.
func (ca *CA) signed(p Pair) *x509.Certificate {
	tc, err := p.TLS()
	if err != nil {
		return nil
	}
	cert, err := x509.ParseCertificate(tc.Certificate[0])
	if err != nil || time.Now().After(cert.NotAfter) || cert.CheckSignatureFrom(ca.Cert) != nil {
		return nil
	}
	return cert
}

// covers says whether cert (nil: none) is for every name and IP.
func covers(cert *x509.Certificate, dnsNames []string, ips []net.IP) bool {
	if cert == nil {
		return false
	}
	for _, n := range dnsNames {
		if cert.VerifyHostname(n) != nil {
			return false
		}
	}
	for _, ip := range ips {
		if cert.VerifyHostname(ip.String()) != nil {
			return false
		}
	}
	return true
}

func serial() *big.Int {
	n, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	if err != nil {
		panic(err) // crypto/rand does not fail on Linux
	}
	return n
}

func encode(der []byte, key *ecdsa.PrivateKey) (Pair, error) {
	kder, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return Pair{}, fmt.Errorf("marshal key: %w", err)
	}
	return Pair{
		CertPEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		KeyPEM:  pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kder}),
	}, nil
}

func loadPair(dir, name string) (Pair, error) {
	c, err := os.ReadFile(filepath.Join(dir, name+".crt"))
	if err != nil {
		return Pair{}, err
	}
	k, err := os.ReadFile(filepath.Join(dir, name+".key"))
	if err != nil {
		return Pair{}, err
	}
	return Pair{CertPEM: c, KeyPEM: k}, nil
}

// savePair writes dir/name.crt and .key; name may lead through a
// subdirectory (kubeadm's etcd/server).
func savePair(dir, name string, p Pair) error {
	sub := filepath.Dir(filepath.Join(dir, name))
	if err := os.MkdirAll(sub, 0o700); err != nil {
		return fmt.Errorf("create %s: %w", sub, err)
	}
	if err := os.WriteFile(filepath.Join(dir, name+".key"), p.KeyPEM, 0o600); err != nil {
		return fmt.Errorf("write %s key: %w", name, err)
	}
	if err := os.WriteFile(filepath.Join(dir, name+".crt"), p.CertPEM, 0o644); err != nil {
		return fmt.Errorf("write %s certificate: %w", name, err)
	}
	return nil
}

// PublicKeyPin is kubeadm's pin of a CA (--discovery-token-ca-cert-hash):
// "sha256:" and the hex SHA-256 of the certificate's DER
// SubjectPublicKeyInfo.
func PublicKeyPin(cert *x509.Certificate) string {
	sum := sha256.Sum256(cert.RawSubjectPublicKeyInfo)
	return "sha256:" + hex.EncodeToString(sum[:])
}
