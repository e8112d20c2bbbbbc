package cluster

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/google/uuid"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/restmapper"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/client-go/tools/leaderelection"
	"k8s.io/client-go/tools/leaderelection/resourcelock"

	saauth "github.com/svcnet/svcnet/internal/auth/serviceaccount"
	"github.com/svcnet/svcnet/internal/controller"
	"github.com/svcnet/svcnet/internal/controller/attachdetach"
	"github.com/svcnet/svcnet/internal/controller/bootstrapsigner"
	"github.com/svcnet/svcnet/internal/controller/clusterroleaggregation"
	"github.com/svcnet/svcnet/internal/controller/cronjob"
	"github.com/svcnet/svcnet/internal/controller/csrapproving"
	"github.com/svcnet/svcnet/internal/controller/csrcleaner"
	"github.com/svcnet/svcnet/internal/controller/csrsigning"
	"github.com/svcnet/svcnet/internal/controller/daemonset"
	"github.com/svcnet/svcnet/internal/controller/deployment"
	"github.com/svcnet/svcnet/internal/controller/disruption"
	"github.com/svcnet/svcnet/internal/controller/endpoints"
	"github.com/svcnet/svcnet/internal/controller/endpointslice"
	"github.com/svcnet/svcnet/internal/controller/endpointslicemirroring"
	"github.com/svcnet/svcnet/internal/controller/garbagecollector"
	"github.com/svcnet/svcnet/internal/controller/job"
	"github.com/svcnet/svcnet/internal/controller/namespace"
	"github.com/svcnet/svcnet/internal/controller/nodelifecycle"
	"github.com/svcnet/svcnet/internal/controller/nodelifecycle/tainteviction"
	"github.com/svcnet/svcnet/internal/controller/podautoscaler"
	"github.com/svcnet/svcnet/internal/controller/replicaset"
	"github.com/svcnet/svcnet/internal/controller/replication"
	"github.com/svcnet/svcnet/internal/controller/resourcequota"
	"github.com/svcnet/svcnet/internal/controller/rootcacertpublisher"
	"github.com/svcnet/svcnet/internal/controller/scheduler"
	"github.com/svcnet/svcnet/internal/controller/serviceaccount"
	"github.com/svcnet/svcnet/internal/controller/serviceaccounttoken"
	"github.com/svcnet/svcnet/internal/controller/servicecidrs"
	"github.com/svcnet/svcnet/internal/controller/statefulset"
	"github.com/svcnet/svcnet/internal/controller/tokencleaner"
	"github.com/svcnet/svcnet/internal/controller/ttlafterfinished"
	"github.com/svcnet/svcnet/internal/controller/validatingadmissionpolicystatus"
	"github.com/svcnet/svcnet/internal/controller/volume/persistentvolume"
	"github.com/svcnet/svcnet/internal/controller/volume/pvcprotection"
	"github.com/svcnet/svcnet/internal/controller/volume/pvprotection"
	"github.com/svcnet/svcnet/internal/events"
	"github.com/svcnet/svcnet/internal/lb/ipam"
	"github.com/svcnet/svcnet/internal/lb/metallb"
)

// LeaderElectionOptions are kube-controller-manager's --leader-elect flags.
type LeaderElectionOptions struct {
	Enabled                                   bool
	LeaseDuration, RenewDeadline, RetryPeriod time.Duration
	// ResourceName and ResourceNamespace name the coordination.k8s.io
	// Lease the instances compete for.
	ResourceName, ResourceNamespace string
}

// ControllerManagerOptions configure `svcnet controller-manager` and the
// controllers inside `svcnet up`.
type ControllerManagerOptions struct {
	// Kubeconfig locates the API server and the credentials.
	Kubeconfig string
	// MetricsBindAddress is where /metrics and /healthz are served over
	// plain HTTP; empty or "0" serves nothing.
	MetricsBindAddress string
	// Controllers selects controllers as upstream's --controllers: "*"
	// for all, a name to enable, "-name" to disable.
	Controllers []string
	// KubeAPIQPS and KubeAPIBurst limit the client's request rate.
	KubeAPIQPS     float32
	KubeAPIBurst   int
	LeaderElection LeaderElectionOptions

	EndpointSlice endpointslice.Options
	Endpoints     endpoints.Options
	Mirroring     endpointslicemirroring.Options
	Namespace     namespace.Options
	ReplicaSet    replicaset.Options
	// ReplicationController is --concurrent-rc-syncs.
	ReplicationController replication.Options
	ResourceQuota         resourcequota.Options
	Deployment            deployment.Options
	StatefulSet           statefulset.Options
	DaemonSet             daemonset.Options
	PodAutoscaler         podautoscaler.Options
	Job                   job.Options
	NodeLifecycle         nodelifecycle.Options
	Scheduler             scheduler.Options
	// GCWorkers is --concurrent-gc-syncs.
	GCWorkers int
	// ServiceAccountKeyFile is --service-account-private-key-file: the
	// key the serviceaccount-token-controller signs legacy tokens with;
	// empty disables that controller, as upstream.
	ServiceAccountKeyFile string
	// RootCAFile is --root-ca-file: the PEM CA bundle published in every
	// namespace's kube-root-ca.crt; empty publishes the kubeconfig's CA.
	RootCAFile string
	// UseServiceAccountCredentials is upstream's flag: each controller
	// acts as its own kube-system ServiceAccount (controllerServiceAccounts)
	// with the rights of its system:controller:<name> role, the
	// controller manager's own identity only leading, listing and asking
	// for their tokens.
	UseServiceAccountCredentials bool
	// SchedulerKubeconfig, if set, is the scheduler's identity (kubeadm's
	// scheduler.conf, system:kube-scheduler); else it uses Kubeconfig's.
	SchedulerKubeconfig string
	// CSRSigning is the CA of the signing controller
	// (--cluster-signing-cert-file, --cluster-signing-key-file) and the
	// longest certificate it issues (--cluster-signing-duration).
	CSRSigning csrsigning.Options
	// SharedVolumeDir, if set, is where the shared-path provisioner makes
	// the volumes of its StorageClass (svcnet up's, under the data dir);
	// empty runs no such provisioner.
	SharedVolumeDir string
}

// DefaultControllerManagerOptions are upstream's defaults.
func DefaultControllerManagerOptions() ControllerManagerOptions {
	return ControllerManagerOptions{
		MetricsBindAddress: "127.0.0.1:10257",
		Controllers:        []string{"*"},
		KubeAPIQPS:         20,
		KubeAPIBurst:       30,
		LeaderElection: LeaderElectionOptions{
			Enabled:           true,
			LeaseDuration:     15 * time.Second,
			RenewDeadline:     10 * time.Second,
			RetryPeriod:       2 * time.Second,
			ResourceName:      "kube-controller-manager",
			ResourceNamespace: "kube-system",
		},
		EndpointSlice:         endpointslice.Options{Workers: 5, MaxEndpointsPerSlice: 100},
		Endpoints:             endpoints.Options{Workers: 5},
		Mirroring:             endpointslicemirroring.Options{Workers: 5, MaxEndpointsPerSubset: 1000},
		Namespace:             namespace.Options{Workers: 10, SyncPeriod: 5 * time.Minute},
		ReplicaSet:            replicaset.Options{Workers: 5},
		ReplicationController: replication.Options{Workers: 5},
		ResourceQuota:         resourcequota.DefaultOptions(),
		Deployment:            deployment.Options{Workers: 5},
		StatefulSet:           statefulset.Options{Workers: 5},
		DaemonSet:             daemonset.Options{Workers: 2},
		PodAutoscaler:         podautoscaler.DefaultOptions(),
		Job:                   job.Options{Workers: 5},
		NodeLifecycle:         nodelifecycle.Options{MonitorPeriod: 5 * time.Second, GracePeriod: 50 * time.Second, StartupGracePeriod: time.Minute, EvictionRate: 0.1, SecondaryRate: 0.01, LargeCluster: 50, UnhealthyZone: 0.55},
		Scheduler:             scheduler.DefaultOptions(),
		GCWorkers:             20,
		CSRSigning:            csrsigning.Options{Duration: csrsigning.DefaultDuration},
	}
}

// clients are what the controllers talk to the API server with.
type clients struct {
	// typed configures the typed clients: one per controller, each with
	// its own rate limit, as upstream's, and one for the informers.
	typed     *rest.Config
	client    kubernetes.Interface
	discovery discovery.DiscoveryInterface
	metrics   *controller.Metrics
	// serviceAccounts is set with --use-service-account-credentials.
	serviceAccounts bool
	// scheduler is the scheduler's identity.
	scheduler *rest.Config
}

// configFor is the client configuration of one user of the API: a
// controller's service account with --use-service-account-credentials,
// else the controller manager's own identity.
func (c *clients) configFor(name string) *rest.Config {
	cfg := c.typed
	if name == "scheduler" || name == "scheduler-events" {
		cfg = c.scheduler
	} else if sa, ok := controllerServiceAccounts[name]; ok && c.serviceAccounts {
		cfg = serviceAccountConfig(c.typed, c.client, sa)
	}
	return rest.AddUserAgent(rest.CopyConfig(cfg), name)
}

// clientFor is a typed client of its own for one user of the API.
func (c *clients) clientFor(name string) (kubernetes.Interface, error) {
	return c.limitedClient(name, c.typed.QPS, c.typed.Burst)
}

// metadataFor is a metadata client of one user of the API, in JSON.
func (c *clients) metadataFor(name string) (metadata.Interface, error) {
	cfg := c.configFor(name)
	cfg.ContentType, cfg.AcceptContentTypes = "", ""
	m, err := metadata.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("metadata client for %s: %w", name, err)
	}
	return m, nil
}

// limitedClient is a typed client of its own with a rate limit of its own.
func (c *clients) limitedClient(name string, qps float32, burst int) (kubernetes.Interface, error) {
	cfg := c.configFor(name)
	cfg.QPS, cfg.Burst = qps, burst
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("client for %s: %w", name, err)
	}
	return client, nil
}

// knownController is one entry of --controllers: its name, upstream's
// older alias, and how it starts for one leadership term.
type knownController struct {
	name, alias string
	start       func(ctx context.Context, o *ControllerManagerOptions, c *clients, d controller.Deps) (func(context.Context), error)
}

// controllersDisabledByDefault run only when --controllers names them,
// as upstream's: the bootstrap token controllers, which kubeadm (and
// svcnet up) enable.
var controllersDisabledByDefault = []string{bootstrapsigner.ControllerName, tokencleaner.ControllerName}

// UpControllers is svcnet up's --controllers, kubeadm's: all, and the
// bootstrap token controllers.
var UpControllers = []string{"*", bootstrapsigner.Alias, tokencleaner.Alias}

var knownControllers = []knownController{
	// As upstream, the tokens controller runs with the controller
	// manager's own client (no controllerServiceAccounts entry).
	{serviceaccounttoken.ControllerName, serviceaccounttoken.Alias, startServiceAccountToken},
	// First: pods wait for their namespace's default ServiceAccount.
	{serviceaccount.ControllerName, serviceaccount.Alias, func(_ context.Context, _ *ControllerManagerOptions, _ *clients, d controller.Deps) (func(context.Context), error) {
		c, err := serviceaccount.New(d)
		return runOf(c, err)
	}},
	{rootcacertpublisher.ControllerName, rootcacertpublisher.Alias, func(_ context.Context, o *ControllerManagerOptions, cl *clients, d controller.Deps) (func(context.Context), error) {
		ca, err := rootcacertpublisher.RootCA(o.RootCAFile, cl.typed)
		if err != nil {
			return nil, err
		}
		c, err := rootcacertpublisher.New(d, ca)
		return runOf(c, err)
	}},
	{clusterroleaggregation.ControllerName, clusterroleaggregation.Alias, func(_ context.Context, _ *ControllerManagerOptions, _ *clients, d controller.Deps) (func(context.Context), error) {
		c, err := clusterroleaggregation.New(d)
		return runOf(c, err)
	}},
	{csrsigning.ControllerName, csrsigning.Alias, startCSRSigning},
	{csrapproving.ControllerName, csrapproving.Alias, func(_ context.Context, _ *ControllerManagerOptions, _ *clients, d controller.Deps) (func(context.Context), error) {
		c, err := csrapproving.New(d)
		return runOf(c, err)
	}},
	{csrcleaner.ControllerName, csrcleaner.Alias, func(_ context.Context, _ *ControllerManagerOptions, _ *clients, d controller.Deps) (func(context.Context), error) {
		return csrcleaner.New(d).Run, nil
	}},
	{"endpoints-controller", "endpoint", func(ctx context.Context, o *ControllerManagerOptions, _ *clients, d controller.Deps) (func(context.Context), error) {
		c, err := endpoints.New(ctx, d, o.Endpoints)
		return runOf(c, err)
	}},
	{"endpointslice-controller", "endpointslice", func(ctx context.Context, o *ControllerManagerOptions, _ *clients, d controller.Deps) (func(context.Context), error) {
		c, err := endpointslice.New(ctx, d, o.EndpointSlice)
		return runOf(c, err)
	}},
	{"endpointslice-mirroring-controller", "endpointslicemirroring", func(ctx context.Context, o *ControllerManagerOptions, _ *clients, d controller.Deps) (func(context.Context), error) {
		c, err := endpointslicemirroring.New(ctx, d, o.Mirroring)
		return runOf(c, err)
	}},
	{"garbage-collector-controller", "garbagecollector", func(_ context.Context, o *ControllerManagerOptions, cl *clients, d controller.Deps) (func(context.Context), error) {
		meta, err := cl.metadataFor("garbage-collector-controller")
		if err != nil {
			return nil, err
		}
		c, err := garbagecollector.New(d.Metrics, meta, cl.discovery, o.GCWorkers)
		return runOf(c, err)
	}},
	{"namespace-controller", "namespace", func(_ context.Context, o *ControllerManagerOptions, cl *clients, d controller.Deps) (func(context.Context), error) {
		meta, err := cl.metadataFor("namespace-controller")
		if err != nil {
			return nil, err
		}
		c, err := namespace.New(d, meta, cl.discovery, o.Namespace)
		return runOf(c, err)
	}},
	{"service-cidr-controller", "", func(ctx context.Context, _ *ControllerManagerOptions, _ *clients, d controller.Deps) (func(context.Context), error) {
		c, err := servicecidrs.New(ctx, d)
		return runOf(c, err)
	}},
	{"replicaset-controller", "replicaset", func(ctx context.Context, o *ControllerManagerOptions, _ *clients, d controller.Deps) (func(context.Context), error) {
		c, err := replicaset.New(ctx, d, o.ReplicaSet)
		return runOf(c, err)
	}},
	{"replicationcontroller-controller", "replicationcontroller", func(ctx context.Context, o *ControllerManagerOptions, _ *clients, d controller.Deps) (func(context.Context), error) {
		c, err := replication.New(ctx, d, o.ReplicationController)
		return runOf(c, err)
	}},
	{"deployment-controller", "deployment", func(ctx context.Context, o *ControllerManagerOptions, _ *clients, d controller.Deps) (func(context.Context), error) {
		c, err := deployment.New(ctx, d, o.Deployment)
		return runOf(c, err)
	}},
	{"statefulset-controller", "statefulset", func(ctx context.Context, o *ControllerManagerOptions, _ *clients, d controller.Deps) (func(context.Context), error) {
		c, err := statefulset.New(ctx, d, o.StatefulSet)
		return runOf(c, err)
	}},
	{daemonset.ControllerName, "daemonset", func(ctx context.Context, o *ControllerManagerOptions, _ *clients, d controller.Deps) (func(context.Context), error) {
		c, err := daemonset.New(ctx, d, o.DaemonSet)
		return runOf(c, err)
	}},
	{disruption.ControllerName, "disruption", func(ctx context.Context, _ *ControllerManagerOptions, _ *clients, d controller.Deps) (func(context.Context), error) {
		c, err := disruption.New(ctx, d)
		return runOf(c, err)
	}},
	{podautoscaler.ControllerName, "horizontalpodautoscaling", startPodAutoscaler},
	{job.ControllerName, "job", func(ctx context.Context, o *ControllerManagerOptions, _ *clients, d controller.Deps) (func(context.Context), error) {
		c, err := job.New(ctx, d, o.Job)
		return runOf(c, err)
	}},
	{cronjob.ControllerName, "cronjob", func(ctx context.Context, _ *ControllerManagerOptions, _ *clients, d controller.Deps) (func(context.Context), error) {
		c, err := cronjob.New(ctx, d)
		return runOf(c, err)
	}},
	{resourcequota.ControllerName, resourcequota.Alias, func(_ context.Context, o *ControllerManagerOptions, cl *clients, d controller.Deps) (func(context.Context), error) {
		meta, err := cl.metadataFor(resourcequota.ControllerName)
		if err != nil {
			return nil, err
		}
		resources := restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(cl.discovery))
		c, err := resourcequota.New(d, meta, resources, o.ResourceQuota)
		return runOf(c, err)
	}},
	{validatingadmissionpolicystatus.ControllerName, validatingadmissionpolicystatus.Alias, func(_ context.Context, _ *ControllerManagerOptions, cl *clients, d controller.Deps) (func(context.Context), error) {
		mapper := restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(cl.discovery))
		c, err := validatingadmissionpolicystatus.New(d, cl.discovery, mapper)
		return runOf(c, err)
	}},
	{ttlafterfinished.ControllerName, "ttl-after-finished", func(_ context.Context, _ *ControllerManagerOptions, _ *clients, d controller.Deps) (func(context.Context), error) {
		c, err := ttlafterfinished.New(d)
		return runOf(c, err)
	}},
	{"node-lifecycle-controller", "nodelifecycle", func(ctx context.Context, o *ControllerManagerOptions, _ *clients, d controller.Deps) (func(context.Context), error) {
		c, err := nodelifecycle.New(ctx, d, o.NodeLifecycle)
		return runOf(c, err)
	}},
	{"taint-eviction-controller", "", func(ctx context.Context, _ *ControllerManagerOptions, _ *clients, d controller.Deps) (func(context.Context), error) {
		c, err := tainteviction.New(ctx, d, tainteviction.Options{})
		return runOf(c, err)
	}},
	{persistentvolume.ControllerName, persistentvolume.Alias, func(ctx context.Context, _ *ControllerManagerOptions, _ *clients, d controller.Deps) (func(context.Context), error) {
		c, err := persistentvolume.New(ctx, d)
		return runOf(c, err)
	}},
	{pvcprotection.ControllerName, pvcprotection.Alias, func(_ context.Context, _ *ControllerManagerOptions, _ *clients, d controller.Deps) (func(context.Context), error) {
		c, err := pvcprotection.New(d)
		return runOf(c, err)
	}},
	{pvprotection.ControllerName, pvprotection.Alias, func(_ context.Context, _ *ControllerManagerOptions, _ *clients, d controller.Deps) (func(context.Context), error) {
		c, err := pvprotection.New(d)
		return runOf(c, err)
	}},
	{sharedPathProvisioner, "", startSharedPathProvisioner},
	{ipam.ControllerName, "", startLoadBalancerIPAM},
	{bootstrapsigner.ControllerName, bootstrapsigner.Alias, func(_ context.Context, _ *ControllerManagerOptions, _ *clients, d controller.Deps) (func(context.Context), error) {
		c, err := bootstrapsigner.New(d)
		return runOf(c, err)
	}},
	{tokencleaner.ControllerName, tokencleaner.Alias, func(_ context.Context, _ *ControllerManagerOptions, _ *clients, d controller.Deps) (func(context.Context), error) {
		c, err := tokencleaner.New(d)
		return runOf(c, err)
	}},
	{attachdetach.ControllerName, "attachdetach", func(ctx context.Context, _ *ControllerManagerOptions, _ *clients, d controller.Deps) (func(context.Context), error) {
		c, err := attachdetach.New(ctx, d)
		return runOf(c, err)
	}},
	{"scheduler", "", func(ctx context.Context, o *ControllerManagerOptions, cl *clients, d controller.Deps) (func(context.Context), error) {
		// As kube-scheduler's, the bindings and the events each have a
		// client of their own, at the scheduler's rate limit.
		var events kubernetes.Interface
		var err error
		if d.Client, err = cl.limitedClient("scheduler", o.Scheduler.QPS, o.Scheduler.Burst); err != nil {
			return nil, err
		}
		if events, err = cl.limitedClient("scheduler-events", o.Scheduler.QPS, o.Scheduler.Burst); err != nil {
			return nil, err
		}
		c, err := scheduler.New(ctx, d, events, o.Scheduler)
		return runOf(c, err)
	}},
}

// startServiceAccountToken starts the serviceaccount-token-controller, or
// nothing without --service-account-private-key-file, as upstream.
func startServiceAccountToken(_ context.Context, o *ControllerManagerOptions, cl *clients, d controller.Deps) (func(context.Context), error) {
	if o.ServiceAccountKeyFile == "" {
		slog.Info("Controller is disabled because there is no private key", "controller", serviceaccounttoken.ControllerName)
		return func(context.Context) {}, nil
	}
	key, err := saauth.LoadKeyFile(o.ServiceAccountKeyFile)
	if err != nil {
		return nil, fmt.Errorf("error reading key for service account token controller: %w", err)
	}
	ca, err := rootcacertpublisher.RootCA(o.RootCAFile, cl.typed)
	if err != nil {
		return nil, err
	}
	if d.Client, err = cl.clientFor(serviceaccounttoken.ClientName); err != nil {
		return nil, err
	}
	c, err := serviceaccounttoken.New(d, key, ca)
	return runOf(c, err)
}

// startLoadBalancerIPAM starts the LoadBalancer IPAM controller on
// MetalLB's configuration, read with a dynamic client of its identity.
func startLoadBalancerIPAM(ctx context.Context, _ *ControllerManagerOptions, cl *clients, d controller.Deps) (func(context.Context), error) {
	cfg := cl.configFor(ipam.ControllerName)
	cfg.ContentType, cfg.AcceptContentTypes = "", ""
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("dynamic client for %s: %w", ipam.ControllerName, err)
	}
	config, err := metallb.New(dyn)
	if err != nil {
		return nil, err
	}
	c, err := ipam.New(ctx, d, dyn, config)
	return runOf(c, err)
}

// startCSRSigning starts the signing controller, or nothing without a CA
// to sign with, as upstream.
func startCSRSigning(_ context.Context, o *ControllerManagerOptions, _ *clients, d controller.Deps) (func(context.Context), error) {
	if o.CSRSigning.CertFile == "" || o.CSRSigning.KeyFile == "" {
		slog.Info("Skipping CSR signer controller because no csr cert/key was specified", "controller", csrsigning.ControllerName)
		return func(context.Context) {}, nil
	}
	signer, err := csrsigning.NewSigner(o.CSRSigning)
	if err != nil {
		return nil, err
	}
	c, err := csrsigning.New(d, signer)
	return runOf(c, err)
}

// KnownControllers names the controllers --controllers accepts.
func KnownControllers() []string {
	names := make([]string, len(knownControllers))
	for i, k := range knownControllers {
		names[i] = k.name
	}
	return names
}

// runOf adapts a constructor's result.
func runOf[C interface{ Run(context.Context) }](c C, err error) (func(context.Context), error) {
	if err != nil {
		return nil, err
	}
	return c.Run, nil
}

// Runs reports whether the controller of that name is enabled.
func (o *ControllerManagerOptions) Runs(name string) bool {
	i := slices.IndexFunc(knownControllers, func(k knownController) bool { return k.name == name })
	return i >= 0 && o.enabled(knownControllers[i])
}

// enabled applies --controllers to one controller, as upstream: an
// explicit name or "-name" wins over "*", which leaves out those disabled
// by default.
func (o *ControllerManagerOptions) enabled(k knownController) bool {
	star := false
	for _, c := range o.Controllers {
		switch c {
		case k.name, k.alias:
			return true
		case "-" + k.name, "-" + k.alias:
			return false
		case "*":
			star = true
		}
	}
	return star && !slices.Contains(controllersDisabledByDefault, k.name)
}

// Validate checks the options as upstream does.
func (o *ControllerManagerOptions) Validate() error {
	var errs []error
	for _, c := range o.Controllers {
		name := strings.TrimPrefix(c, "-")
		if c != "*" && !slices.ContainsFunc(knownControllers, func(k knownController) bool { return k.name == name || k.alias == name }) {
			errs = append(errs, fmt.Errorf("%q is not in the list of known controllers", c))
		}
	}
	switch n := o.EndpointSlice.MaxEndpointsPerSlice; {
	case n < 1:
		errs = append(errs, fmt.Errorf("max-endpoints-per-slice must be greater than 0, but got %d", n))
	case n > 1000:
		errs = append(errs, fmt.Errorf("max-endpoints-per-slice must not be more than 1000, but got %d", n))
	}
	if n := o.EndpointSlice.Workers; n < 1 || n > 50 {
		errs = append(errs, fmt.Errorf("concurrent-service-endpoint-syncs must not be less than 1 or greater than 50, but got %d", n))
	}
	if n := o.Mirroring.MaxEndpointsPerSubset; n < 1 {
		errs = append(errs, fmt.Errorf("mirroring-max-endpoints-per-subset must be greater than 0, but got %d", n))
	}
	if n := o.Scheduler.Parallelism; n < 1 {
		errs = append(errs, fmt.Errorf("scheduler-parallelism must be greater than 0, but got %d", n))
	}
	if o.RootCAFile != "" {
		if _, err := rootcacertpublisher.RootCA(o.RootCAFile, nil); err != nil {
			errs = append(errs, err)
		}
	}
	le := o.LeaderElection
	if le.Enabled && (le.LeaseDuration <= le.RenewDeadline || le.RenewDeadline <= le.RetryPeriod || le.RetryPeriod <= 0) {
		errs = append(errs, errors.New("leader election needs lease-duration > renew-deadline > retry-period > 0"))
	}
	return errors.Join(errs...)
}

// ControllerManager is a running controller manager.
type ControllerManager struct {
	// MetricsURL is the http URL of /metrics, empty when not served.
	MetricsURL string
	// Started is when it started.
	Started time.Time
	done    chan error
	stopped atomic.Bool
	// leader checks the lease renewals of a term, as upstream's
	// /healthz/leader-election.
	leader *leaderelection.HealthzAdaptor
}

// leaderHealthTimeout is how late a leader's lease renewal may be before
// it counts as unhealthy (upstream's).
const leaderHealthTimeout = 20 * time.Second

// Healthy says whether the controllers run: nil while the controller
// manager runs and, when it leads, renews its lease in time.
func (cm *ControllerManager) Healthy() error {
	if cm.stopped.Load() {
		return errors.New("the controller manager stopped")
	}
	if err := cm.leader.Check(nil); err != nil {
		return fmt.Errorf("leader election: %w", err)
	}
	return nil
}

// Wait blocks until the controller manager has stopped.
func (cm *ControllerManager) Wait() error { return <-cm.done }

// StartControllerManager connects to the API server, serves metrics, and
// runs the selected controllers (only while holding the leader lease, when
// leader election is on) until ctx ends.
func StartControllerManager(ctx context.Context, o ControllerManagerOptions) (*ControllerManager, error) {
	if err := o.Validate(); err != nil {
		return nil, err
	}
	c, err := newClients(o)
	if err != nil {
		return nil, err
	}
	cm := &ControllerManager{done: make(chan error, 1), Started: time.Now(), leader: leaderelection.NewLeaderHealthzAdaptor(leaderHealthTimeout)}
	slog.Info("controller manager starting", "version", KubernetesVersion, "leaderElect", o.LeaderElection.Enabled)
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	c.metrics = controller.NewMetrics(reg)
	var srv *http.Server
	if o.MetricsBindAddress != "" && o.MetricsBindAddress != "0" {
		ln, err := net.Listen("tcp", o.MetricsBindAddress)
		if err != nil {
			return nil, fmt.Errorf("listen for metrics on %s: %w", o.MetricsBindAddress, err)
		}
		mux := http.NewServeMux()
		mux.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
		mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("ok")) })
		srv = &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
		cm.MetricsURL = "http://" + ln.Addr().String() + "/metrics"
		go func() {
			if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
				slog.Error("metrics server failed", "err", err)
			}
		}()
	}
	go func() {
		var err error
		switch {
		case !slices.ContainsFunc(knownControllers, o.enabled):
			// Nothing to run, so nothing to campaign for.
			slog.Info("no controllers enabled")
			<-ctx.Done()
		case o.LeaderElection.Enabled:
			err = lead(ctx, &o, c, cm.leader)
		default:
			err = runControllers(ctx, &o, c)
		}
		if srv != nil {
			sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			_ = srv.Shutdown(sctx)
			cancel()
		}
		cm.stopped.Store(true)
		cm.done <- err
	}()
	return cm, nil
}

func newClients(o ControllerManagerOptions) (*clients, error) {
	cfg, err := clientcmd.BuildConfigFromFlags("", o.Kubeconfig)
	if err != nil {
		return nil, fmt.Errorf("load kubeconfig %s: %w", o.Kubeconfig, err)
	}
	cfg.QPS, cfg.Burst = o.KubeAPIQPS, o.KubeAPIBurst
	cfg = rest.AddUserAgent(cfg, "svcnet-controller-manager")
	disco, err := discovery.NewDiscoveryClientForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("discovery client: %w", err)
	}
	// Typed objects travel as protobuf, as upstream's controllers do.
	typed := rest.CopyConfig(cfg)
	typed.ContentType = "application/vnd.kubernetes.protobuf"
	typed.AcceptContentTypes = "application/vnd.kubernetes.protobuf,application/json"
	client, err := kubernetes.NewForConfig(typed)
	if err != nil {
		return nil, fmt.Errorf("client: %w", err)
	}
	c := &clients{typed: typed, client: client, discovery: disco,
		serviceAccounts: o.UseServiceAccountCredentials, scheduler: typed}
	if o.SchedulerKubeconfig != "" {
		sc, err := clientcmd.BuildConfigFromFlags("", o.SchedulerKubeconfig)
		if err != nil {
			return nil, fmt.Errorf("load scheduler kubeconfig %s: %w", o.SchedulerKubeconfig, err)
		}
		sc.ContentType, sc.AcceptContentTypes = typed.ContentType, typed.AcceptContentTypes
		c.scheduler = sc
	}
	return c, nil
}

// lead campaigns for the lease and runs the controllers for each term
// won, until ctx ends. A term ends when the lease is lost, or when the
// controllers cannot start; the instance then campaigns again.
func lead(ctx context.Context, o *ControllerManagerOptions, c *clients, watchdog *leaderelection.HealthzAdaptor) error {
	host, err := os.Hostname()
	if err != nil {
		return fmt.Errorf("hostname: %w", err)
	}
	id := host + "_" + uuid.NewString()
	le := o.LeaderElection
	// As upstream, lease requests time out with the renew deadline, so
	// that a stuck request cannot outlive a term.
	leaseConfig := rest.CopyConfig(c.typed)
	leaseConfig.Timeout = le.RenewDeadline
	leaseClient, err := kubernetes.NewForConfig(rest.AddUserAgent(leaseConfig, "leader-election"))
	if err != nil {
		return fmt.Errorf("leader election client: %w", err)
	}
	// The recorder outlives ctx, for the event of the lease's release.
	rctx, stopRecorder := context.WithCancel(context.WithoutCancel(ctx))
	defer stopRecorder()
	recorder := events.NewRecorder(rctx, c.client, "kube-controller-manager")
	for ctx.Err() == nil {
		term, endTerm := context.WithCancel(ctx)
		leading := make(chan context.Context, 1)
		elector, err := leaderelection.NewLeaderElector(leaderelection.LeaderElectionConfig{
			Lock: &resourcelock.LeaseLock{
				LeaseMeta:  metav1.ObjectMeta{Namespace: le.ResourceNamespace, Name: le.ResourceName},
				Client:     leaseClient.CoordinationV1(),
				LockConfig: resourcelock.ResourceLockConfig{Identity: id, EventRecorder: recorder},
			},
			LeaseDuration:   le.LeaseDuration,
			RenewDeadline:   le.RenewDeadline,
			RetryPeriod:     le.RetryPeriod,
			ReleaseOnCancel: true,
			Name:            le.ResourceName,
			WatchDog:        watchdog,
			Callbacks: leaderelection.LeaderCallbacks{
				OnStartedLeading: func(lctx context.Context) { leading <- lctx },
				OnStoppedLeading: func() { slog.Info("leader lease released or lost", "identity", id) },
				OnNewLeader: func(holder string) {
					slog.Info("leader elected", "lease", le.ResourceNamespace+"/"+le.ResourceName, "leader", holder, "self", holder == id)
				},
			},
		})
		if err != nil {
			endTerm()
			return fmt.Errorf("leader election: %w", err)
		}
		campaign := make(chan struct{})
		go func() {
			defer close(campaign)
			elector.Run(term)
		}()
		select {
		case lctx := <-leading:
			if err := runControllers(lctx, o, c); err != nil {
				slog.Error("controllers failed to start; giving up the lease", "err", err)
			}
		case <-campaign:
		}
		endTerm()
		<-campaign
		if ctx.Err() == nil {
			// Give another instance a chance before campaigning again.
			select {
			case <-ctx.Done():
			case <-time.After(le.RetryPeriod):
			}
		}
	}
	return nil
}

// runControllers starts the enabled controllers on fresh informers and
// runs them until ctx ends.
func runControllers(ctx context.Context, o *ControllerManagerOptions, c *clients) error {
	informerClient, err := c.clientFor("shared-informers")
	if err != nil {
		return err
	}
	factory := informers.NewSharedInformerFactory(informerClient, resyncPeriod())
	var runs []func(context.Context)
	for _, k := range knownControllers {
		if !o.enabled(k) {
			continue
		}
		client, err := c.clientFor(k.name)
		if err != nil {
			factory.Shutdown()
			return err
		}
		d := controller.Deps{Client: client, Informers: factory, Metrics: c.metrics}
		run, err := k.start(ctx, o, c, d)
		if err != nil {
			factory.Shutdown()
			return fmt.Errorf("start %s: %w", k.name, err)
		}
		runs = append(runs, run)
	}
	factory.Start(ctx.Done())
	var wg sync.WaitGroup
	for _, run := range runs {
		wg.Go(func() { run(ctx) })
	}
	wg.Wait()
	factory.Shutdown()
	return nil
}

// resyncPeriod is upstream's: every informer replays its cache after a
// random 12 to 24 hours, a safety net for missed events.
func resyncPeriod() time.Duration {
	const minResync = 12 * time.Hour
	return minResync + time.Duration(rand.Int64N(int64(minResync)))
}
