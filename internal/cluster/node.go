package cluster

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/svcnet/svcnet/internal/controller"
	"github.com/svcnet/svcnet/internal/controller/nodeipam"
	"github.com/svcnet/svcnet/internal/node"
	"github.com/svcnet/svcnet/internal/pki"
	"github.com/svcnet/svcnet/internal/proxy"
)

// NodeOptions configure a node agent.
type NodeOptions struct {
	// Kubeconfig reaches the API server.
	Kubeconfig string
	// Join, with a token, joins the node first (unless a previous join's
	// kubeconfig is still valid); the node then runs with the kubeconfig
	// the join wrote into DataDir instead of Kubeconfig.
	Join JoinOptions
	// ProxyKubeconfig, if set, is the Service proxy's identity
	// (system:kube-proxy, bound to system:node-proxier); else it uses
	// Kubeconfig's.
	ProxyKubeconfig string
	// SpeakerKubeconfig, if set, is the layer 2 speaker's identity
	// (system:metallb-speaker); else it uses Kubeconfig's.
	SpeakerKubeconfig string
	// DataDir holds the node's state under DataDir/node.
	DataDir string
	// NodeName defaults to the host name.
	NodeName string
	// NetNS names the network namespace the node's network lives in.
	NetNS string
	// NodeIP is the InternalIP; empty picks one.
	NodeIP string
	// ServiceClusterIPRange is the API server's (one CIDR, or two
	// comma-separated); pod traffic to it is not masqueraded, and a node
	// in a named namespace routes it to its pod bridge when nothing else
	// routes it.
	ServiceClusterIPRange string
	// ListenAddress is host:port of the node's HTTPS server, in the
	// process's network namespace, or in the node's with
	// ListenInNodeNamespace.
	ListenAddress         string
	ListenInNodeNamespace bool
	// MaxPods is the node's pods capacity (0: the kubelet's 110).
	MaxPods int
	// EvictionPressureTransitionPeriod is how long the node reports a
	// pressure condition after its signal was last seen (default 5m).
	EvictionPressureTransitionPeriod time.Duration
	// ClusterDNS and ClusterDomain go into pods' resolv.conf.
	ClusterDNS    string
	ClusterDomain string
	// ImageTable is a YAML file of images laid over the defaults.
	ImageTable string
	// Runtime runs the containers (node.RuntimeAuto, node.RuntimeRunc or
	// node.RuntimeProcess); RegistryMirror serves Docker Hub's images
	// first; ImageGC says when runc's images are garbage collected.
	Runtime        string
	RegistryMirror string
	ImageGC        node.ImageGC
	// StopPodsOnExit stops the pods when the node stops (and removes the
	// proxy's rules).
	StopPodsOnExit bool
	// ShutdownGracePeriod bounds each pod's grace period then.
	ShutdownGracePeriod time.Duration
	// ProxyMode is the Service proxy's backend (nftables).
	ProxyMode string
	// ProxyMetrics and ProxyHealthz are host:port, in the node's network
	// namespace, serving the proxy's metrics and health as kube-proxy's
	// (proxyhttp.go); "0" or empty: off.
	ProxyMetrics, ProxyHealthz string
	// ProxySynced is told what the proxy holds after each of its syncs,
	// and whether it carries cluster IPs (the userspace proxy does only
	// where they are local addresses).
	ProxySynced func(services map[types.NamespacedName]*proxy.Service, clusterIPs bool)
	// StaticPods are more components to show as the node's mirror pods
	// (svcnet up's control plane, on the control-plane node) beside the
	// node's kube-proxy.
	StaticPods []node.StaticPod
	// LocalVolumes runs the node's local-path provisioner (svcnet up's
	// StorageClass standard), whose volumes are directories under
	// DataDir/local-path-provisioner.
	LocalVolumes bool
}

// RunNode runs a node agent until ctx ends.
func RunNode(ctx context.Context, o NodeOptions) error {
	var err error
	name := o.NodeName
	if name == "" {
		if name, err = os.Hostname(); err != nil {
			return fmt.Errorf("node name: %w", err)
		}
	}
	if o.Join.Token != "" {
		if o.Kubeconfig, err = joinNode(ctx, o.Join, o.DataDir, name); err != nil {
			return err
		}
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", o.Kubeconfig)
	if err != nil {
		return fmt.Errorf("load kubeconfig %s: %w", o.Kubeconfig, err)
	}
	cfg.QPS, cfg.Burst = 100, 200
	images, err := node.LoadImageTable(o.ImageTable)
	if err != nil {
		return err
	}
	var ip net.IP
	if o.NodeIP != "" {
		if ip, err = parseNodeIP(o.NodeIP); err != nil {
			return err
		}
	}
	serviceRanges, err := parseServiceRanges(o.ServiceClusterIPRange)
	if err != nil {
		return err
	}
	dir := filepath.Join(o.DataDir, "node")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("create node data dir: %w", err)
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var wg sync.WaitGroup
	var proxyErr error
	proxyHealth := &proxy.Health{}
	frontends := &proxyFrontends{health: proxyHealth}
	proxyLog, err := startProxyLog(o, name, proxyHealth)
	if err != nil {
		return err
	}
	defer proxyLog.close()
	proxyCfg, err := identity(o.ProxyKubeconfig, cfg)
	if err != nil {
		return err
	}
	speakerCfg, err := identity(o.SpeakerKubeconfig, cfg)
	if err != nil {
		return err
	}
	wg.Go(func() {
		if proxyErr = runProxy(ctx, o, proxyCfg, name, serviceRanges, proxyHealth, frontends); proxyErr != nil {
			cancel()
		}
	})
	var speakerErr error
	wg.Go(func() {
		if speakerErr = runSpeaker(ctx, speakerCfg, name, o.NetNS); speakerErr != nil {
			cancel()
		}
	})
	var provisionerErr error
	if o.LocalVolumes {
		wg.Go(func() {
			if provisionerErr = runLocalPathProvisioner(ctx, cfg, name, localPathDir(o.DataDir)); provisionerErr != nil {
				cancel()
			}
		})
	}
	nodeErr := node.Run(ctx, node.Config{
		NodeName:                 name,
		REST:                     cfg,
		Runtime:                  o.Runtime,
		RegistryMirror:           o.RegistryMirror,
		ImageGC:                  o.ImageGC,
		DataDir:                  dir,
		NetNS:                    o.NetNS,
		NodeIP:                   ip,
		ServiceRanges:            serviceRanges,
		ListenAddress:            o.ListenAddress,
		ListenInNodeNamespace:    o.ListenInNodeNamespace,
		ClusterDNS:               o.ClusterDNS,
		ClusterDomain:            o.ClusterDomain,
		PressureTransitionPeriod: o.EvictionPressureTransitionPeriod,
		MaxPods:                  o.MaxPods,
		Images:                   images,
		StopPodsOnExit:           o.StopPodsOnExit,
		ShutdownGracePeriod:      o.ShutdownGracePeriod,
		Version:                  KubernetesVersion,
		StaticPods:               append(append([]node.StaticPod{}, o.StaticPods...), proxyLog.staticPod(o, name)),
		ProxyFrontends:           frontends,
	})
	cancel()
	wg.Wait()
	return errors.Join(nodeErr, proxyErr, speakerErr, provisionerErr)
}

// identity is the client configuration of a component of the node with a
// kubeconfig of its own (base's rate limits), else base.
func identity(kubeconfig string, base *rest.Config) (*rest.Config, error) {
	if kubeconfig == "" {
		return base, nil
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		return nil, fmt.Errorf("load kubeconfig %s: %w", kubeconfig, err)
	}
	cfg.QPS, cfg.Burst = base.QPS, base.Burst
	return cfg, nil
}

// parseNodeIP reads --node-ip.
func parseNodeIP(s string) (net.IP, error) {
	ip := net.ParseIP(s)
	if ip == nil {
		return nil, fmt.Errorf("--node-ip %q is not an IP address", s)
	}
	return ip, nil
}

// parseServiceRanges reads --service-cluster-ip-range: one CIDR, or two
// comma-separated (none when empty).
func parseServiceRanges(s string) ([]netip.Prefix, error) {
	var out []netip.Prefix
	if s == "" {
		return nil, nil
	}
	for c := range strings.SplitSeq(s, ",") {
		p, err := netip.ParsePrefix(strings.TrimSpace(c))
		if err != nil {
			return nil, fmt.Errorf("--service-cluster-ip-range %q: %w", s, err)
		}
		out = append(out, p.Masked())
	}
	return out, nil
}

// RunNodeIPAM hands out pod CIDRs of clusterCIDR to nodes until ctx ends,
// the controller-manager's node IPAM for a cluster that runs its nodes
// itself (svcnet up).
func RunNodeIPAM(ctx context.Context, kubeconfig, clusterCIDR string, nodeMaskSize int) error {
	_, cidr, err := net.ParseCIDR(clusterCIDR)
	if err != nil {
		return fmt.Errorf("cluster CIDR %q: %w", clusterCIDR, err)
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		return fmt.Errorf("load kubeconfig %s: %w", kubeconfig, err)
	}
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return fmt.Errorf("API client: %w", err)
	}
	factory := informers.NewSharedInformerFactory(client, 0)
	c, err := nodeipam.New(ctx, nodeipam.Config{ClusterCIDR: cidr, NodeMaskSize: nodeMaskSize}, client, factory,
		controller.NewMetrics(prometheus.NewRegistry()))
	if err != nil {
		return err
	}
	factory.Start(ctx.Done())
	c.Run(ctx)
	factory.Shutdown()
	return nil
}

// KubeletClientTLS is the API server's client certificate for node agents,
// issued by the cluster CA in the data dir.
func KubeletClientTLS(dataDir string) (*tls.Config, error) {
	dir := filepath.Join(dataDir, "pki")
	ca, err := pki.LoadOrCreateCA(dir)
	if err != nil {
		return nil, err
	}
	pair, err := ca.Client(dir, "apiserver-kubelet-client", "kube-apiserver-kubelet-client", []string{"system:masters"})
	if err != nil {
		return nil, err
	}
	cert, err := pair.TLS()
	if err != nil {
		return nil, fmt.Errorf("load kubelet client certificate: %w", err)
	}
	return &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}, nil
}
