package cluster

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"

	"github.com/svcnet/svcnet/internal/auth/nodeauthorizer"
)

// nodeProxierBinding lets every node do what kube-proxy does: svcnet's
// node agent embeds the Service proxy and routes the pod CIDRs of the
// other Nodes, so beside the Node authorizer's rights a node needs
// system:node-proxier's (list and watch Nodes, Services, EndpointSlices).
const nodeProxierBinding = "svcnet:node-proxier"

// ensureNodePolicy creates the nodeProxierBinding if it is missing.
func ensureNodePolicy(ctx context.Context, client kubernetes.Interface) error {
	b := &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: nodeProxierBinding},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "system:node-proxier"},
		Subjects:   []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: rbacv1.GroupKind, Name: nodeauthorizer.Group}},
	}
	_, err := client.RbacV1().ClusterRoleBindings().Create(ctx, b, metav1.CreateOptions{})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("create ClusterRoleBinding %s: %w", nodeProxierBinding, err)
	}
	return nil
}

// markControlPlane labels the control plane's node once it has
// registered, as kubeadm's mark-control-plane phase: NodeRestriction
// keeps a node from setting node-role labels on itself.
func markControlPlane(ctx context.Context, client kubernetes.Interface, name string) error {
	patch := fmt.Appendf(nil, `{"metadata":{"labels":{%q:""}}}`, controlPlaneLabel)
	logged := false
	return wait.PollUntilContextCancel(ctx, 100*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		_, err := client.CoreV1().Nodes().Patch(ctx, name, types.MergePatchType, patch, metav1.PatchOptions{})
		if err != nil && !apierrors.IsNotFound(err) && !logged {
			slog.Warn("label the control plane's node", "node", name, "err", err)
			logged = true
		}
		return err == nil, nil
	})
}
