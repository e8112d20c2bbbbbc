// Package node is svcnet's kubelet: it registers a Node and keeps its
// Lease, runs the pods bound to it as processes (each container under a
// shim, in the pod's network namespace from internal/cni, with the pod's
// hostname and its own /etc/hosts and /etc/resolv.conf), builds their
// environment and volumes (volume_setup.go), restarts them with CrashLoopBackOff, probes them, stops them
// gracefully, reports their status as upstream's kubelet does, and serves
// their logs to the API server. The components its process runs (svcnet
// up's control plane, the node's Service proxy) it shows as the kubelet
// shows static pods, as mirror pods (mirror.go), which it runs nothing for.
//
// Like the kubelet, it holds one worker per pod that brings the pod's
// containers in line with its spec on every change (pod update, container
// exit, probe result); a relist loop finds container exits. Container state
// lives in the data dir, not in memory, so a restarted agent adopts the
// running pods with their addresses.
package node

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"sync"
	"time"

	"golang.org/x/sync/singleflight"
	"golang.org/x/sys/unix"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/client-go/util/flowcontrol"

	"github.com/svcnet/svcnet/internal/cni"
	"github.com/svcnet/svcnet/internal/events"
	"github.com/svcnet/svcnet/internal/informer"
	"github.com/svcnet/svcnet/internal/netns"
	"github.com/svcnet/svcnet/internal/node/images"
	"github.com/svcnet/svcnet/internal/node/runc"
	"github.com/svcnet/svcnet/internal/proxy"
)

// Config configures a node agent.
type Config struct {
	// NodeName is the Node's name.
	NodeName string
	// REST reaches the API server.
	REST *rest.Config
	// DataDir holds the node's state: pods, logs, addresses, certificates.
	DataDir string
	// NetNS names the network namespace (/var/run/netns/NAME) the node's
	// network lives in; empty means the process's own.
	NetNS string
	// ServiceRanges are the cluster IP ranges. Pod traffic to them is not
	// masqueraded. In a node namespace that has no route for them they get
	// one onto the pod bridge, so that the node itself reaches cluster IPs.
	ServiceRanges []netip.Prefix
	// NodeIP is the InternalIP; nil picks one as cni.NodeIP does.
	NodeIP net.IP
	// ListenAddress is host:port of the HTTPS server that serves logs to
	// the API server. It listens in the process's namespace, or in the
	// node's with ListenInNodeNamespace (the nodes of svcnet up --nodes N,
	// each on its own address).
	ListenAddress         string
	ListenInNodeNamespace bool
	// PressureTransitionPeriod is the kubelet's
	// --eviction-pressure-transition-period (default 5m).
	PressureTransitionPeriod time.Duration
	// ClusterDNS and ClusterDomain go into pods' resolv.conf.
	ClusterDNS    string
	ClusterDomain string
	// Images maps images to programs.
	Images ImageTable
	// Runtime runs the containers: RuntimeProcess (the default) or
	// RuntimeRunc, which pulls the images Images does not map (Docker
	// Hub's from RegistryMirror first, when set), assembles those it maps,
	// and runs them with runc; RuntimeAuto is RuntimeRunc where runc can
	// run containers.
	Runtime        string
	RegistryMirror string
	// ImageGC is when the images runc runs are garbage collected; zero:
	// the kubelet's defaults.
	ImageGC ImageGC
	// MaxPods is the pods capacity.
	MaxPods int
	// StopPodsOnExit stops every pod and removes its network, then the
	// node's bridge, routes and masquerade, when the agent stops (svcnet
	// up); otherwise pods outlive the agent.
	StopPodsOnExit bool
	// ShutdownGracePeriod bounds the grace period of each pod stopped
	// when the agent stops, as the kubelet's graceful node shutdown
	// (shutdownGracePeriod) does; zero: no bound.
	ShutdownGracePeriod time.Duration
	// Self is the svcnet executable that runs shims and built-in images.
	Self string
	// Version is the Kubernetes version the node reports.
	Version string
	// StaticPods are the components the node's process runs, shown in
	// the API as mirror pods; with StopPodsOnExit they are deleted when
	// the agent stops, as the components stop with it.
	StaticPods []StaticPod
	// ProxyFrontends, if set, reads the node's Service proxy's frontends
	// back from its data plane, for the server's /proxy/frontends.
	ProxyFrontends proxy.FrontendLister
}

// Agent is a running node agent.
type Agent struct {
	// admitMu makes the admission of a pod one step (admit.go).
	admitMu  sync.Mutex
	cfg      Config
	client   kubernetes.Interface
	net      *cni.Network
	rt       *containerRuntime
	env      *envSources
	recorder record.EventRecorder
	probes   *probeManager
	backoff  *flowcontrol.Backoff
	// images holds the pulled images and runc runs them (RuntimeRunc);
	// pullBackoff and pullErrors are the image pulls' back-off and last
	// failures.
	images      *images.Store
	runc        *runc.Runtime
	pullBackoff *flowcontrol.Backoff
	// dataDirBound is set when the agent bound its data dir onto itself
	// to share its mounts with the shim host (RuntimeRunc).
	dataDirBound bool
	pullErrors   sync.Map
	// assembled holds the images assembled for the image table's entries
	// (RuntimeRunc) by name; assembling joins concurrent first uses.
	assembled  sync.Map
	assembling singleflight.Group
	imageGC    *imageGC
	resolv     resolvConf
	volumes    *volumeManager

	podLister  corelisters.PodLister
	nodeLister corelisters.NodeLister
	static     *staticPods
	nodeIP     net.IP
	// runCtx ends when the agent stops; informer handlers start pod
	// workers under it.
	runCtx context.Context

	mu      sync.Mutex
	workers map[types.UID]*podWorker
	// wg tracks the pod workers.
	wg sync.WaitGroup
}

// Run registers the node and runs its pods until ctx ends.
func Run(ctx context.Context, cfg Config) error {
	if cfg.ClusterDNS == "" {
		cfg.ClusterDNS = "10.96.0.10"
	}
	if cfg.ClusterDomain == "" {
		cfg.ClusterDomain = "cluster.local"
	}
	if cfg.PressureTransitionPeriod == 0 {
		cfg.PressureTransitionPeriod = defaultPressureTransitionPeriod
	}
	if cfg.MaxPods == 0 {
		cfg.MaxPods = 110
	}
	if cfg.Images == nil {
		cfg.Images = DefaultImages()
	}
	if cfg.Self == "" {
		self, err := os.Executable()
		if err != nil {
			return fmt.Errorf("find the svcnet executable: %w", err)
		}
		cfg.Self = self
	}
	client, err := kubernetes.NewForConfig(cfg.REST)
	if err != nil {
		return fmt.Errorf("API client: %w", err)
	}
	nsPath := netns.Path(cfg.NetNS)
	network, err := cni.Open(cni.Config{NodeNetNS: nsPath, Dir: filepath.Join(cfg.DataDir, "cni")})
	if err != nil {
		return err
	}
	defer network.Close()
	hostResolv, err := readHostResolvConf()
	if err != nil {
		return err
	}
	a := &Agent{
		cfg:     cfg,
		client:  client,
		net:     network,
		rt:      &containerRuntime{dir: filepath.Join(cfg.DataDir, "pods"), logDir: filepath.Join(cfg.DataDir, "logs"), self: cfg.Self},
		backoff: flowcontrol.NewBackOff(10*time.Second, 300*time.Second),
		resolv:  parseResolvConf(hostResolv),
		workers: map[types.UID]*podWorker{},
	}
	policy := cfg.ImageGC
	if policy == (ImageGC{}) {
		policy = DefaultImageGC()
	}
	if err := policy.Validate(); err != nil {
		return err
	}
	if cfg.Runtime == RuntimeAuto || cfg.Runtime == RuntimeRunc {
		if err := runc.MountCgroups(); err != nil {
			slog.Warn("node: mount the host's cgroups for runc", "err", err)
		}
	}
	if cfg.Runtime == RuntimeAuto {
		cfg.Runtime = RuntimeRunc
		if err := runc.Usable(); err != nil {
			cfg.Runtime = RuntimeProcess
			slog.Warn("node: runc cannot run containers here; they run as host processes", "err", err)
		}
		a.cfg.Runtime = cfg.Runtime
	}
	switch cfg.Runtime {
	case "", RuntimeProcess:
		slog.Warn("node: containers run as host processes (--runtime process): they share the host's file system, users and processes; the image table's programs play their images")
	case RuntimeRunc:
		if a.runc, err = runc.Find(filepath.Join(cfg.DataDir, "runc")); err != nil {
			return fmt.Errorf("--runtime runc: %w", err)
		}
		if a.images, err = images.Open(filepath.Join(cfg.DataDir, "images"), images.Options{Mirror: cfg.RegistryMirror}); err != nil {
			return err
		}
		a.pullBackoff = flowcontrol.NewBackOff(10*time.Second, 300*time.Second)
		if a.dataDirBound, err = shareDataDir(cfg.DataDir, a.rt.dir); err != nil {
			return err
		}
		imageDir := filepath.Join(cfg.DataDir, "images")
		a.imageGC = newImageGC(policy, a.images, func(st *unix.Statfs_t) error { return unix.Statfs(imageDir, st) },
			a.imagesInUse, a.assembledImages)
	default:
		return fmt.Errorf("unknown runtime %q: %s, %s or %s", cfg.Runtime, RuntimeAuto, RuntimeRunc, RuntimeProcess)
	}
	return a.run(ctx, nsPath)
}

func (a *Agent) run(ctx context.Context, nsPath string) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	a.runCtx = ctx
	a.recorder = events.NewRecorder(ctx, a.client, "kubelet")

	var err error
	if a.nodeIP, err = a.pickNodeIP(nsPath); err != nil {
		return err
	}
	reg := &registration{agent: a, disk: newDiskPressure(a.cfg.DataDir, a.cfg.PressureTransitionPeriod)}
	podCIDR, err := reg.register(ctx)
	if err != nil {
		return err
	}
	if err := a.net.Ensure(podCIDR); err != nil {
		return fmt.Errorf("pod network: %w", err)
	}
	if err := a.net.RouteServiceRanges(a.cfg.ServiceRanges); err != nil {
		return fmt.Errorf("pod network: %w", err)
	}
	srv, err := newServer(a)
	if err != nil {
		return err
	}
	if err := reg.markReady(ctx, srv); err != nil {
		srv.ln.Close()
		return err
	}

	podInformers := informers.NewSharedInformerFactoryWithOptions(a.client, 0, informers.WithTweakListOptions(func(o *metav1.ListOptions) {
		o.FieldSelector = fields.OneTermEqualSelector("spec.nodeName", a.cfg.NodeName).String()
	}))
	all := informers.NewSharedInformerFactory(a.client, 0)
	pods := podInformers.Core().V1().Pods()
	a.podLister = pods.Lister()
	services := all.Core().V1().Services()
	nodes := all.Core().V1().Nodes()
	a.nodeLister = nodes.Lister()
	a.static = newStaticPods(a, a.cfg.StaticPods, time.Now())
	a.env = &envSources{
		services: services.Lister(),
		configMap: func(ctx context.Context, ns, name string) (*corev1.ConfigMap, error) {
			return a.client.CoreV1().ConfigMaps(ns).Get(ctx, name, metav1.GetOptions{})
		},
		secret: func(ctx context.Context, ns, name string) (*corev1.Secret, error) {
			return a.client.CoreV1().Secrets(ns).Get(ctx, name, metav1.GetOptions{})
		},
		allocatable: reg.capacity(),
		warn: func(pod *corev1.Pod, reason, msg string) {
			a.recorder.Event(pod, corev1.EventTypeWarning, reason, msg)
		},
	}
	a.probes = newProbeManager(a)

	podsSynced, err := informer.Handle(pods.Informer(), a.podHandler(ctx))
	if err != nil {
		return err
	}
	if err := a.watchVolumeSources(ctx); err != nil {
		return err
	}
	routes := newSyncLoop("the pod network with the nodes", a.syncRoutes)
	nodesSynced, err := informer.Handle(nodes.Informer(), routes.handler())
	if err != nil {
		return err
	}
	// Host ports follow the pods and their sandboxes.
	hostPorts := newSyncLoop("the pods' host ports", a.syncHostPorts)
	if _, err := informer.Handle(pods.Informer(), hostPorts.handler()); err != nil {
		return err
	}
	a.net.OnSandboxChange(hostPorts.poke)
	if _, err := informer.Handle(nodes.Informer(), a.attachHandler()); err != nil {
		return err
	}
	podInformers.Start(ctx.Done())
	all.Start(ctx.Done())
	if !cache.WaitForCacheSync(ctx.Done(), podsSynced, nodesSynced, services.Informer().HasSynced) {
		return ctx.Err()
	}
	// Routes and masquerade are in place before this run starts a pod;
	// what a previous run left is rewritten from the Nodes.
	if err := routes.sync(); err != nil {
		slog.Warn("sync the pod network with the nodes", "err", err)
		routes.poke()
	}
	if err := a.adopt(ctx); err != nil {
		return err
	}
	for _, p := range listPods(a.podLister) {
		a.podChanged(p)
	}

	var wg sync.WaitGroup
	errc := make(chan error, 1)
	wg.Go(func() {
		if err := srv.serve(ctx); err != nil {
			errc <- err
			cancel()
		}
	})
	wg.Go(func() { reg.heartbeat(ctx) })
	wg.Go(func() { a.relist(ctx) })
	wg.Go(func() { a.watchLocalStorage(ctx) })
	wg.Go(func() { routes.run(ctx) })
	wg.Go(func() { hostPorts.run(ctx) })
	wg.Go(func() { a.static.run(ctx) })
	wg.Go(func() { a.volumes.podCerts.Run(ctx) })
	if a.imageGC != nil {
		wg.Go(func() { a.collectImages(ctx) })
	}
	slog.Info("node agent running", "node", a.cfg.NodeName, "podCIDR", podCIDR, "nodeIP", a.nodeIP, "netns", nsPath)

	<-ctx.Done()
	wg.Wait()
	a.wg.Wait()
	a.volumes.configMaps.Wait()
	a.volumes.secrets.Wait()
	a.volumes.trustBundles.Shutdown()
	a.probes.stopAll()
	if a.cfg.StopPodsOnExit {
		// The API server may still be there (svcnet up stops it last).
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		a.static.removeAll(rctx)
		cancel()
		a.stopAllPods()
		if a.images != nil {
			runc.RemoveCgroupParent(cgroupParent)
		}
		if a.dataDirBound {
			unbindDataDir(a.cfg.DataDir)
		}
		if err := a.net.Remove(); err != nil {
			slog.Warn("remove the node's pod network", "err", err)
		}
	}
	select {
	case err := <-errc:
		return err
	default:
		return nil
	}
}

// podHandler feeds the pods of the node to their workers; mirror pods,
// which show static pods and run nothing, go to the static pods instead.
func (a *Agent) podHandler(ctx context.Context) cache.ResourceEventHandlerFuncs {
	return cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { a.podChanged(obj) },
		UpdateFunc: func(_, obj any) { a.podChanged(obj) },
		DeleteFunc: func(obj any) {
			pod, ok := informer.Object[*corev1.Pod](obj)
			switch {
			case !ok:
			case isMirrorPod(pod):
				a.static.poke() // gone: it is made anew
			default:
				a.podGone(ctx, pod.UID)
			}
		},
	}
}

// pickNodeIP is the configured IP, else the address of the node's
// namespace that cni.NodeIP picks.
func (a *Agent) pickNodeIP(nsPath string) (net.IP, error) {
	if a.cfg.NodeIP != nil {
		return a.cfg.NodeIP, nil
	}
	ip, how, err := cni.NodeIP(nsPath)
	if err != nil {
		return nil, fmt.Errorf("node IP: %w", err)
	}
	slog.Info("node IP chosen", "node", a.cfg.NodeName, "ip", ip, "from", how)
	return ip, nil
}

// listPods lists the cached pods; a cache lister does not fail.
func listPods(l corelisters.PodLister) []*corev1.Pod {
	pods, _ := l.List(labels.Everything())
	return pods
}

// adopt takes over what a previous run of the agent left: pods on disk get
// workers (those gone from the API are stopped and removed by them), and
// pod networks that belong to no pod on disk are released.
func (a *Agent) adopt(ctx context.Context) error {
	uids, err := a.rt.pods()
	if err != nil {
		return err
	}
	keep := map[string]bool{}
	for _, uid := range uids {
		keep[uid] = true
		if _, err := a.podByUID(types.UID(uid)); err != nil {
			a.podGone(ctx, types.UID(uid))
		}
	}
	if err := a.net.GC(keep); err != nil {
		slog.Warn("release leaked pod networks", "err", err)
	}
	return nil
}

// podByUID finds a pod of this node in the informer cache.
func (a *Agent) podByUID(uid types.UID) (*corev1.Pod, error) {
	for _, p := range listPods(a.podLister) {
		if p.UID == uid {
			return p, nil
		}
	}
	return nil, errors.New("no such pod")
}

// stopAllPods stops every pod's containers and removes its network, for
// an agent that takes its pods with it.
func (a *Agent) stopAllPods() {
	uids, err := a.rt.pods()
	if err != nil {
		slog.Warn("list pods to stop", "err", err)
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var wg sync.WaitGroup
	for _, uid := range uids {
		wg.Go(func() {
			rec, _ := a.loadPodRecord(uid)
			// No pod: no hooks and no events, the agent is going away.
			grace := gracePeriod(rec.Pod, nil)
			if a.cfg.ShutdownGracePeriod > 0 {
				grace = min(grace, a.cfg.ShutdownGracePeriod)
			}
			if err := a.killContainers(ctx, uid, nil, &grace); err != nil {
				slog.Warn("stop pod", "uid", uid, "err", err)
			}
			if err := a.net.Teardown(uid); err != nil {
				slog.Warn("remove pod network", "uid", uid, "err", err)
			}
			if err := a.tearDownVolumes(uid); err != nil {
				slog.Warn("unmount pod volumes", "uid", uid, "err", err)
			}
		})
	}
	wg.Wait()
}
