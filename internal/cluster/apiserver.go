// Package cluster assembles svcnet's components into running processes: the
// data dir layout, certificates and kubeconfig, embedded or external etcd,
// and the API server, for `svcnet up` and the component subcommands.
package cluster

import (
	"cmp"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	clientv3 "go.etcd.io/etcd/client/v3"
	"k8s.io/apiextensions-apiserver/pkg/apiserver/conversion"
	"k8s.io/apimachinery/pkg/runtime/schema"
	utilnet "k8s.io/apimachinery/pkg/util/net"
	"k8s.io/apimachinery/pkg/version"
	webhookutil "k8s.io/apiserver/pkg/util/webhook"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	aggregatorclient "k8s.io/kube-aggregator/pkg/client/clientset_generated/clientset"

	"github.com/svcnet/svcnet/internal/admission/webhook"
	aggregatorpkg "github.com/svcnet/svcnet/internal/aggregator"
	"github.com/svcnet/svcnet/internal/allocator"
	"github.com/svcnet/svcnet/internal/apiextensions"
	"github.com/svcnet/svcnet/internal/apiserver"
	"github.com/svcnet/svcnet/internal/auth/bootstrappolicy"
	"github.com/svcnet/svcnet/internal/auth/serviceaccount"
	"github.com/svcnet/svcnet/internal/controller"
	"github.com/svcnet/svcnet/internal/controlplane"
	"github.com/svcnet/svcnet/internal/controlplane/apfbootstrap"
	"github.com/svcnet/svcnet/internal/controlplane/autoregister"
	"github.com/svcnet/svcnet/internal/controlplane/clusterauthenticationtrust"
	"github.com/svcnet/svcnet/internal/controlplane/defaultservicecidr"
	"github.com/svcnet/svcnet/internal/controlplane/schedulingbootstrap"
	"github.com/svcnet/svcnet/internal/events"
	"github.com/svcnet/svcnet/internal/metricsserver"
	"github.com/svcnet/svcnet/internal/netns"
	"github.com/svcnet/svcnet/internal/pki"
	"github.com/svcnet/svcnet/internal/registry"
	"github.com/svcnet/svcnet/internal/registry/all"
	"github.com/svcnet/svcnet/internal/storage"
	"github.com/svcnet/svcnet/internal/storage/encryption"
	"github.com/svcnet/svcnet/internal/topology"
)

// maintenanceInterval is how often the embedded etcd's database is looked
// after (storage.Embedded.RunMaintenance).
const maintenanceInterval = 10 * time.Second

// KubernetesVersion is the upstream release whose API svcnet serves: the
// k8s.io/api version in go.mod.
const KubernetesVersion = "v1.37.2"

// APIServerOptions configure the API server and its etcd.
type APIServerOptions struct {
	DataDir string
	// CADir holds the cluster CA (ca.crt, ca.key) and the service account
	// signing key (sa.key, sa.pub), as kubeadm's /etc/kubernetes/pki; API
	// servers sharing an etcd share it, so that clients and tokens work
	// against each. Empty: <DataDir>/pki.
	CADir string
	// BindAddress is host:port for HTTPS (default 127.0.0.1:6443).
	BindAddress string
	// EtcdServers are external etcd client URLs; empty starts the embedded
	// member in DataDir/etcd.
	EtcdServers []string
	// EtcdTLS is kube-apiserver's --etcd-cafile, --etcd-certfile and
	// --etcd-keyfile for EtcdServers; the embedded member's are issued
	// into DataDir/pki (see etcdCertificates).
	EtcdTLS storage.TLSFiles
	// EtcdClientURL and EtcdPeerURL place the embedded member (default
	// DefaultEtcdClientURL, DefaultEtcdPeerURL); both are https.
	EtcdClientURL, EtcdPeerURL string
	// ServiceClusterIPRange is one CIDR, or two of different families for
	// dual-stack (default 10.96.0.0/12); ServiceNodePortRange is a port
	// range (default 30000-32767).
	ServiceClusterIPRange, ServiceNodePortRange string
	// AdvertiseAddress is the address listed in the kubernetes Service's
	// endpoints; empty means the bind address, or the host's default
	// interface address when binding to all.
	AdvertiseAddress string
	// ServeAdvertised makes the API server serve on the advertised address
	// too (same port) where the bind address does not cover it, in the
	// network namespace pinned at AdvertiseNetNS (empty: its own), so that
	// pods reach the API through the kubernetes Service: svcnet up's for
	// the control-plane node's IP. (kube-apiserver never binds it: there
	// it may be a load balancer's.)
	ServeAdvertised bool
	AdvertiseNetNS  string
	// EnableBootstrapTokenAuth is kube-apiserver's
	// --enable-bootstrap-token-auth: bootstrap tokens (Secrets of type
	// bootstrap.kubernetes.io/token in kube-system) authenticate.
	EnableBootstrapTokenAuth bool
	// AuthorizationModes are the authorizers asked in turn (Node, RBAC,
	// AlwaysAllow); empty means DefaultAuthorizationModes.
	AuthorizationModes []string
	// EtcdQuotaBackendBytes is the embedded member's quota (0: etcd's 2
	// GiB); RunMaintenance keeps it usable.
	EtcdQuotaBackendBytes int64
	// EtcdLog, if set, gets the embedded etcd's own log (etcd's JSON
	// lines, info level); otherwise it logs only what is fatal.
	EtcdLog io.Writer
	// EncryptionProviderConfig is kube-apiserver's
	// --encryption-provider-config: an EncryptionConfiguration file whose
	// providers encrypt resources in etcd (see package encryption).
	EncryptionProviderConfig string
	// EncryptSecrets (up's --encrypt-secrets) encrypts Secrets with an
	// aescbc key generated once into DataDir/pki/encryption-config.yaml;
	// not with EncryptionProviderConfig.
	EncryptSecrets bool
}

// caDir is where the CA and the service account key are.
func (o *APIServerOptions) caDir() string {
	if o.CADir != "" {
		return o.CADir
	}
	return filepath.Join(o.DataDir, "pki")
}

// Defaults of the Service ranges and of the embedded etcd's URLs.
const (
	DefaultServiceClusterIPRange = "10.96.0.0/12"
	DefaultServiceNodePortRange  = "30000-32767"
	DefaultEtcdClientURL         = "https://127.0.0.1:2379"
	DefaultEtcdPeerURL           = "https://127.0.0.1:2380"
)

// DefaultDataDir is /var/lib/svcnet for root, else ~/.svcnet.
func DefaultDataDir() string {
	if os.Geteuid() == 0 {
		return "/var/lib/svcnet"
	}
	if home, err := os.UserHomeDir(); err == nil {
		return filepath.Join(home, ".svcnet")
	}
	return ".svcnet"
}

// APIServer is a running API server with its storage.
type APIServer struct {
	// Kubeconfig is the admin kubeconfig's path.
	Kubeconfig string
	// URL is the server's https URL.
	URL string
	// AdvertiseURL is the https URL of its advertised address, the one
	// other machines reach it at (cluster-info's).
	AdvertiseURL string
	// Started is when the API server started serving.
	Started time.Time
	// EtcdEndpoints and EtcdTLS are how the API server reaches etcd.
	EtcdEndpoints []string
	EtcdTLS       storage.TLSFiles

	embedded *storage.Embedded
	client   *clientv3.Client
	loopback kubernetes.Interface
	done     chan error
}

// StartAPIServer starts etcd (unless external), the API server and its
// compactor; they run until ctx ends. Wait returns when all have stopped.
func StartAPIServer(ctx context.Context, o APIServerOptions) (*APIServer, error) {
	if o.BindAddress == "" {
		o.BindAddress = "127.0.0.1:6443"
	}
	if o.ServiceClusterIPRange == "" {
		o.ServiceClusterIPRange = DefaultServiceClusterIPRange
	}
	if o.ServiceNodePortRange == "" {
		o.ServiceNodePortRange = DefaultServiceNodePortRange
	}
	ranges, err := allocator.ParseConfig(o.ServiceClusterIPRange, o.ServiceNodePortRange)
	if err != nil {
		return nil, err
	}
	host, port, err := net.SplitHostPort(o.BindAddress)
	if err != nil {
		return nil, fmt.Errorf("bind address %q: %w", o.BindAddress, err)
	}
	advertise, err := advertiseAddress(o.AdvertiseAddress, host)
	if err != nil {
		return nil, err
	}
	portNum, err := strconv.ParseInt(port, 10, 32)
	if err != nil {
		return nil, fmt.Errorf("bind address %q: %w", o.BindAddress, err)
	}
	if err := os.MkdirAll(o.DataDir, 0o700); err != nil {
		return nil, fmt.Errorf("create data dir: %w", err)
	}
	enc, err := loadEncryption(&o)
	if err != nil {
		return nil, err
	}
	ca, err := pki.LoadOrCreateCA(o.caDir())
	if err != nil {
		return nil, err
	}
	a := &APIServer{done: make(chan error, 1), EtcdEndpoints: o.EtcdServers, EtcdTLS: o.EtcdTLS}
	if len(o.EtcdServers) == 0 {
		if !o.EtcdTLS.IsZero() {
			return nil, errors.New("--etcd-cafile, --etcd-certfile and --etcd-keyfile are for --etcd-servers: the embedded etcd's certificates are issued into " + filepath.Join(o.DataDir, "pki"))
		}
		clientURL, peerURL := cmp.Or(o.EtcdClientURL, DefaultEtcdClientURL), cmp.Or(o.EtcdPeerURL, DefaultEtcdPeerURL)
		member, client, err := etcdCertificates(ca, o.DataDir, clientURL, peerURL)
		if err != nil {
			return nil, err
		}
		e, err := storage.StartEmbedded(ctx, storage.EmbeddedConfig{
			Dir: filepath.Join(o.DataDir, "etcd"), ClientURL: clientURL, PeerURL: peerURL, TLS: member, Log: o.EtcdLog,
			QuotaBackendBytes: o.EtcdQuotaBackendBytes,
		})
		if err != nil {
			return nil, err
		}
		a.embedded = e
		a.EtcdEndpoints, a.EtcdTLS = []string{e.ClientURL}, client
	}
	endpoints := a.EtcdEndpoints
	cli, err := storage.Connect(endpoints, a.EtcdTLS)
	if err != nil {
		a.stopStorage()
		return nil, err
	}
	a.client = cli
	store := storage.New(cli, registry.JSONCodec{})
	alloc := allocator.NewServices(cli, ranges, registry.JSONCodec{})

	lb := &apiserver.Loopback{}
	loopback, err := kubernetes.NewForConfig(lb.Config())
	if err != nil {
		a.stopStorage()
		return nil, fmt.Errorf("loopback client: %w", err)
	}
	a.loopback = loopback
	auth, err := newAPIAuth(o.caDir(), o.AuthorizationModes, o.EnableBootstrapTokenAuth, lb.Config(), loopback)
	if err != nil {
		a.stopStorage()
		return nil, err
	}
	kubeletTLS, err := KubeletClientTLS(o.DataDir)
	if err != nil {
		a.stopStorage()
		return nil, err
	}
	// As kube-apiserver with metrics-server behind it: metrics.k8s.io,
	// scraped with the API server's own kubelet client certificate.
	metrics := metricsserver.New(loopback, kubeletTLS, metricsserver.DefaultResolution)
	set, err := all.Set(all.Deps{Services: alloc, Authorizer: auth.chain, RBAC: auth.rbac, Tokens: auth.tokens,
		ServiceAccounts: auth.objects, Authenticator: auth.authn, Metrics: metrics, Client: loopback})
	if err != nil {
		a.stopStorage()
		return nil, err
	}
	var stored []schema.GroupResource
	for _, r := range set.All() {
		stored = append(stored, r.GroupResource())
	}
	// The allocator reads and writes these in etcd itself, unencrypted.
	store.SetTransformers(enc.ForKeys(stored, allocator.IPAddressesPrefix, allocator.ServiceCIDRsPrefix))
	oapi, err := openAPIHandler(set)
	if err != nil {
		a.stopStorage()
		return nil, err
	}
	aggregator, err := aggregatorclient.NewForConfig(lb.Config())
	if err != nil {
		a.stopStorage()
		return nil, fmt.Errorf("apiregistration client: %w", err)
	}
	// As kube-aggregator in front of kube-apiserver: APIServices naming a
	// Service are proxied to it with the front-proxy client certificate,
	// which extension servers trust through
	// kube-system/extension-apiserver-authentication.
	trust, proxyClient, err := frontProxy(ca, o.caDir(), o.DataDir)
	if err != nil {
		a.stopStorage()
		return nil, err
	}
	// The topology page (under /svcnet/topology/) runs the doctor as the
	// user who asks, through the loopback client.
	pages, err := topology.New(lb.Config())
	if err != nil {
		a.stopStorage()
		return nil, err
	}
	var srv *apiserver.Server
	agg, err := aggregatorpkg.New(aggregatorpkg.Config{Client: aggregator, Kube: loopback, ProxyClientCert: proxyClient,
		Dial: func(ctx context.Context, namespace, name string, port int32) (net.Conn, error) {
			return srv.DialService(ctx, namespace, name, port)
		},
		Metrics: controller.NewMetrics(prometheus.NewRegistry())})
	if err != nil {
		a.stopStorage()
		return nil, fmt.Errorf("aggregator: %w", err)
	}
	srv, err = apiserver.New(apiserver.Config{
		Store: store, Resources: set, OpenAPI: oapi, KubeletTLS: kubeletTLS, Aggregator: agg, Pages: pages,
		Authenticator: auth.authn, Authorizer: auth.chain, Admission: auth.admission, Loopback: lb,
		Issuer: serviceaccount.Discovery(serviceaccount.DefaultIssuer, auth.key),
		Version: version.Info{Major: "1", Minor: minorOf(KubernetesVersion), GitVersion: KubernetesVersion,
			// As kube-apiserver's defaults: it emulates its own version and
			// is compatible with the minor release before.
			EmulationMajor: "1", EmulationMinor: minorOf(KubernetesVersion),
			MinCompatibilityMajor: "1", MinCompatibilityMinor: previousMinor(KubernetesVersion),
			GitTreeState: "clean", GoVersion: runtime.Version(), Compiler: runtime.Compiler,
			Platform: runtime.GOOS + "/" + runtime.GOARCH},
	})
	if err != nil {
		a.stopStorage()
		return nil, err
	}
	repair := &controlplane.Repair{Store: store, Alloc: alloc, Events: loopback.CoreV1()}
	kubeSvc := &controlplane.KubernetesService{Client: loopback, Store: store, Etcd: cli,
		ServiceIP: ranges.ServiceCIDRs[0].First(), Address: advertise, Port: int32(portNum)}
	serviceCIDRs := make([]string, len(ranges.ServiceCIDRs))
	for i, r := range ranges.ServiceCIDRs {
		serviceCIDRs[i] = r.String()
	}
	defaultCIDR := defaultservicecidr.New(loopback, serviceCIDRs,
		events.NewRecorder(ctx, loopback, defaultservicecidr.ControllerName))
	converters, err := conversion.NewCRConverterFactory(webhookutil.NewDefaultServiceResolver(), webhook.ServiceDialing(auth.dial))
	if err != nil {
		a.stopStorage()
		return nil, fmt.Errorf("custom resource converters: %w", err)
	}
	crds, err := apiextensions.New(lb.Config(), set, oapi, converters, controller.NewMetrics(prometheus.NewRegistry()))
	if err != nil {
		a.stopStorage()
		return nil, err
	}
	// As kube-aggregator's autoregistration: an APIService for every
	// served group version, custom resources' included.
	apiServices, err := autoregister.New(aggregator, set, controller.NewMetrics(prometheus.NewRegistry()))
	if err != nil {
		a.stopStorage()
		return nil, fmt.Errorf("APIService autoregistration: %w", err)
	}
	// The informers of auth and the custom resource controllers stop
	// after the server.
	informerCtx, stopInformers := context.WithCancel(context.WithoutCancel(ctx))
	crdsDone := make(chan struct{})
	go func() {
		crds.Run(informerCtx)
		close(crdsDone)
	}()
	stopPolicy := func() {
		stopInformers()
		auth.shutdown()
		<-crdsDone
	}
	bctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	auth.dialService = srv.DialService
	// The admission webhooks' configurations are read before the
	// bootstrap's writes, which they would wait for.
	err = auth.start(informerCtx, bctx)
	if err == nil {
		err = bootstrap(bctx, srv, repair, kubeSvc, defaultCIDR, loopback, trust)
	}
	if err == nil && !cache.WaitForCacheSync(bctx.Done(), crds.HasSynced) {
		err = fmt.Errorf("custom resource definitions not read: %w", bctx.Err())
	}
	cancel()
	if err != nil {
		stopPolicy()
		a.stopStorage()
		return nil, err
	}

	tlsConfig, err := a.certificates(ca, o.DataDir, host, port, ranges.ServiceCIDRs[0].First(), advertise)
	if err != nil {
		stopPolicy()
		a.stopStorage()
		return nil, err
	}
	var also *netip.Addr
	if o.ServeAdvertised {
		also = &advertise
	}
	lns, err := listen(o.BindAddress, also, o.AdvertiseNetNS)
	if err != nil {
		stopPolicy()
		a.stopStorage()
		return nil, err
	}
	go func() {
		compactCtx, stop := context.WithCancel(ctx)
		go func() {
			store.RunCompactor(compactCtx, 5*time.Minute)
		}()
		if a.embedded != nil {
			go a.embedded.RunMaintenance(compactCtx, cli, maintenanceInterval)
		}
		go repair.Run(compactCtx, repairInterval)
		endpointsDone, cidrDone, ipsDone := make(chan struct{}), make(chan struct{}), make(chan struct{})
		go func() {
			alloc.IPs.Run(compactCtx)
			close(ipsDone)
		}()
		go func() {
			kubeSvc.Run(ctx)
			close(endpointsDone)
		}()
		go func() {
			defaultCIDR.Run(ctx)
			close(cidrDone)
		}()
		metricsDone := make(chan struct{})
		go func() {
			metrics.Run(compactCtx)
			close(metricsDone)
		}()
		// It starts once the stored custom resource definitions are
		// served (bootstrap waited for them), so that its first sync
		// keeps their APIServices.
		apiServicesDone, aggDone := make(chan struct{}), make(chan struct{})
		go func() {
			apiServices.Run(ctx)
			close(apiServicesDone)
		}()
		go func() {
			agg.Run(ctx)
			close(aggDone)
		}()
		err := srv.Serve(ctx, tlsConfig, lns...)
		stopPolicy()
		stop()
		<-endpointsDone // it leaves the endpoints through etcd
		<-cidrDone
		<-metricsDone
		<-apiServicesDone
		<-aggDone
		<-ipsDone
		a.stopStorage()
		a.done <- err
	}()
	addrs := make([]string, len(lns))
	for i, ln := range lns {
		addrs[i] = ln.Addr().String()
	}
	a.AdvertiseURL = "https://" + net.JoinHostPort(advertise.String(), port)
	a.Started = time.Now()
	slog.Info("API server serving", "url", a.URL, "addresses", addrs, "etcd", strings.Join(endpoints, ","), "version", KubernetesVersion)
	slog.Info("topology page: run `kubectl proxy`, then open http://127.0.0.1:8001"+apiserver.TopologyPath, "path", apiserver.TopologyPath)
	return a, nil
}

// Ready asks the server's /readyz, through its loopback, whether it
// serves: it answers once it reaches etcd.
func (a *APIServer) Ready(ctx context.Context) error {
	body, err := a.loopback.Discovery().RESTClient().Get().AbsPath("/readyz").DoRaw(ctx)
	if err != nil {
		return fmt.Errorf("readyz: %w: %s", err, strings.TrimSpace(string(body)))
	}
	return nil
}

// Etcd is the embedded etcd member, nil with external etcd.
func (a *APIServer) Etcd() *storage.Embedded { return a.embedded }

// EtcdHealthy reads a key through the API server's etcd client, as
// etcdctl endpoint health does: a linearizable read needs a leader and a
// quorum.
func (a *APIServer) EtcdHealthy(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	if _, err := a.client.Get(ctx, "health"); err != nil {
		return fmt.Errorf("etcd: %w", err)
	}
	return nil
}

// listen opens the bind address and, when also is set and the bind
// address does not cover it, that address (with the bind port) in the
// namespace at alsoNetNS.
func listen(bind string, also *netip.Addr, alsoNetNS string) ([]net.Listener, error) {
	ln, err := net.Listen("tcp", bind)
	if err != nil {
		return nil, fmt.Errorf("listen on %s: %w", bind, err)
	}
	host, port, _ := net.SplitHostPort(bind)
	bindIP, _ := netip.ParseAddr(host)
	if also == nil || alsoNetNS == "" && (bindIP == *also || bindIP.IsUnspecified()) {
		return []net.Listener{ln}, nil
	}
	addr := net.JoinHostPort(also.String(), port)
	other, err := netns.ListenAt(alsoNetNS)("tcp", addr)
	if err != nil {
		ln.Close()
		return nil, fmt.Errorf("listen on the advertised address %s (is it an address of this node?): %w", addr, err)
	}
	return []net.Listener{ln, other}, nil
}

// repairInterval is how often the Service allocation bitmaps are checked
// against the Services after the repair at start (upstream: 3 minutes).
const repairInterval = 3 * time.Minute

// bootstrap prepares the store before the API is served: the initial
// namespaces, upstream's default RBAC policy, the API Priority and
// Fairness configuration, the system PriorityClasses (which the first pods
// name), the ConfigMap extension API servers read their client trust
// from, the allocation bitmaps repaired from the stored Services, the
// kubernetes Service with this API server in its endpoints, and the
// default ServiceCIDR.
func bootstrap(ctx context.Context, srv *apiserver.Server, repair *controlplane.Repair, kubeSvc *controlplane.KubernetesService,
	defaultCIDR *defaultservicecidr.Controller, loopback kubernetes.Interface, trust clusterauthenticationtrust.Info) error {
	if err := srv.Bootstrap(ctx); err != nil {
		return err
	}
	if err := bootstrappolicy.Ensure(ctx, loopback); err != nil {
		return fmt.Errorf("default RBAC policy: %w", err)
	}
	if err := apfbootstrap.Ensure(ctx, loopback); err != nil {
		return fmt.Errorf("API Priority and Fairness bootstrap configuration: %w", err)
	}
	if err := schedulingbootstrap.Ensure(ctx, loopback); err != nil {
		return fmt.Errorf("system priority classes: %w", err)
	}
	if err := clusterauthenticationtrust.Ensure(ctx, loopback, trust); err != nil {
		return err
	}
	if err := repair.Alloc.IPs.Sync(ctx); err != nil {
		return err
	}
	if err := repair.RunOnce(ctx); err != nil {
		return err
	}
	// The repair's IPAddresses are in etcd; the cache follows them from
	// Run, the bitmap view is current from the start.
	if err := repair.Alloc.IPs.Sync(ctx); err != nil {
		return err
	}
	if err := repair.Alloc.IPs.WriteView(ctx); err != nil {
		return err
	}
	if err := kubeSvc.Start(ctx); err != nil {
		return err
	}
	return defaultCIDR.Start(ctx)
}

// advertiseAddress is the flag's address, else the bind host, else (when
// binding to all addresses) the host's default interface address.
func advertiseAddress(flag, bindHost string) (netip.Addr, error) {
	if flag != "" {
		a, err := netip.ParseAddr(flag)
		if err != nil {
			return netip.Addr{}, fmt.Errorf("advertise address %q: %w", flag, err)
		}
		return a, nil
	}
	if a, err := netip.ParseAddr(bindHost); err == nil && !a.IsUnspecified() {
		return a, nil
	}
	ip, err := utilnet.ChooseHostInterface()
	if err != nil {
		return netip.Addr{}, fmt.Errorf("choose an address to advertise (set --advertise-address): %w", err)
	}
	a, _ := netip.AddrFromSlice(ip)
	return a.Unmap(), nil
}

// loadEncryption reads the encryption at rest configuration of o, first
// writing --encrypt-secrets' own; nil when there is none.
func loadEncryption(o *APIServerOptions) (*encryption.Config, error) {
	if o.EncryptSecrets && o.EncryptionProviderConfig != "" {
		return nil, fmt.Errorf("--encrypt-secrets and --encryption-provider-config are mutually exclusive: --encrypt-secrets uses its own configuration, %s", filepath.Join(o.DataDir, "pki", encryption.SecretsConfigFile))
	}
	if o.EncryptSecrets {
		path, err := encryption.EnsureSecretsConfig(filepath.Join(o.DataDir, "pki"))
		if err != nil {
			return nil, err
		}
		o.EncryptionProviderConfig = path
	}
	if o.EncryptionProviderConfig == "" {
		return nil, nil
	}
	c, err := encryption.Load(o.EncryptionProviderConfig)
	if err != nil {
		return nil, err
	}
	slog.Info("encryption at rest", "config", c.Path, "hash", c.Hash, "resources", c.Resources())
	return c, nil
}

// Wait blocks until the server and its storage have stopped.
func (a *APIServer) Wait() error { return <-a.done }

func (a *APIServer) stopStorage() {
	if a.client != nil {
		_ = a.client.Close()
	}
	if a.embedded != nil {
		a.embedded.Close()
	}
}

// previousMinor is the minor release before v's.
func previousMinor(v string) string {
	m, err := strconv.Atoi(minorOf(v))
	if err != nil || m == 0 {
		return ""
	}
	return strconv.Itoa(m - 1)
}

func minorOf(v string) string {
	parts := strings.Split(strings.TrimPrefix(v, "v"), ".")
	if len(parts) < 2 {
		return ""
	}
	return parts[1]
}

// certificates loads or creates the serving and admin certificates (in
// the data dir's pki), writes the admin kubeconfig, and returns the
// server's TLS config.
func (a *APIServer) certificates(ca *pki.CA, dataDir, host, port string, serviceIP, advertise netip.Addr) (*tls.Config, error) {
	dir := filepath.Join(dataDir, "pki")
	ips := []net.IP{net.ParseIP("127.0.0.1"), net.ParseIP("::1"), serviceIP.AsSlice(), advertise.AsSlice()}
	names := []string{"localhost", "kubernetes", "kubernetes.default", "kubernetes.default.svc", "kubernetes.default.svc.cluster.local"}
	if ip := net.ParseIP(host); ip != nil && !ip.IsUnspecified() {
		ips = append(ips, ip)
	} else if host != "" && ip == nil {
		names = append(names, host)
	}
	serving, err := ca.Serving(dir, "apiserver", names, ips)
	if err != nil {
		return nil, err
	}
	cert, err := serving.TLS()
	if err != nil {
		return nil, fmt.Errorf("load serving certificate: %w", err)
	}
	admin, err := ca.Client(dir, "admin", "svcnet-admin", []string{"system:masters"})
	if err != nil {
		return nil, err
	}
	clientHost := host
	if ip := net.ParseIP(host); host == "" || (ip != nil && ip.IsUnspecified()) {
		clientHost = "127.0.0.1"
	}
	a.URL = "https://" + net.JoinHostPort(clientHost, port)
	a.Kubeconfig = filepath.Join(dataDir, "kubeconfig")
	if err := WriteKubeconfig(a.Kubeconfig, a.URL, ca.CertPEM, admin); err != nil {
		return nil, err
	}
	return &tls.Config{
		Certificates: []tls.Certificate{cert},
		ClientAuth:   tls.VerifyClientCertIfGiven,
		ClientCAs:    ca.Pool(),
		MinVersion:   tls.VersionTLS12,
		NextProtos:   []string{"h2", "http/1.1"},
	}, nil
}

// frontProxy loads or creates the front-proxy CA (in the CA directory,
// shared by API servers on one etcd, as kubeadm's front-proxy-ca) and this
// server's front-proxy client certificate, and says what the cluster's
// authentication trust ConfigMap holds.
func frontProxy(ca *pki.CA, caDir, dataDir string) (clusterauthenticationtrust.Info, tls.Certificate, error) {
	fp, err := pki.LoadOrCreateNamedCA(caDir, "front-proxy-ca", "front-proxy-ca")
	if err != nil {
		return clusterauthenticationtrust.Info{}, tls.Certificate{}, fmt.Errorf("front-proxy CA: %w", err)
	}
	pair, err := fp.Client(filepath.Join(dataDir, "pki"), "front-proxy-client", clusterauthenticationtrust.ProxyClientName, nil)
	if err != nil {
		return clusterauthenticationtrust.Info{}, tls.Certificate{}, fmt.Errorf("front-proxy client certificate: %w", err)
	}
	cert, err := pair.TLS()
	if err != nil {
		return clusterauthenticationtrust.Info{}, tls.Certificate{}, fmt.Errorf("load the front-proxy client certificate: %w", err)
	}
	return clusterauthenticationtrust.Info{ClientCA: ca.CertPEM, RequestHeaderCA: fp.CertPEM,
		RequestHeaderAllowed: []string{clusterauthenticationtrust.ProxyClientName}}, cert, nil
}
