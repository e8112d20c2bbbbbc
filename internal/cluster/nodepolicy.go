package cluster

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
)

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
