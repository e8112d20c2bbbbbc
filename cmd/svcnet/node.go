package main

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/svcnet/svcnet/internal/cluster"
	"github.com/svcnet/svcnet/internal/node"
	"github.com/svcnet/svcnet/internal/node/builtin"
)

// nodeFlags binds the node agent's flags shared by node and up; listen is
// the default address of the node's HTTPS server.
func nodeFlags(f *pflag.FlagSet, o *cluster.NodeOptions, listen string) {
	f.StringVar(&o.NodeName, "node-name", "", "the Node's name (default: the host name)")
	f.StringVar(&o.NetNS, "netns", "", "run the node's network (bridge svcnet0, pod veths, routes) inside this named network namespace (/var/run/netns/NAME)")
	f.StringVar(&o.NodeIP, "node-ip", "", "the node's InternalIP (default: the address of the interface of the node namespace's default route, else its first global address)")
	f.StringVar(&o.ListenAddress, "kubelet-address", listen, "host:port of the node's HTTPS server (logs, exec, port-forward), in the process's network namespace (up --nodes N: its port, on each node's address in the node's namespace)")
	f.StringVar(&o.ClusterDNS, "cluster-dns", "10.96.0.10", "the cluster DNS address in pods' resolv.conf")
	f.StringVar(&o.ClusterDomain, "cluster-domain", "cluster.local", "the cluster's DNS domain")
	f.StringVar(&o.ImageTable, "image-table", "", "YAML file mapping images to built-in programs, host executables or commands, over the defaults")
	f.StringVar(&o.Runtime, "runtime", node.RuntimeAuto, "how containers run: runc (isolated: images are pulled, those of the image table assembled from svcnet's built-in programs and the host's busybox), process (the image table's programs as host processes, sharing the host's file system) or auto (runc where it is installed and the cgroups are mounted, else process)")
	gc := node.DefaultImageGC()
	o.ImageGC = gc
	f.IntVar(&o.ImageGC.HighThresholdPercent, "image-gc-high-threshold", gc.HighThresholdPercent, "with --runtime runc: the percent of disk usage of the data dir's file system above which image garbage collection runs (100 disables it), as the kubelet's flag")
	f.IntVar(&o.ImageGC.LowThresholdPercent, "image-gc-low-threshold", gc.LowThresholdPercent, "with --runtime runc: the percent of disk usage image garbage collection frees down to, as the kubelet's flag")
	f.DurationVar(&o.ImageGC.MinAge, "minimum-image-ttl-duration", gc.MinAge, "with --runtime runc: how long an image stays unused before it may be garbage collected, as the kubelet's flag")
	f.DurationVar(&o.ImageGC.Period, "image-gc-period", gc.Period, "with --runtime runc: how often disk usage is checked for image garbage collection (the kubelet's fixed 5m)")
	f.StringVar(&o.RegistryMirror, "registry-mirror", "", "with --runtime runc: a registry (host[:port]) that Docker Hub's images are pulled from first")
	f.StringVar(&o.ProxyMode, "proxy-mode", cluster.ProxyModeNFTables, "the Service proxy's mode: nftables (falls back to userspace where nftables cannot be used) or userspace")
	f.DurationVar(&o.EvictionPressureTransitionPeriod, "eviction-pressure-transition-period", 5*time.Minute, "how long the Node keeps a pressure condition (DiskPressure) after its signal was last seen, as the kubelet's flag")
	f.DurationVar(&o.ShutdownGracePeriod, "shutdown-grace-period", 5*time.Second, "svcnet up and node --stop-pods-on-exit: the longest grace period a pod's containers get when the node stops, as the kubelet's graceful node shutdown (0: each pod's own)")
	f.IntVar(&o.MaxPods, "max-pods", 110, "the number of pods the node can run (its pods capacity), as the kubelet's flag")
	f.StringVar(&o.ProxyMetrics, "proxy-metrics-bind-address", "127.0.0.1:10249", "host:port in the node's network namespace serving the Service proxy's /metrics (kube-proxy's names), /proxyMode and /healthz over HTTP, as kube-proxy's flag (\"0\" disables)")
	f.StringVar(&o.ProxyHealthz, "proxy-healthz-bind-address", "0.0.0.0:10256", "host:port in the node's network namespace serving the Service proxy's /healthz and /livez over HTTP, as kube-proxy's flag (\"0\" disables)")
}

func nodeCommand() *cobra.Command {
	o := &cluster.NodeOptions{}
	var cleanup bool
	cmd := &cobra.Command{
		Use:   "node",
		Short: "Run a node agent (kubelet, CNI and kube-proxy): register a Node, run its pods, proxy its Services",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if cleanup {
				return cluster.CleanupProxy(o.NetNS)
			}
			if (o.Join.Token == "") != (o.Join.Server == "") {
				return errors.New("--token and --server join together")
			}
			return cluster.RunNode(cmd.Context(), *o)
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.Kubeconfig, "kubeconfig", filepath.Join(cluster.DefaultDataDir(), "kubeconfig"), "kubeconfig of the API server")
	f.StringVar(&o.Join.Server, "server", "", "with --token: the API server's https URL to join through (kubeadm join's endpoint)")
	f.StringVar(&o.Join.Token, "token", "", "join with this bootstrap token ([a-z0-9]{6}.[a-z0-9]{16}, svcnet token create): discover and verify the cluster CA, get the node's client certificate through a CertificateSigningRequest, and run with the kubeconfig written to <data-dir>/kubelet.conf (reused on restart while its certificate is valid) instead of --kubeconfig")
	f.StringSliceVar(&o.Join.CACertHashes, "discovery-token-ca-cert-hash", nil, "with --token: the pin of the cluster CA's public key, \"sha256:<hex>\" (svcnet token create --print-join-command prints it)")
	f.StringVar(&o.ProxyKubeconfig, "proxy-kubeconfig", "", "kubeconfig of the Service proxy's identity, system:kube-proxy (default: --kubeconfig)")
	f.StringVar(&o.DataDir, "data-dir", cluster.DefaultDataDir(), "directory for the node's pods, logs and addresses (under node/)")
	f.BoolVar(&o.LocalVolumes, "local-path-provisioner", true, "provision the volumes of StorageClass provisioner svcnet.io/local-path selected for this node, as directories under <data-dir>/local-path-provisioner")
	f.BoolVar(&o.StopPodsOnExit, "stop-pods-on-exit", false, "stop the node's pods and remove the proxy's rules when the agent exits (by default they stay and are adopted on restart)")
	f.BoolVar(&cleanup, "cleanup", false, "remove the Service proxy's nftables rules from the node's network namespace and exit")
	f.StringVar(&o.ServiceClusterIPRange, "service-cluster-ip-range", cluster.DefaultServiceClusterIPRange, "the API server's Service cluster IP range: pod traffic to it is not masqueraded; with --netns, routed to the pod bridge when the namespace has no route for it, so that the node reaches cluster IPs")
	nodeFlags(f, o, "0.0.0.0:10250")
	cmd.AddCommand(shimCommand(), shimHostCommand(), imageCommand())
	return cmd
}

// shimCommand is the parent of a process container, which the agent
// starts for each.
func shimCommand() *cobra.Command {
	return &cobra.Command{
		Use:    "shim DIR",
		Short:  "Run one container (started by the node agent)",
		Hidden: true,
		Args:   cobra.ExactArgs(1),
		RunE: func(_ *cobra.Command, args []string) error {
			return node.RunShim(args[0])
		},
	}
}

// shimHostCommand is the parent of the node's containers of images, which
// the agent starts when it has none.
func shimHostCommand() *cobra.Command {
	return &cobra.Command{
		Use:    "shims DIR",
		Short:  "Run the node's containers of images (started by the node agent)",
		Hidden: true,
		Args:   cobra.ExactArgs(1),
		RunE: func(_ *cobra.Command, args []string) error {
			return node.RunShimHost(args[0])
		},
	}
}

// imageCommand runs a built-in image's program as a container's process.
func imageCommand() *cobra.Command {
	return &cobra.Command{
		Use:                "image NAME [--ports=P,...] -- ARGS",
		Short:              "Run a built-in image (started as a container's process)",
		Hidden:             true,
		DisableFlagParsing: true,
		Args:               cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			ports, rest, err := builtin.ParseArgs(args[1:])
			if err != nil {
				return err
			}
			if err := builtin.Main(args[0], ports, rest); err != nil {
				fmt.Fprintln(os.Stderr, err)
				os.Exit(1)
			}
			return nil
		},
	}
}
