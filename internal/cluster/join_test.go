package cluster

import (
	"context"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	certificatesv1 "k8s.io/api/certificates/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/cluster-bootstrap/token/jws"

	"github.com/svcnet/svcnet/internal/pki"
)

// TestDiscover serves cluster-info over TLS and checks what discovery
// accepts: the right signature and pin; not another token's signature, a
// pin of another CA, or a kubeconfig that changes between the reads.
func TestDiscover(t *testing.T) {
	srv := httptest.NewUnstartedServer(nil)
	srv.StartTLS()
	defer srv.Close()
	caPEM := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw})
	kubeconfig, err := ClusterInfoKubeconfig("https://10.0.0.1:6443", caPEM)
	if err != nil {
		t.Fatal(err)
	}
	const token = "abcdef.0123456789abcdef"
	sig, err := jws.ComputeDetachedSignature(string(kubeconfig), "abcdef", "0123456789abcdef")
	if err != nil {
		t.Fatal(err)
	}
	var reads atomic.Int32
	var second atomic.Value // the kubeconfig of later reads
	second.Store(string(kubeconfig))
	srv.Config.Handler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/api/v1/namespaces/kube-public/configmaps/cluster-info" || r.Header.Get("Authorization") != "" {
			http.Error(w, "unexpected "+r.URL.Path, http.StatusForbidden)
			return
		}
		kc := string(kubeconfig)
		if reads.Add(1)%2 == 0 {
			kc = second.Load().(string)
		}
		cm := corev1.ConfigMap{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "ConfigMap"},
			ObjectMeta: metav1.ObjectMeta{Name: "cluster-info", Namespace: "kube-public"},
			Data:       map[string]string{"kubeconfig": kc, "jws-kubeconfig-abcdef": sig}}
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(cm)
	})
	pin := pki.PublicKeyPin(srv.Certificate())
	ctx := context.Background()
	cfg, err := discover(ctx, JoinOptions{Server: srv.URL, Token: token, CACertHashes: []string{"sha256:00", pin}})
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Host != "https://10.0.0.1:6443" || string(cfg.CAData) != string(caPEM) || cfg.BearerToken != "" {
		t.Errorf("discovered %+v", cfg)
	}
	other, _ := pki.LoadOrCreateCA(t.TempDir())
	for _, c := range []struct {
		o    JoinOptions
		want string
	}{
		{JoinOptions{Server: srv.URL, Token: "abcdef.0123456789abcdee", CACertHashes: []string{pin}}, "failed to verify JWS signature"},
		{JoinOptions{Server: srv.URL, Token: token, CACertHashes: []string{pki.PublicKeyPin(other.Cert)}}, "is invalid"},
		{JoinOptions{Server: srv.URL, Token: token}, "--discovery-token-ca-cert-hash is required"},
	} {
		if _, err := discover(ctx, c.o); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%+v: %v, want %q", c.o, err, c.want)
		}
	}
	reads.Store(0)
	second.Store(string(kubeconfig) + "# another\n")
	if _, err := discover(ctx, JoinOptions{Server: srv.URL, Token: token, CACertHashes: []string{pin}}); err == nil ||
		!strings.Contains(err.Error(), "was different from the first") {
		t.Errorf("changed kubeconfig: %v", err)
	}
}

// TestRequestNodeCertificate plays the approver and signer on a fake: the
// CSR is the kubelet's, and the certificate issued comes back.
func TestRequestNodeCertificate(t *testing.T) {
	ca, err := pki.LoadOrCreateCA(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	issued, err := ca.Client(t.TempDir(), "node", "system:node:n1", []string{"system:nodes"})
	if err != nil {
		t.Fatal(err)
	}
	cs := fake.NewClientset()
	var req *certificatesv1.CertificateSigningRequest
	cs.PrependReactor("create", "certificatesigningrequests", func(a k8stesting.Action) (bool, runtime.Object, error) {
		req = a.(k8stesting.CreateAction).GetObject().(*certificatesv1.CertificateSigningRequest).DeepCopy()
		req.UID = "uid-1"
		req.Status.Conditions = []certificatesv1.CertificateSigningRequestCondition{{Type: certificatesv1.CertificateApproved, Status: corev1.ConditionTrue}}
		req.Status.Certificate = issued.CertPEM
		return false, nil, cs.Tracker().Create(certificatesv1.SchemeGroupVersion.WithResource("certificatesigningrequests"), req, "")
	})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	pair, err := requestNodeCertificate(ctx, cs, "n1")
	if err != nil {
		t.Fatal(err)
	}
	if string(pair.CertPEM) != string(issued.CertPEM) || !strings.Contains(string(pair.KeyPEM), "EC PRIVATE KEY") {
		t.Errorf("pair = %s", pair.CertPEM)
	}
	block, _ := pem.Decode(req.Spec.Request)
	cr, err := x509.ParseCertificateRequest(block.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	if cr.Subject.CommonName != "system:node:n1" || !slices.Equal(cr.Subject.Organization, []string{"system:nodes"}) ||
		req.Spec.SignerName != "kubernetes.io/kube-apiserver-client-kubelet" || !strings.HasPrefix(req.Name, "node-csr-") ||
		!slices.Equal(req.Spec.Usages, []certificatesv1.KeyUsage{"digital signature", "client auth"}) {
		t.Errorf("CSR %s: subject %v, spec %+v", req.Name, cr.Subject, req.Spec)
	}

	// A kubeconfig with a valid certificate is reused; one expired is not.
	path := filepath.Join(t.TempDir(), "kubelet.conf")
	if ok, err := validKubeconfig(path, time.Now()); ok || err != nil {
		t.Errorf("missing kubeconfig: %v %v", ok, err)
	}
	if err := WriteKubeconfig(path, "https://10.0.0.1:6443", ca.CertPEM, pair); err != nil {
		t.Fatal(err)
	}
	if ok, err := validKubeconfig(path, time.Now()); !ok || err != nil {
		t.Errorf("valid kubeconfig: %v %v", ok, err)
	}
	if ok, _ := validKubeconfig(path, time.Now().Add(20*365*24*time.Hour)); ok {
		t.Error("expired certificate taken as valid")
	}
}
