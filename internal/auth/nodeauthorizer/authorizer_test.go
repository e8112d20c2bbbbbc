package nodeauthorizer

import (
	"context"
	"testing"

	capi "k8s.io/api/certificates/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apiserver/pkg/authentication/user"
	certlisters "k8s.io/client-go/listers/certificates/v1"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"

	"github.com/svcnet/svcnet/internal/auth/authz"
	"github.com/svcnet/svcnet/internal/auth/bootstrappolicy"
)

func TestAuthorize(t *testing.T) {
	pods := cache.NewIndexer(cache.MetaNamespaceKeyFunc, Indexers)
	claims := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc})
	for _, p := range []*corev1.Pod{
		{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "web"}, Spec: corev1.PodSpec{NodeName: "n1", ServiceAccountName: "web-sa",
			Volumes: []corev1.Volume{
				{Name: "s", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: "tls"}}},
				{Name: "d", VolumeSource: corev1.VolumeSource{PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: "data"}}},
			},
			ResourceClaims: []corev1.PodResourceClaim{
				{Name: "gpu", ResourceClaimName: ptr.To("shared-gpu")},
				{Name: "nic", ResourceClaimTemplateName: ptr.To("nic")},
				{Name: "fpga", ResourceClaimTemplateName: ptr.To("fpga")},
			},
			Containers: []corev1.Container{{Name: "c", EnvFrom: []corev1.EnvFromSource{{ConfigMapRef: &corev1.ConfigMapEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: "env"}}}}}}},
			// The claim made from the nic template (none was needed
			// for fpga) and the one of its extended resources.
			Status: corev1.PodStatus{ResourceClaimStatuses: []corev1.PodResourceClaimStatus{
				{Name: "nic", ResourceClaimName: ptr.To("web-nic-x7k2p")}, {Name: "fpga"},
			}, ExtendedResourceClaimStatus: &corev1.PodExtendedResourceClaimStatus{ResourceClaimName: "web-extended-resources-q8d4z"}}},
		{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "db"}, Spec: corev1.PodSpec{NodeName: "n2",
			Volumes: []corev1.Volume{{Name: "s", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: "db-pw"}}}}}},
	} {
		if err := pods.Add(p); err != nil {
			t.Fatal(err)
		}
	}
	if err := claims.Add(&corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "data"}, Spec: corev1.PersistentVolumeClaimSpec{VolumeName: "pv-1"}}); err != nil {
		t.Fatal(err)
	}
	pcrs := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc})
	for _, r := range []*capi.PodCertificateRequest{
		{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "web-pcr"}, Spec: capi.PodCertificateRequestSpec{NodeName: "n1"}},
		{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "db-pcr"}, Spec: capi.PodCertificateRequestSpec{NodeName: "n2"}},
	} {
		if err := pcrs.Add(r); err != nil {
			t.Fatal(err)
		}
	}
	z := &Authorizer{Pods: pods, Claims: corelisters.NewPersistentVolumeClaimLister(claims),
		PodCertificateRequests: certlisters.NewPodCertificateRequestLister(pcrs), Rules: bootstrappolicy.NodeRules()}
	n1 := &user.DefaultInfo{Name: "system:node:n1", Groups: []string{"system:nodes", "system:authenticated"}}
	res := func(verb, ns, resource, name string) authz.Attributes {
		return authz.Attributes{User: n1, Verb: verb, ResourceRequest: true, APIVersion: "v1", Namespace: ns, Resource: resource, Name: name}
	}
	sub := func(a authz.Attributes, s string) authz.Attributes { a.Subresource = s; return a }
	group := func(a authz.Attributes, g string) authz.Attributes { a.APIGroup = g; return a }
	selected := func(a authz.Attributes, sel string) authz.Attributes {
		a.FieldSelector = fields.ParseSelectorOrDie(sel)
		return a
	}
	noRelation := "no relationship found between node 'n1' and this object"
	for _, c := range []struct {
		name   string
		a      authz.Attributes
		want   authz.Decision
		reason string
	}{
		{"its pod's secret", res("get", "ns", "secrets", "tls"), authz.Allow, ""},
		{"its pod's secret, watched alone", res("watch", "ns", "secrets", "tls"), authz.Allow, ""},
		{"another node's pod's secret", res("get", "ns", "secrets", "db-pw"), authz.NoOpinion, noRelation},
		{"every secret", res("list", "ns", "secrets", ""), authz.NoOpinion, "No Object name found"},
		{"writing a secret", res("update", "ns", "secrets", "tls"), authz.NoOpinion, "can only read resources of this type"},
		{"an env ConfigMap", res("get", "ns", "configmaps", "env"), authz.Allow, ""},
		{"its pod's claim", res("get", "ns", "persistentvolumeclaims", "data"), authz.Allow, ""},
		{"watching claims", res("watch", "ns", "persistentvolumeclaims", "data"), authz.NoOpinion, "can only get individual resources of this type"},
		{"the claim's volume", res("get", "", "persistentvolumes", "pv-1"), authz.Allow, ""},
		{"another volume", res("get", "", "persistentvolumes", "pv-2"), authz.NoOpinion, noRelation},
		{"a token for its pod's account", sub(res("create", "ns", "serviceaccounts", "web-sa"), "token"), authz.Allow, ""},
		{"a token for another account", sub(res("create", "ns", "serviceaccounts", "default"), "token"), authz.NoOpinion, noRelation},
		// The service accounts of its pods, for the pod certificate
		// manager, as upstream's authorizer with PodCertificateRequest.
		{"its pod's account", res("get", "ns", "serviceaccounts", "web-sa"), authz.Allow, ""},
		{"another account", res("get", "ns", "serviceaccounts", "default"), authz.NoOpinion, noRelation},
		{"listing accounts", res("list", "ns", "serviceaccounts", ""), authz.NoOpinion, "can only create tokens for individual service accounts"},
		{"its pods", selected(res("watch", "", "pods", ""), "spec.nodeName=n1"), authz.Allow, ""},
		{"another node's pods", selected(res("list", "", "pods", ""), "spec.nodeName=n2"), authz.NoOpinion, "can only list/watch pods with spec.nodeName field selector"},
		{"its pod", res("get", "ns", "pods", "web"), authz.Allow, ""},
		{"another node's pod", res("get", "ns", "pods", "db"), authz.NoOpinion, noRelation},
		{"pod status", sub(res("patch", "ns", "pods", "db"), "status"), authz.Allow, ""},
		{"its Node", res("get", "", "nodes", "n1"), authz.Allow, ""},
		{"every Node", res("list", "", "nodes", ""), authz.NoOpinion, "node 'n1' cannot read all nodes, only its own Node object"},
		{"another Node", res("get", "", "nodes", "n2"), authz.NoOpinion, "node 'n1' cannot read 'n2', only its own Node object"},
		{"its Lease", group(res("update", "kube-node-lease", "leases", "n1"), "coordination.k8s.io"), authz.Allow, ""},
		{"another Lease", group(res("update", "kube-node-lease", "leases", "n2"), "coordination.k8s.io"), authz.NoOpinion, "can only access node lease with the same name as the requesting node"},
		{"a Lease elsewhere", group(res("get", "default", "leases", "n1"), "coordination.k8s.io"), authz.NoOpinion, `can only access leases in the "kube-node-lease" system namespace`},
		// A node keeps its own CSINode, as upstream's kubelet; its status
		// is CSIVolumeHealth's, which is off.
		{"its CSINode", group(res("patch", "", "csinodes", "n1"), "storage.k8s.io"), authz.Allow, ""},
		{"creating a CSINode", group(res("create", "", "csinodes", ""), "storage.k8s.io"), authz.Allow, ""},
		{"deleting its CSINode", group(res("delete", "", "csinodes", "n1"), "storage.k8s.io"), authz.Allow, ""},
		{"another CSINode", group(res("get", "", "csinodes", "n2"), "storage.k8s.io"), authz.NoOpinion, "can only access CSINode with the same name as the requesting node"},
		{"listing CSINodes", group(res("list", "", "csinodes", ""), "storage.k8s.io"), authz.NoOpinion, "can only get, create, update, patch, or delete a CSINode"},
		{"its CSINode's status", group(sub(res("update", "", "csinodes", "n1"), "status"), "storage.k8s.io"), authz.NoOpinion, "CSINode status access requires CSIVolumeHealth feature"},
		{"another CSINode subresource", group(sub(res("list", "", "csinodes", "n1"), "foo"), "storage.k8s.io"), authz.NoOpinion, "cannot authorize CSINode subresources"},
		// ResourceClaims, as upstream's authorizer: those of its pods,
		// by name or made from a template for them, may be read.
		{"its pod's ResourceClaim", group(res("get", "ns", "resourceclaims", "shared-gpu"), "resource.k8s.io"), authz.Allow, ""},
		{"its pod's templated ResourceClaim", group(res("get", "ns", "resourceclaims", "web-nic-x7k2p"), "resource.k8s.io"), authz.Allow, ""},
		{"its pod's extended resources' ResourceClaim", group(res("get", "ns", "resourceclaims", "web-extended-resources-q8d4z"), "resource.k8s.io"), authz.Allow, ""},
		{"another ResourceClaim", group(res("get", "ns", "resourceclaims", "nic"), "resource.k8s.io"), authz.NoOpinion, noRelation},
		{"its pod's ResourceClaim elsewhere", group(res("get", "other", "resourceclaims", "shared-gpu"), "resource.k8s.io"), authz.NoOpinion, noRelation},
		{"watching ResourceClaims", group(res("watch", "ns", "resourceclaims", "shared-gpu"), "resource.k8s.io"), authz.NoOpinion, "can only get individual resources of this type"},
		{"a ResourceClaim's status", group(sub(res("get", "ns", "resourceclaims", "shared-gpu"), "status"), "resource.k8s.io"), authz.NoOpinion, "cannot get subresource"},
		{"Services (a static rule)", res("watch", "", "services", ""), authz.Allow, ""},
		{"a RuntimeClass (a static rule)", group(res("get", "", "runtimeclasses", "gvisor"), "node.k8s.io"), authz.Allow, ""},
		{"writing a RuntimeClass", group(res("update", "", "runtimeclasses", "gvisor"), "node.k8s.io"), authz.NoOpinion, ""},
		{"Deployments", group(res("list", "", "deployments", ""), "apps"), authz.NoOpinion, ""},
		// The kubelet reads ClusterTrustBundles for projected volumes,
		// through system:node's static rule, as upstream's NodeRules.
		{"a ClusterTrustBundle", group(res("get", "", "clustertrustbundles", "example.com:foo:abc"), "certificates.k8s.io"), authz.Allow, ""},
		{"listing ClusterTrustBundles", group(res("list", "", "clustertrustbundles", ""), "certificates.k8s.io"), authz.Allow, ""},
		{"watching ClusterTrustBundles", group(res("watch", "", "clustertrustbundles", ""), "certificates.k8s.io"), authz.Allow, ""},
		{"writing a ClusterTrustBundle", group(res("create", "", "clustertrustbundles", ""), "certificates.k8s.io"), authz.NoOpinion, ""},
		{"deleting a ClusterTrustBundle", group(res("delete", "", "clustertrustbundles", "example.com:foo:abc"), "certificates.k8s.io"), authz.NoOpinion, ""},
		// PodCertificateRequests, as upstream's authorizer: created freely
		// (NodeRestriction narrows), read when they name the node.
		{"creating a PodCertificateRequest", group(res("create", "ns", "podcertificaterequests", ""), "certificates.k8s.io"), authz.Allow, ""},
		{"its PodCertificateRequest", group(res("get", "ns", "podcertificaterequests", "web-pcr"), "certificates.k8s.io"), authz.Allow, ""},
		{"another node's PodCertificateRequest", group(res("get", "ns", "podcertificaterequests", "db-pcr"), "certificates.k8s.io"), authz.NoOpinion, noRelation},
		{"a missing PodCertificateRequest", group(res("get", "ns", "podcertificaterequests", "gone"), "certificates.k8s.io"), authz.NoOpinion, noRelation},
		{"watching its PodCertificateRequests", group(selected(res("watch", "", "podcertificaterequests", ""), "spec.nodeName=n1"), "certificates.k8s.io"), authz.Allow, ""},
		{"listing every PodCertificateRequest", group(res("list", "ns", "podcertificaterequests", ""), "certificates.k8s.io"), authz.NoOpinion, "can only list/watch podcertificaterequests with nodeName field selector"},
		{"another node's PodCertificateRequests", group(selected(res("list", "", "podcertificaterequests", ""), "spec.nodeName=n2"), "certificates.k8s.io"), authz.NoOpinion, "can only list/watch podcertificaterequests with nodeName field selector"},
		{"deleting a PodCertificateRequest", group(res("delete", "ns", "podcertificaterequests", "web-pcr"), "certificates.k8s.io"), authz.NoOpinion, "nodes may not delete podcertificaterequests"},
		{"a PodCertificateRequest's status", group(sub(res("update", "ns", "podcertificaterequests", "web-pcr"), "status"), "certificates.k8s.io"), authz.NoOpinion, "nodes may not access the status subresource of PodCertificateRequests"},
		{"signing for a signer", group(res("sign", "", "signers", "example.com/foo"), "certificates.k8s.io"), authz.NoOpinion, ""},
		{"attesting for a signer", group(res("attest", "", "signers", "example.com/foo"), "certificates.k8s.io"), authz.NoOpinion, ""},
	} {
		d, reason, err := z.Authorize(context.Background(), c.a)
		if err != nil || d != c.want || reason != c.reason {
			t.Errorf("%s: %v %q %v, want %v %q", c.name, d, reason, err, c.want, c.reason)
		}
	}

	bare := &Authorizer{Pods: pods, Rules: bootstrappolicy.NodeRules()}
	if d, reason, _ := bare.Authorize(context.Background(), group(res("get", "ns", "podcertificaterequests", "web-pcr"), "certificates.k8s.io")); d != authz.NoOpinion || reason != noRelation {
		t.Errorf("without PodCertificateRequests: %v %q", d, reason)
	}

	jane := res("get", "ns", "secrets", "tls")
	jane.User = &user.DefaultInfo{Name: "jane"}
	if d, _, _ := z.Authorize(context.Background(), jane); d != authz.NoOpinion {
		t.Errorf("a user who is no node: %v", d)
	}
	nameless := res("get", "ns", "secrets", "tls")
	nameless.User = &user.DefaultInfo{Name: "system:node:", Groups: []string{"system:nodes"}}
	if d, reason, _ := z.Authorize(context.Background(), nameless); d != authz.NoOpinion || reason != `unknown node for user "system:node:"` {
		t.Errorf("a node without a name: %v %q", d, reason)
	}
}
