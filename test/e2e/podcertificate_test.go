package e2e

import (
	"context"
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	certificatesv1 "k8s.io/api/certificates/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"
)

// testSignerName is the signer of the pod certificate test.
const testSignerName = "e2e.example.com/test"

// podCertSigner issues the PodCertificateRequests of one signer with a CA
// of its own, as upstream's e2e tests' signer does: a certificate for the
// requested key, for the pod's SPIFFE ID, living a day or the request's
// maxExpirationSeconds when shorter, from two minutes back.
type podCertSigner struct {
	client kubernetes.Interface
	key    crypto.Signer
	ca     *x509.Certificate
}

func newPodCertSigner(t *testing.T, client kubernetes.Interface) *podCertSigner {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(48 * time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, key.Public(), key)
	if err != nil {
		t.Fatal(err)
	}
	ca, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	return &podCertSigner{client: client, key: key, ca: ca}
}

// run issues the pending requests of testSignerName every 200ms until
// ctx ends.
func (s *podCertSigner) run(ctx context.Context, t *testing.T) {
	tick := time.NewTicker(200 * time.Millisecond)
	defer tick.Stop()
	for {
		list, err := s.client.CertificatesV1().PodCertificateRequests("").List(ctx, metav1.ListOptions{
			FieldSelector: "spec.signerName=" + testSignerName})
		if err == nil {
			for i := range list.Items {
				if r := &list.Items[i]; len(r.Status.Conditions) == 0 {
					err = errors.Join(err, s.issue(ctx, r))
				}
			}
		}
		if err != nil && ctx.Err() == nil {
			t.Logf("pod certificate signer: %v", err)
		}
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}

func (s *podCertSigner) issue(ctx context.Context, r *certificatesv1.PodCertificateRequest) error {
	stub, err := x509.ParseCertificateRequest(r.Spec.StubPKCS10Request)
	if err != nil {
		return fmt.Errorf("request %s: %w", r.Name, err)
	}
	life := 24 * time.Hour
	if m := r.Spec.MaxExpirationSeconds; m != nil && time.Duration(*m)*time.Second < life {
		life = time.Duration(*m) * time.Second
	}
	notBefore := time.Now().Add(-2 * time.Minute).Truncate(time.Second)
	notAfter := notBefore.Add(life)
	id := &url.URL{Scheme: "spiffe", Host: "cluster.local", Path: "/ns/" + r.Namespace + "/sa/" + r.Spec.ServiceAccountName}
	der, err := x509.CreateCertificate(rand.Reader, &x509.Certificate{SerialNumber: big.NewInt(notBefore.UnixNano()),
		URIs: []*url.URL{id}, NotBefore: notBefore, NotAfter: notAfter, KeyUsage: x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth, x509.ExtKeyUsageServerAuth}}, s.ca, stub.PublicKey, s.key)
	if err != nil {
		return fmt.Errorf("request %s: %w", r.Name, err)
	}
	r = r.DeepCopy()
	r.Status = certificatesv1.PodCertificateRequestStatus{
		Conditions: []metav1.Condition{{Type: certificatesv1.PodCertificateRequestConditionTypeIssued, Status: metav1.ConditionTrue,
			Reason: "Issued", Message: "issued by the test", LastTransitionTime: metav1.Now()}},
		CertificateChain: string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})),
		NotBefore:        ptr.To(metav1.NewTime(notBefore)),
		BeginRefreshAt:   ptr.To(metav1.NewTime(notAfter.Add(-30 * time.Minute))),
		NotAfter:         ptr.To(metav1.NewTime(notAfter)),
	}
	if _, err := s.client.CertificatesV1().PodCertificateRequests(r.Namespace).UpdateStatus(ctx, r, metav1.UpdateOptions{}); err != nil {
		return fmt.Errorf("issue %s: %w", r.Name, err)
	}
	return nil
}

// checkCredentials checks a key and chain (PEM) a pod holds: a PKCS#8
// key, and a chain whose leaf is for that key, issued by the signer to
// the pod's service account, living life.
func (s *podCertSigner) checkCredentials(t *testing.T, keyPEM, chainPEM string, life time.Duration) {
	t.Helper()
	block, rest := pem.Decode([]byte(keyPEM))
	if block == nil || block.Type != "PRIVATE KEY" || strings.TrimSpace(string(rest)) != "" {
		t.Fatalf("the key is not one PRIVATE KEY block:\n%s", keyPEM)
	}
	key, err := x509.ParsePKCS8PrivateKey(block.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	block, _ = pem.Decode([]byte(chainPEM))
	if block == nil || block.Type != "CERTIFICATE" {
		t.Fatalf("the chain does not start with a certificate:\n%s", chainPEM)
	}
	leaf, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	if !leaf.PublicKey.(interface{ Equal(crypto.PublicKey) bool }).Equal(key.(crypto.Signer).Public()) {
		t.Error("the leaf certificate is not for the pod's key")
	}
	if err := leaf.CheckSignatureFrom(s.ca); err != nil {
		t.Errorf("the leaf certificate is not the signer's: %v", err)
	}
	if len(leaf.URIs) != 1 || leaf.URIs[0].String() != "spiffe://cluster.local/ns/default/sa/default" {
		t.Errorf("the leaf certificate names %v, want the pod's service account", leaf.URIs)
	}
	if got := leaf.NotAfter.Sub(leaf.NotBefore); got != life {
		t.Errorf("the leaf certificate lives %s, want %s", got, life)
	}
}

// TestPodCertificates: a pod's podCertificate projection gets a key the
// node made and the certificate a signer (the test's) issued for it
// through a PodCertificateRequest, before the pod's containers start: in
// one credential bundle (key, then chain), or in a key file and a chain
// file; the certificate lives maxExpirationSeconds, or the signer's day.
func TestPodCertificates(t *testing.T) {
	t.Parallel()
	c := startNodeCluster(t)
	signer := newPodCertSigner(t, c.clientset())
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() { signer.run(ctx, t) })
	t.Cleanup(func() {
		cancel()
		wg.Wait()
	})

	c.pod("bundle", "busybox", fmt.Sprintf(`    command: [sleep, "3600"]
    volumeMounts: [{name: tls, mountPath: /run/tls}]
  volumes:
  - name: tls
    projected:
      sources:
      - podCertificate: {signerName: %s, keyType: ECDSAP256, maxExpirationSeconds: 3600, credentialBundlePath: bundle.pem}
`, testSignerName))
	c.pod("split", "busybox", fmt.Sprintf(`    command: [sleep, "3600"]
    volumeMounts: [{name: tls, mountPath: /run/tls}]
  volumes:
  - name: tls
    projected:
      sources:
      - podCertificate: {signerName: %s, keyType: ED25519, keyPath: tls.key, certificateChainPath: tls.crt}
`, testSignerName))
	c.waitReady("bundle", "True", 60*time.Second)
	c.waitReady("split", "True", 60*time.Second)

	bundle := c.must("exec", "bundle", "--", "cat", "/run/tls/bundle.pem")
	keyEnd := strings.Index(bundle, "-----END PRIVATE KEY-----\n")
	if !strings.HasPrefix(bundle, "-----BEGIN PRIVATE KEY-----\n") || keyEnd < 0 {
		t.Fatalf("the credential bundle does not start with the key:\n%s", bundle)
	}
	keyEnd += len("-----END PRIVATE KEY-----\n")
	signer.checkCredentials(t, bundle[:keyEnd], bundle[keyEnd:], time.Hour)
	signer.checkCredentials(t, c.must("exec", "split", "--", "cat", "/run/tls/tls.key"), c.must("exec", "split", "--", "cat", "/run/tls/tls.crt"), 24*time.Hour)

	// One request each, made by the node for the pod, issued.
	for _, pod := range []string{"bundle", "split"} {
		got := strings.Fields(c.must("get", "podcertificaterequests", "--field-selector", "spec.podName="+pod, "--no-headers",
			"-o", "custom-columns=NODE:.spec.nodeName,SA:.spec.serviceAccountName,STATE:.status.conditions[0].type"))
		if want := []string{nodeName, "default", "Issued"}; strings.Join(got, " ") != strings.Join(want, " ") {
			t.Errorf("the requests of %s: %v, want %v", pod, got, want)
		}
	}
}
