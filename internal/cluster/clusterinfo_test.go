package cluster

import (
	"context"
	"testing"

	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/clientcmd"
)

func TestEnsureJoinObjects(t *testing.T) {
	ctx := context.Background()
	cs := fake.NewClientset()
	ca := []byte("-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n")
	if err := ensureJoinObjects(ctx, cs, "https://10.0.0.1:6443", ca); err != nil {
		t.Fatal(err)
	}
	cm, err := cs.CoreV1().ConfigMaps("kube-public").Get(ctx, "cluster-info", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := clientcmd.Load([]byte(cm.Data["kubeconfig"]))
	if err != nil {
		t.Fatal(err)
	}
	if c := cfg.Clusters[""]; len(cfg.Clusters) != 1 || c == nil || c.Server != "https://10.0.0.1:6443" || string(c.CertificateAuthorityData) != string(ca) ||
		len(cfg.AuthInfos) != 0 || len(cfg.Contexts) != 0 {
		t.Errorf("cluster-info kubeconfig = %s", cm.Data["kubeconfig"])
	}
	rb, err := cs.RbacV1().RoleBindings("kube-public").Get(ctx, "kubeadm:bootstrap-signer-clusterinfo", metav1.GetOptions{})
	if err != nil || rb.Subjects[0].Name != "system:anonymous" || rb.RoleRef.Name != "kubeadm:bootstrap-signer-clusterinfo" {
		t.Errorf("cluster-info RoleBinding = %+v, %v", rb, err)
	}
	for name, want := range map[string][2]string{
		"kubeadm:kubelet-bootstrap":                     {"system:node-bootstrapper", "system:bootstrappers:kubeadm:default-node-token"},
		"kubeadm:node-autoapprove-bootstrap":            {"system:certificates.k8s.io:certificatesigningrequests:nodeclient", "system:bootstrappers:kubeadm:default-node-token"},
		"kubeadm:node-autoapprove-certificate-rotation": {"system:certificates.k8s.io:certificatesigningrequests:selfnodeclient", "system:nodes"},
		"svcnet:node-proxier":                           {"system:node-proxier", "system:nodes"},
	} {
		crb, err := cs.RbacV1().ClusterRoleBindings().Get(ctx, name, metav1.GetOptions{})
		if err != nil || crb.RoleRef.Name != want[0] || len(crb.Subjects) != 1 || crb.Subjects[0].Kind != "Group" || crb.Subjects[0].Name != want[1] {
			t.Errorf("ClusterRoleBinding %s = %+v, %v", name, crb, err)
		}
	}

	// Again, over a signed cluster-info with another server and a binding
	// changed: the kubeconfig and the subjects are put back, the
	// signatures kept.
	cm.Data["jws-kubeconfig-abcdef"] = "sig"
	cm.Data["kubeconfig"] = "stale"
	if _, err := cs.CoreV1().ConfigMaps("kube-public").Update(ctx, cm, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	crb, _ := cs.RbacV1().ClusterRoleBindings().Get(ctx, "kubeadm:kubelet-bootstrap", metav1.GetOptions{})
	crb.Subjects = []rbacv1.Subject{{Kind: "User", Name: "someone"}}
	if _, err := cs.RbacV1().ClusterRoleBindings().Update(ctx, crb, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := ensureJoinObjects(ctx, cs, "https://10.0.0.1:6443", ca); err != nil {
		t.Fatal(err)
	}
	again, _ := cs.CoreV1().ConfigMaps("kube-public").Get(ctx, "cluster-info", metav1.GetOptions{})
	if again.Data["jws-kubeconfig-abcdef"] != "sig" || again.Data["kubeconfig"] == "stale" {
		t.Errorf("cluster-info after a restart = %q", again.Data)
	}
	crb, _ = cs.RbacV1().ClusterRoleBindings().Get(ctx, "kubeadm:kubelet-bootstrap", metav1.GetOptions{})
	if crb.Subjects[0].Name != "system:bootstrappers:kubeadm:default-node-token" {
		t.Errorf("subjects not put back: %+v", crb.Subjects)
	}
}
