// Package resourcequota is upstream's resource quota controller
// (pkg/controller/resourcequota): it keeps each ResourceQuota's status,
// hard as its spec says and used as the namespace's objects use it. The
// API server's quota admission raises used as objects are written; this
// controller computes it anew when a quota is created or its limits
// change, when an object it counts goes away or stops using what it did
// (replenishment), and every sync period.
package resourcequota

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	k8squota "k8s.io/apiserver/pkg/quota/v1"
	"k8s.io/apiserver/pkg/quota/v1/generic"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/metadata/metadatainformer"
	"k8s.io/client-go/tools/cache"

	"github.com/svcnet/svcnet/internal/controller"
	"github.com/svcnet/svcnet/internal/informer"
	"github.com/svcnet/svcnet/internal/quota"
)

// ControllerName is the controller's name, and its ServiceAccount's.
const ControllerName = "resourcequota-controller"

// Alias is the controller's name in --controllers.
const Alias = "resourcequota"

// Options are the controller's flags.
type Options struct {
	// Workers is --concurrent-resource-quota-syncs.
	Workers int
	// SyncPeriod is --resource-quota-sync-period: how often every quota
	// is computed anew.
	SyncPeriod time.Duration
}

// DefaultOptions are upstream's defaults.
func DefaultOptions() Options { return Options{Workers: 5, SyncPeriod: 5 * time.Minute} }

// Resources maps a resource to the version it is served at.
type Resources interface {
	ResourceFor(schema.GroupVersionResource) (schema.GroupVersionResource, error)
}

// Controller keeps the quotas' status.
type Controller struct {
	client   kubernetes.Interface
	quotas   corelisters.ResourceQuotaLister
	synced   []cache.InformerSynced
	queue    *controller.Queue[string]
	registry k8squota.Registry
	opts     Options

	// Objects counted by count/<resource>.<group> for which no evaluator
	// is built in are watched by their metadata, once a quota names them.
	resources Resources
	metadata  metadatainformer.SharedInformerFactory
	mu        sync.Mutex
	watched   map[schema.GroupResource]cache.InformerSynced
	stop      <-chan struct{}
}

// New creates the controller: the evaluators read the shared informers of
// the kinds they know, whose deletes (and updates that release usage)
// replenish the quotas of their namespace.
func New(d controller.Deps, meta metadata.Interface, resources Resources, opts Options) (*Controller, error) {
	quotas := d.Informers.Core().V1().ResourceQuotas()
	c := &Controller{client: d.Client, quotas: quotas.Lister(), opts: opts, resources: resources,
		metadata: metadatainformer.NewSharedInformerFactory(meta, 0), watched: map[schema.GroupResource]cache.InformerSynced{}}
	c.queue = controller.NewQueue(d.Metrics, controller.QueueConfig[string]{Name: "resourcequota_primary", Sync: c.sync})
	enqueue := func(obj any) {
		if key, ok := informer.Key(obj); ok {
			c.queue.Add(key)
		}
	}
	handlers := []informer.Handler{{Informer: quotas.Informer(), Handler: cache.ResourceEventHandlerFuncs{
		AddFunc: enqueue,
		UpdateFunc: func(_, cur any) {
			if q, ok := cur.(*corev1.ResourceQuota); ok && needsSync(q) {
				enqueue(cur)
			}
		},
		DeleteFunc: enqueue,
	}}}
	evaluators := quota.NewEvaluators(generic.ListerFuncForResourceFunc(d.Informers.ForResource))
	for _, e := range evaluators {
		// The built-in evaluators count core/v1 kinds.
		gr := e.GroupResource()
		inf, err := d.Informers.ForResource(gr.WithVersion("v1"))
		if err != nil {
			return nil, fmt.Errorf("resource quota controller: informer of %s: %w", gr, err)
		}
		handlers = append(handlers, informer.Handler{Informer: inf.Informer(), Handler: c.replenisher(gr)})
	}
	c.registry = generic.NewRegistry(evaluators)
	synced, err := informer.Register(handlers...)
	if err != nil {
		return nil, fmt.Errorf("resource quota controller: %w", err)
	}
	c.synced = synced
	return c, nil
}

// needsSync: a quota whose limits changed, or that lacks the usage of one
// of them, is computed anew.
func needsSync(q *corev1.ResourceQuota) bool {
	if !apiequality.Semantic.DeepEqual(q.Spec.Hard, q.Status.Hard) {
		return true
	}
	for name := range q.Spec.Hard {
		if _, ok := q.Status.Used[name]; !ok {
			return true
		}
	}
	return false
}

// replenisher queues the quotas of an object's namespace that count its
// resource when it is deleted, or updated so that it uses less.
func (c *Controller) replenisher(gr schema.GroupResource) cache.ResourceEventHandler {
	return cache.ResourceEventHandlerFuncs{
		UpdateFunc: func(old, cur any) {
			if quota.UpdateFilter(gr.WithVersion("v1"), old, cur) {
				c.replenish(gr, cur)
			}
		},
		DeleteFunc: func(obj any) { c.replenish(gr, obj) },
	}
}

func (c *Controller) replenish(gr schema.GroupResource, obj any) {
	o, ok := informer.Object[metav1.Object](obj)
	if !ok {
		return
	}
	evaluator := c.registry.Get(gr)
	if evaluator == nil {
		return
	}
	quotas, err := c.quotas.ResourceQuotas(o.GetNamespace()).List(labels.Everything())
	if err != nil {
		return
	}
	for _, q := range quotas {
		// The limits the quota has, or is about to have once its first
		// status (which the cache may not show yet) is written.
		limits := append(k8squota.ResourceNames(q.Status.Hard), k8squota.ResourceNames(q.Spec.Hard)...)
		if len(evaluator.MatchingResources(limits)) > 0 {
			c.queue.Add(q.Namespace + "/" + q.Name)
		}
	}
}

// Run syncs quotas until ctx ends, every one of them each sync period.
func (c *Controller) Run(ctx context.Context) {
	c.mu.Lock()
	c.stop = ctx.Done() // the metadata informers run until then
	c.mu.Unlock()
	defer c.metadata.Shutdown()
	var wg sync.WaitGroup
	defer wg.Wait()
	wg.Go(func() { wait.UntilWithContext(ctx, c.resyncAll, c.opts.SyncPeriod) })
	c.queue.Run(ctx, c.opts.Workers, c.synced...)
}

func (c *Controller) resyncAll(context.Context) {
	quotas, err := c.quotas.List(labels.Everything())
	if err != nil {
		return
	}
	for _, q := range quotas {
		c.queue.Add(q.Namespace + "/" + q.Name)
	}
}

// sync computes one quota's usage and writes its status when it changed.
func (c *Controller) sync(ctx context.Context, key string) error {
	ns, name, err := cache.SplitMetaNamespaceKey(key)
	if err != nil {
		return nil
	}
	q, err := c.quotas.ResourceQuotas(ns).Get(name)
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return err
	}
	if err := c.watchCounted(q.Spec.Hard); err != nil {
		return err
	}
	hard := k8squota.Add(corev1.ResourceList{}, q.Spec.Hard)
	// What cannot be computed now keeps its last value.
	used := k8squota.Add(corev1.ResourceList{}, q.Status.Used)
	computed, calcErr := k8squota.CalculateUsage(q.Namespace, q.Spec.Scopes, hard, c.registry, q.Spec.ScopeSelector)
	for name, v := range computed {
		used[name] = v
	}
	used = k8squota.Mask(used, k8squota.ResourceNames(hard))
	if q.Status.Hard == nil || q.Status.Used == nil || !apiequality.Semantic.DeepEqual(q.Status.Hard, hard) || !k8squota.Equals(q.Status.Used, used) {
		next := q.DeepCopy()
		next.Status = corev1.ResourceQuotaStatus{Hard: hard, Used: used}
		if _, err := c.client.CoreV1().ResourceQuotas(ns).UpdateStatus(ctx, next, metav1.UpdateOptions{}); err != nil {
			return errors.Join(calcErr, fmt.Errorf("update the status of quota %s: %w", key, err))
		}
	}
	return calcErr
}

// watchCounted watches by their metadata the resources that hard counts
// (count/<resource>.<group>) and no built-in evaluator knows, and counts
// them from then on. Until their lists are read, the quota is retried.
func (c *Controller) watchCounted(hard corev1.ResourceList) error {
	var pending []string
	for name := range hard {
		resource, ok := strings.CutPrefix(string(name), "count/")
		if !ok {
			continue
		}
		gr := schema.ParseGroupResource(resource)
		synced, err := c.watch(gr)
		if err != nil {
			return fmt.Errorf("count %s: %w", name, err)
		}
		if !synced() {
			pending = append(pending, gr.String())
		}
	}
	if len(pending) > 0 {
		return fmt.Errorf("%w: %s not listed yet", controller.ErrStale, strings.Join(pending, ", "))
	}
	return nil
}

// watch starts watching gr unless an evaluator counts it already; what
// it returns tells when its list has been read.
func (c *Controller) watch(gr schema.GroupResource) (cache.InformerSynced, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if synced, ok := c.watched[gr]; ok {
		return synced, nil
	}
	if c.registry.Get(gr) != nil {
		return alwaysSynced, nil
	}
	gvr, err := c.resources.ResourceFor(gr.WithVersion(""))
	if meta.IsNoMatchError(err) {
		return alwaysSynced, nil // not served: none of it to count
	}
	if err != nil {
		return nil, err
	}
	inf := c.metadata.ForResource(gvr)
	if _, err := inf.Informer().AddEventHandler(c.replenisher(gr)); err != nil {
		return nil, err
	}
	listers := generic.ListerFuncForResourceFunc(func(gvr schema.GroupVersionResource) (informers.GenericInformer, error) {
		return c.metadata.ForResource(gvr), nil
	})
	c.registry.Add(generic.NewObjectCountEvaluator(gr, generic.ListResourceUsingListerFunc(listers, gvr), ""))
	c.metadata.Start(c.stop)
	c.watched[gr] = inf.Informer().HasSynced
	return inf.Informer().HasSynced, nil
}

func alwaysSynced() bool { return true }
