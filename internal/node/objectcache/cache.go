// Package objectcache keeps the Secrets and ConfigMaps a node's pods use,
// each watched on its own (a list and watch of its namespace selecting its
// metadata.name), as the kubelet's watch-based secret and configmap
// managers: the Node authorizer lets a node read only the objects its
// pods reference, never a whole collection. Pods register the names they
// use; an object no pod uses any more stops being watched. A change to a
// watched object is reported, so that the pods using it are synced again.
package objectcache

import (
	"context"
	"slices"
	"sync"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/tools/cache"
)

// Source reads and watches one kind in a namespace.
type Source struct {
	// Resource names the kind in errors ("secret", "configmap", as
	// upstream's not-found messages say).
	Resource schema.GroupResource
	// Object is an empty object of the kind.
	Object runtime.Object
	List   func(ctx context.Context, namespace string, opts metav1.ListOptions) (runtime.Object, error)
	Watch  func(ctx context.Context, namespace string, opts metav1.ListOptions) (watch.Interface, error)
	// Get reads an object directly, while its watch has not listed yet.
	Get func(ctx context.Context, namespace, name string) (runtime.Object, error)
	// Client is the clientset behind List and Watch, which tells the
	// watches whether it serves watch lists (a fake one does not).
	Client any
}

// Namespaced is a typed client of one kind in a namespace (client-go's
// SecretInterface, ConfigMapInterface).
type Namespaced[T, L runtime.Object] interface {
	List(ctx context.Context, opts metav1.ListOptions) (L, error)
	Watch(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error)
	Get(ctx context.Context, name string, opts metav1.GetOptions) (T, error)
}

// SourceOf is the Source of a typed client: in gives the kind's client in
// a namespace, empty is an empty object of the kind, clientset the
// clientset behind them.
func SourceOf[T, L runtime.Object](resource schema.GroupResource, empty T, clientset any, in func(namespace string) Namespaced[T, L]) Source {
	return Source{
		Resource: resource, Object: empty, Client: clientset,
		List: func(ctx context.Context, ns string, o metav1.ListOptions) (runtime.Object, error) {
			return in(ns).List(ctx, o)
		},
		Watch: func(ctx context.Context, ns string, o metav1.ListOptions) (watch.Interface, error) {
			return in(ns).Watch(ctx, o)
		},
		Get: func(ctx context.Context, ns, name string) (runtime.Object, error) {
			return in(ns).Get(ctx, name, metav1.GetOptions{})
		},
	}
}

// Cache is the watched objects of one kind.
type Cache struct {
	src Source
	// changed is told of every add, update and delete of a watched object.
	changed func(namespace, name string)
	ctx     context.Context
	wg      sync.WaitGroup

	mu    sync.Mutex
	items map[types.NamespacedName]*item
	// uses are the names each pod registered.
	uses map[types.UID][]types.NamespacedName
}

type item struct {
	informer cache.SharedIndexInformer
	stop     context.CancelFunc
	pods     int
}

// New is a Cache whose watches run until ctx ends (Wait waits for them).
func New(ctx context.Context, src Source, changed func(namespace, name string)) *Cache {
	return &Cache{src: src, changed: changed, ctx: ctx, items: map[types.NamespacedName]*item{}, uses: map[types.UID][]types.NamespacedName{}}
}

// Register sets the names of the objects in namespace that pod uses,
// watching those not watched yet and dropping what it no longer uses.
func (c *Cache) Register(pod types.UID, namespace string, names []string) {
	keys := make([]types.NamespacedName, 0, len(names))
	for _, n := range names {
		k := types.NamespacedName{Namespace: namespace, Name: n}
		if !slices.Contains(keys, k) {
			keys = append(keys, k)
		}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	old := c.uses[pod]
	for _, k := range keys {
		if !slices.Contains(old, k) {
			c.ref(k)
		}
	}
	for _, k := range old {
		if !slices.Contains(keys, k) {
			c.unref(k)
		}
	}
	if len(keys) == 0 {
		delete(c.uses, pod)
	} else {
		c.uses[pod] = keys
	}
}

// Unregister drops every object pod used.
func (c *Cache) Unregister(pod types.UID) { c.Register(pod, "", nil) }

func (c *Cache) ref(k types.NamespacedName) {
	if it, ok := c.items[k]; ok {
		it.pods++
		return
	}
	if c.ctx.Err() != nil {
		return
	}
	selector := fields.OneTermEqualSelector("metadata.name", k.Name).String()
	lw := &cache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
			o.FieldSelector = selector
			return c.src.List(ctx, k.Namespace, o)
		},
		WatchFuncWithContext: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
			o.FieldSelector = selector
			return c.src.Watch(ctx, k.Namespace, o)
		},
	}
	inf := cache.NewSharedIndexInformer(cache.ToListWatcherWithWatchListSemantics(lw, c.src.Client), c.src.Object, 0, cache.Indexers{})
	notify := func(any) { c.changed(k.Namespace, k.Name) }
	_, _ = inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: notify, UpdateFunc: func(_, obj any) { notify(obj) }, DeleteFunc: notify,
	})
	ctx, stop := context.WithCancel(c.ctx)
	c.items[k] = &item{informer: inf, stop: stop, pods: 1}
	c.wg.Go(func() { inf.RunWithContext(ctx) })
}

func (c *Cache) unref(k types.NamespacedName) {
	it, ok := c.items[k]
	if !ok {
		return
	}
	if it.pods--; it.pods == 0 {
		it.stop()
		delete(c.items, k)
	}
}

// Get is the object as its watch last saw it, read directly while the
// watch has not listed yet or when no pod registered it; the kubelet's
// not-found error (`secret "x" not found`) when it does not exist.
func (c *Cache) Get(ctx context.Context, namespace, name string) (runtime.Object, error) {
	k := types.NamespacedName{Namespace: namespace, Name: name}
	c.mu.Lock()
	it := c.items[k]
	c.mu.Unlock()
	if it == nil || !it.informer.HasSynced() {
		obj, err := c.src.Get(ctx, namespace, name)
		if apierrors.IsNotFound(err) {
			return nil, apierrors.NewNotFound(c.src.Resource, name)
		}
		return obj, err
	}
	obj, exists, err := it.informer.GetStore().GetByKey(k.String())
	if err != nil {
		return nil, err
	}
	if !exists {
		return nil, apierrors.NewNotFound(c.src.Resource, name)
	}
	return obj.(runtime.Object), nil
}

// Watched reports how many objects are watched.
func (c *Cache) Watched() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.items)
}

// Wait returns once every watch has stopped (after the ctx of New ends).
func (c *Cache) Wait() { c.wg.Wait() }
