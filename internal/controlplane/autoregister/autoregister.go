// Package autoregister keeps an APIService for every group version the API
// server serves, as kube-apiserver's kube-aggregator does with its
// autoregister controller (fed by the API server's own group versions and
// by the crdregistration controller), and keeps Local APIServices
// Available, as its local availability controller.
//
// The group versions come from the resource set, read again whenever it
// changes (custom resource definitions come and go). Each becomes a Local
// APIService "<version>.<group>" (Desired) labelled
// kube-aggregator.kubernetes.io/automanaged: "onstart" for the built-in
// ones, synced once per start of the loop, and "true" for custom
// resources' versions, synced continuously. A sync of one name follows
// upstream's table (see sync): it creates what is missing, puts the wanted
// spec back, and deletes an automanaged APIService whose group version is
// no longer served; one created by someone else, without the label, is
// never touched. The loop starts once the stored definitions are served,
// so that its first sync deletes none of their APIServices.
//
// Every APIService without a Service gets the condition Available=True,
// reason Local. APIServices naming a Service are internal/aggregator's.
package autoregister

import (
	"context"
	"maps"
	"reflect"
	"sync"

	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/tools/cache"
	apiregistrationv1 "k8s.io/kube-aggregator/pkg/apis/apiregistration/v1"
	v1helper "k8s.io/kube-aggregator/pkg/apis/apiregistration/v1/helper"
	aggregatorclient "k8s.io/kube-aggregator/pkg/client/clientset_generated/clientset"
	aggregatorinformers "k8s.io/kube-aggregator/pkg/client/informers/externalversions"
	listers "k8s.io/kube-aggregator/pkg/client/listers/apiregistration/v1"

	"github.com/svcnet/svcnet/internal/controller"
	"github.com/svcnet/svcnet/internal/informer"
	"github.com/svcnet/svcnet/internal/registry"
)

// Upstream's label and its values.
const (
	// ManagedLabel says how an APIService is synced.
	ManagedLabel = "kube-aggregator.kubernetes.io/automanaged"
	// ManageOnStart: synced once when the loop starts.
	ManageOnStart = "onstart"
	// ManageContinuously: synced always.
	ManageContinuously = "true"
)

// workers sync names at once (upstream runs five).
const workers = 2

// Served is what the loop reads of the resource set (*registry.Set).
type Served interface {
	All() []*registry.Resource
	Changed() <-chan struct{}
}

// Controller keeps the APIServices of the served group versions.
type Controller struct {
	client     aggregatorclient.Interface
	set        Served
	priorities map[schema.GroupVersion]Priority
	factory    aggregatorinformers.SharedInformerFactory
	lister     listers.APIServiceLister
	synced     cache.InformerSynced
	queue      *controller.Queue[string]

	mu      sync.Mutex
	desired map[string]Wanted // by name, the label set
	done    map[string]bool   // names synced successfully once
	atStart map[string]bool   // names stored when the loop started
	skipped map[schema.GroupVersion]bool
}

// New returns the loop over set, writing through client (the API server's
// loopback), with upstream's priorities.
func New(client aggregatorclient.Interface, set Served, m *controller.Metrics) (*Controller, error) {
	factory := aggregatorinformers.NewSharedInformerFactory(client, 0)
	apiServices := factory.Apiregistration().V1().APIServices()
	c := &Controller{
		client: client, set: set, priorities: Priorities, factory: factory, lister: apiServices.Lister(),
		desired: map[string]Wanted{}, done: map[string]bool{}, atStart: map[string]bool{}, skipped: map[schema.GroupVersion]bool{},
	}
	c.queue = controller.NewQueue(m, controller.QueueConfig[string]{Name: "autoregister", Sync: c.sync})
	enqueue := func(obj any) {
		if s, ok := informer.Object[*apiregistrationv1.APIService](obj); ok {
			c.queue.Add(s.Name)
		}
	}
	var err error
	c.synced, err = informer.Handle(apiServices.Informer(), cache.ResourceEventHandlerFuncs{
		AddFunc: enqueue, UpdateFunc: func(_, cur any) { enqueue(cur) }, DeleteFunc: enqueue,
	})
	if err != nil {
		return nil, err
	}
	return c, nil
}

// Run keeps the APIServices until ctx ends. It notes the APIServices
// stored when it starts and the group versions served then before it
// syncs any, then follows the set's changes.
func (c *Controller) Run(ctx context.Context) {
	c.factory.Start(ctx.Done())
	defer c.factory.Shutdown()
	var wg sync.WaitGroup
	defer wg.Wait()
	if cache.WaitForCacheSync(ctx.Done(), c.synced) {
		if stored, err := c.lister.List(labels.Everything()); err == nil {
			c.mu.Lock()
			for _, s := range stored {
				c.atStart[s.Name] = true
			}
			c.mu.Unlock()
		}
		changed := c.set.Changed()
		c.refresh()
		wg.Go(func() { c.follow(ctx, changed) })
	}
	c.queue.Run(ctx, workers, c.synced)
}

// follow reads the set again at each of its changes until ctx ends.
func (c *Controller) follow(ctx context.Context, changed <-chan struct{}) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-changed:
		}
		changed = c.set.Changed()
		c.refresh()
	}
}

// refresh makes the set's group versions the wanted APIServices, queueing
// the names whose wish changed (added, changed or gone).
func (c *Controller) refresh() {
	next, skipped := Desired(c.set.All(), c.priorities)
	for _, w := range next {
		mode := ManageContinuously
		if w.OnStart {
			mode = ManageOnStart
		}
		w.APIService.Labels = map[string]string{ManagedLabel: mode}
	}
	c.mu.Lock()
	logSkipped(c.skipped, skipped)
	prev := c.desired
	c.desired = next
	c.mu.Unlock()
	for name, w := range next {
		if p, ok := prev[name]; !ok || p.OnStart != w.OnStart || !reflect.DeepEqual(p.APIService, w.APIService) {
			c.queue.Add(name)
		}
	}
	for name := range maps.Keys(prev) {
		if _, ok := next[name]; !ok {
			c.queue.Add(name)
		}
	}
}

// wanted returns the wish for name (nil: none) and whether name has been
// synced successfully since the loop started.
func (c *Controller) wanted(name string) (*apiregistrationv1.APIService, bool, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	w, ok := c.desired[name]
	if !ok {
		return nil, c.done[name], c.atStart[name]
	}
	return w.APIService, c.done[name], c.atStart[name]
}

func (c *Controller) markDone(name string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.done[name] = true
}

// sync registers name and, when that wrote nothing, keeps a Local
// APIService Available.
func (c *Controller) sync(ctx context.Context, name string) error {
	wrote, err := c.register(ctx, name)
	if err != nil || wrote {
		// A write comes back through the informer, and syncs again.
		return err
	}
	return c.markAvailable(ctx, name)
}

// register is upstream's checkAPIService: it brings the stored APIService
// name in line with the wish for it, by this table (rows: what is stored;
// columns: what is wanted).
//
//	                               | not wanted  | sync on start | sync always
//	-------------------------------|-------------|---------------|------------
//	lookup error                   | error       | error         | error
//	not found                      | -           | create once   | create
//	not automanaged                | -           | -             | -
//	on start, not there at start   | -           | -             | -
//	on start, there at start       | delete once | update once   | update once
//	always                         | delete      | update once   | update
//
// A name synced once, successfully, is done for "once". It reports
// whether it wrote.
func (c *Controller) register(ctx context.Context, name string) (wrote bool, err error) {
	desired, done, atStart := c.wanted(name)
	cur, err := c.lister.Get(name)
	if !done {
		defer func() {
			if err == nil {
				c.markDone(name)
			}
		}()
	}
	apiServices := c.client.ApiregistrationV1().APIServices()
	switch {
	case err != nil && !apierrors.IsNotFound(err):
		return false, err
	case apierrors.IsNotFound(err) && desired == nil:
		return false, nil
	case managedType(desired) == ManageOnStart && done:
		return false, nil
	case apierrors.IsNotFound(err):
		_, err := apiServices.Create(ctx, desired, metav1.CreateOptions{})
		if apierrors.IsAlreadyExists(err) {
			return false, nil // created meanwhile: its event syncs again
		}
		return err == nil, err
	case managedType(cur) != ManageOnStart && managedType(cur) != ManageContinuously:
		return false, nil
	case managedType(cur) == ManageOnStart && (!atStart || done):
		return false, nil
	case desired == nil:
		err := apiServices.Delete(ctx, name, metav1.DeleteOptions{Preconditions: metav1.NewUIDPreconditions(string(cur.UID))})
		if apierrors.IsNotFound(err) || apierrors.IsConflict(err) {
			return false, nil // deleted or changed meanwhile
		}
		return err == nil, err
	case reflect.DeepEqual(cur.Spec, desired.Spec):
		return false, nil
	}
	next := cur.DeepCopy()
	next.Spec = desired.Spec
	_, err = apiServices.Update(ctx, next, metav1.UpdateOptions{})
	if apierrors.IsNotFound(err) || apierrors.IsConflict(err) {
		return false, nil // deleted or changed meanwhile
	}
	return err == nil, err
}

func managedType(s *apiregistrationv1.APIService) string {
	if s == nil {
		return ""
	}
	return s.Labels[ManagedLabel]
}

// markAvailable is upstream's local availability controller: a stored
// APIService without a Service has Available=True, reason Local.
func (c *Controller) markAvailable(ctx context.Context, name string) error {
	cur, err := c.lister.Get(name)
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return err
	}
	if cur.Spec.Service != nil {
		return nil
	}
	next := cur.DeepCopy()
	v1helper.SetAPIServiceCondition(next, v1helper.NewLocalAvailableAPIServiceCondition())
	if equality.Semantic.DeepEqual(cur.Status, next.Status) {
		return nil
	}
	_, err = c.client.ApiregistrationV1().APIServices().UpdateStatus(ctx, next, metav1.UpdateOptions{})
	if apierrors.IsNotFound(err) || apierrors.IsConflict(err) {
		return nil // its event syncs again
	}
	return err
}
