package proxy

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"time"

	"golang.org/x/time/rate"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/selection"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"

	"github.com/svcnet/svcnet/internal/informer"
)

// Backend programs the data plane.
type Backend interface {
	// Sync applies u; an error makes the next sync a full one.
	Sync(ctx context.Context, u Update) (Stats, error)
	// Cleanup removes everything the backend installed.
	Cleanup() error
}

// Config configures the proxy of one node.
type Config struct {
	Client   kubernetes.Interface
	NodeName string
	Backend  Backend
	Metrics  *Metrics
	// MinSyncPeriod spaces syncs (default 1s, upstream's; two may burst);
	// SyncPeriod is the full resync period (default 30s).
	MinSyncPeriod time.Duration
	SyncPeriod    time.Duration
	// Listen opens the healthCheckNodePort listeners of
	// externalTrafficPolicy Local Services, in the node's network.
	Listen func(network, address string) (net.Listener, error)
	// CleanupOnExit removes the backend's rules when ctx ends.
	CleanupOnExit bool
	// Synced, when set, is told every Service as the backend holds it after
	// each sync (see Desired): what svcnet up waits on before it says the
	// cluster is up.
	Synced func(map[types.NamespacedName]*Service)
	// Logger logs the proxy's records; default: slog's, with the node.
	Logger *slog.Logger
	// Health, if set, is kept up to date with the syncs, for the node's
	// kube-proxy readiness.
	Health *Health
}

// Run tracks Services and EndpointSlices and keeps the backend in line
// with them until ctx ends.
func Run(ctx context.Context, c Config) error {
	if c.MinSyncPeriod == 0 {
		c.MinSyncPeriod = time.Second
	}
	if c.SyncPeriod == 0 {
		c.SyncPeriod = 30 * time.Second
	}
	if c.Logger == nil {
		c.Logger = slog.Default().With("node", c.NodeName)
	}
	if c.Health == nil {
		c.Health = &Health{}
	}
	c.Health.start(time.Now(), 2*c.SyncPeriod)
	defer c.Health.stop()
	tracker := NewTracker(c.NodeName)
	kick := make(chan struct{}, 1)
	wake := func() {
		select {
		case kick <- struct{}{}:
		default:
		}
	}
	selector := proxiedServices().String()
	factory := informers.NewSharedInformerFactoryWithOptions(c.Client, 0, informers.WithTweakListOptions(func(o *metav1.ListOptions) {
		o.LabelSelector = selector
	}))
	svcSynced, err := informer.Handle(factory.Core().V1().Services().Informer(), cache.ResourceEventHandlerFuncs{
		AddFunc: func(obj any) {
			if s, ok := obj.(*corev1.Service); ok {
				tracker.ServiceUpdated(nil, s)
				wake()
			}
		},
		UpdateFunc: func(_, obj any) {
			if s, ok := obj.(*corev1.Service); ok {
				tracker.ServiceUpdated(nil, s)
				wake()
			}
		},
		DeleteFunc: func(obj any) {
			if s, ok := informer.Object[*corev1.Service](obj); ok {
				tracker.ServiceUpdated(s, nil)
				wake()
			}
		},
	})
	if err != nil {
		return err
	}
	sliceSynced, err := informer.Handle(factory.Discovery().V1().EndpointSlices().Informer(), cache.ResourceEventHandlerFuncs{
		AddFunc: func(obj any) {
			if s, ok := obj.(*discoveryv1.EndpointSlice); ok {
				tracker.SliceUpdated(s, false)
				wake()
			}
		},
		UpdateFunc: func(_, obj any) {
			if s, ok := obj.(*discoveryv1.EndpointSlice); ok {
				tracker.SliceUpdated(s, false)
				wake()
			}
		},
		DeleteFunc: func(obj any) {
			if s, ok := informer.Object[*discoveryv1.EndpointSlice](obj); ok {
				tracker.SliceUpdated(s, true)
				wake()
			}
		},
	})
	if err != nil {
		return err
	}
	factory.Start(ctx.Done())
	defer factory.Shutdown()
	if !cache.WaitForCacheSync(ctx.Done(), svcSynced, sliceSynced) {
		return c.cleanup(nil) // stopped before the first sync
	}
	health := newHealthServers(c.Listen, c.Logger)
	defer health.close()
	r := &runner{kick: kick, limiter: rate.NewLimiter(rate.Every(c.MinSyncPeriod), 2), period: c.SyncPeriod,
		urgent: tracker.Urgent, floor: urgentSyncFloor}
	c.Logger.Info("service proxy running")
	r.loop(ctx, func(full bool) error {
		start := time.Now()
		u, triggers := tracker.Take(full)
		st, err := c.Backend.Sync(ctx, u)
		if err != nil {
			c.Metrics.syncFailures.Inc()
			c.Logger.Error("sync proxy rules", "full", full, "err", err)
			return err
		}
		c.Metrics.synced(start, full, triggers, st)
		c.Health.synced(time.Now())
		health.sync(u.Services)
		if c.Synced != nil {
			c.Synced(u.Services)
		}
		return nil
	})
	return c.cleanup(nil)
}

// proxiedServices selects the Services a proxy serves, as kube-proxy's:
// not those another proxy serves, nor headless ones.
func proxiedServices() labels.Selector {
	noProxyName, _ := labels.NewRequirement("service.kubernetes.io/service-proxy-name", selection.DoesNotExist, nil)
	notHeadless, _ := labels.NewRequirement(corev1.IsHeadlessService, selection.DoesNotExist, nil)
	return labels.NewSelector().Add(*noProxyName, *notHeadless)
}

// Desired is what a proxy of node holds once it has applied services and
// slices, the API's objects, as Config.Synced reports it.
func Desired(services []*corev1.Service, slices []*discoveryv1.EndpointSlice, node string) map[types.NamespacedName]*Service {
	t := NewTracker(node)
	sel := proxiedServices()
	for _, s := range services {
		if sel.Matches(labels.Set(s.Labels)) {
			t.ServiceUpdated(nil, s)
		}
	}
	for _, s := range slices {
		t.SliceUpdated(s, false)
	}
	u, _ := t.Take(true)
	return u.Services
}

func (c Config) cleanup(err error) error {
	if !c.CleanupOnExit {
		return err
	}
	if cerr := c.Backend.Cleanup(); cerr != nil {
		return errors.Join(err, fmt.Errorf("clean up proxy rules: %w", cerr))
	}
	return err
}

// urgentSyncFloor is the least time between the start of a sync and an
// urgent one, so that a flapping Service cannot keep the proxy busy.
const urgentSyncFloor = 100 * time.Millisecond

// runner calls a sync when kicked, at most at the limiter's rate, and a
// full sync at the start, every period, and after a failure. A sync the
// urgent func asks for (a Service that backends reject for want of
// endpoints has got some) does not wait for the limiter, only for floor
// after the previous sync: clients must not be refused for up to a min
// sync period by a Service that is ready.
type runner struct {
	kick    chan struct{}
	limiter *rate.Limiter
	period  time.Duration
	urgent  func() bool
	floor   time.Duration
}

func (r *runner) loop(ctx context.Context, sync func(full bool) error) {
	full := true
	timer := time.NewTimer(0)
	defer timer.Stop()
	var last time.Time
	for {
		select {
		case <-ctx.Done():
			return
		case <-r.kick:
		case <-timer.C:
			full = true
		}
		if !r.wait(ctx, last) {
			return
		}
		// Events that arrived while waiting are in this sync.
		select {
		case <-r.kick:
		default:
		}
		last = time.Now()
		next := r.period
		if err := sync(full); err != nil {
			// Retry soon, in full: what failed is unknown.
			full = true
			next = time.Duration(float64(time.Second) / float64(r.limiter.Limit()))
		} else {
			full = false
		}
		timer.Reset(next)
	}
}

// wait returns when the next sync may start, the one after the sync that
// started at last: on a token of the limiter or, once urgent, floor after
// last. Kicks while waiting are events that may have made it urgent. It
// reports false when ctx ended first.
func (r *runner) wait(ctx context.Context, last time.Time) bool {
	res := r.limiter.Reserve()
	delay := res.Delay()
	if delay == 0 {
		return true
	}
	token := time.NewTimer(delay)
	defer token.Stop()
	var early <-chan time.Time
	for {
		if early == nil && r.urgent() {
			early = time.After(time.Until(last.Add(r.floor)))
		}
		select {
		case <-ctx.Done():
			res.Cancel()
			return false
		case <-token.C:
			return true
		case <-early:
			res.Cancel()
			return true
		case <-r.kick:
		}
	}
}
