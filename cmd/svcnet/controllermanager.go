package main

import (
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
	f.IntVar(&o.Scheduler.Parallelism, "scheduler-parallelism", o.Scheduler.Parallelism, "pods the scheduler places and binds at once")
	f.Float32Var(&o.Scheduler.QPS, "scheduler-kube-api-qps", o.Scheduler.QPS, "queries per second of each of the scheduler's clients (kube-scheduler's --kube-api-qps)")
	f.IntVar(&o.Scheduler.Burst, "scheduler-kube-api-burst", o.Scheduler.Burst, "burst of queries of each of the scheduler's clients (kube-scheduler's --kube-api-burst)")
	nl := &o.NodeLifecycle
	f.DurationVar(&nl.MonitorPeriod, "node-monitor-period", nl.MonitorPeriod, "how often node health (status heartbeats and Leases) is checked")
	f.DurationVar(&nl.GracePeriod, "node-monitor-grace-period", nl.GracePeriod, "how long a running node may stay silent before it is marked Unknown (several times the node's heartbeat period)")
	f.DurationVar(&nl.StartupGracePeriod, "node-startup-grace-period", nl.StartupGracePeriod, "how long a node that never posted its status may stay silent before it is marked Unknown")
	f.Float32Var(&nl.EvictionRate, "node-eviction-rate", nl.EvictionRate, "nodes per second tainted for eviction when their zone is healthy (the zone is the whole cluster without zone labels)")
	f.Float32Var(&nl.SecondaryRate, "secondary-node-eviction-rate", nl.SecondaryRate, "nodes per second tainted for eviction when their zone is unhealthy; 0 in clusters up to large-cluster-size-threshold nodes")
	f.Int32Var(&nl.LargeCluster, "large-cluster-size-threshold", nl.LargeCluster, "nodes above which a zone is large, for secondary-node-eviction-rate")
	f.Float32Var(&nl.UnhealthyZone, "unhealthy-zone-threshold", nl.UnhealthyZone, "share of not Ready nodes (at least 3) that makes a zone unhealthy")
	f.IntVar(&o.ReplicaSet.Workers, "concurrent-replicaset-syncs", o.ReplicaSet.Workers, "ReplicaSets synced at once")
	f.IntVar(&o.ReplicationController.Workers, "concurrent-rc-syncs", o.ReplicationController.Workers, "ReplicationControllers synced at once")
	f.IntVar(&o.ResourceQuota.Workers, "concurrent-resource-quota-syncs", o.ResourceQuota.Workers, "ResourceQuotas synced at once")
	f.DurationVar(&o.ResourceQuota.SyncPeriod, "resource-quota-sync-period", o.ResourceQuota.SyncPeriod, "how often every ResourceQuota's usage is computed anew")
	f.IntVar(&o.Deployment.Workers, "concurrent-deployment-syncs", o.Deployment.Workers, "Deployments synced at once")
	f.IntVar(&o.StatefulSet.Workers, "concurrent-statefulset-syncs", o.StatefulSet.Workers, "StatefulSets synced at once")
	f.IntVar(&o.DaemonSet.Workers, "concurrent-daemonset-syncs", o.DaemonSet.Workers, "DaemonSets synced at once")
	pa := &o.PodAutoscaler
	f.IntVar(&pa.Workers, "concurrent-horizontal-pod-autoscaler-syncs", pa.Workers, "HorizontalPodAutoscalers synced at once")
	f.DurationVar(&pa.SyncPeriod, "horizontal-pod-autoscaler-sync-period", pa.SyncPeriod, "how often each HorizontalPodAutoscaler is synced")
	f.Float64Var(&pa.Tolerance, "horizontal-pod-autoscaler-tolerance", pa.Tolerance, "the least change of the usage ratio to target that rescales, for rules without a tolerance of their own")
	f.DurationVar(&pa.DownscaleStabilization, "horizontal-pod-autoscaler-downscale-stabilization", pa.DownscaleStabilization, "how long the highest recent recommendation holds off a scale-down")
	f.DurationVar(&pa.CPUInitialization, "horizontal-pod-autoscaler-cpu-initialization-period", pa.CPUInitialization, "how long after its start a pod's CPU samples are skipped unless it is ready and the sample taken since")
	f.DurationVar(&pa.InitialReadinessDelay, "horizontal-pod-autoscaler-initial-readiness-delay", pa.InitialReadinessDelay, "how long after its start a pod's readiness changes count as initial")
	f.DurationVar(&o.CSRSigning.Duration, "cluster-signing-duration", o.CSRSigning.Duration, "the longest certificate the signing controller issues; a CertificateSigningRequest may ask for a shorter one with spec.expirationSeconds")
	return &o
}

func controllerManagerCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "controller-manager",
		Short: "Run the controllers (kube-controller-manager) and the scheduler: endpoints, workloads, nodes, garbage collection, namespaces",
		Args:  cobra.NoArgs,
	}
	o := controllerManagerFlags(cmd)
	cmd.Flags().StringVar(&o.Kubeconfig, "kubeconfig", "", "kubeconfig of the API server (written by svcnet up or svcnet apiserver)")
	_ = cmd.MarkFlagRequired("kubeconfig")
	cmd.Flags().BoolVar(&o.UseServiceAccountCredentials, "use-service-account-credentials", false, "run each controller as its own kube-system ServiceAccount, as kubeadm does (the kubeconfig's user needs system:kube-controller-manager's rights)")
	cmd.Flags().StringVar(&o.SchedulerKubeconfig, "scheduler-kubeconfig", "", "kubeconfig of the scheduler's identity (default: --kubeconfig)")
	cmd.Flags().StringVar(&o.SharedVolumeDir, "shared-volume-dir", "", "directory the shared-path provisioner (StorageClass provisioner svcnet.io/shared-path) makes its volumes in; empty runs no such provisioner")
	cmd.Flags().StringVar(&o.RootCAFile, "root-ca-file", "", "PEM CA bundle published as ca.crt of every namespace's kube-root-ca.crt ConfigMap (default: the kubeconfig's CA)")
	cmd.Flags().StringVar(&o.CSRSigning.CertFile, "cluster-signing-cert-file", "", "PEM CA certificate the signing controller issues the certificates of approved CertificateSigningRequests with (empty, or no key file, disables it)")
	cmd.Flags().StringVar(&o.CSRSigning.KeyFile, "cluster-signing-key-file", "", "PEM private key of --cluster-signing-cert-file")
	cmd.Flags().StringVar(&o.ServiceAccountKeyFile, "service-account-private-key-file", "", "PEM RSA private key the serviceaccount-token-controller signs legacy service account tokens with (empty disables it)")
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
