package cluster

// What kubeadm's bootstrap-token phase writes so that nodes can join with a
// bootstrap token, written by svcnet up at every start: the ConfigMap
// kube-public/cluster-info, which anyone may read, holding a kubeconfig
// with the API server's URL and CA (no credentials; the bootstrap signer
// signs it for each token), and the bindings that let a token's user ask
// for a node certificate and have it approved.

import (
	"context"
	"fmt"
	"reflect"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	bootstrapapi "k8s.io/cluster-bootstrap/token/api"

	"github.com/svcnet/svcnet/internal/auth/bootstraptoken"
	"github.com/svcnet/svcnet/internal/auth/nodeauthorizer"
)

// kubeadm's names of the join RBAC, and svcnet's own for what kubeadm
// leaves to kube-proxy's ServiceAccount.
const (
	clusterInfoRole             = "kubeadm:bootstrap-signer-clusterinfo"
	nodeBootstrapBinding        = "kubeadm:kubelet-bootstrap"
	nodeAutoApproveBinding      = "kubeadm:node-autoapprove-bootstrap"
	nodeAutoApproveRenewBinding = "kubeadm:node-autoapprove-certificate-rotation"
	// svcnet's node agent embeds the Service proxy and routes the pod
	// CIDRs of the other Nodes, so beside the Node authorizer's rights a
	// node needs system:node-proxier's (list and watch Nodes, Services,
	// EndpointSlices).
	nodeProxierBinding = "svcnet:node-proxier"
)

// ClusterInfoKubeconfig is cluster-info's kubeconfig: one cluster (named
// "", as kubeadm's) with the server URL and the CA, and nothing else.
func ClusterInfoKubeconfig(server string, caPEM []byte) ([]byte, error) {
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters[""] = &clientcmdapi.Cluster{Server: server, CertificateAuthorityData: caPEM}
	b, err := clientcmd.Write(*cfg)
	if err != nil {
		return nil, fmt.Errorf("encode the cluster-info kubeconfig: %w", err)
	}
	return b, nil
}

// ensureJoinObjects creates, or puts back, cluster-info and the join RBAC.
func ensureJoinObjects(ctx context.Context, client kubernetes.Interface, server string, caPEM []byte) error {
	kubeconfig, err := ClusterInfoKubeconfig(server, caPEM)
	if err != nil {
		return err
	}
	if err := ensureClusterInfo(ctx, client, string(kubeconfig)); err != nil {
		return err
	}
	rbac := client.RbacV1()
	role := &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: clusterInfoRole, Namespace: metav1.NamespacePublic},
		Rules: []rbacv1.PolicyRule{{Verbs: []string{"get"}, APIGroups: []string{""}, Resources: []string{"configmaps"},
			ResourceNames: []string{bootstrapapi.ConfigMapClusterInfo}}}}
	err = ensure(ctx, role, rbac.Roles(role.Namespace), func(cur, want *rbacv1.Role) bool {
		same := reflect.DeepEqual(cur.Rules, want.Rules)
		cur.Rules = want.Rules
		return same
	})
	if err != nil {
		return err
	}
	binding := &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: clusterInfoRole, Namespace: metav1.NamespacePublic},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: clusterInfoRole},
		Subjects: []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: rbacv1.UserKind, Name: user.Anonymous}}}
	err = ensure(ctx, binding, rbac.RoleBindings(binding.Namespace), func(cur, want *rbacv1.RoleBinding) bool {
		same := reflect.DeepEqual(cur.Subjects, want.Subjects)
		cur.Subjects = want.Subjects
		return same
	})
	if err != nil {
		return err
	}
	tokens := bootstraptoken.DefaultGroups[0]
	for _, b := range []struct{ name, role, group string }{
		{nodeBootstrapBinding, "system:node-bootstrapper", tokens},
		{nodeAutoApproveBinding, "system:certificates.k8s.io:certificatesigningrequests:nodeclient", tokens},
		{nodeAutoApproveRenewBinding, "system:certificates.k8s.io:certificatesigningrequests:selfnodeclient", nodeauthorizer.Group},
		{nodeProxierBinding, "system:node-proxier", nodeauthorizer.Group},
	} {
		crb := &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: b.name},
			RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: b.role},
			Subjects: []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: rbacv1.GroupKind, Name: b.group}}}
		err := ensure(ctx, crb, rbac.ClusterRoleBindings(), func(cur, want *rbacv1.ClusterRoleBinding) bool {
			same := reflect.DeepEqual(cur.Subjects, want.Subjects)
			cur.Subjects = want.Subjects
			return same
		})
		if err != nil {
			return err
		}
	}
	return nil
}

// ensureClusterInfo writes cluster-info's kubeconfig key, keeping its
// other keys (the signatures, which the bootstrap signer renews).
func ensureClusterInfo(ctx context.Context, client kubernetes.Interface, kubeconfig string) error {
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: bootstrapapi.ConfigMapClusterInfo, Namespace: metav1.NamespacePublic},
		Data: map[string]string{bootstrapapi.KubeConfigKey: kubeconfig}}
	return ensure(ctx, cm, client.CoreV1().ConfigMaps(cm.Namespace), func(cur, want *corev1.ConfigMap) bool {
		if cur.Data[bootstrapapi.KubeConfigKey] == kubeconfig {
			return true
		}
		if cur.Data == nil {
			cur.Data = map[string]string{}
		}
		cur.Data[bootstrapapi.KubeConfigKey] = kubeconfig
		return false
	})
}

// objectClient is what ensure needs of a typed client.
type objectClient[T any] interface {
	Create(ctx context.Context, obj T, opts metav1.CreateOptions) (T, error)
	Get(ctx context.Context, name string, opts metav1.GetOptions) (T, error)
	Update(ctx context.Context, obj T, opts metav1.UpdateOptions) (T, error)
}

// ensure creates want, or, when it exists, lets fix bring the current
// object in line (it reports whether it already was) and updates it.
func ensure[T metav1.Object](ctx context.Context, want T, c objectClient[T], fix func(cur, want T) bool) error {
	_, err := c.Create(ctx, want, metav1.CreateOptions{})
	if err == nil {
		return nil
	}
	if !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("create %s: %w", want.GetName(), err)
	}
	cur, err := c.Get(ctx, want.GetName(), metav1.GetOptions{})
	if err != nil {
		return fmt.Errorf("get %s: %w", want.GetName(), err)
	}
	if fix(cur, want) {
		return nil
	}
	if _, err := c.Update(ctx, cur, metav1.UpdateOptions{}); err != nil {
		return fmt.Errorf("update %s: %w", want.GetName(), err)
	}
	return nil
}
