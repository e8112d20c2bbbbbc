package podcertificate

import (
	"bytes"
	"context"
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"math/big"
	"reflect"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	certificatesv1 "k8s.io/api/certificates/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	corelisters "k8s.io/client-go/listers/core/v1"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	clocktesting "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"

	"github.com/svcnet/svcnet/internal/registry/podcertificaterequest"
)

const signer = "example.com/pods"

// harness is a running manager of node n1 with one pod, web, whose volume
// tls has a podCertificate source (index 1) and a clusterTrustBundle
// source, and a CA that signs as a signer would.
type harness struct {
	t      *testing.T
	client *fake.Clientset
	m      *Manager
	clock  *clocktesting.FakePassiveClock
	pod    *corev1.Pod
	events *record.FakeRecorder
	ca     *ca

	mu      sync.Mutex
	changed int
}

func newHarness(t *testing.T) *harness {
	t.Helper()
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "web", UID: "pod-uid"},
		Spec: corev1.PodSpec{NodeName: "n1", ServiceAccountName: "web-sa", Volumes: []corev1.Volume{{Name: "tls", VolumeSource: corev1.VolumeSource{
			Projected: &corev1.ProjectedVolumeSource{Sources: []corev1.VolumeProjection{
				{ClusterTrustBundle: &corev1.ClusterTrustBundleProjection{SignerName: ptr.To(signer), Path: "ca.pem"}},
				{PodCertificate: &corev1.PodCertificateProjection{SignerName: signer, KeyType: "ECDSAP256",
					MaxExpirationSeconds: ptr.To[int32](86400), UserAnnotations: map[string]string{"example.com/role": "frontend"},
					CredentialBundlePath: "bundle.pem"}},
			}},
		}}}},
	}
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1", UID: "node-uid"}}
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "web-sa", UID: "sa-uid"}}
	h := &harness{t: t, client: fake.NewClientset(pod, node, sa), pod: pod, events: record.NewFakeRecorder(10),
		clock: clocktesting.NewFakePassiveClock(time.Now()), ca: newCA(t)}
	// The API server names a request after its generateName and stamps
	// its creation.
	var n atomic.Int32
	h.client.PrependReactor("create", "podcertificaterequests", func(a k8stesting.Action) (bool, runtime.Object, error) {
		r := a.(k8stesting.CreateAction).GetObject().(*certificatesv1.PodCertificateRequest)
		r.Name = fmt.Sprintf("%s%d", r.GenerateName, n.Add(1))
		r.CreationTimestamp = metav1.NewTime(h.clock.Now())
		return false, nil, nil
	})
	pods := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{})
	nodes := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{})
	if err := pods.Add(pod); err != nil {
		t.Fatal(err)
	}
	if err := nodes.Add(node); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	m, err := New(ctx, Config{Client: h.client, NodeName: "n1", Nodes: corelisters.NewNodeLister(nodes), Pods: corelisters.NewPodLister(pods),
		Recorder: h.events, Changed: func(p *corev1.Pod) {
			if p.UID != pod.UID {
				t.Errorf("changed pod %s, want %s", p.UID, pod.UID)
			}
			h.mu.Lock()
			h.changed++
			h.mu.Unlock()
		}})
	if err != nil {
		t.Fatal(err)
	}
	m.now = h.clock.Now
	h.m = m
	done := make(chan struct{})
	go func() {
		defer close(done)
		m.Run(ctx)
	}()
	t.Cleanup(func() {
		cancel()
		<-done
	})
	return h
}

// eventually waits for cond to say nothing.
func (h *harness) eventually(cond func() string) {
	h.t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		msg := cond()
		if msg == "" {
			return
		}
		if time.Now().After(deadline) {
			h.t.Fatal(msg)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// requests are the PodCertificateRequests made, by name.
func (h *harness) requests() map[string]*certificatesv1.PodCertificateRequest {
	h.t.Helper()
	list, err := h.client.CertificatesV1().PodCertificateRequests("ns").List(context.Background(), metav1.ListOptions{})
	if err != nil {
		h.t.Fatal(err)
	}
	out := map[string]*certificatesv1.PodCertificateRequest{}
	for i := range list.Items {
		out[list.Items[i].Name] = &list.Items[i]
	}
	return out
}

// waitRequest waits for the request name to be made.
func (h *harness) waitRequest(name string) *certificatesv1.PodCertificateRequest {
	h.t.Helper()
	var r *certificatesv1.PodCertificateRequest
	h.eventually(func() string {
		if r = h.requests()[name]; r == nil {
			return fmt.Sprintf("no request %s; requests: %v", name, h.requests())
		}
		return ""
	})
	return r
}

// credentials are the projection's, or the error.
func (h *harness) credentials() (keyPEM, chain []byte, err error) {
	return h.m.Credentials(h.pod, "tls", 1)
}

func (h *harness) changes() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.changed
}

// setStatus writes a request's status as its signer, after checking it
// as the API server would.
func (h *harness) setStatus(r *certificatesv1.PodCertificateRequest, status certificatesv1.PodCertificateRequestStatus) {
	h.t.Helper()
	next := r.DeepCopy()
	next.Status = status
	if errs := podcertificaterequest.Resource(nil).Strategy.ValidateUpdate(next, r); len(errs) > 0 {
		h.t.Fatalf("the API server would refuse the status of %s: %v", r.Name, errs)
	}
	if _, err := h.client.CertificatesV1().PodCertificateRequests(r.Namespace).UpdateStatus(context.Background(), next, metav1.UpdateOptions{}); err != nil {
		h.t.Fatal(err)
	}
}

// issue issues r, a certificate for the key of its stub request that
// started two minutes ago (the API server's clock is the real one) and
// lives for life, to be refreshed after refresh; it returns the chain the
// signer wrote.
func (h *harness) issue(r *certificatesv1.PodCertificateRequest, life, refresh time.Duration) string {
	h.t.Helper()
	stub, err := x509.ParseCertificateRequest(r.Spec.StubPKCS10Request)
	if err != nil {
		h.t.Fatal(err)
	}
	notBefore := time.Now().Add(-2 * time.Minute).Truncate(time.Second)
	notAfter := notBefore.Add(life)
	chain := h.ca.sign(h.t, stub.PublicKey, notBefore, notAfter)
	h.setStatus(r, certificatesv1.PodCertificateRequestStatus{
		Conditions: []metav1.Condition{{Type: certificatesv1.PodCertificateRequestConditionTypeIssued, Status: metav1.ConditionTrue,
			Reason: "Issued", Message: "issued", LastTransitionTime: metav1.NewTime(h.clock.Now())}},
		CertificateChain: chain,
		NotBefore:        ptr.To(metav1.NewTime(notBefore)),
		BeginRefreshAt:   ptr.To(metav1.NewTime(notBefore.Add(refresh))),
		NotAfter:         ptr.To(metav1.NewTime(notAfter)),
	})
	return chain
}

// waitCredentials waits for the projection's credentials to be the key
// of r's stub request and chain.
func (h *harness) waitCredentials(r *certificatesv1.PodCertificateRequest, chain string) {
	h.t.Helper()
	stub, err := x509.ParseCertificateRequest(r.Spec.StubPKCS10Request)
	if err != nil {
		h.t.Fatal(err)
	}
	h.eventually(func() string {
		keyPEM, got, err := h.credentials()
		if err != nil {
			return fmt.Sprintf("credentials: %v", err)
		}
		if string(got) != chain {
			return fmt.Sprintf("chain\n%s\nwant\n%s", got, chain)
		}
		block, rest := pem.Decode(keyPEM)
		if block == nil || block.Type != "PRIVATE KEY" || len(rest) > 0 {
			return fmt.Sprintf("the key is not one PKCS#8 PEM block: %q", keyPEM)
		}
		key, err := x509.ParsePKCS8PrivateKey(block.Bytes)
		if err != nil {
			return fmt.Sprintf("the key: %v", err)
		}
		if !key.(crypto.Signer).Public().(interface{ Equal(crypto.PublicKey) bool }).Equal(stub.PublicKey) {
			return "the key is not the one of the request " + r.Name
		}
		return ""
	})
}

// TestIssue: a pod's podCertificate projection makes one request, filled
// as the kubelet fills it and valid to the API server, and has no
// credentials until it is issued; then its credentials are the request's
// key and the issued chain, and the pod is poked. A forgotten pod has
// none.
func TestIssue(t *testing.T) {
	h := newHarness(t)
	h.m.Track(h.pod)
	r := h.waitRequest("req-1")
	want := certificatesv1.PodCertificateRequestSpec{
		SignerName: signer, PodName: "web", PodUID: "pod-uid", ServiceAccountName: "web-sa", ServiceAccountUID: "sa-uid",
		NodeName: "n1", NodeUID: "node-uid", MaxExpirationSeconds: ptr.To[int32](86400),
		UnverifiedUserAnnotations: map[string]string{"example.com/role": "frontend"},
		StubPKCS10Request:         r.Spec.StubPKCS10Request,
	}
	if got := r.Spec; !reflect.DeepEqual(got, want) {
		t.Errorf("request spec\n%+v\nwant\n%+v", got, want)
	}
	if got := r.OwnerReferences; len(got) != 1 || got[0] != (metav1.OwnerReference{APIVersion: "v1", Kind: "Pod", Name: "web", UID: "pod-uid"}) {
		t.Errorf("owner references %+v, want the pod", got)
	}
	strategy := podcertificaterequest.Resource(nil).Strategy
	strategy.Default(r)
	if errs := strategy.Validate(r); len(errs) > 0 {
		t.Errorf("the API server refuses the request: %v", errs)
	}

	if _, _, err := h.credentials(); err == nil || err.Error() != "credential bundle is not issued yet" {
		t.Errorf("credentials before the request is issued: %v", err)
	}
	// Another sync asks nothing more while the request is pending.
	h.m.Track(h.pod)
	chain := h.issue(r, time.Hour, 30*time.Minute)
	h.waitCredentials(r, chain)
	if n := len(h.requests()); n != 1 {
		t.Errorf("%d requests, want 1", n)
	}
	h.eventually(func() string {
		if h.changes() == 0 {
			return "the pod was not poked when its certificate was issued"
		}
		return ""
	})

	h.m.Forget(h.pod.UID)
	if _, _, err := h.credentials(); err == nil {
		t.Error("a forgotten pod has credentials")
	}
}

// TestRefresh: once beginRefreshAt (and its jitter) has passed, a new
// request with a new key is made while the old credentials stay; its
// issue replaces them. Credentials kept past the refresh time by more
// than ten minutes, and past their expiry, are reported once each.
func TestRefresh(t *testing.T) {
	h := newHarness(t)
	h.m.Track(h.pod)
	first := h.waitRequest("req-1")
	// To be refreshed in eight minutes (and up to five of jitter).
	firstChain := h.issue(first, time.Hour, 10*time.Minute)
	h.waitCredentials(first, firstChain)
	h.m.Track(h.pod)
	time.Sleep(50 * time.Millisecond)
	if n := len(h.requests()); n != 1 {
		t.Fatalf("%d requests before beginRefreshAt, want 1", n)
	}

	h.clock.SetTime(time.Now().Add(14 * time.Minute))
	h.m.Track(h.pod)
	second := h.waitRequest("req-2")
	if bytes.Equal(second.Spec.StubPKCS10Request, first.Spec.StubPKCS10Request) {
		t.Error("the refresh asks for the same key")
	}
	h.waitCredentials(first, firstChain)

	// Still pending two hours on (and seen by the manager's watch: a
	// request missing from it that long is taken as deleted).
	h.eventually(func() string {
		if _, err := h.m.requests.PodCertificateRequests("ns").Get(second.Name); err != nil {
			return err.Error()
		}
		return ""
	})
	h.clock.SetTime(time.Now().Add(2 * time.Hour))
	h.m.Track(h.pod)
	for _, want := range []string{"Warning CertificateOverdueForRefresh PodCertificate refresh overdue", "Warning CertificateExpired PodCertificate expired"} {
		select {
		case got := <-h.events.Events:
			if got != want {
				t.Errorf("event %q, want %q", got, want)
			}
		case <-time.After(5 * time.Second):
			t.Fatalf("no event %q", want)
		}
	}
	h.m.Track(h.pod)
	time.Sleep(50 * time.Millisecond)
	if len(h.events.Events) > 0 {
		t.Errorf("another event: %q", <-h.events.Events)
	}

	secondChain := h.issue(second, 24*time.Hour, 23*time.Hour)
	h.waitCredentials(second, secondChain)
	if n := len(h.requests()); n != 2 {
		t.Errorf("%d requests, want 2", n)
	}
}

// TestDenied: a denied request ends the projection: its credentials are
// an error saying why, the pod gets an event, and no request follows.
func TestDenied(t *testing.T) {
	h := newHarness(t)
	h.m.Track(h.pod)
	r := h.waitRequest("req-1")
	h.setStatus(r, certificatesv1.PodCertificateRequestStatus{Conditions: []metav1.Condition{{
		Type: certificatesv1.PodCertificateRequestConditionTypeDenied, Status: metav1.ConditionTrue,
		Reason: "NotAllowed", Message: "web may not have one", LastTransitionTime: metav1.NewTime(h.clock.Now())}}})
	h.eventually(func() string {
		_, _, err := h.credentials()
		if want := `PodCertificateRequest was permanently denied: reason="NotAllowed" message="web may not have one"`; err == nil || err.Error() != want {
			return fmt.Sprintf("credentials: %v, want %q", err, want)
		}
		return ""
	})
	select {
	case got := <-h.events.Events:
		if want := `Warning Denied PodCertificateRequest ns/req-1 was denied, reason="NotAllowed", message="web may not have one"`; got != want {
			t.Errorf("event %q, want %q", got, want)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("no Denied event")
	}
	h.clock.SetTime(h.clock.Now().Add(48 * time.Hour))
	h.m.Track(h.pod)
	time.Sleep(50 * time.Millisecond)
	if n := len(h.requests()); n != 1 {
		t.Errorf("%d requests after the denial, want 1", n)
	}
}

// TestNewKey: each key type of the API makes a key whose stub request
// the API server takes as proof of possession; others are refused.
func TestNewKey(t *testing.T) {
	strategy := podcertificaterequest.Resource(nil).Strategy
	for _, kt := range []string{"RSA3072", "RSA4096", "ECDSAP256", "ECDSAP384", "ECDSAP521", "ED25519"} {
		t.Run(kt, func(t *testing.T) {
			t.Parallel()
			keyPEM, stub, err := newKey(kt)
			if err != nil {
				t.Fatal(err)
			}
			r := &certificatesv1.PodCertificateRequest{Spec: certificatesv1.PodCertificateRequestSpec{
				SignerName: signer, PodName: "web", PodUID: "pod-uid", ServiceAccountName: "default", ServiceAccountUID: "sa-uid",
				NodeName: "n1", NodeUID: "node-uid", StubPKCS10Request: stub}}
			strategy.Default(r)
			if errs := strategy.Validate(r); len(errs) > 0 {
				t.Errorf("the API server refuses the request: %v", errs)
			}
			block, _ := pem.Decode(keyPEM)
			key, err := x509.ParsePKCS8PrivateKey(block.Bytes)
			if err != nil {
				t.Fatal(err)
			}
			req, err := x509.ParseCertificateRequest(stub)
			if err != nil {
				t.Fatal(err)
			}
			if !key.(crypto.Signer).Public().(interface{ Equal(crypto.PublicKey) bool }).Equal(req.PublicKey) {
				t.Error("the stub request is not for the key")
			}
		})
	}
	if _, _, err := newKey("DSA1024"); err == nil || !strings.Contains(err.Error(), `unknown key type "DSA1024"`) {
		t.Errorf("an unknown key type: %v", err)
	}
}

// TestCleanChain: what a signer writes around or in the headers of the
// certificates' PEM blocks is dropped.
func TestCleanChain(t *testing.T) {
	a := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: []byte("leaf")})
	b := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: []byte("intermediate")})
	messy := "issued by us\n" + string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Headers: map[string]string{"Note": "x"}, Bytes: []byte("leaf")})) +
		"between\n" + string(b) + "after\n"
	if got, want := cleanChain(messy), append(a, b...); !bytes.Equal(got, want) {
		t.Errorf("clean chain\n%s\nwant\n%s", got, want)
	}
}

// ca is a root with an intermediate that signs.
type ca struct {
	key          *ecdsa.PrivateKey
	cert         *x509.Certificate
	intermediate []byte
}

func newCA(t *testing.T) *ca {
	t.Helper()
	gen := func(tmpl, parent *x509.Certificate, pub crypto.PublicKey, signer crypto.Signer) *x509.Certificate {
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
	genKey := func() *ecdsa.PrivateKey {
		k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		if err != nil {
			t.Fatal(err)
		}
		return k
	}
	tmpl := func(n int64) *x509.Certificate {
		return &x509.Certificate{SerialNumber: big.NewInt(n), NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
			IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign}
	}
	rootKey, key := genKey(), genKey()
	root := gen(tmpl(1), tmpl(1), &rootKey.PublicKey, rootKey)
	inter := gen(tmpl(2), root, &key.PublicKey, rootKey)
	return &ca{key: key, cert: inter, intermediate: inter.Raw}
}

// sign is the chain (PEM, leaf first) of a certificate for pub.
func (c *ca) sign(t *testing.T, pub crypto.PublicKey, notBefore, notAfter time.Time) string {
	t.Helper()
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(notBefore.UnixNano()), NotBefore: notBefore, NotAfter: notAfter,
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, c.cert, pub, c.key)
	if err != nil {
		t.Fatal(err)
	}
	return string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})) +
		string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: c.intermediate}))
}
