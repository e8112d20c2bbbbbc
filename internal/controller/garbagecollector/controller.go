// Package garbagecollector is the garbage collector, as upstream's: it
// watches the metadata of every kind that can be listed, watched and
// deleted, keeps the graph of their ownerReferences, and
//   - deletes dependents whose owners are all gone (background deletion),
//   - deletes the dependents of an owner deleted in the foreground, and
//     lifts the owner's foregroundDeletion finalizer once its blocking
//     dependents are gone,
//   - removes an owner deleted with orphan propagation from its dependents'
//     ownerReferences, then lifts its orphan finalizer,
//
// which is what `kubectl delete --cascade=background|foreground|orphan`
// asks for. As upstream's, it looks at discovery again every
// DiscoveryResync, so that the kinds of custom resource definitions made
// later are collected too.
package garbagecollector

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/metadata/metadatainformer"
	"k8s.io/client-go/restmapper"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"

	"github.com/svcnet/svcnet/internal/controller"
	"github.com/svcnet/svcnet/internal/informer"
)

// ignored are resources the collector does not track, as upstream: events
// are many, short-lived and never owners.
var ignored = map[schema.GroupResource]bool{
	{Group: "", Resource: "events"}:              true,
	{Group: "events.k8s.io", Resource: "events"}: true,
}

// DiscoveryResync is how often the collector looks for new resources, as
// upstream's --garbage-collector resync period.
const DiscoveryResync = 30 * time.Second

// Controller is the garbage collector.
type Controller struct {
	workers   int
	meta      metadata.Interface
	disco     discovery.DiscoveryInterface
	graph     *graph
	informers metadatainformer.SharedInformerFactory
	synced    []cache.InformerSynced
	queue     *controller.Queue[types.UID]

	mu      sync.RWMutex
	mapper  meta.RESTMapper
	watched map[schema.GroupVersionResource]bool
}

// New discovers the deletable resources and registers a metadata informer
// for each.
func New(m *controller.Metrics, metaClient metadata.Interface, disco discovery.DiscoveryInterface, workers int) (*Controller, error) {
	c := &Controller{
		workers:   workers,
		meta:      metaClient,
		disco:     disco,
		informers: metadatainformer.NewSharedInformerFactory(metaClient, 0),
		watched:   map[schema.GroupVersionResource]bool{},
	}
	c.graph = newGraph(c.namespaced)
	c.queue = controller.NewQueue(m, controller.QueueConfig[types.UID]{Name: "garbage_collector", Sync: c.sync})
	if err := c.discover(); err != nil {
		return nil, err
	}
	return c, nil
}

// discover maps the served kinds anew and watches the deletable resources
// not watched yet.
func (c *Controller) discover() error {
	groups, err := restmapper.GetAPIGroupResources(c.disco)
	if err != nil {
		return fmt.Errorf("garbage collector: discover resources: %w", err)
	}
	c.mu.Lock()
	c.mapper = restmapper.NewDiscoveryRESTMapper(groups)
	c.mu.Unlock()
	for _, g := range groups {
		for version, resources := range g.VersionedResources {
			if version != g.Group.PreferredVersion.Version {
				continue
			}
			for _, r := range resources {
				gvr := schema.GroupVersionResource{Group: g.Group.Name, Version: version, Resource: r.Name}
				if ignored[gvr.GroupResource()] || !deletable(r) || c.watched[gvr] {
					continue
				}
				if err := c.watch(gvr, gvr.GroupVersion().WithKind(r.Kind)); err != nil {
					return err
				}
				c.watched[gvr] = true
			}
		}
	}
	return nil
}

// deletable says whether a discovered resource is a top-level resource the
// collector can list, watch and delete.
func deletable(r metav1.APIResource) bool {
	for _, verb := range []string{"list", "watch", "delete"} {
		if !slices.Contains(r.Verbs, verb) {
			return false
		}
	}
	return !strings.Contains(r.Name, "/")
}

// watch feeds one resource's metadata into the graph.
func (c *Controller) watch(gvr schema.GroupVersionResource, gvk schema.GroupVersionKind) error {
	observe := func(obj any) {
		m, ok := obj.(metav1.Object)
		if !ok {
			return
		}
		ref := objectRef{APIVersion: gvk.GroupVersion().String(), Kind: gvk.Kind, Namespace: m.GetNamespace(), Name: m.GetName(), UID: m.GetUID()}
		c.enqueue(c.graph.observe(ref, m))
	}
	synced, err := informer.Handle(c.informers.ForResource(gvr).Informer(), cache.ResourceEventHandlerFuncs{
		AddFunc:    observe,
		UpdateFunc: func(_, cur any) { observe(cur) },
		DeleteFunc: func(obj any) {
			if m, ok := informer.Object[metav1.Object](obj); ok {
				c.enqueue(c.graph.remove(m.GetUID()))
			}
		},
	})
	if err != nil {
		return fmt.Errorf("garbage collector: watch %s: %w", gvr, err)
	}
	c.synced = append(c.synced, synced)
	return nil
}

func (c *Controller) enqueue(uids []types.UID) {
	for _, uid := range uids {
		c.queue.Add(uid)
	}
}

// Run starts the metadata informers and collects garbage until ctx ends.
func (c *Controller) Run(ctx context.Context) {
	c.informers.Start(ctx.Done())
	defer c.informers.Shutdown()
	synced := c.synced // the resources found at the start
	var wg sync.WaitGroup
	wg.Go(func() { c.resync(ctx) })
	c.queue.Run(ctx, c.workers, synced...)
	wg.Wait()
}

// resync looks at discovery every DiscoveryResync until ctx ends, and
// starts the informers of new resources.
func (c *Controller) resync(ctx context.Context) {
	t := time.NewTicker(DiscoveryResync)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if err := c.discover(); err != nil {
			slog.Warn("garbage collector: discovery failed, trying again later", "err", err)
			continue
		}
		c.informers.Start(ctx.Done())
	}
}

// resource maps an apiVersion and kind to its resource and scope.
func (c *Controller) resource(apiVersion, kind string) (schema.GroupVersionResource, bool, error) {
	gv, err := schema.ParseGroupVersion(apiVersion)
	if err != nil {
		return schema.GroupVersionResource{}, false, fmt.Errorf("bad apiVersion %q: %w", apiVersion, err)
	}
	c.mu.RLock()
	mapper := c.mapper
	c.mu.RUnlock()
	m, err := mapper.RESTMapping(gv.WithKind(kind).GroupKind(), gv.Version)
	if err != nil {
		return schema.GroupVersionResource{}, false, fmt.Errorf("map %s %s: %w", apiVersion, kind, err)
	}
	return m.Resource, m.Scope.Name() == meta.RESTScopeNameNamespace, nil
}

func (c *Controller) namespaced(apiVersion, kind string) bool {
	_, namespaced, err := c.resource(apiVersion, kind)
	return err == nil && namespaced
}

// client is the metadata client of the object's resource.
func (c *Controller) client(ref objectRef) (metadata.ResourceInterface, error) {
	gvr, namespaced, err := c.resource(ref.APIVersion, ref.Kind)
	if err != nil {
		return nil, err
	}
	if !namespaced {
		return c.meta.Resource(gvr), nil
	}
	return c.meta.Resource(gvr).Namespace(ref.Namespace), nil
}

// get reads the object live; nil when it is gone or replaced by another
// of the same name.
func (c *Controller) get(ctx context.Context, ref objectRef) (*metav1.PartialObjectMetadata, error) {
	api, err := c.client(ref)
	if err != nil {
		return nil, err
	}
	obj, err := api.Get(ctx, ref.Name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("get %s: %w", ref, err)
	}
	if obj.UID != ref.UID {
		return nil, nil
	}
	return obj, nil
}

// sync acts on one object of the graph.
func (c *Controller) sync(ctx context.Context, uid types.UID) error {
	v := c.graph.view(uid)
	switch {
	case v == nil:
		return nil
	case v.virtual:
		return c.verifyVirtual(ctx, v)
	case v.deleting && v.has(metav1.FinalizerOrphanDependents):
		return c.orphanDependents(ctx, v)
	case v.deletingDependents():
		return c.deleteDependents(ctx, v)
	case v.deleting || len(v.owners) == 0:
		return nil
	}
	return c.collect(ctx, v)
}

// verifyVirtual looks up an owner only known from references; when it does
// not exist its dependents are collected.
func (c *Controller) verifyVirtual(ctx context.Context, v *view) error {
	if _, _, absent := c.graph.owner(v.ref.UID); !absent {
		obj, err := c.get(ctx, v.ref)
		if err != nil || obj != nil {
			return err // present: its informer will deliver it
		}
	}
	c.enqueue(c.graph.remove(v.ref.UID))
	return nil
}

// ownerState is what a dependent's reference finds.
type ownerState int

const (
	ownerPresent ownerState = iota
	ownerAbsent
	ownerWaiting // deleting in the foreground, waiting for its dependents
)

// owner judges one ownerReference of a dependent in namespace, from the
// graph when it knows, else with a live lookup.
func (c *Controller) owner(ctx context.Context, ref metav1.OwnerReference, namespace string) (ownerState, error) {
	n, present, absent := c.graph.owner(ref.UID)
	if absent {
		return ownerAbsent, nil
	}
	if !present {
		o := objectRef{APIVersion: ref.APIVersion, Kind: ref.Kind, Name: ref.Name, UID: ref.UID}
		if c.namespaced(ref.APIVersion, ref.Kind) {
			o.Namespace = namespace
		}
		obj, err := c.get(ctx, o)
		if err != nil {
			return ownerPresent, err
		}
		if obj == nil {
			c.graph.markAbsent(ref.UID)
			return ownerAbsent, nil
		}
		n = node{deleting: obj.DeletionTimestamp != nil, finalizers: obj.Finalizers}
	}
	if n.deletingDependents() {
		return ownerWaiting, nil
	}
	return ownerPresent, nil
}

// collect deletes a dependent none of whose owners remain, and drops
// references to absent owners (and owners waiting for it) from one that
// still has an owner.
func (c *Controller) collect(ctx context.Context, v *view) error {
	latest, err := c.get(ctx, v.ref)
	if err != nil || latest == nil || latest.DeletionTimestamp != nil || len(latest.OwnerReferences) == 0 {
		return err // gone, going, or (no longer) anyone's dependent
	}
	var solid, gone []types.UID
	waiting := false
	for _, ref := range latest.OwnerReferences {
		state, err := c.owner(ctx, ref, latest.Namespace)
		if err != nil {
			return err
		}
		switch state {
		case ownerPresent:
			solid = append(solid, ref.UID)
		case ownerAbsent:
			gone = append(gone, ref.UID)
		case ownerWaiting:
			waiting = true
			gone = append(gone, ref.UID)
		}
	}
	if len(solid) > 0 {
		if len(gone) == 0 {
			return nil
		}
		slog.Debug("garbage collector: dropping references to gone owners", "object", v.ref.String())
		return c.dropOwners(ctx, v.ref, gone)
	}
	policy := metav1.DeletePropagationBackground
	switch {
	case waiting && len(v.dependents) > 0:
		// An owner waits for this object, which has dependents of its
		// own: they go first.
		policy = metav1.DeletePropagationForeground
		if slices.ContainsFunc(v.dependents, func(d dependentView) bool { return d.deletingDependents }) {
			// A dependent already waits for dependents of its own,
			// which may close a cycle back to this object's owner: as
			// upstream, this object stops blocking its owners first.
			if err := c.unblockOwners(ctx, v.ref); err != nil {
				return err
			}
		}
	case slices.Contains(latest.Finalizers, metav1.FinalizerOrphanDependents):
		policy = metav1.DeletePropagationOrphan
	case slices.Contains(latest.Finalizers, metav1.FinalizerDeleteDependents):
		policy = metav1.DeletePropagationForeground
	}
	slog.Debug("garbage collector: deleting", "object", v.ref.String(), "propagation", policy)
	return c.delete(ctx, v.ref, policy)
}

// deleteDependents drives a foreground deletion: the owner's finalizer is
// lifted once no dependent blocks it; until then, blocking dependents are
// deleted (their deletion events bring the owner back here).
func (c *Controller) deleteDependents(ctx context.Context, v *view) error {
	blocked := false
	for _, d := range v.dependents {
		if !d.blocking {
			continue
		}
		blocked = true
		if !d.deleting {
			c.queue.Add(d.ref.UID)
		}
	}
	if blocked {
		return nil
	}
	return c.dropFinalizer(ctx, v.ref, metav1.FinalizerDeleteDependents)
}

// orphanDependents removes the owner from its dependents' references, then
// lifts its orphan finalizer.
func (c *Controller) orphanDependents(ctx context.Context, v *view) error {
	var errs []error
	for _, d := range v.dependents {
		errs = append(errs, c.dropOwners(ctx, d.ref, []types.UID{v.ref.UID}))
	}
	if err := errors.Join(errs...); err != nil {
		return err
	}
	return c.dropFinalizer(ctx, v.ref, metav1.FinalizerOrphanDependents)
}

// delete deletes the object if it still is the same one.
func (c *Controller) delete(ctx context.Context, ref objectRef, policy metav1.DeletionPropagation) error {
	api, err := c.client(ref)
	if err != nil {
		return err
	}
	err = api.Delete(ctx, ref.Name, metav1.DeleteOptions{
		Preconditions:     &metav1.Preconditions{UID: &ref.UID},
		PropagationPolicy: &policy,
	})
	if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
		return fmt.Errorf("delete %s: %w", ref, err)
	}
	return nil
}

// dropOwners removes references to the given owners from an object.
func (c *Controller) dropOwners(ctx context.Context, ref objectRef, owners []types.UID) error {
	return c.patchMeta(ctx, ref, func(m *metav1.PartialObjectMetadata) (string, any, bool) {
		keep := slices.DeleteFunc(slices.Clone(m.OwnerReferences), func(o metav1.OwnerReference) bool {
			return slices.Contains(owners, o.UID)
		})
		return "ownerReferences", keep, len(keep) != len(m.OwnerReferences)
	})
}

// unblockOwners makes none of an object's ownerReferences block its
// owner's foreground deletion.
func (c *Controller) unblockOwners(ctx context.Context, ref objectRef) error {
	return c.patchMeta(ctx, ref, func(m *metav1.PartialObjectMetadata) (string, any, bool) {
		refs := slices.Clone(m.OwnerReferences)
		changed := false
		for i := range refs {
			if refs[i].BlockOwnerDeletion != nil && *refs[i].BlockOwnerDeletion {
				refs[i].BlockOwnerDeletion = ptr.To(false)
				changed = true
			}
		}
		return "ownerReferences", refs, changed
	})
}

// dropFinalizer removes one finalizer from an object.
func (c *Controller) dropFinalizer(ctx context.Context, ref objectRef, finalizer string) error {
	return c.patchMeta(ctx, ref, func(m *metav1.PartialObjectMetadata) (string, any, bool) {
		keep := slices.DeleteFunc(slices.Clone(m.Finalizers), func(f string) bool { return f == finalizer })
		return "finalizers", keep, len(keep) != len(m.Finalizers)
	})
}

// patchMeta sets one metadata field of the object's latest version with a
// merge patch conditioned on its resourceVersion, retrying on conflict.
// edit returns the field, its new value, and whether anything changes.
func (c *Controller) patchMeta(ctx context.Context, ref objectRef, edit func(*metav1.PartialObjectMetadata) (string, any, bool)) error {
	api, err := c.client(ref)
	if err != nil {
		return err
	}
	return retry.RetryOnConflict(retry.DefaultBackoff, func() error {
		latest, err := c.get(ctx, ref)
		if err != nil || latest == nil {
			return err
		}
		field, value, changed := edit(latest)
		if !changed {
			return nil
		}
		patch, err := json.Marshal(map[string]any{"metadata": map[string]any{field: value, "resourceVersion": latest.ResourceVersion}})
		if err != nil {
			return fmt.Errorf("encode patch: %w", err)
		}
		_, err = api.Patch(ctx, ref.Name, types.MergePatchType, patch, metav1.PatchOptions{})
		if apierrors.IsNotFound(err) {
			return nil
		}
		if err != nil && !apierrors.IsConflict(err) {
			return fmt.Errorf("patch %s of %s: %w", field, ref, err)
		}
		return err
	})
}
