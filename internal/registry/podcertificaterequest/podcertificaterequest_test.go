package podcertificaterequest

import (
	"context"
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"encoding/pem"
	"math/big"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"

	capi "k8s.io/api/certificates/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apiserver/pkg/authentication/user"

	"github.com/svcnet/svcnet/internal/auth/authn"
	"github.com/svcnet/svcnet/internal/auth/authz"
	"github.com/svcnet/svcnet/internal/registry"
	"github.com/svcnet/svcnet/internal/registry/registrytest"
)

type pcr = *capi.PodCertificateRequest

// keyPair is a P-256 key with its stub request, as a kubelet makes them.
type keyPair struct {
	key  *ecdsa.PrivateKey
	stub []byte
}

func newKey(t testing.TB) keyPair {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	stub, err := x509.CreateCertificateRequest(rand.Reader, &x509.CertificateRequest{}, key)
	if err != nil {
		t.Fatal(err)
	}
	return keyPair{key, stub}
}

// cert is a certificate of pub, self-signed by signer, living from
// notBefore for life, as PEM.
func cert(t testing.TB, pub crypto.PublicKey, signer crypto.Signer, notBefore time.Time, life time.Duration, dnsNames ...string) string {
	t.Helper()
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(7), Subject: pkix.Name{CommonName: "pod"},
		NotBefore: notBefore, NotAfter: notBefore.Add(life), DNSNames: dnsNames}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, pub, signer)
	if err != nil {
		t.Fatal(err)
	}
	return string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}))
}

func (k keyPair) valid() pcr {
	return &capi.PodCertificateRequest{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "web-abc", ResourceVersion: "3"},
		Spec: capi.PodCertificateRequestSpec{
			SignerName: "example.com/foo", PodName: "web", PodUID: "pod-uid",
			ServiceAccountName: "default", ServiceAccountUID: "sa-uid",
			NodeName: "n1", NodeUID: "node-uid",
			MaxExpirationSeconds: ptr(86400), StubPKCS10Request: k.stub,
		},
	}
}

func ptr(i int32) *int32 { return &i }

const subdomainMsg = `a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')`

// The messages are upstream's ValidatePodCertificateRequestCreate's, in
// its order.
func TestValidate(t *testing.T) {
	k := newKey(t)
	// The proof of possession fails: a bit of the request's signature
	// (at its end, within an integer of the ECDSA signature) flipped.
	forged := append([]byte(nil), k.stub...)
	forged[len(forged)-3] ^= 0x01
	registrytest.RunValidate(t, strategy{}, k.valid, []registrytest.Case[pcr]{
		{Name: "valid", Change: func(pcr) {}},
		{Name: "kubernetes signer, a day", Change: func(r pcr) { r.Spec.SignerName = "kubernetes.io/foo" }},
		{Name: "user annotations", Change: func(r pcr) { r.Spec.UnverifiedUserAnnotations = map[string]string{"Example.com/Team": "a"} }},
		{Name: "signer", Change: func(r pcr) { r.Spec.SignerName = "foo" }, Want: []string{
			`spec.signerName: Invalid value: "foo": must be a fully qualified domain and path of the form 'example.com/signer-name'`,
		}},
		{Name: "user annotation without a domain", Change: func(r pcr) { r.Spec.UnverifiedUserAnnotations = map[string]string{"team": "a"} }, Want: []string{
			`spec.unverifiedUserAnnotations: Invalid value: "team": must be a domain-prefixed key (such as "acme.io/foo")`,
		}},
		{Name: "names and UIDs", Change: func(r pcr) {
			r.Spec.PodName, r.Spec.PodUID = "Web", ""
			r.Spec.ServiceAccountName, r.Spec.ServiceAccountUID = "", "sa-uid"
			r.Spec.NodeUID = types.UID(strings.Repeat("u", 129))
		}, Want: []string{
			`spec.podName: Invalid value: "Web": ` + subdomainMsg,
			`spec.podUID: Invalid value: "": must not be empty`,
			`spec.serviceAccountName: Invalid value: "": ` + subdomainMsg,
			`spec.nodeUID: Too long: may not be more than 128 bytes`,
		}},
		{Name: "too short a life", Change: func(r pcr) { r.Spec.MaxExpirationSeconds = ptr(3599) }, Want: []string{
			`spec.maxExpirationSeconds: Invalid value: 3599: must be in the range [3600, 7862400]`,
		}},
		{Name: "91 days", Change: func(r pcr) { r.Spec.MaxExpirationSeconds = ptr(7862400) }},
		{Name: "kubernetes signer, two days", Change: func(r pcr) { r.Spec.SignerName, r.Spec.MaxExpirationSeconds = "foo.kubernetes.io/bar", ptr(172800) }, Want: []string{
			`spec.maxExpirationSeconds: Invalid value: 172800: must be in the range [3600, 86400]`,
		}},
		{Name: "no life", Change: func(r pcr) { r.Spec.MaxExpirationSeconds, r.Spec.StubPKCS10Request = nil, nil }, Want: []string{
			`spec.maxExpirationSeconds: Required value: must be set`,
		}},
		{Name: "no stub request", Change: func(r pcr) { r.Spec.StubPKCS10Request = nil }, Want: []string{
			`spec: Invalid value: exactly one of (stubPKCS10Request) or (pkixPublicKey, proofOfPossession) must be set`,
		}},
		{Name: "stub not a request", Change: func(r pcr) { r.Spec.StubPKCS10Request = []byte("junk") }, Want: []string{
			`spec.stubPKCS10Request: Invalid value: must be a valid PKCS#10 CSR`,
		}},
		// The proof of possession: the request is signed by the key it
		// carries.
		{Name: "signature not the key's", Change: func(r pcr) { r.Spec.StubPKCS10Request = forged }, Want: []string{
			`spec.stubPKCS10Request: Invalid value: invalid signature`,
		}},
		{Name: "stub too big", Change: func(r pcr) { r.Spec.StubPKCS10Request = make([]byte, 10*1024+1) }, Want: []string{
			`spec.stubPKCS10Request: Too long: may not be more than 10240 bytes`,
		}},
	})
}

func TestValidateUpdate(t *testing.T) {
	k := newKey(t)
	registrytest.RunValidateUpdate(t, strategy{}, k.valid, []registrytest.Case[pcr]{
		{Name: "labels", Change: func(r pcr) { r.Labels = map[string]string{"a": "b"} }},
		{Name: "spec", Change: func(r pcr) { r.Spec.PodName = "db" }, Want: []string{
			// The value is the new spec, as JSON.
			`spec: Invalid value: {"signerName":"example.com/foo","podName":"db","podUID":"pod-uid","serviceAccountName":"default",` +
				`"serviceAccountUID":"sa-uid","nodeName":"n1","nodeUID":"node-uid","maxExpirationSeconds":86400,"stubPKCS10Request":"` +
				base64.StdEncoding.EncodeToString(k.stub) + `"}: field is immutable`,
		}},
	})
}

// issued is the status a signer writes for a request of k, issued now.
func issued(t testing.TB, k keyPair, now time.Time, life time.Duration) capi.PodCertificateRequestStatus {
	nb := now.Add(-time.Minute).Truncate(time.Second)
	na := nb.Add(life)
	return capi.PodCertificateRequestStatus{
		Conditions:       []metav1.Condition{{Type: "Issued", Status: "True", Reason: "E2E", Message: "ok", LastTransitionTime: metav1.NewTime(now)}},
		CertificateChain: cert(t, k.key.Public(), k.key, nb, life, "web.ns.svc"),
		NotBefore:        &metav1.Time{Time: nb}, NotAfter: &metav1.Time{Time: na},
		BeginRefreshAt: &metav1.Time{Time: nb.Add(15 * time.Minute)},
	}
}

// The status messages are upstream's ValidatePodCertificateRequestStatusUpdate's.
func TestValidateStatusUpdate(t *testing.T) {
	k, other := newKey(t), newKey(t)
	now := time.Now()
	s := strategy{now: func() time.Time { return now }}
	cond := func(typ, status string) metav1.Condition {
		return metav1.Condition{Type: typ, Status: metav1.ConditionStatus(status), Reason: "R", LastTransitionTime: metav1.NewTime(now)}
	}
	ok := issued(t, k, now, time.Hour)
	stale := issued(t, k, now.Add(-time.Hour), 2*time.Hour)
	theirs := cert(t, other.key.Public(), other.key, ok.NotBefore.Time, time.Hour)
	registrytest.RunValidateUpdate(t, s, k.valid, []registrytest.Case[pcr]{
		{Name: "issued", Change: func(r pcr) { r.Status = issued(t, k, now, time.Hour) }},
		{Name: "denied", Change: func(r pcr) { r.Status.Conditions = []metav1.Condition{cond("Denied", "True")} }},
		{Name: "failed with a chain", Change: func(r pcr) {
			r.Status = issued(t, k, now, time.Hour)
			r.Status.Conditions = []metav1.Condition{cond("Failed", "True")}
		}, Want: []string{`status: Invalid value: non-condition status fields must be empty when denying or failing the PodCertificateRequest`}},
		{Name: "unknown condition", Change: func(r pcr) { r.Status.Conditions = []metav1.Condition{cond("Ready", "True")} }, Want: []string{
			`status.conditions.[0].type: Unsupported value: "Ready": supported values: "Issued", "Denied", "Failed"`,
		}},
		{Name: "two terminal conditions, one false", Change: func(r pcr) {
			r.Status.Conditions = []metav1.Condition{cond("Denied", "True"), cond("Failed", "False")}
		}, Want: []string{
			`status.conditions.[1].type: Invalid value: "Failed": There may be at most one condition with type "Issued", "Denied", or "Failed"`,
			`status.conditions.[1].status: Unsupported value: "False": supported values: "True"`,
		}},
		{Name: "chain without the requested key", Change: func(r pcr) {
			r.Status = issued(t, k, now, time.Hour)
			r.Status.CertificateChain = theirs
		}, Want: []string{`status.certificateChain: Invalid value: ` + strconv.Quote(theirs) + `: leaf certificate was not issued to the requested public key`}},
		{Name: "no refresh time", Change: func(r pcr) {
			r.Status = issued(t, k, now, time.Hour)
			r.Status.BeginRefreshAt = nil
		}, Want: []string{`status.beginRefreshAt: Required value: must be present and in the range [notbefore+10min, notafter-10min]`}},
		{Name: "notBefore too old", Change: func(r pcr) {
			r.Status = stale
		}, Want: []string{`status.notBefore: Invalid value: "` + stale.NotBefore.UTC().Format(time.RFC3339) + `": must be set to within 5 minutes of kube-apiserver's current time`}},
		{Name: "longer than asked", Change: func(r pcr) {
			r.Status = issued(t, k, now, 25*time.Hour)
			r.Status.BeginRefreshAt = &metav1.Time{Time: r.Status.NotBefore.Add(time.Hour)}
		}, Want: []string{`status.certificateChain: Invalid value: 90000000000000: leaf certificate lifetime must be <= spec.maxExpirationSeconds (86400)`}},
		{Name: "refresh too late", Change: func(r pcr) {
			r.Status = *ok.DeepCopy()
			r.Status.BeginRefreshAt = &metav1.Time{Time: ok.NotAfter.Add(-5 * time.Minute)}
		}, Want: []string{`status.beginRefreshAt: Invalid value: "` + ok.NotAfter.Add(-5*time.Minute).UTC().Format(time.RFC3339) + `": must be at least 10 minutes before status.notAfter`}},
		{Name: "not a PEM chain", Change: func(r pcr) {
			r.Status = issued(t, k, now, time.Hour)
			r.Status.CertificateChain = "junk"
		}, Want: []string{`status.certificateChain: Invalid value: "junk": issued certificate chain must contain at least one certificate`}},
		{Name: "issued is final", Old: func(r pcr) { r.Status = issued(t, k, now, time.Hour) }, Change: func(r pcr) {
			r.Status.Conditions[0].Message = "again"
		}, Want: []string{`status: Invalid value: immutable after PodCertificateRequest is issued, denied, or failed`}},
		{Name: "no terminal condition", Change: func(r pcr) {
			r.Status.NotBefore = &metav1.Time{Time: now}
		}, Want: []string{`status: Invalid value: status is immutable unless transitioning to "Issued", "Denied", or "Failed"`}},
	})
}

// TestStrategy: a create starts without status, an update keeps the
// stored status, a status write keeps the spec and metadata, and the
// life defaults to a day.
func TestStrategy(t *testing.T) {
	k := newKey(t)
	r := k.valid()
	r.Spec.MaxExpirationSeconds = nil
	r.Status.CertificateChain = "x"
	got := registrytest.Created(strategy{}, r)
	if got.Status.CertificateChain != "" || got.Spec.MaxExpirationSeconds == nil || *got.Spec.MaxExpirationSeconds != 86400 {
		t.Errorf("created %+v", got)
	}
	old := k.valid()
	old.Status.CertificateChain = "stored"
	next := k.valid()
	next.Status.CertificateChain = "new"
	strategy{}.PrepareForUpdate(next, old)
	if next.Status.CertificateChain != "stored" {
		t.Errorf("update changed the status: %+v", next.Status)
	}
	var su registry.StatusUpdater = strategy{}
	next = k.valid()
	next.Spec.PodName = "other"
	next.Labels = map[string]string{"a": "b"}
	next.Status.CertificateChain = "new"
	su.PrepareForStatusUpdate(next, old)
	if next.Spec.PodName != "web" || next.Labels != nil || next.Status.CertificateChain != "new" {
		t.Errorf("status write kept %+v", next)
	}
}

func TestResource(t *testing.T) {
	r := Resource(nil)
	if r.Resource != "podcertificaterequests" || r.Singular != "podcertificaterequest" || r.ShortNames != nil || r.Categories != nil ||
		!r.Namespaced || !r.Status || r.Generation || r.KeepStatusOnCreate || r.ReturnDeletedObject || r.Scale != nil ||
		r.Subresources != nil || r.Kind != capi.SchemeGroupVersion.WithKind("PodCertificateRequest") || !registry.Scheme.Recognizes(r.Kind) {
		t.Errorf("unexpected discovery data: %+v", r)
	}
	k := newKey(t)
	want := fields.Set{"spec.signerName": "example.com/foo", "spec.podName": "web", "spec.nodeName": "n1"}
	if got := r.Fields(k.valid()); !reflect.DeepEqual(got, want) {
		t.Errorf("fields %v", got)
	}
}

func TestColumns(t *testing.T) {
	k := newKey(t)
	names := []string{"Name", "PodName", "ServiceAccountName", "NodeName", "SignerName", "State", "UnverifiedUserAnnotations"}
	r := k.valid()
	registrytest.ExpectRow(t, Resource(nil).Columns, r, names, []interface{}{"web-abc", "web", "default", "n1", "example.com/foo", "Pending", "<none>"})
	r.Spec.UnverifiedUserAnnotations = map[string]string{"example.com/b": "2", "example.com/a": "1"}
	r.Status.Conditions = []metav1.Condition{{Type: "Denied", Status: "True"}}
	registrytest.ExpectRow(t, Resource(nil).Columns, r, names, []interface{}{"web-abc", "web", "default", "n1", "example.com/foo", "Denied", "example.com/a=1,example.com/b=2"})
	if d := Resource(nil).Columns[5].Description; d != "Is the request Pending, Issued, Denied, or Failed?" {
		t.Errorf("STATE description %q", d)
	}
}

// signers allows "sign" on the signers listed, to bob only.
type signers []string

func (s signers) Authorize(_ context.Context, a authz.Attributes) (authz.Decision, string, error) {
	if a.APIGroup != capi.GroupName || a.Resource != "signers" || a.Verb != "sign" || a.User.GetName() != "bob" {
		return authz.NoOpinion, "", nil
	}
	for _, n := range s {
		if n == a.Name {
			return authz.Allow, "", nil
		}
	}
	return authz.NoOpinion, "", nil
}

// TestSign: a status write that changes the status needs "sign" on the
// stored signer or its domain, refused as upstream, an invalid signer.
func TestSign(t *testing.T) {
	k := newKey(t)
	now := time.Now()
	bob := authn.WithUser(context.Background(), &user.DefaultInfo{Name: "bob"})
	const denied = `PodCertificateRequest.certificates.k8s.io "web-abc" is invalid: spec.signerName: Forbidden: User "bob" is not permitted to "sign" for signer "example.com/foo"`
	signed := k.valid()
	signed.Status = issued(t, k, now, time.Hour)
	relabelled := k.valid()
	relabelled.Labels = map[string]string{"a": "b"}
	for _, tt := range []struct {
		name   string
		ctx    context.Context
		rights authz.Authorizer
		sub    string
		obj    pcr
		want   string
	}{
		{"the signer", bob, signers{"example.com/foo"}, "status", signed, ""},
		{"the domain", bob, signers{"example.com/*"}, "status", signed, ""},
		{"another signer", bob, signers{"example.com/bar"}, "status", signed, denied},
		{"no authorizer", bob, nil, "status", signed, denied},
		{"no user", context.Background(), signers{"example.com/foo"}, "status", signed, `spec.signerName: Internal error: cannot determine calling user to perform "sign" check`},
		{"status unchanged", bob, signers{}, "status", relabelled, ""},
		{"update of the object", bob, signers{}, "", relabelled, ""},
	} {
		t.Run(tt.name, func(t *testing.T) {
			err := strategy{authorizer: tt.rights}.AdmitUpdate(tt.ctx, tt.sub, tt.obj, k.valid())
			switch {
			case tt.want == "" && err != nil:
				t.Errorf("refused: %v", err)
			case tt.want != "" && (!apierrors.IsInvalid(err) || !strings.Contains(err.Error(), tt.want)):
				t.Errorf("got %v, want %s", err, tt.want)
			}
		})
	}
}
