// Package serviceaccount issues and checks service account tokens as
// kube-apiserver does: JWTs signed RS256 with the cluster's service
// account key (kubeadm's sa.key and sa.pub in the data dir's pki), the
// key ID upstream derives from the public key, and upstream's claims
// (subject system:serviceaccount:<ns>:<name>, audiences, expiry, and
// under "kubernetes.io" the namespace, service account and the pod,
// node or secret the token is bound to). A token is accepted while it
// has not expired and every object it names still exists with the same
// UID; a token bound to a deleted pod is refused.
package serviceaccount

import (
	"crypto"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/pem"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	jose "github.com/go-jose/go-jose/v4"
)

// Key is the service account signing key.
type Key struct {
	private *rsa.PrivateKey
	id      string
}

// LoadOrCreateKey reads dir/sa.key, creating it (RSA 2048, as kubeadm)
// and dir/sa.pub if absent.
func LoadOrCreateKey(dir string) (*Key, error) {
	k, err := LoadKeyFile(filepath.Join(dir, "sa.key"))
	if errors.Is(err, os.ErrNotExist) {
		return createKey(dir)
	}
	return k, err
}

// LoadKeyFile reads an RSA private key in PEM (PKCS #1 or #8; the first
// such block), as kube-controller-manager's
// --service-account-private-key-file.
func LoadKeyFile(path string) (*Key, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read service account key: %w", err)
	}
	for {
		var block *pem.Block
		if block, b = pem.Decode(b); block == nil {
			return nil, fmt.Errorf("service account key %s: no RSA private key", path)
		}
		var priv any
		switch block.Type {
		case "RSA PRIVATE KEY":
			priv, err = x509.ParsePKCS1PrivateKey(block.Bytes)
		case "PRIVATE KEY":
			priv, err = x509.ParsePKCS8PrivateKey(block.Bytes)
		default:
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("service account key %s: %w", path, err)
		}
		rk, ok := priv.(*rsa.PrivateKey)
		if !ok {
			return nil, fmt.Errorf("service account key %s: not an RSA key", path)
		}
		return newKey(rk)
	}
}

func createKey(dir string) (*Key, error) {
	rk, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		return nil, fmt.Errorf("generate service account key: %w", err)
	}
	pub, err := x509.MarshalPKIXPublicKey(&rk.PublicKey)
	if err != nil {
		return nil, fmt.Errorf("encode service account public key: %w", err)
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("create %s: %w", dir, err)
	}
	// The public key first: a key without it is never left behind.
	if err := os.WriteFile(filepath.Join(dir, "sa.pub"), pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: pub}), 0o644); err != nil {
		return nil, fmt.Errorf("write service account public key: %w", err)
	}
	priv := pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(rk)})
	if err := os.WriteFile(filepath.Join(dir, "sa.key"), priv, 0o600); err != nil {
		return nil, fmt.Errorf("write service account key: %w", err)
	}
	return newKey(rk)
}

func newKey(rk *rsa.PrivateKey) (*Key, error) {
	id, err := keyID(&rk.PublicKey)
	if err != nil {
		return nil, err
	}
	return &Key{private: rk, id: id}, nil
}

// keyID is upstream's key ID: the unpadded URL-safe base64 of the SHA-256
// of the public key's PKIX DER.
func keyID(pub crypto.PublicKey) (string, error) {
	der, err := x509.MarshalPKIXPublicKey(pub)
	if err != nil {
		return "", fmt.Errorf("encode service account public key: %w", err)
	}
	sum := sha256.Sum256(der)
	return base64.RawURLEncoding.EncodeToString(sum[:]), nil
}

// ID is the key's ID, the "kid" of the tokens it signs.
func (k *Key) ID() string { return k.id }

// JWKS is the public key as a JSON Web Key Set, as upstream serves it at
// /openid/v1/jwks.
func (k *Key) JWKS() jose.JSONWebKeySet {
	return jose.JSONWebKeySet{Keys: []jose.JSONWebKey{{Key: &k.private.PublicKey, KeyID: k.id, Algorithm: string(jose.RS256), Use: "sig"}}}
}
