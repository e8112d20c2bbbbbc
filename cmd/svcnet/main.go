// Command svcnet runs Kubernetes Service networking in one binary: `svcnet up`
// starts the all-in-one cluster, and each component runs alone as its own
// subcommand.
package main

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/svcnet/svcnet/internal/cluster"
	"github.com/svcnet/svcnet/internal/nodenet"
	"github.com/svcnet/svcnet/internal/storage"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	root := &cobra.Command{
		Use:           "svcnet",
		Short:         "Kubernetes Service networking, complete and faithful, in one binary",
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.AddCommand(upCommand(), apiserverCommand(), controllerManagerCommand(), nodeCommand(), speakerCommand(), dnsCommand(), ingressCommand(), tokenCommand(), doctorCommand(), proxyCommand(), traceCommand())
	if err := root.ExecuteContext(ctx); err != nil {
		fmt.Fprintln(os.Stderr, "svcnet:", err)
		os.Exit(1)
	}
}

// apiServerFlags binds the API server's flags, shared by up and apiserver.
func apiServerFlags(cmd *cobra.Command) *cluster.APIServerOptions {
	o := &cluster.APIServerOptions{}
	f := cmd.Flags()
	f.StringVar(&o.DataDir, "data-dir", cluster.DefaultDataDir(), "directory for etcd data, certificates and the kubeconfig")
	f.StringVar(&o.CADir, "ca-dir", "", "directory of the cluster CA (ca.crt, ca.key) and the service account key (sa.key, sa.pub), which API servers sharing an etcd share (default: <data-dir>/pki)")
	f.StringVar(&o.BindAddress, "bind-address", "127.0.0.1:6443", "host:port the API server serves HTTPS on")
	f.StringSliceVar(&o.EtcdServers, "etcd-servers", nil, "List of etcd servers to connect with (scheme://ip:port), comma separated. (default: embedded etcd in the data dir)")
	f.StringVar(&o.EtcdTLS.KeyFile, "etcd-keyfile", "", "SSL key file used to secure etcd communication.")
	f.StringVar(&o.EtcdTLS.CertFile, "etcd-certfile", "", "SSL certification file used to secure etcd communication.")
	f.StringVar(&o.EtcdTLS.TrustedCAFile, "etcd-cafile", "", "SSL Certificate Authority file used to secure etcd communication.")
	f.StringVar(&o.EtcdClientURL, "etcd-client-url", cluster.DefaultEtcdClientURL, "client URL of the embedded etcd (for etcdctl, with the certificates in <data-dir>/pki/etcd)")
	f.StringVar(&o.EtcdPeerURL, "etcd-peer-url", cluster.DefaultEtcdPeerURL, "peer URL of the embedded etcd")
	f.Int64Var(&o.EtcdQuotaBackendBytes, "etcd-quota-backend-bytes", storage.DefaultQuotaBackendBytes, "size of the embedded etcd's database past which it refuses writes (etcd's --quota-backend-bytes); svcnet compacts, defragments and lifts the alarm once deletes free space")
	f.StringVar(&o.ServiceClusterIPRange, "service-cluster-ip-range", cluster.DefaultServiceClusterIPRange, "CIDR (or two, comma-separated, one per IP family) Service cluster IPs are allocated from")
	f.StringVar(&o.ServiceNodePortRange, "service-node-port-range", cluster.DefaultServiceNodePortRange, "port range NodePort Services are allocated from")
	f.StringSliceVar(&o.AuthorizationModes, "authorization-mode", cluster.DefaultAuthorizationModes, "authorizers asked in turn about each request: Node (with the NodeRestriction admission plugin), RBAC, AlwaysAllow (as kube-apiserver's; members of system:masters may do anything either way)")
	f.BoolVar(&o.EnableBootstrapTokenAuth, "enable-bootstrap-token-auth", false, "allow bootstrap tokens (Secrets of type bootstrap.kubernetes.io/token in kube-system) to authenticate, as kube-apiserver's (up: on)")
	f.StringVar(&o.AdvertiseAddress, "advertise-address", "", "address listed in the kubernetes Service's endpoints (default: the bind address; up: the control-plane node's IP, where it also serves)")
	f.StringVar(&o.EncryptionProviderConfig, "encryption-provider-config", "", "the file containing configuration for encryption providers to be used for storing secrets (or other resources) in etcd: an apiserver.config.k8s.io/v1 EncryptionConfiguration, as kube-apiserver's (aescbc, aesgcm, secretbox, identity; not kms)")
	return o
}

func apiserverCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "apiserver",
		Short: "Run the API server (kube-apiserver and etcd)",
		Args:  cobra.NoArgs,
	}
	o := apiServerFlags(cmd)
	cmd.RunE = func(cmd *cobra.Command, _ []string) error {
		a, err := cluster.StartAPIServer(cmd.Context(), *o)
		if err != nil {
			return err
		}
		slog.Info("admin kubeconfig written", "path", a.Kubeconfig)
		return a.Wait()
	}
	return cmd
}

func upCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "up",
		Short: "Start the cluster on embedded defaults: API server, etcd, controllers, scheduler and a node",
		Args:  cobra.NoArgs,
	}
	o := &cluster.UpOptions{}
	api := apiServerFlags(cmd)
	// As kubeadm's kube-apiserver: joining nodes authenticate with
	// bootstrap tokens.
	api.EnableBootstrapTokenAuth = true
	cmd.Flags().Lookup("enable-bootstrap-token-auth").DefValue = "true"
	cmd.Flags().BoolVar(&api.EncryptSecrets, "encrypt-secrets", false, "encrypt Secrets in etcd with an aescbc key generated once into <data-dir>/pki/encryption-config.yaml (not with --encryption-provider-config)")
	cm := controllerManagerFlags(cmd)
	f := cmd.Flags()
	cm.Controllers = cluster.UpControllers
	f.Lookup("controllers").DefValue = "[" + strings.Join(cluster.UpControllers, ",") + "]"
	nodeFlags(f, &o.Node, "127.0.0.1:10250")
	f.IntVar(&o.Nodes, "nodes", 1, "node agents to run: 0 for the control plane alone; 1 in up's own network namespace (or --netns); more each in a network namespace of its own, NAME-1 to NAME-N after --node-name, on a bridge svcnet-nodes in up's namespace")
	f.StringVar(&o.NodeNetwork, "node-network", nodenet.DefaultCIDR, "with --nodes N: the nodes' network; up holds its first address, node i the i+1-th")
	f.StringVar(&o.ClusterCIDR, "cluster-cidr", "10.244.0.0/16", "range node IPAM hands pod CIDRs (/24s) out of")
	f.StringSliceVar(&o.DNSUpstreams, "dns-upstream", nil, "resolvers (host or host:port, comma-separated) the cluster DNS forwards names outside the cluster to (default: the nodes' /etc/resolv.conf)")
	f.StringSliceVar(&o.LBPool, "lb-pool", nil, "LoadBalancer addresses (CIDRs or FROM-TO ranges, IPv4 or IPv6, comma-separated) of the IPAddressPool default in metallb-system, with its L2Advertisement (default: with --nodes N>1 and no pool of one's own, the 200th to 250th addresses of --node-network)")
	f.StringSliceVar(&o.Disable, "disable", nil, "packaged components not to install: coredns (cluster DNS), ingress (the Ingress controller), local-storage (the local-path provisioners and their StorageClasses standard and shared)")
	f.Lookup("cluster-dns").Usage = "the cluster DNS address, the kube-dns Service's cluster IP (default: the tenth address of the Service range)"
	f.Lookup("cluster-dns").DefValue = ""
	cmd.RunE = func(cmd *cobra.Command, _ []string) error {
		o.APIServer, o.ControllerManager = *api, *cm
		if !f.Changed("cluster-dns") {
			o.Node.ClusterDNS = ""
		}
		o.Ready = func(kubeconfig, url string) {
			fmt.Printf("svcnet is up: API server %s\n\n  export KUBECONFIG=%s\n  kubectl get nodes\n\n", url, kubeconfig)
		}
		return cluster.Up(cmd.Context(), *o)
	}
	return cmd
}
