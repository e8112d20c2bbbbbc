package noderestriction

import (
	"context"
	"strings"
	"testing"

	certificatesv1 "k8s.io/api/certificates/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apiserver/pkg/authentication/user"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"

	"github.com/svcnet/svcnet/internal/admission"
	"github.com/svcnet/svcnet/internal/auth/authz"
)

// signers lets a node request certificates of example.com/extra for the
// service account web-sa, as an RBAC rule on the verb
// request-serviceaccounts-podcertificate-signer would.
type signers struct{}

func (signers) Authorize(_ context.Context, a authz.Attributes) (authz.Decision, string, error) {
	if a.Verb == "request-serviceaccounts-podcertificate-signer" && a.APIGroup == "certificates.k8s.io" &&
		a.Resource == "example.com:extra" && a.Namespace == "ns" && a.Name == "web-sa" && a.User.GetName() == "system:node:n1" {
		return authz.Allow, "", nil
	}
	return authz.NoOpinion, "", nil
}

// TestPodCertificateRequests: a node may create a request only for a pod
// of its own whose projection names the signer (or for a signer the
// authorizer allows), naming itself, the pod and its service account
// with their current UIDs; a UID that differs is refused, but not as
// Forbidden (the cache may lag), and nothing else is allowed.
func TestPodCertificateRequests(t *testing.T) {
	pods := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc})
	nodes := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{})
	accounts := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc})
	projected := corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{Sources: []corev1.VolumeProjection{
		{PodCertificate: &corev1.PodCertificateProjection{SignerName: "example.com/pods", KeyType: "ED25519", CredentialBundlePath: "b.pem"}}}}}
	for _, o := range []any{
		&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "web", UID: "pod-uid"},
			Spec: corev1.PodSpec{NodeName: "n1", ServiceAccountName: "web-sa", Volumes: []corev1.Volume{{Name: "tls", VolumeSource: projected}}}},
		&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "db", UID: "db-uid"},
			Spec: corev1.PodSpec{NodeName: "n2", ServiceAccountName: "web-sa", Volumes: []corev1.Volume{{Name: "tls", VolumeSource: projected}}}},
		&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "static", UID: "static-uid", Annotations: map[string]string{corev1.MirrorPodAnnotationKey: "x"}},
			Spec: corev1.PodSpec{NodeName: "n1", ServiceAccountName: "web-sa"}},
	} {
		if err := pods.Add(o); err != nil {
			t.Fatal(err)
		}
	}
	if err := nodes.Add(&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1", UID: "node-uid"}}); err != nil {
		t.Fatal(err)
	}
	if err := accounts.Add(&corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "web-sa", UID: "sa-uid"}}); err != nil {
		t.Fatal(err)
	}
	p := New(corelisters.NewPodLister(pods), corelisters.NewNodeLister(nodes), corelisters.NewServiceAccountLister(accounts), signers{})
	n1 := &user.DefaultInfo{Name: "system:node:n1", Groups: []string{"system:nodes"}}

	request := func(change func(*certificatesv1.PodCertificateRequestSpec)) *admission.Attributes {
		r := &certificatesv1.PodCertificateRequest{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", GenerateName: "req-"},
			Spec: certificatesv1.PodCertificateRequestSpec{SignerName: "example.com/pods", PodName: "web", PodUID: "pod-uid",
				ServiceAccountName: "web-sa", ServiceAccountUID: "sa-uid", NodeName: "n1", NodeUID: "node-uid"}}
		if change != nil {
			change(&r.Spec)
		}
		return &admission.Attributes{Operation: admission.Create, Resource: pcrResource, Version: "v1", Namespace: "ns", Object: r, User: n1}
	}
	for _, c := range []struct {
		name      string
		a         *admission.Attributes
		want      string // "" allowed
		forbidden bool
	}{
		{"its pod's request", request(nil), "", false},
		{"a signer the authorizer allows", request(func(s *certificatesv1.PodCertificateRequestSpec) { s.SignerName = "example.com/extra" }), "", false},
		{"another signer", request(func(s *certificatesv1.PodCertificateRequestSpec) { s.SignerName = "example.com/other" }),
			`podcertificaterequests.certificates.k8s.io "req-" is forbidden: pod "ns/web" does not mount a podCertificate projected volume for signer "example.com/other"`, true},
		{"for another node", request(func(s *certificatesv1.PodCertificateRequestSpec) { s.NodeName = "n2" }),
			`PodCertificateRequest.Spec.NodeName="n2", which is not the requesting node "n1"`, true},
		{"an old node UID", request(func(s *certificatesv1.PodCertificateRequestSpec) { s.NodeUID = "old" }),
			`PodCertificateRequest for pod "ns/web" names node UID "old", inconsistent with the running node ("node-uid")`, false},
		{"a pod that does not exist", request(func(s *certificatesv1.PodCertificateRequestSpec) { s.PodName = "gone" }),
			`while retrieving pod "ns/gone" named in the PodCertificateRequest: pod "gone" not found`, false},
		{"an old pod UID", request(func(s *certificatesv1.PodCertificateRequestSpec) { s.PodUID = "old" }),
			`PodCertificateRequest for pod "ns/web" contains pod UID ("old") which differs from running pod "pod-uid"`, false},
		{"another node's pod", request(func(s *certificatesv1.PodCertificateRequestSpec) { s.PodName, s.PodUID = "db", "db-uid" }),
			`pod "ns/db" is not running on node "n1" named in the PodCertificateRequest`, true},
		{"a mirror pod", request(func(s *certificatesv1.PodCertificateRequestSpec) { s.PodName, s.PodUID = "static", "static-uid" }),
			`pod "ns/static" is a mirror pod`, true},
		{"another service account", request(func(s *certificatesv1.PodCertificateRequestSpec) { s.ServiceAccountName = "default" }),
			`PodCertificateRequest for pod "ns/web" contains serviceAccountName ("default") that differs from running pod ("web-sa")`, true},
		{"an old service account UID", request(func(s *certificatesv1.PodCertificateRequestSpec) { s.ServiceAccountUID = "old" }),
			`PodCertificateRequest for pod "ns/web" names service account UID "old", which differs from the running service account ("sa-uid")`, false},
		{"an update", &admission.Attributes{Operation: admission.Update, Resource: pcrResource, Namespace: "ns", Name: "req-1", User: n1,
			Object: &certificatesv1.PodCertificateRequest{}, OldObject: &certificatesv1.PodCertificateRequest{}}, "unexpected operation UPDATE", true},
	} {
		err := p.Validate(context.Background(), c.a)
		switch {
		case c.want == "" && err != nil:
			t.Errorf("%s: %v", c.name, err)
		case c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want) || apierrors.IsForbidden(err) != c.forbidden):
			t.Errorf("%s: %v, want %q (Forbidden: %v)", c.name, err, c.want, c.forbidden)
		}
	}
}
