// Package schedulingbootstrap writes, at API server start, the system
// PriorityClasses, as kube-apiserver's
// scheduling/bootstrap-system-priority-classes post-start hook does
// (pkg/registry/scheduling/rest): system-node-critical and
// system-cluster-critical, with upstream's values and descriptions, each
// created when it is missing. An existing one is left as it is; its value
// cannot have changed, and its deletion is refused.
//
// It runs before the API is served, so that the pods naming these classes
// (the control plane's mirror pods, the cluster DNS) are admitted with
// their priority from the first.
package schedulingbootstrap

import (
	"context"
	"fmt"
	"log/slog"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/svcnet/svcnet/internal/registry/priorityclass"
)

// Ensure creates the system PriorityClasses that do not exist. A class
// another API server creates meanwhile is fine.
func Ensure(ctx context.Context, client kubernetes.Interface) error {
	api := client.SchedulingV1().PriorityClasses()
	for _, c := range priorityclass.SystemClasses() {
		_, err := api.Get(ctx, c.Name, metav1.GetOptions{})
		if err == nil {
			continue
		}
		if !apierrors.IsNotFound(err) {
			return fmt.Errorf("get PriorityClass %s: %w", c.Name, err)
		}
		if _, err := api.Create(ctx, c, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("create PriorityClass %s: %w", c.Name, err)
		}
		slog.Info("created PriorityClass", "name", c.Name, "value", c.Value)
	}
	return nil
}
