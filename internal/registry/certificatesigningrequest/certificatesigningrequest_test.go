package certificatesigningrequest

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"strings"
	"testing"
	"time"

	capi "k8s.io/api/certificates/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/utils/ptr"

	"github.com/svcnet/svcnet/internal/auth/authn"
	"github.com/svcnet/svcnet/internal/auth/authz"
	"github.com/svcnet/svcnet/internal/registry/registrytest"
)

func request(t testing.TB, subject pkix.Name) []byte {
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

func certificate(t testing.TB) []byte {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), NotBefore: time.Now(), NotAfter: time.Now().Add(time.Hour)}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, key.Public(), key)
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
}

func validCSR(t testing.TB) func() *capi.CertificateSigningRequest {
	req := request(t, pkix.Name{CommonName: "jane", Organization: []string{"dev"}})
	return func() *capi.CertificateSigningRequest {
		return &capi.CertificateSigningRequest{
			ObjectMeta: metav1.ObjectMeta{Name: "jane"},
			Spec: capi.CertificateSigningRequestSpec{
				Request: req, SignerName: capi.KubeAPIServerClientSignerName, Usages: []capi.KeyUsage{capi.UsageClientAuth},
			},
		}
	}
}

func condition(t capi.RequestConditionType) capi.CertificateSigningRequestCondition {
	return capi.CertificateSigningRequestCondition{Type: t, Status: corev1.ConditionTrue}
}

func TestValidate(t *testing.T) {
	registrytest.RunValidate(t, strategy{}, validCSR(t), []registrytest.Case[*capi.CertificateSigningRequest]{
		{Name: "valid", Change: func(*capi.CertificateSigningRequest) {}},
		{Name: "no PEM", Change: func(c *capi.CertificateSigningRequest) { c.Spec.Request = []byte("x") },
			Want: []string{`spec.request: Invalid value: "eA==": PEM block type must be CERTIFICATE REQUEST`}},
		{Name: "no usages", Change: func(c *capi.CertificateSigningRequest) { c.Spec.Usages = nil },
			Want: []string{`spec.usages: Required value`}},
		{Name: "unknown and duplicate usages", Change: func(c *capi.CertificateSigningRequest) {
			c.Spec.Usages = []capi.KeyUsage{"client auth", "fly", "client auth"}
		},
			Want: []string{
				`spec.usages[1]: Unsupported value: "fly": supported values: "any", "cert sign", "client auth", "code signing", "content commitment", "crl sign", "data encipherment", "decipher only", "digital signature", "email protection", "encipher only", "ipsec end system", "ipsec tunnel", "ipsec user", "key agreement", "key encipherment", "microsoft sgc", "netscape sgc", "ocsp signing", "s/mime", "server auth", "signing", "timestamping"`,
				`spec.usages[2]: Duplicate value: "client auth"`,
			}},
		{Name: "no signer", Change: func(c *capi.CertificateSigningRequest) { c.Spec.SignerName = "" },
			Want: []string{`spec.signerName: Required value`}},
		{Name: "unqualified signer", Change: func(c *capi.CertificateSigningRequest) { c.Spec.SignerName = "signer" },
			Want: []string{`spec.signerName: Invalid value: "signer": must be a fully qualified domain and path of the form 'example.com/signer-name'`}},
		{Name: "signer domain of one label", Change: func(c *capi.CertificateSigningRequest) { c.Spec.SignerName = "example/signer" },
			Want: []string{`spec.signerName: Invalid value: "example": should be a domain with at least two segments separated by dots`}},
		{Name: "signer path not a subdomain", Change: func(c *capi.CertificateSigningRequest) { c.Spec.SignerName = "example.com/Signer" },
			Want: []string{`spec.signerName: Invalid value: "Signer": validating label "Signer": a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')`}},
		{Name: "legacy signer", Change: func(c *capi.CertificateSigningRequest) { c.Spec.SignerName = "kubernetes.io/legacy-unknown" },
			Want: []string{`spec.signerName: Invalid value: "kubernetes.io/legacy-unknown": the legacy signerName is not allowed via this API version`}},
		{Name: "short expiration", Change: func(c *capi.CertificateSigningRequest) { c.Spec.ExpirationSeconds = ptr.To[int32](599) },
			Want: []string{`spec.expirationSeconds: Invalid value: 599: may not specify a duration less than 600 seconds (10 minutes)`}},
		{Name: "shortest expiration", Change: func(c *capi.CertificateSigningRequest) { c.Spec.ExpirationSeconds = ptr.To[int32](600) }},
		{Name: "conditions", Change: func(c *capi.CertificateSigningRequest) {
			c.Status.Conditions = []capi.CertificateSigningRequestCondition{
				condition(capi.CertificateApproved), condition(capi.CertificateDenied),
				{Type: capi.CertificateFailed, Status: corev1.ConditionFalse}, {Type: "Ready"}, {Status: corev1.ConditionTrue}, condition("Ready"),
			}
		},
			Want: []string{
				`status.conditions: Invalid value: "Denied": Approved and Denied conditions are mutually exclusive`,
				`status.conditions[2].status: Unsupported value: "False": supported values: "True"`,
				`status.conditions[3].status: Required value`,
				`status.conditions[4].type: Required value`,
				`status.conditions[5].type: Duplicate value: "Ready"`,
			}},
		{Name: "certificate not PEM", Change: func(c *capi.CertificateSigningRequest) { c.Status.Certificate = []byte("x") },
			Want: []string{`status.certificate: Invalid value: "<certificate data>": must contain at least one CERTIFICATE PEM block`}},
		{Name: "certificate of another block", Change: func(c *capi.CertificateSigningRequest) { c.Status.Certificate = c.Spec.Request },
			Want: []string{`status.certificate: Invalid value: "<certificate data>": only CERTIFICATE PEM blocks are allowed, found "CERTIFICATE REQUEST"`}},
		{Name: "certificate", Change: func(c *capi.CertificateSigningRequest) { c.Status.Certificate = certificate(t) }},
	})
}

func TestValidateStatusUpdate(t *testing.T) {
	cert := certificate(t)
	registrytest.RunValidateUpdate(t, strategy{}, validCSR(t), []registrytest.Case[*capi.CertificateSigningRequest]{
		{Name: "certificate set", Change: func(c *capi.CertificateSigningRequest) { c.Status.Certificate = cert }},
		{Name: "certificate changed", Old: func(c *capi.CertificateSigningRequest) { c.Status.Certificate = certificate(t) },
			Change: func(c *capi.CertificateSigningRequest) { c.Status.Certificate = cert },
			Want:   []string{`status.certificate: Forbidden: updates may not modify existing certificate content`}},
		{Name: "failed", Change: func(c *capi.CertificateSigningRequest) {
			c.Status.Conditions = append(c.Status.Conditions, condition(capi.CertificateFailed))
		}},
		{Name: "approval added", Change: func(c *capi.CertificateSigningRequest) {
			c.Status.Conditions = append(c.Status.Conditions, condition(capi.CertificateApproved))
		},
			Want: []string{`status.conditions: Forbidden: updates may not add a condition of type "Approved"`}},
		{Name: "approval removed", Old: func(c *capi.CertificateSigningRequest) {
			c.Status.Conditions = append(c.Status.Conditions, condition(capi.CertificateApproved))
		},
			Change: func(c *capi.CertificateSigningRequest) { c.Status.Conditions = nil },
			Want:   []string{`status.conditions: Forbidden: updates may not remove a condition of type "Approved"`}},
		{Name: "legacy signer kept", Old: func(c *capi.CertificateSigningRequest) { c.Spec.SignerName = "kubernetes.io/legacy-unknown" },
			Change: func(c *capi.CertificateSigningRequest) { c.Status.Certificate = cert }},
	})
}

func TestApproval(t *testing.T) {
	old := validCSR(t)()
	old.Status.Conditions = []capi.CertificateSigningRequestCondition{{Type: "Ready", Status: corev1.ConditionTrue, LastTransitionTime: metav1.Unix(100, 0)}}
	csr := old.DeepCopy()
	csr.Spec.Usages = []capi.KeyUsage{capi.UsageAny}
	csr.Status.Certificate = certificate(t)
	csr.Status.Conditions = append(csr.Status.Conditions, condition(capi.CertificateApproved))
	prepareApproval(csr, old)
	registrytest.ExpectErrors(t, validateApproval(csr, old))
	if len(csr.Status.Certificate) > 0 || csr.Spec.Usages[0] != capi.UsageClientAuth {
		t.Errorf("approval changed more than the conditions: %+v", csr)
	}
	approved := csr.Status.Conditions[1]
	if approved.LastUpdateTime.IsZero() || approved.LastTransitionTime.IsZero() || csr.Status.Conditions[0].LastTransitionTime != metav1.Unix(100, 0) {
		t.Errorf("condition times: %+v", csr.Status.Conditions)
	}

	denied := csr.DeepCopy()
	denied.Status.Conditions = append(denied.Status.Conditions, condition(capi.CertificateDenied))
	registrytest.ExpectErrors(t, validateApproval(denied, csr),
		`status.conditions: Invalid value: "Denied": Approved and Denied conditions are mutually exclusive`)
}

func TestStatusKeepsApproval(t *testing.T) {
	old := validCSR(t)()
	old.Status.Conditions = []capi.CertificateSigningRequestCondition{condition(capi.CertificateApproved)}
	old.Status.Conditions[0].LastUpdateTime, old.Status.Conditions[0].LastTransitionTime = metav1.Unix(100, 0), metav1.Unix(100, 0)
	csr := old.DeepCopy()
	csr.Status.Conditions[0].Message = "changed"
	csr.Status.Conditions = append(csr.Status.Conditions, condition(capi.CertificateFailed))
	strategy{}.PrepareForStatusUpdate(csr, old)
	if csr.Status.Conditions[0].Message != "" || csr.Status.Conditions[1].LastUpdateTime.IsZero() {
		t.Errorf("conditions: %+v", csr.Status.Conditions)
	}
	registrytest.ExpectErrors(t, strategy{}.ValidateUpdate(csr, old))
}

func TestUpdateKeepsSpecAndStatus(t *testing.T) {
	old := validCSR(t)()
	csr := old.DeepCopy()
	csr.Labels = map[string]string{"a": "b"}
	csr.Spec.SignerName = "example.com/other"
	csr.Status.Certificate = certificate(t)
	strategy{}.PrepareForUpdate(csr, old)
	if csr.Spec.SignerName != old.Spec.SignerName || len(csr.Status.Certificate) > 0 || csr.Labels["a"] != "b" {
		t.Errorf("update: %+v", csr)
	}
}

func TestCreateRecordsRequestor(t *testing.T) {
	csr := validCSR(t)()
	csr.Spec.Username, csr.Spec.Groups = "someone-else", []string{"system:masters"}
	u := &user.DefaultInfo{Name: "jane", UID: "1", Groups: []string{"dev", "system:authenticated"}, Extra: map[string][]string{"scopes": {"a"}}}
	if err := (strategy{}).Admit(authn.WithUser(context.Background(), u), csr); err != nil {
		t.Fatal(err)
	}
	s := csr.Spec
	if s.Username != "jane" || s.UID != "1" || strings.Join(s.Groups, ",") != "dev,system:authenticated" || s.Extra["scopes"][0] != "a" {
		t.Errorf("spec: %+v", s)
	}

	masters := validCSR(t)()
	masters.Spec.Request = request(t, pkix.Name{CommonName: "root", Organization: []string{"system:masters"}})
	err := strategy{}.Admit(authn.WithUser(context.Background(), u), masters)
	if !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), `certificatesigningrequests.certificates.k8s.io "jane" is forbidden: use of kubernetes.io/kube-apiserver-client signer with system:masters group is not allowed`) {
		t.Errorf("system:masters: %v", err)
	}
	masters.Spec.SignerName = "example.com/masters"
	if err := (strategy{}).Admit(authn.WithUser(context.Background(), u), masters); err != nil {
		t.Errorf("system:masters of another signer: %v", err)
	}
}

// signers allows verb on the signer names listed.
type signers map[string][]string

func (s signers) Authorize(_ context.Context, a authz.Attributes) (authz.Decision, string, error) {
	if a.APIGroup != capi.GroupName || a.Resource != "signers" || a.APIVersion != "*" {
		return authz.NoOpinion, "", nil
	}
	for _, n := range s[a.Verb] {
		if n == a.Name {
			return authz.Allow, "", nil
		}
	}
	return authz.NoOpinion, "", nil
}

func TestSignerRights(t *testing.T) {
	old := validCSR(t)()
	ctx := authn.WithUser(context.Background(), &user.DefaultInfo{Name: "bob"})
	approved := old.DeepCopy()
	approved.Status.Conditions = []capi.CertificateSigningRequestCondition{condition(capi.CertificateApproved)}
	issued := old.DeepCopy()
	issued.Status.Certificate = certificate(t)
	for _, tt := range []struct {
		name, sub string
		rights    signers
		csr       *capi.CertificateSigningRequest
		want      string
	}{
		{"approve", Approval, signers{"approve": {capi.KubeAPIServerClientSignerName}}, approved, ""},
		{"approve the domain", Approval, signers{"approve": {"kubernetes.io/*"}}, approved, ""},
		{"approve without the right", Approval, signers{"sign": {capi.KubeAPIServerClientSignerName}}, approved,
			`certificatesigningrequests.certificates.k8s.io "jane" is forbidden: user not permitted to approve requests with signerName "kubernetes.io/kube-apiserver-client"`},
		{"sign", "status", signers{"sign": {capi.KubeAPIServerClientSignerName}}, issued, ""},
		{"sign without the right", "status", signers{"approve": {"kubernetes.io/*"}}, issued,
			`certificatesigningrequests.certificates.k8s.io "jane" is forbidden: user not permitted to sign requests with signerName "kubernetes.io/kube-apiserver-client"`},
		{"status unchanged", "status", nil, old.DeepCopy(), ""},
		{"metadata", "", nil, approved, ""},
	} {
		t.Run(tt.name, func(t *testing.T) {
			err := strategy{authorizer: tt.rights}.AdmitUpdate(ctx, tt.sub, tt.csr, old)
			switch {
			case tt.want == "" && err != nil:
				t.Errorf("refused: %v", err)
			case tt.want != "" && (!apierrors.IsForbidden(err) || err.Error() != tt.want):
				t.Errorf("got %v, want %s", err, tt.want)
			}
		})
	}
}

func TestColumns(t *testing.T) {
	csr := validCSR(t)()
	csr.Spec.Username = "jane"
	csr.Spec.ExpirationSeconds = ptr.To[int32](3600)
	columns := Resource(nil).Columns
	if got, want := strings.Join(registrytest.Names(columns), " "), "Name Age SignerName Requestor RequestedDuration Condition"; got != want {
		t.Errorf("columns %q, want %q", got, want)
	}
	for _, tt := range []struct {
		conditions []capi.RequestConditionType
		issued     bool
		want       string
	}{
		{nil, false, "Pending"},
		{[]capi.RequestConditionType{capi.CertificateApproved}, true, "Approved,Issued"},
		{[]capi.RequestConditionType{capi.CertificateApproved, capi.CertificateFailed}, false, "Approved,Failed"},
		{[]capi.RequestConditionType{capi.CertificateApproved, capi.CertificateDenied}, false, "Denied"},
		{[]capi.RequestConditionType{capi.CertificateFailed}, false, "Pending,Failed"},
	} {
		c := csr.DeepCopy()
		for _, t := range tt.conditions {
			c.Status.Conditions = append(c.Status.Conditions, condition(t))
		}
		if tt.issued {
			c.Status.Certificate = []byte("x")
		}
		if got, want := registrytest.TextRow(t, columns, c), "jane|kubernetes.io/kube-apiserver-client|jane|60m|"+tt.want; got != want {
			t.Errorf("row %q, want %q", got, want)
		}
	}
	c := csr.DeepCopy()
	c.Spec.SignerName, c.Spec.ExpirationSeconds = "", nil
	if got, want := registrytest.TextRow(t, columns, c), "jane|<none>|jane|<none>|Pending"; got != want {
		t.Errorf("row %q, want %q", got, want)
	}
}
