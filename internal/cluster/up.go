package cluster

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"

	"golang.org/x/sys/unix"
	apiextensionsclient "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/svcnet/svcnet/internal/addons"
	"github.com/svcnet/svcnet/internal/allocator"
	"github.com/svcnet/svcnet/internal/auth/nodeauthorizer"
	"github.com/svcnet/svcnet/internal/cni"
	"github.com/svcnet/svcnet/internal/controller/serviceaccount"
	"github.com/svcnet/svcnet/internal/crds"
	"github.com/svcnet/svcnet/internal/lb/speaker"
	"github.com/svcnet/svcnet/internal/netns"
	"github.com/svcnet/svcnet/internal/nodenet"
	"github.com/svcnet/svcnet/internal/pki"
)

// UpOptions configure `svcnet up`: the control plane and its nodes in one
// process.
type UpOptions struct {
	APIServer         APIServerOptions
	ControllerManager ControllerManagerOptions
	// Node is what every node agent runs with. Its NodeName (default: the
	// host name), NetNS and NodeIP place the node of a one-node cluster;
	// with more nodes, node i is NodeName-i.
	Node NodeOptions
	// Nodes is how many node agents run: 0 none; 1 in up's own network
	// namespace (or Node.NetNS); more each in a namespace of its own on a
	// bridge in up's namespace, the nodes' network NodeNetwork.
	Nodes       int
	NodeNetwork string
	// ClusterCIDR is what node IPAM hands pod CIDRs (/24s) out of.
	ClusterCIDR string
	// DNSUpstreams are the resolvers the cluster DNS forwards names
	// outside the cluster to (the coredns Corefile's forward plugin);
	// empty means the nodes' resolv.conf.
	DNSUpstreams []string
	// LBPool is --lb-pool, the addresses (CIDRs or ranges) of the
	// IPAddressPool up makes; with none, up --nodes N makes one on the
	// nodes' network (addons.NodesPool) unless a pool of the user's exists.
	LBPool []string
	// Disable names packaged components not to install (k3s's --disable):
	// "coredns", "ingress".
	Disable []string
	// Ready is called once the cluster is up, with the admin kubeconfig's
	// path and the API server's URL.
	Ready func(kubeconfig, url string)
}

// controlPlaneLabel marks the node the control plane runs on, as kubeadm
// labels it (svcnet does not taint it: its pods schedule there as on a
// one-node cluster).
const controlPlaneLabel = "node-role.kubernetes.io/control-plane"

// Up runs the cluster until ctx ends, then stops the nodes (and their pods)
// and the controllers, then the API server, and removes every namespace,
// link and route it made.
func Up(ctx context.Context, o UpOptions) error {
	ranges, err := allocator.ParseConfig(o.APIServer.ServiceClusterIPRange, o.APIServer.ServiceNodePortRange)
	if err != nil {
		return err
	}
	if err := addons.ParsePools(o.LBPool); err != nil {
		return err
	}
	for _, d := range o.Disable {
		if d != addonCoreDNS && d != addonIngress && d != addonLocalStorage {
			return fmt.Errorf("--disable %q: svcnet up packages %q, %q and %q only", d, addonCoreDNS, addonIngress, addonLocalStorage)
		}
	}
	if o.Node.ClusterDNS == "" {
		// kubeadm's choice: the tenth address of the Service range.
		ip := ranges.ServiceCIDRs[0].First()
		for range 9 {
			ip = ip.Next()
		}
		o.Node.ClusterDNS = ip.String()
	}
	// Nothing of a running cluster's may be touched before these are held.
	unlock, err := lockFile(filepath.Join(o.APIServer.DataDir, "up.lock"), "the data dir "+o.APIServer.DataDir+" is in use by another svcnet")
	if err != nil {
		return err
	}
	defer unlock()
	cp, err := startControlPlaneLogs(&o)
	if err != nil {
		return err
	}
	defer cp.close()
	plan, err := planNodes(&o)
	if err != nil {
		return err
	}
	if plan.network != nil {
		unlockNet, err := lockNodesNetwork()
		if err != nil {
			return err
		}
		defer unlockNet()
		if err := plan.network.Create(); err != nil {
			return errors.Join(fmt.Errorf("nodes' network: %w", err), plan.network.Remove())
		}
		defer func() {
			if err := plan.network.Remove(); err != nil {
				slog.Warn("remove the nodes' network", "err", err)
			}
		}()
	}

	// ctx stops the nodes and the controllers; the API server outlives
	// them, so that their last writes on the way out (pod status, the
	// leader lease) still reach it.
	ctx, stop := context.WithCancel(ctx)
	defer stop()
	apiCtx, stopAPI := context.WithCancel(context.WithoutCancel(ctx))
	defer stopAPI()
	a, err := StartAPIServer(apiCtx, o.APIServer)
	if err != nil {
		return err
	}
	cp.apiServer.Store(a)
	var wg sync.WaitGroup
	errs := make(chan error, 3+len(plan.nodes))
	run := func(name string, f func() error) {
		wg.Go(func() {
			if err := f(); err != nil && ctx.Err() == nil {
				errs <- fmt.Errorf("%s: %w", name, err)
				stop() // one component failing takes the cluster down
			}
		})
	}
	apiDone := make(chan error, 1)
	go func() {
		apiDone <- a.Wait()
		stop() // so does an API server that fails
	}()

	// One admin client for what up writes itself.
	admin, err := adminClient(a.Kubeconfig)
	if err == nil {
		// As kubeadm's bootstrap-token phase: what joining nodes need.
		err = joinObjects(ctx, &o.APIServer, a, admin)
	}
	if err == nil {
		err = ensureSpeakerRBAC(ctx, admin)
	}
	if err == nil {
		err = ensureLocalPathRBAC(ctx, admin)
	}

	if err != nil {
		stopAPI()
		<-apiDone
		return err
	}
	cm := o.ControllerManager
	// As kubeadm's: the controller manager and the scheduler have
	// identities of their own, and each controller its ServiceAccount.
	cm.Kubeconfig, err = componentKubeconfig(&o.APIServer, a.URL, o.APIServer.DataDir, "controller-manager", "system:kube-controller-manager")
	if err == nil {
		cm.SchedulerKubeconfig, err = componentKubeconfig(&o.APIServer, a.URL, o.APIServer.DataDir, "scheduler", "system:kube-scheduler")
	}
	if err != nil {
		stopAPI()
		<-apiDone
		return err
	}
	cm.UseServiceAccountCredentials = true
	cm.ServiceAccountKeyFile = filepath.Join(o.APIServer.caDir(), "sa.key")
	// As kubeadm's: the cluster CA signs the certificates of requests.
	cm.CSRSigning.CertFile = filepath.Join(o.APIServer.caDir(), "ca.crt")
	cm.CSRSigning.KeyFile = filepath.Join(o.APIServer.caDir(), "ca.key")
	localStorage := !slices.Contains(o.Disable, addonLocalStorage)
	if localStorage {
		cm.SharedVolumeDir = sharedPathDir(o.APIServer.DataDir)
	}
	proxyKubeconfig, err := componentKubeconfig(&o.APIServer, a.URL, o.APIServer.DataDir, "kube-proxy", "system:kube-proxy")
	var speakerKubeconfig string
	if err == nil {
		speakerKubeconfig, err = componentKubeconfig(&o.APIServer, a.URL, o.APIServer.DataDir, "metallb-speaker", speaker.User)
	}
	if err != nil {
		stopAPI()
		<-apiDone
		return err
	}
	cm.Scheduler.NoNodesReason = plan.noNodes
	run("controller manager", func() error {
		c, err := StartControllerManager(ctx, cm)
		if err != nil {
			return err
		}
		cp.controllerManager.Store(c)
		return c.Wait()
	})
	// The other projects' definitions install beside the nodes' start (the
	// Gateway API's take seconds to validate); up is not up without them.
	crdsInstalled := make(chan struct{})
	run("custom resource definitions", func() error {
		if err := installCustomResources(ctx, a.Kubeconfig, admin, loadBalancerAddon(&o, plan), !slices.Contains(o.Disable, addonIngress)); err != nil {
			return err
		}
		close(crdsInstalled)
		return nil
	})
	run("node IPAM", func() error { return RunNodeIPAM(ctx, a.Kubeconfig, o.ClusterCIDR, 24) })
	if plan.controlPlane != "" {
		run("mark the control plane", func() error { return markControlPlane(ctx, admin, plan.controlPlane) })
	}
	ready := &readiness{dns: o.Node.ClusterDNS, name: "kubernetes.default.svc." + o.Node.ClusterDomain,
		serviceAccount: cm.Runs(serviceaccount.ControllerName), controlPlane: plan.controlPlane}
	for _, n := range plan.nodes {
		// Each node is system:node:<name> in system:nodes.
		if n.Kubeconfig, err = componentKubeconfig(&o.APIServer, a.URL, n.DataDir, "kubelet-client", nodeauthorizer.UserPrefix+n.NodeName, nodeauthorizer.Group); err != nil {
			errs <- err
			stop()
			break
		}
		n.ProxyKubeconfig = proxyKubeconfig
		n.SpeakerKubeconfig = speakerKubeconfig
		n.LocalVolumes = localStorage
		p := &nodeProxy{name: n.NodeName, netns: netns.Path(n.NetNS)}
		n.ProxySynced = p.synced
		ready.nodes = append(ready.nodes, p)
		if n.NodeName == plan.controlPlane {
			n.StaticPods = cp.staticPods()
		}
		run("node "+n.NodeName, func() error { return RunNode(ctx, n) })
	}
	if slices.Contains(o.Disable, addonCoreDNS) {
		ready.dns = "" // nothing to wait for
	}
	err = applyAddons(ctx, admin, o)
	ready.client = admin
	if err == nil {
		select {
		case <-crdsInstalled:
		case <-ctx.Done(): // ready.wait returns at once
		}
	}
	switch {
	case err != nil:
		errs <- err
		stop()
	case ready.wait(ctx) == nil && o.Ready != nil:
		o.Ready(a.Kubeconfig, a.URL)
	}
	<-ctx.Done()
	wg.Wait()
	stopAPI()
	close(errs)
	var all []error
	for err := range errs {
		all = append(all, err)
	}
	return errors.Join(append(all, <-apiDone)...)
}

// joinObjects writes cluster-info (with the advertised URL and the
// cluster CA) and the join RBAC.
func joinObjects(ctx context.Context, o *APIServerOptions, a *APIServer, admin kubernetes.Interface) error {
	ca, err := pki.LoadOrCreateCA(o.caDir())
	if err != nil {
		return err
	}
	if err := ensureJoinObjects(ctx, admin, a.AdvertiseURL, ca.CertPEM); err != nil {
		return fmt.Errorf("objects for joining nodes: %w", err)
	}
	return nil
}

// loadBalancerAddon is the pool up makes: --lb-pool's, else one on the
// nodes' network of --nodes N.
func loadBalancerAddon(o *UpOptions, plan *nodePlan) addons.LoadBalancer {
	if len(o.LBPool) > 0 || plan.network == nil {
		return addons.LoadBalancer{Addresses: o.LBPool}
	}
	pool := addons.NodesPool(plan.network.Prefix, len(plan.network.Nodes))
	if pool == "" {
		return addons.LoadBalancer{}
	}
	return addons.LoadBalancer{Addresses: []string{pool}, OnlyIfNone: true}
}

// installCustomResources installs the definitions of the other projects'
// APIs svcnet implements (MetalLB's, the Gateway API's), before the
// controllers that serve them start, then the add-ons made of them:
// MetalLB's namespace and up's pool, and the Ingress add-on's
// GatewayClass unless that add-on is disabled.
func installCustomResources(ctx context.Context, kubeconfig string, admin kubernetes.Interface, lb addons.LoadBalancer, gatewayClass bool) error {
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		return fmt.Errorf("load kubeconfig %s: %w", kubeconfig, err)
	}
	apiext, err := apiextensionsclient.NewForConfig(cfg)
	if err != nil {
		return fmt.Errorf("API client: %w", err)
	}
	for _, s := range []crds.Set{crds.MetalLB, crds.GatewayAPI} {
		if err := crds.Apply(ctx, apiext, s); err != nil {
			return fmt.Errorf("%s definitions: %w", s, err)
		}
	}
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return fmt.Errorf("API client: %w", err)
	}
	if err := addons.ApplyLoadBalancer(ctx, admin, dyn, lb); err != nil {
		return fmt.Errorf("load balancer add-on: %w", err)
	}
	if !gatewayClass {
		return nil
	}
	if err := addons.ApplyGatewayClass(ctx, dyn); err != nil {
		return fmt.Errorf("ingress add-on: %w", err)
	}
	return nil
}

// Names of the add-ons for --disable: cluster DNS, the Ingress
// controller, the local-path provisioners and their StorageClasses (k3s's
// name).
const (
	addonCoreDNS      = "coredns"
	addonIngress      = "ingress"
	addonLocalStorage = "local-storage"
)

// applyAddons installs cluster DNS, the Ingress controller and the
// StorageClasses, but those disabled.
func applyAddons(ctx context.Context, client kubernetes.Interface, o UpOptions) error {
	if !slices.Contains(o.Disable, addonLocalStorage) {
		if err := addons.ApplyStorage(ctx, client); err != nil {
			return fmt.Errorf("local-storage add-on: %w", err)
		}
	}
	if !slices.Contains(o.Disable, addonIngress) {
		if err := addons.ApplyIngress(ctx, client); err != nil {
			return fmt.Errorf("ingress add-on: %w", err)
		}
	}
	if slices.Contains(o.Disable, addonCoreDNS) {
		return nil
	}
	dnsIP, err := netip.ParseAddr(o.Node.ClusterDNS)
	if err != nil {
		return fmt.Errorf("--cluster-dns %q: %w", o.Node.ClusterDNS, err)
	}
	err = addons.Apply(ctx, client, addons.Config{ClusterDNS: dnsIP, Domain: o.Node.ClusterDomain, Upstreams: o.DNSUpstreams})
	if err != nil {
		return fmt.Errorf("cluster add-ons: %w", err)
	}
	return nil
}

// componentKubeconfig writes <dir>/<name>.conf (kubeadm's file names)
// for a component's client certificate of user in groups, issued by the
// cluster CA, and returns its path.
func componentKubeconfig(o *APIServerOptions, url, dataDir, name, user string, groups ...string) (string, error) {
	dir := filepath.Join(dataDir, "pki")
	ca, err := pki.LoadOrCreateCA(o.caDir())
	if err != nil {
		return "", err
	}
	pair, err := ca.Client(dir, name, user, groups)
	if err != nil {
		return "", err
	}
	path := filepath.Join(dataDir, name+".conf")
	return path, WriteKubeconfig(path, url, ca.CertPEM, pair)
}

// adminClient is a client of the admin kubeconfig.
func adminClient(kubeconfig string) (kubernetes.Interface, error) {
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		return nil, fmt.Errorf("load kubeconfig %s: %w", kubeconfig, err)
	}
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("API client: %w", err)
	}
	return client, nil
}

// nodePlan is what Up runs: the node agents, the nodes' network when they
// have one, and why there is no node when there is none.
type nodePlan struct {
	nodes   []NodeOptions
	network *nodenet.Network
	noNodes string
	// controlPlane is the node up labels as the control plane's.
	controlPlane string
}

// planNodes lays out o.Nodes nodes, sets the API server's advertised
// address to the control-plane node's IP, and brings loopback up in up's
// namespace.
func planNodes(o *UpOptions) (*nodePlan, error) {
	if o.Nodes < 0 {
		return nil, fmt.Errorf("--nodes %d: want 0 or more", o.Nodes)
	}
	if o.Nodes > 1 && o.Node.NetNS != "" {
		return nil, errors.New("--netns places the node of a one-node cluster; --nodes N makes a namespace per node")
	}
	if o.Nodes > 1 && o.Node.NodeIP != "" {
		return nil, errors.New("--node-ip places the node of a one-node cluster; --nodes N takes node IPs from --node-network")
	}
	p := &nodePlan{}
	if err := nodeCapable(); err != nil {
		if o.Nodes > 0 {
			p.noNodes = "svcnet up runs no node: running pods needs root (" + err.Error() + "); run it as root, or with --nodes 0 for the control plane alone"
			slog.Warn(p.noNodes)
		}
		return p, nil
	}
	if err := cni.LoopbackUp(""); err != nil {
		return nil, err
	}
	if o.Nodes == 0 {
		p.noNodes = "svcnet up runs no node (--nodes 0): join one with svcnet node"
		return p, nil
	}
	base := o.Node
	if base.NodeName == "" {
		host, err := os.Hostname()
		if err != nil {
			return nil, fmt.Errorf("node name: %w", err)
		}
		base.NodeName = strings.ToLower(host)
	}
	base.DataDir, base.ServiceClusterIPRange = o.APIServer.DataDir, o.APIServer.ServiceClusterIPRange
	base.StopPodsOnExit = true
	if o.Nodes == 1 {
		ip, err := nodeIP(base)
		if err != nil {
			return nil, err
		}
		base.NodeIP = ip.String()
		p.controlPlane = base.NodeName
		p.nodes = []NodeOptions{base}
		advertise(o, ip.String(), netns.Path(base.NetNS))
		return p, nil
	}
	names := make([]string, o.Nodes)
	for i := range names {
		names[i] = fmt.Sprintf("%s-%d", base.NodeName, i+1)
	}
	network, err := nodenet.Plan(o.NodeNetwork, names, filepath.Join(o.APIServer.DataDir, "nodes"))
	if err != nil {
		return nil, err
	}
	p.network = network
	_, kubeletPort, err := net.SplitHostPort(base.ListenAddress)
	if err != nil {
		return nil, fmt.Errorf("--kubelet-address %q: %w", base.ListenAddress, err)
	}
	for i, n := range network.Nodes {
		node := base
		node.NodeName, node.NetNS, node.NodeIP = n.Name, n.Name, n.IP.String()
		node.DataDir = filepath.Join(o.APIServer.DataDir, "nodes", n.Name)
		// Each node's kubelet server listens on the node's own address.
		node.ListenAddress, node.ListenInNodeNamespace = net.JoinHostPort(n.IP.String(), kubeletPort), true
		if i == 0 {
			p.controlPlane = n.Name
			advertise(o, n.IP.String(), n.NetNS)
		}
		p.nodes = append(p.nodes, node)
	}
	return p, nil
}

// nodeIP is the one node's --node-ip, else the address cni.NodeIP picks
// in its namespace.
func nodeIP(n NodeOptions) (net.IP, error) {
	if n.NodeIP != "" {
		return parseNodeIP(n.NodeIP)
	}
	ns := netns.Path(n.NetNS)
	if ns != "" {
		if err := cni.LoopbackUp(ns); err != nil {
			return nil, err
		}
	}
	ip, how, err := cni.NodeIP(ns)
	if err != nil {
		return nil, fmt.Errorf("node %s: %w", n.NodeName, err)
	}
	slog.Info("node IP chosen", "node", n.NodeName, "ip", ip, "from", how)
	return ip, nil
}

// advertise makes the control-plane node's IP the API server's advertised
// address (the kubernetes Service's endpoint), served in that node's
// namespace, unless --advertise-address says otherwise.
func advertise(o *UpOptions, ip, ns string) {
	if o.APIServer.AdvertiseAddress == "" {
		o.APIServer.AdvertiseAddress, o.APIServer.AdvertiseNetNS, o.APIServer.ServeAdvertised = ip, ns, true
	}
}

// lockFile holds an exclusive lock on path (made if missing) until the
// returned function is called or the process ends; busy says why when
// another process holds it.
func lockFile(path, busy string) (func(), error) {
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return nil, fmt.Errorf("create %s: %w", filepath.Dir(path), err)
	}
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return nil, fmt.Errorf("open lock %s: %w", path, err)
	}
	if err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
		f.Close()
		if errors.Is(err, unix.EWOULDBLOCK) {
			return nil, errors.New(busy)
		}
		return nil, fmt.Errorf("lock %s: %w", path, err)
	}
	return func() { f.Close() }, nil
}

// lockNodesNetwork holds the nodes' network of up's network namespace
// (one bridge svcnet-nodes, one set of addresses): a lock file named
// after the namespace.
func lockNodesNetwork() (func(), error) {
	var st unix.Stat_t
	if err := unix.Stat("/proc/self/ns/net", &st); err != nil {
		return nil, fmt.Errorf("identify the network namespace: %w", err)
	}
	return lockFile(fmt.Sprintf("/run/svcnet/nodes-net%d.lock", st.Ino),
		"another svcnet up --nodes runs its nodes' network in this network namespace")
}

// nodeCapable says what the process lacks to run a node: network and mount
// namespaces need CAP_NET_ADMIN and CAP_SYS_ADMIN.
func nodeCapable() error {
	hdr := unix.CapUserHeader{Version: unix.LINUX_CAPABILITY_VERSION_3}
	var data [2]unix.CapUserData
	if err := unix.Capget(&hdr, &data[0]); err != nil {
		return fmt.Errorf("read capabilities: %w", err)
	}
	var missing []string
	for _, c := range []struct {
		bit  uint
		name string
	}{{unix.CAP_NET_ADMIN, "CAP_NET_ADMIN"}, {unix.CAP_SYS_ADMIN, "CAP_SYS_ADMIN"}} {
		if data[c.bit/32].Effective&(1<<(c.bit%32)) == 0 {
			missing = append(missing, c.name)
		}
	}
	if len(missing) > 0 {
		return fmt.Errorf("it lacks %s", strings.Join(missing, " and "))
	}
	return nil
}
