package noderestriction

import (
	"context"
	"strings"
	"testing"

	authenticationv1 "k8s.io/api/authentication/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apiserver/pkg/authentication/user"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"

	"github.com/svcnet/svcnet/internal/admission"
)

func TestValidate(t *testing.T) {
	pods := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc})
	nodes := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{})
	mine := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "mine", UID: "u1"}, Spec: corev1.PodSpec{NodeName: "n1"}}
	theirs := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "theirs", UID: "u2"}, Spec: corev1.PodSpec{NodeName: "n2"}}
	for _, o := range []any{mine, theirs} {
		if err := pods.Add(o); err != nil {
			t.Fatal(err)
		}
	}
	if err := nodes.Add(&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1", UID: "node-uid"}}); err != nil {
		t.Fatal(err)
	}
	p := New(corelisters.NewPodLister(pods), corelisters.NewNodeLister(nodes), nil, nil)
	n1 := &user.DefaultInfo{Name: "system:node:n1", Groups: []string{"system:nodes"}}

	mirror := func(change func(*corev1.Pod)) *corev1.Pod {
		pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "kube-system", Name: "etcd-n1",
			Annotations:     map[string]string{corev1.MirrorPodAnnotationKey: "hash"},
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "v1", Kind: "Node", Name: "n1", UID: "node-uid", Controller: ptr.To(true)}}},
			Spec: corev1.PodSpec{NodeName: "n1"}}
		if change != nil {
			change(pod)
		}
		return pod
	}
	type attrs = admission.Attributes
	pod := func(op admission.Operation, sub, name string, obj, old runtime.Object) *attrs {
		return &attrs{Operation: op, Resource: podResource, Subresource: sub, Namespace: "ns", Name: name, Object: obj, OldObject: old, User: n1}
	}
	for _, c := range []struct {
		name string
		a    *attrs
		want string // "" allowed
	}{
		{"a mirror pod", pod(admission.Create, "", "etcd-n1", mirror(nil), nil), ""},
		{"a plain pod", pod(admission.Create, "", "x", mirror(func(p *corev1.Pod) { p.Annotations = nil }), nil),
			`pods "x" is forbidden: pod does not have "kubernetes.io/config.mirror" annotation, node "n1" can only create mirror pods`},
		{"a mirror pod on another node", pod(admission.Create, "", "x", mirror(func(p *corev1.Pod) { p.Spec.NodeName = "n2" }), nil),
			`node "n1" can only create pods with spec.nodeName set to itself`},
		{"a mirror pod of an old Node", pod(admission.Create, "", "x", mirror(func(p *corev1.Pod) { p.OwnerReferences[0].UID = "old" }), nil),
			"node n1 UID mismatch: expected old got node-uid"},
		{"a mirror pod with a secret", pod(admission.Create, "", "x", mirror(func(p *corev1.Pod) {
			p.Spec.Volumes = []corev1.Volume{{Name: "s", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: "s"}}}}
		}), nil), `node "n1" can not create pods that reference secrets`},
		{"a mirror pod with a pod certificate", pod(admission.Create, "", "x", mirror(func(p *corev1.Pod) {
			p.Spec.Volumes = []corev1.Volume{{Name: "tls", VolumeSource: corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{
				Sources: []corev1.VolumeProjection{{PodCertificate: &corev1.PodCertificateProjection{SignerName: "example.com/x"}}}}}}}
		}), nil), `node "n1" can not create pods that reference podcertificates`},
		{"deleting its pod", pod(admission.Delete, "", "mine", nil, mine), ""},
		{"deleting another's pod", pod(admission.Delete, "", "theirs", nil, theirs), `node "n1" can only delete pods with spec.nodeName set to itself`},
		{"its pod's status", pod(admission.Update, "status", "mine", mine, mine), ""},
		{"another's pod's status", pod(admission.Update, "status", "theirs", theirs, theirs),
			`node "n1" can only update pod status for pods with spec.nodeName set to itself`},
		{"labels through status", pod(admission.Update, "status", "mine", &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"a": "b"}}}, mine),
			`node "n1" cannot update labels through pod status`},
		{"its Node with kubelet labels", &attrs{Operation: admission.Create, Resource: nodeResource, Name: "n1", User: n1,
			Object: &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1", Labels: map[string]string{corev1.LabelHostname: "n1", "node.kubernetes.io/pool": "a", "example.com/x": "y"}}}}, ""},
		{"its Node with a role", &attrs{Operation: admission.Create, Resource: nodeResource, Name: "n1", User: n1,
			Object: &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1", Labels: map[string]string{"node-role.kubernetes.io/control-plane": "", "node-restriction.kubernetes.io/a": "b"}}}},
			`node "n1" is not allowed to set the following labels: node-restriction.kubernetes.io/a, node-role.kubernetes.io/control-plane`},
		{"another Node", &attrs{Operation: admission.Update, Resource: nodeResource, Name: "n2", User: n1, Object: &corev1.Node{}, OldObject: &corev1.Node{}},
			`node "n1" is not allowed to modify node "n2"`},
		{"its taints", &attrs{Operation: admission.Update, Resource: nodeResource, Name: "n1", User: n1, OldObject: &corev1.Node{},
			Object: &corev1.Node{Spec: corev1.NodeSpec{Taints: []corev1.Taint{{Key: "k", Effect: corev1.TaintEffectNoSchedule}}}}},
			`node "n1" is not allowed to modify taints`},
		{"removing its role", &attrs{Operation: admission.Update, Resource: nodeResource, Name: "n1", User: n1, Object: &corev1.Node{},
			OldObject: &corev1.Node{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"node-role.kubernetes.io/control-plane": ""}}}},
			`is not allowed to modify labels: node-role.kubernetes.io/control-plane`},
		{"a token for its pod", &attrs{Operation: admission.Create, Resource: accountResource, Subresource: "token", Namespace: "ns", Name: "default", User: n1,
			Object: &authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{BoundObjectRef: &authenticationv1.BoundObjectReference{APIVersion: "v1", Kind: "Pod", Name: "mine", UID: "u1"}}}}, ""},
		{"a token for another's pod", &attrs{Operation: admission.Create, Resource: accountResource, Subresource: "token", Namespace: "ns", Name: "default", User: n1,
			Object: &authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{BoundObjectRef: &authenticationv1.BoundObjectReference{APIVersion: "v1", Kind: "Pod", Name: "theirs", UID: "u2"}}}},
			"node requested token bound to a pod scheduled on a different node"},
		{"an unbound token", &attrs{Operation: admission.Create, Resource: accountResource, Subresource: "token", Namespace: "ns", Name: "default", User: n1,
			Object: &authenticationv1.TokenRequest{}}, "node requested token not bound to a pod"},
		{"its Lease", &attrs{Operation: admission.Create, Resource: leaseResource, Namespace: "kube-node-lease", User: n1,
			Object: &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: "n1"}}}, ""},
		{"another Lease", &attrs{Operation: admission.Create, Resource: leaseResource, Namespace: "kube-node-lease", User: n1,
			Object: &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: "n2"}}}, "can only access node lease with the same name as the requesting node"},
		{"its CSINode", &attrs{Operation: admission.Create, Resource: csiNodeResource, User: n1,
			Object: &storagev1.CSINode{ObjectMeta: metav1.ObjectMeta{Name: "n1"}}}, ""},
		{"another CSINode", &attrs{Operation: admission.Create, Resource: csiNodeResource, User: n1,
			Object: &storagev1.CSINode{ObjectMeta: metav1.ObjectMeta{Name: "n2"}}}, "can only access CSINode with the same name as the requesting node"},
		{"deleting its CSINode", &attrs{Operation: admission.Delete, Resource: csiNodeResource, Name: "n1", User: n1}, ""},
		{"updating another CSINode", &attrs{Operation: admission.Update, Resource: csiNodeResource, Name: "n2", User: n1,
			Object: &storagev1.CSINode{}, OldObject: &storagev1.CSINode{}}, "can only access CSINode with the same name as the requesting node"},
		{"its CSINode's status", &attrs{Operation: admission.Update, Resource: csiNodeResource, Subresource: "status", Name: "n1", User: n1,
			Object: &storagev1.CSINode{}, OldObject: &storagev1.CSINode{}}, "CSIVolumeHealth feature gate is disabled"},
		{"not a node", &attrs{Operation: admission.Delete, Resource: podResource, Namespace: "ns", Name: "theirs", User: &user.DefaultInfo{Name: "jane"}}, ""},
	} {
		err := p.Validate(context.Background(), c.a)
		switch {
		case c.want == "" && err != nil:
			t.Errorf("%s: %v", c.name, err)
		case c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want) || !apierrors.IsForbidden(err)):
			t.Errorf("%s: %v, want Forbidden %q", c.name, err, c.want)
		}
	}
}
