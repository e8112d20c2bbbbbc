package main

import (
	"context"
	"log/slog"
	"strings"

	"github.com/spf13/cobra"
	"k8s.io/klog/v2"

	"github.com/svcnet/svcnet/internal/cluster"
)

// controllerManagerFlags binds the controller manager's flags, shared by
// up and controller-manager; names and defaults are kube-controller-manager's.
func controllerManagerFlags(cmd *cobra.Command) *cluster.ControllerManagerOptions {
	o := cluster.DefaultControllerManagerOptions()
	f := cmd.Flags()
	f.StringVar(&o.MetricsBindAddress, "metrics-bind-address", o.MetricsBindAddress, "host:port serving /metrics and /healthz over HTTP (\"0\" disables)")
	f.StringSliceVar(&o.Controllers, "controllers", o.Controllers, "controllers to run: '*' for all, 'foo' to enable foo, '-foo' to disable foo; known: "+strings.Join(cluster.KnownControllers(), ", "))
	f.Float32Var(&o.KubeAPIQPS, "kube-api-qps", o.KubeAPIQPS, "queries per second to the API server")
	f.IntVar(&o.KubeAPIBurst, "kube-api-burst", o.KubeAPIBurst, "burst of queries to the API server")
	le := &o.LeaderElection
	f.BoolVar(&le.Enabled, "leader-elect", le.Enabled, "run the controllers only while holding the leader lease, so that several instances can run")
	f.DurationVar(&le.LeaseDuration, "leader-elect-lease-duration", le.LeaseDuration, "how long a lease not renewed blocks other candidates")
	f.DurationVar(&le.RenewDeadline, "leader-elect-renew-deadline", le.RenewDeadline, "how long the leader keeps retrying to renew before giving up")
	f.DurationVar(&le.RetryPeriod, "leader-elect-retry-period", le.RetryPeriod, "wait between attempts to acquire or renew the lease")
	f.StringVar(&le.ResourceName, "leader-elect-resource-name", le.ResourceName, "name of the Lease")
	f.StringVar(&le.ResourceNamespace, "leader-elect-resource-namespace", le.ResourceNamespace, "namespace of the Lease")
	f.IntVar(&o.EndpointSlice.Workers, "concurrent-service-endpoint-syncs", o.EndpointSlice.Workers, "Services whose EndpointSlices are synced at once")
	f.IntVar(&o.EndpointSlice.MaxEndpointsPerSlice, "max-endpoints-per-slice", o.EndpointSlice.MaxEndpointsPerSlice, "most endpoints in one EndpointSlice (1 to 1000)")
	f.DurationVar(&o.EndpointSlice.BatchPeriod, "endpointslice-updates-batch-period", o.EndpointSlice.BatchPeriod, "how long pod changes wait, so that a burst gives one EndpointSlice write")
	f.IntVar(&o.Endpoints.Workers, "concurrent-endpoint-syncs", o.Endpoints.Workers, "Services whose Endpoints are synced at once")
	f.DurationVar(&o.Endpoints.BatchPeriod, "endpoint-updates-batch-period", o.Endpoints.BatchPeriod, "how long pod changes wait, so that a burst gives one Endpoints write")
	f.IntVar(&o.Mirroring.Workers, "mirroring-concurrent-service-endpoint-syncs", o.Mirroring.Workers, "Endpoints mirrored at once")
	f.IntVar(&o.Mirroring.MaxEndpointsPerSubset, "mirroring-max-endpoints-per-subset", o.Mirroring.MaxEndpointsPerSubset, "most addresses of one Endpoints subset mirrored")
	f.DurationVar(&o.Mirroring.BatchPeriod, "mirroring-endpointslice-updates-batch-period", o.Mirroring.BatchPeriod, "how long EndpointSlice changes wait before mirroring is repaired")
	f.IntVar(&o.GCWorkers, "concurrent-gc-syncs", o.GCWorkers, "objects the garbage collector handles at once")
	f.IntVar(&o.Namespace.Workers, "concurrent-namespace-syncs", o.Namespace.Workers, "namespaces emptied at once")
	f.DurationVar(&o.Namespace.SyncPeriod, "namespace-sync-period", o.Namespace.SyncPeriod, "how often terminating namespaces are looked at again")
	return &o
}

func controllerManagerCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "controller-manager",
		Short: "Run the controllers (kube-controller-manager): EndpointSlices, Endpoints, mirroring, garbage collection, namespaces",
		Args:  cobra.NoArgs,
	}
	o := controllerManagerFlags(cmd)
	cmd.Flags().StringVar(&o.Kubeconfig, "kubeconfig", "", "kubeconfig of the API server (written by svcnet up or svcnet apiserver)")
	_ = cmd.MarkFlagRequired("kubeconfig")
	cmd.RunE = func(cmd *cobra.Command, _ []string) error {
		klog.SetSlogLogger(slog.Default())
		cm, err := cluster.StartControllerManager(cmd.Context(), *o)
		if err != nil {
			return err
		}
		if cm.MetricsURL != "" {
			slog.Info("controller manager metrics", "url", cm.MetricsURL)
		}
		return cm.Wait()
	}
	return cmd
}

// withControllers runs the controller manager inside `svcnet up` against
// its API server until ctx ends, and returns once it has stopped.
func withControllers(ctx context.Context, a *cluster.APIServer, o cluster.ControllerManagerOptions) error {
	klog.SetSlogLogger(slog.Default())
	o.Kubeconfig = a.Kubeconfig
	cm, err := cluster.StartControllerManager(ctx, o)
	if err != nil {
		return err
	}
	return cm.Wait()
}
