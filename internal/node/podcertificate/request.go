package podcertificate

import (
	"bytes"
	"context"
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/pem"
	"fmt"

	certificatesv1 "k8s.io/api/certificates/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// request makes a key of the projection's type and asks the signer for a
// certificate of it, filling the request as the kubelet does; it returns
// the request as created and the key (PEM).
func (m *Manager) request(ctx context.Context, pod *corev1.Pod, src *corev1.PodCertificateProjection) (*certificatesv1.PodCertificateRequest, []byte, error) {
	// The service account's UID is read at each request, as the
	// kubelet does.
	sa, err := m.cfg.Client.CoreV1().ServiceAccounts(pod.Namespace).Get(ctx, pod.Spec.ServiceAccountName, metav1.GetOptions{})
	if err != nil {
		return nil, nil, fmt.Errorf("while fetching service account: %w", err)
	}
	node, err := m.cfg.Nodes.Get(m.cfg.NodeName)
	if err != nil {
		return nil, nil, fmt.Errorf("while getting node object from local cache: %w", err)
	}
	keyPEM, stub, err := newKey(src.KeyType)
	if err != nil {
		return nil, nil, fmt.Errorf("while generating keypair: %w", err)
	}
	r := &certificatesv1.PodCertificateRequest{
		ObjectMeta: metav1.ObjectMeta{
			Namespace:    pod.Namespace,
			GenerateName: "req-",
			// Deleted with the pod.
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "v1", Kind: "Pod", Name: pod.Name, UID: pod.UID}},
		},
		Spec: certificatesv1.PodCertificateRequestSpec{
			SignerName:                src.SignerName,
			PodName:                   pod.Name,
			PodUID:                    pod.UID,
			ServiceAccountName:        pod.Spec.ServiceAccountName,
			ServiceAccountUID:         sa.UID,
			NodeName:                  types.NodeName(m.cfg.NodeName),
			NodeUID:                   node.UID,
			MaxExpirationSeconds:      src.MaxExpirationSeconds,
			StubPKCS10Request:         stub,
			UnverifiedUserAnnotations: src.UserAnnotations,
		},
	}
	created, err := m.cfg.Client.CertificatesV1().PodCertificateRequests(pod.Namespace).Create(ctx, r, metav1.CreateOptions{})
	if err != nil {
		return nil, nil, fmt.Errorf("while creating on API: %w", err)
	}
	return created, keyPEM, nil
}

// newKey makes a private key of keyType, one of the API's key types, and
// returns it as PKCS#8 PEM with the stub PKCS#10 request that proves its
// possession: an empty request signed with the key.
func newKey(keyType string) (keyPEM, stub []byte, err error) {
	var key crypto.Signer
	switch keyType {
	case "RSA3072":
		key, err = rsa.GenerateKey(rand.Reader, 3072)
	case "RSA4096":
		key, err = rsa.GenerateKey(rand.Reader, 4096)
	case "ECDSAP256":
		key, err = ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	case "ECDSAP384":
		key, err = ecdsa.GenerateKey(elliptic.P384(), rand.Reader)
	case "ECDSAP521":
		key, err = ecdsa.GenerateKey(elliptic.P521(), rand.Reader)
	case "ED25519":
		_, key, err = ed25519.GenerateKey(rand.Reader)
	default:
		return nil, nil, fmt.Errorf("unknown key type %q", keyType)
	}
	if err != nil {
		return nil, nil, fmt.Errorf("while generating %s key: %w", keyType, err)
	}
	stub, err = x509.CreateCertificateRequest(rand.Reader, &x509.CertificateRequest{}, key)
	if err != nil {
		return nil, nil, fmt.Errorf("while generating stub PKCS#10 request: %w", err)
	}
	der, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return nil, nil, fmt.Errorf("while marshaling key to PKCS#8: %w", err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}), stub, nil
}

// cleanChain is the chain's certificates alone, as plain PEM blocks:
// whatever the signer wrote between or in the blocks' headers is dropped.
func cleanChain(chain string) []byte {
	var out bytes.Buffer
	rest := []byte(chain)
	for {
		var b *pem.Block
		if b, rest = pem.Decode(rest); b == nil {
			return out.Bytes()
		}
		_ = pem.Encode(&out, &pem.Block{Type: "CERTIFICATE", Bytes: b.Bytes})
	}
}
