package cluster

import (
	"context"
	"fmt"
	"log/slog"
	"path/filepath"
	"reflect"

	"github.com/prometheus/client_golang/prometheus"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/svcnet/svcnet/internal/auth/nodeauthorizer"
	"github.com/svcnet/svcnet/internal/controller"
	"github.com/svcnet/svcnet/internal/volume/localpath"
)

// sharedPathProvisioner is the controller manager's shared-path
// provisioner (svcnet's, not upstream's), which runs as
// localpath.ServiceAccount.
const sharedPathProvisioner = "shared-path-provisioner"

// localPathDir is where a node's local volumes live under its data dir,
// and sharedPathDir where the shared ones live under the cluster's.
func localPathDir(dataDir string) string  { return filepath.Join(dataDir, "local-path-provisioner") }
func sharedPathDir(dataDir string) string { return filepath.Join(dataDir, "shared-path-provisioner") }

// startSharedPathProvisioner starts the shared-path provisioner, or
// nothing without its directory (--shared-volume-dir).
func startSharedPathProvisioner(ctx context.Context, o *ControllerManagerOptions, _ *clients, d controller.Deps) (func(context.Context), error) {
	if o.SharedVolumeDir == "" {
		slog.Info("Skipping the shared-path provisioner because no directory was specified", "controller", sharedPathProvisioner)
		return func(context.Context) {}, nil
	}
	p, err := localpath.New(ctx, localpath.Config{Client: d.Client, Informers: d.Informers, Metrics: d.Metrics,
		Provisioner: localpath.SharedProvisioner, Dir: o.SharedVolumeDir})
	return runOf(p, err)
}

// runLocalPathProvisioner runs the node's local-path provisioner, with
// the node's identity, until ctx ends.
func runLocalPathProvisioner(ctx context.Context, cfg *rest.Config, nodeName, dir string) error {
	client, err := kubernetes.NewForConfig(rest.AddUserAgent(rest.CopyConfig(cfg), "local-path-provisioner"))
	if err != nil {
		return fmt.Errorf("API client: %w", err)
	}
	factory := informers.NewSharedInformerFactory(client, 0)
	p, err := localpath.New(ctx, localpath.Config{Client: client, Informers: factory,
		Metrics: controller.NewMetrics(prometheus.NewRegistry()), Provisioner: localpath.LocalProvisioner, Dir: dir, NodeName: nodeName})
	if err != nil {
		return err
	}
	factory.Start(ctx.Done())
	p.Run(ctx)
	factory.Shutdown()
	return nil
}

// ensureLocalPathRBAC writes the provisioners' ClusterRole and its
// binding to the nodes and to the shared provisioner's ServiceAccount.
func ensureLocalPathRBAC(ctx context.Context, client kubernetes.Interface) error {
	rbac := client.RbacV1()
	err := ensure(ctx, localpath.ClusterRole(), rbac.ClusterRoles(), func(cur, want *rbacv1.ClusterRole) bool {
		same := reflect.DeepEqual(cur.Rules, want.Rules)
		cur.Rules = want.Rules
		return same
	})
	if err != nil {
		return fmt.Errorf("local-path provisioner role: %w", err)
	}
	binding := localpath.ClusterRoleBinding(nodeauthorizer.Group, metav1.NamespaceSystem)
	err = ensure(ctx, binding, rbac.ClusterRoleBindings(), func(cur, want *rbacv1.ClusterRoleBinding) bool {
		same := reflect.DeepEqual(cur.Subjects, want.Subjects)
		cur.Subjects = want.Subjects
		return same
	})
	if err != nil {
		return fmt.Errorf("local-path provisioner role binding: %w", err)
	}
	return nil
}
