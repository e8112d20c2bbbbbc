package clustertrustbundle

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"math/big"
	"reflect"
	"strings"
	"testing"
	"time"

	capi "k8s.io/api/certificates/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apiserver/pkg/authentication/user"

	"github.com/svcnet/svcnet/internal/auth/authn"
	"github.com/svcnet/svcnet/internal/auth/authz"
	"github.com/svcnet/svcnet/internal/registry"
	"github.com/svcnet/svcnet/internal/registry/registrytest"
)

type ctb = *capi.ClusterTrustBundle

// certPEM is a new self-signed certificate as a PEM block, a CA's when ca
// is set, with headers when some are given.
func certPEM(t testing.TB, ca bool, headers map[string]string) string {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "ca"},
		NotBefore: time.Now(), NotAfter: time.Now().Add(time.Hour), IsCA: ca, BasicConstraintsValid: true}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, key.Public(), key)
	if err != nil {
		t.Fatal(err)
	}
	return string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Headers: headers, Bytes: der}))
}

// anchors are two CA certificates and a leaf.
type anchors struct{ a, b, leaf string }

func newAnchors(t testing.TB) anchors {
	return anchors{certPEM(t, true, nil), certPEM(t, true, nil), certPEM(t, false, nil)}
}

// valid makes bundles of example.com/foo holding anchor a.
func (x anchors) valid() ctb {
	return &capi.ClusterTrustBundle{
		ObjectMeta: metav1.ObjectMeta{Name: "example.com:foo:abc", ResourceVersion: "3"},
		Spec:       capi.ClusterTrustBundleSpec{SignerName: "example.com/foo", TrustBundle: x.a},
	}
}

const subdomainMsg = `a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')`

// The messages are upstream's (ValidateClusterTrustBundle, its name rule
// and ValidateSignerName), in its order.
func TestValidate(t *testing.T) {
	x := newAnchors(t)
	block := func(typ string) string { return string(pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: []byte("x")})) }
	registrytest.RunValidate(t, strategy{}, x.valid, []registrytest.Case[ctb]{
		{Name: "valid", Change: func(ctb) {}},
		{Name: "no signer", Change: func(b ctb) { b.Name, b.Spec.SignerName = "plain", "" }},
		{Name: "several anchors, text between blocks", Change: func(b ctb) { b.Spec.TrustBundle = "# ours\n" + x.a + "garbage\n" + x.b }},
		{Name: "no signer, a colon in the name", Change: func(b ctb) { b.Spec.SignerName = "" }, Want: []string{
			`metadata.name: Invalid value: "example.com:foo:abc": ClusterTrustBundle without signer name must not have ":" in its name`,
		}},
		{Name: "no signer, name not a subdomain", Change: func(b ctb) { b.Name, b.Spec.SignerName = "Plain", "" }, Want: []string{
			`metadata.name: Invalid value: "Plain": ` + subdomainMsg,
		}},
		{Name: "missing name prefix", Change: func(b ctb) { b.Name = "look-ma-no-prefix" }, Want: []string{
			`metadata.name: Invalid value: "look-ma-no-prefix": ClusterTrustBundle for signerName example.com/foo must be named with prefix example.com:foo:`,
		}},
		{Name: "empty name suffix", Change: func(b ctb) { b.Name = "example.com:foo:" }, Want: []string{
			`metadata.name: Invalid value: "example.com:foo:": ` + subdomainMsg,
		}},
		{Name: "bad name suffix", Change: func(b ctb) { b.Name = "example.com:foo:123notvalidDNSSubdomain" }, Want: []string{
			`metadata.name: Invalid value: "example.com:foo:123notvalidDNSSubdomain": ` + subdomainMsg,
		}},
		// generateName is checked as a prefix (a trailing dash may end
		// it), and the name generated from it as a name.
		{Name: "generated name", Change: func(b ctb) { b.GenerateName, b.Name = "example.com:foo:v-", "example.com:foo:v-x7k2q" }},
		{Name: "generateName without the prefix", Change: func(b ctb) { b.GenerateName, b.Name = "v-", "v-x7k2q" }, Want: []string{
			`metadata.generateName: Invalid value: "v-": ClusterTrustBundle for signerName example.com/foo must be named with prefix example.com:foo:`,
			`metadata.name: Invalid value: "v-x7k2q": ClusterTrustBundle for signerName example.com/foo must be named with prefix example.com:foo:`,
		}},
		{Name: "signer without a path", Change: func(b ctb) { b.Name, b.Spec.SignerName = "invalid:abc", "invalid" }, Want: []string{
			`spec.signerName: Invalid value: "invalid": must be a fully qualified domain and path of the form 'example.com/signer-name'`,
		}},
		{Name: "signer domain of one label", Change: func(b ctb) { b.Name, b.Spec.SignerName = "example:foo:abc", "example/foo" }, Want: []string{
			`spec.signerName: Invalid value: "example": should be a domain with at least two segments separated by dots`,
		}},
		{Name: "no anchors", Change: func(b ctb) { b.Spec.TrustBundle = "" }, Want: []string{
			`spec.trustBundle: Invalid value: "<value omitted>": at least one trust anchor must be provided`,
		}},
		{Name: "no blocks", Change: func(b ctb) { b.Spec.TrustBundle = "not PEM at all" }, Want: []string{
			`spec.trustBundle: Invalid value: "<value omitted>": at least one trust anchor must be provided`,
		}},
		{Name: "bad block type", Change: func(b ctb) { b.Spec.TrustBundle = x.a + block("NOTACERTIFICATE") }, Want: []string{
			`spec.trustBundle: Invalid value: "<value omitted>": entry 1 has bad block type: NOTACERTIFICATE`,
		}},
		{Name: "block headers", Change: func(b ctb) {
			b.Spec.TrustBundle = x.a + certPEM(t, true, map[string]string{"Proc-Type": "4,ENCRYPTED"})
		}, Want: []string{
			`spec.trustBundle: Invalid value: "<value omitted>": entry 1 has PEM block headers`,
		}},
		{Name: "not X.509", Change: func(b ctb) { b.Spec.TrustBundle = block("CERTIFICATE") }, Want: []string{
			`spec.trustBundle: Invalid value: "<value omitted>": entry 0 does not parse as X.509`,
		}},
		{Name: "not a CA", Change: func(b ctb) { b.Spec.TrustBundle = x.leaf }, Want: []string{
			`spec.trustBundle: Invalid value: "<value omitted>": entry 0 does not have the CA bit set`,
		}},
		{Name: "duplicates", Change: func(b ctb) { b.Spec.TrustBundle = x.a + x.b + x.a + x.b + x.b }, Want: []string{
			`spec.trustBundle: Invalid value: "<value omitted>": duplicate trust anchor (indices [0 2])`,
			`spec.trustBundle: Invalid value: "<value omitted>": duplicate trust anchor (indices [1 3 4])`,
		}},
		// A bad block hides the duplicates.
		{Name: "bad blocks and duplicates", Change: func(b ctb) { b.Spec.TrustBundle = x.a + x.leaf + x.a + block("KEY") }, Want: []string{
			`spec.trustBundle: Invalid value: "<value omitted>": entry 1 does not have the CA bit set`,
			`spec.trustBundle: Invalid value: "<value omitted>": entry 3 has bad block type: KEY`,
		}},
		{Name: "too big", Change: func(b ctb) { b.Spec.TrustBundle = x.a + strings.Repeat("x", maxTrustBundleSize) }, Want: []string{
			`spec.trustBundle: Too long: may not be more than 1048576 bytes`,
		}},
		{Name: "everything wrong", Change: func(b ctb) { b.Name, b.Spec.SignerName, b.Spec.TrustBundle = "foo", "example.com/Foo", x.leaf }, Want: []string{
			`metadata.name: Invalid value: "foo": ClusterTrustBundle for signerName example.com/Foo must be named with prefix example.com:Foo:`,
			`spec.signerName: Invalid value: "Foo": validating label "Foo": ` + subdomainMsg,
			`spec.trustBundle: Invalid value: "<value omitted>": entry 0 does not have the CA bit set`,
		}},
	})
}

func TestValidateUpdate(t *testing.T) {
	x := newAnchors(t)
	registrytest.RunValidateUpdate(t, strategy{}, x.valid, []registrytest.Case[ctb]{
		{Name: "labels", Change: func(b ctb) { b.Labels = map[string]string{"alive": "true"} }},
		{Name: "new anchors", Change: func(b ctb) { b.Spec.TrustBundle = x.b + x.a }},
		{Name: "bad new anchors", Change: func(b ctb) { b.Spec.TrustBundle = x.b + x.b }, Want: []string{
			`spec.trustBundle: Invalid value: "<value omitted>": duplicate trust anchor (indices [0 1])`,
		}},
		// A stored bundle that no longer parses is kept while it is kept.
		{Name: "stored bundle not parsed again", Old: func(b ctb) { b.Spec.TrustBundle = x.leaf },
			Change: func(b ctb) { b.Labels = map[string]string{"a": "b"} }},
		{Name: "signer changed", Change: func(b ctb) { b.Spec.SignerName = "example.com/bar" }, Want: []string{
			`metadata.name: Invalid value: "example.com:foo:abc": ClusterTrustBundle for signerName example.com/bar must be named with prefix example.com:bar:`,
			`spec.signerName: Invalid value: "example.com/bar": field is immutable`,
		}},
		{Name: "signer removed", Old: func(b ctb) { b.Name = "plain" }, Change: func(b ctb) { b.Spec.SignerName = "" }, Want: []string{
			`spec.signerName: Invalid value: "": field is immutable`,
		}},
	})
}

// TestStrategy: upstream's strategy changes nothing on create or update;
// there is no status to keep.
func TestStrategy(t *testing.T) {
	x := newAnchors(t)
	b := x.valid()
	if got := registrytest.Created(strategy{}, x.valid()); !reflect.DeepEqual(got, b) {
		t.Errorf("create changed the bundle: %+v", got)
	}
	next := x.valid()
	next.Spec.TrustBundle = x.b
	strategy{}.PrepareForUpdate(next, b)
	if next.Spec.TrustBundle != x.b {
		t.Errorf("update kept the stored spec: %+v", next.Spec)
	}
	if _, ok := any(strategy{}).(registry.StatusUpdater); ok {
		t.Error("a bundle has no status")
	}
}

func TestResource(t *testing.T) {
	r := Resource(nil)
	if r.Resource != "clustertrustbundles" || r.Singular != "clustertrustbundle" || r.ShortNames != nil || r.Categories != nil ||
		r.Namespaced || r.Status || r.Generation || r.KeepStatusOnCreate || r.ReturnDeletedObject || r.Scale != nil ||
		r.Subresources != nil || r.Kind != capi.SchemeGroupVersion.WithKind("ClusterTrustBundle") || !registry.Scheme.Recognizes(r.Kind) {
		t.Errorf("unexpected discovery data: %+v", r)
	}
	// The name is left to Validate, which knows the signer.
	if msgs := r.NameValidation("Not:A:Subdomain", false); msgs != nil {
		t.Errorf("name validation: %v", msgs)
	}
	x := newAnchors(t)
	if got := r.Fields(x.valid()); !reflect.DeepEqual(got, fields.Set{"spec.signerName": "example.com/foo"}) {
		t.Errorf("fields %v", got)
	}
}

func TestColumns(t *testing.T) {
	x := newAnchors(t)
	names := []string{"Name", "SignerName"}
	registrytest.ExpectRow(t, Resource(nil).Columns, x.valid(), names, []interface{}{"example.com:foo:abc", "example.com/foo"})
	plain := x.valid()
	plain.Name, plain.Spec.SignerName = "plain", ""
	registrytest.ExpectRow(t, Resource(nil).Columns, plain, names, []interface{}{"plain", "<none>"})
	if d := Resource(nil).Columns[1].Description; !strings.HasPrefix(d, "signerName indicates the associated signer, if any.") {
		t.Errorf("SIGNERNAME description %q", d)
	}
}

// signers allows verb on the signers listed; a name mapped to "error"
// makes the authorizer fail.
type signers map[string][]string

var errAuthz = errors.New("authorizer down")

func (s signers) Authorize(_ context.Context, a authz.Attributes) (authz.Decision, string, error) {
	if a.APIGroup != capi.GroupName || a.Resource != "signers" || a.APIVersion != "*" || !a.ResourceRequest || a.User.GetName() != "bob" {
		return authz.NoOpinion, "", nil
	}
	for _, n := range s[a.Verb] {
		if n == a.Name {
			return authz.Allow, "", nil
		}
	}
	for _, n := range s["error"] {
		if n == a.Name {
			return authz.Deny, "", errAuthz
		}
	}
	return authz.NoOpinion, "", nil
}

// TestAttest is upstream's ClusterTrustBundleAttest: a create or update of
// a bundle of a signer needs "attest" on the signer or on <domain>/*.
func TestAttest(t *testing.T) {
	x := newAnchors(t)
	bob := authn.WithUser(context.Background(), &user.DefaultInfo{Name: "bob", Groups: []string{"system:authenticated"}})
	const denied = `clustertrustbundles.certificates.k8s.io "example.com:foo:abc" is forbidden: user not permitted to attest for signerName "example.com/foo"`
	plain := x.valid()
	plain.Name, plain.Spec.SignerName = "plain", ""
	relabelled := x.valid()
	relabelled.Labels = map[string]string{"alive": "true"}
	collected := x.valid()
	collected.Finalizers = []string{"example.com/keep"}
	collected.OwnerReferences = []metav1.OwnerReference{{APIVersion: "v1", Kind: "ConfigMap", Name: "owner", UID: "1"}}
	collected.ManagedFields = []metav1.ManagedFieldsEntry{{Manager: "gc"}}
	for _, tt := range []struct {
		name   string
		ctx    context.Context
		rights authz.Authorizer
		obj    ctb
		update bool
		want   string
	}{
		{"create, the signer", bob, signers{"attest": {"example.com/foo"}}, x.valid(), false, ""},
		{"create, the signer's domain", bob, signers{"attest": {"example.com/*"}}, x.valid(), false, ""},
		{"create, another signer", bob, signers{"attest": {"example.com/bar", "example.org/*"}}, x.valid(), false, denied},
		{"create, only sign", bob, signers{"sign": {"example.com/foo"}, "approve": {"example.com/*"}}, x.valid(), false, denied},
		{"create without a signer", bob, signers{}, plain, false, ""},
		{"no authorizer", bob, nil, x.valid(), false, denied},
		{"no user", context.Background(), signers{"attest": {"example.com/foo"}}, x.valid(), false, denied},
		// As upstream, an error on the signer still asks about the domain.
		{"authorizer error, then the domain", bob, signers{"error": {"example.com/foo"}, "attest": {"example.com/*"}}, x.valid(), false, ""},
		{"authorizer errors", bob, signers{"error": {"example.com/foo", "example.com/*"}}, x.valid(), false, denied},
		{"update, the signer", bob, signers{"attest": {"example.com/foo"}}, relabelled, true, ""},
		{"update, the signer's domain", bob, signers{"attest": {"example.com/*"}}, relabelled, true, ""},
		{"update without the right", bob, signers{}, relabelled, true, denied},
		{"update of the garbage collector's fields", bob, signers{}, collected, true, ""},
		{"update without a signer", bob, signers{}, plain, true, ""},
	} {
		t.Run(tt.name, func(t *testing.T) {
			s := strategy{authorizer: tt.rights}
			var err error
			if tt.update {
				old := x.valid()
				if tt.obj.Spec.SignerName == "" {
					old = plain.DeepCopy()
				}
				err = s.AdmitUpdate(tt.ctx, "", tt.obj, old)
				// A write of an update is not checked again.
				if _, _, werr := s.PrepareWrite(tt.ctx, tt.obj, old, false); werr != nil {
					t.Errorf("PrepareWrite of an update: %v", werr)
				}
			} else {
				_, _, err = s.PrepareWrite(tt.ctx, tt.obj, nil, true)
			}
			switch {
			case tt.want == "" && err != nil:
				t.Errorf("refused: %v", err)
			case tt.want != "" && (!apierrors.IsForbidden(err) || err.Error() != tt.want):
				t.Errorf("got %v, want %s", err, tt.want)
			}
		})
	}
}
