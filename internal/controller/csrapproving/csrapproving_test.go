package csrapproving

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"strings"
	"testing"

	authorizationv1 "k8s.io/api/authorization/v1"
	capi "k8s.io/api/certificates/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	k8stesting "k8s.io/client-go/testing"

	"github.com/svcnet/svcnet/internal/controller"
	"github.com/svcnet/svcnet/internal/controller/controllertest"
)

func request(t *testing.T, subject pkix.Name) []byte {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	der, err := x509.CreateCertificateRequest(rand.Reader, &x509.CertificateRequest{Subject: subject}, key)
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE REQUEST", Bytes: der})
}

func TestApproving(t *testing.T) {
	node := func(name string) []byte {
		return request(t, pkix.Name{CommonName: "system:node:" + name, Organization: []string{"system:nodes"}})
	}
	usages := []capi.KeyUsage{capi.UsageDigitalSignature, capi.UsageClientAuth}
	csr := func(name, user string, req []byte, signer string) *capi.CertificateSigningRequest {
		return &capi.CertificateSigningRequest{ObjectMeta: metav1.ObjectMeta{Name: name},
			Spec: capi.CertificateSigningRequestSpec{Request: req, SignerName: signer, Usages: usages, Username: user, Groups: []string{"system:bootstrappers"}}}
	}
	kubelet := capi.KubeAPIServerClientKubeletSignerName
	cs := controllertest.NewClient(
		csr("bootstrap", "system:bootstrap:abc", node("a"), kubelet),
		csr("renewal", "system:node:b", node("b"), kubelet),
		csr("not-allowed", "mallory", node("c"), kubelet),
		csr("not-a-node", "system:bootstrap:abc", request(t, pkix.Name{CommonName: "jane"}), kubelet),
		csr("other-signer", "system:bootstrap:abc", node("d"), capi.KubeAPIServerClientSignerName),
	)
	// The bootstrapper may have new node client certificates, the node
	// renew its own; mallory nothing.
	var reviews []string
	cs.PrependReactor("create", "subjectaccessreviews", func(a k8stesting.Action) (bool, runtime.Object, error) {
		sar := a.(k8stesting.CreateAction).GetObject().(*authorizationv1.SubjectAccessReview)
		r := sar.Spec.ResourceAttributes
		reviews = append(reviews, sar.Spec.User+":"+r.Verb+" "+r.Group+" "+r.Resource+"/"+r.Subresource)
		sar.Status.Allowed = sar.Spec.User == "system:bootstrap:abc" && r.Subresource == "nodeclient" ||
			sar.Spec.User == "system:node:b" && r.Subresource == "selfnodeclient"
		return true, sar, nil
	})
	var c *Controller
	controllertest.Start(t, cs, func(_ context.Context, d controller.Deps) []func(context.Context) {
		var err error
		if c, err = New(d); err != nil {
			t.Fatal(err)
		}
		return nil // handled one at a time below
	})
	get := func(name string) *capi.CertificateSigningRequest {
		out, err := cs.CertificatesV1().CertificateSigningRequests().Get(context.Background(), name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return out
	}
	for _, tt := range []struct{ name, message, reviews, err string }{
		{"bootstrap", "Auto approving kubelet client certificate after SubjectAccessReview.",
			"system:bootstrap:abc:create certificates.k8s.io certificatesigningrequests/nodeclient", ""},
		{"renewal", "Auto approving self kubelet client certificate after SubjectAccessReview.",
			"system:node:b:create certificates.k8s.io certificatesigningrequests/selfnodeclient", ""},
		{"not-allowed", "",
			"mallory:create certificates.k8s.io certificatesigningrequests/nodeclient",
			`recognized csr "not-allowed" as [nodeclient] but subject access review was not approved`},
		{"not-a-node", "", "", ""},
		{"other-signer", "", "", ""},
	} {
		reviews = nil
		err := c.handle(context.Background(), get(tt.name))
		if got := ""; err != nil {
			got = err.Error()
			if got != tt.err {
				t.Errorf("%s: error %q, want %q", tt.name, got, tt.err)
			}
		} else if tt.err != "" {
			t.Errorf("%s: no error, want %q", tt.name, tt.err)
		}
		if got := strings.Join(reviews, ", "); got != tt.reviews {
			t.Errorf("%s: reviews %q, want %q", tt.name, got, tt.reviews)
		}
		conditions := get(tt.name).Status.Conditions
		switch {
		case tt.message == "" && len(conditions) > 0:
			t.Errorf("%s: conditions %+v", tt.name, conditions)
		case tt.message != "" && (len(conditions) != 1 || conditions[0].Type != capi.CertificateApproved || conditions[0].Status != corev1.ConditionTrue ||
			conditions[0].Reason != "AutoApproved" || conditions[0].Message != tt.message):
			t.Errorf("%s: conditions %+v", tt.name, conditions)
		}
	}
	// Approved already: not looked at again.
	reviews = nil
	if err := c.handle(context.Background(), get("bootstrap")); err != nil || len(reviews) > 0 {
		t.Errorf("approved again: %v, reviews %v", err, reviews)
	}
}
