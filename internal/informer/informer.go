// Package informer holds the small helpers every user of client-go
// informers in svcnet shares (controllers, the node agent, the proxy, DNS,
// the API server's own controllers): unwrapping an event's object,
// its key, and registering handlers so that a caller can wait for their
// initial lists.
package informer

import (
	"fmt"

	"k8s.io/client-go/tools/cache"
)

// Object returns the object of an informer event, unwrapping the tombstone
// a delete event carries when the watch missed the final state; ok is false
// for anything else.
func Object[T any](obj any) (T, bool) {
	if d, isTombstone := obj.(cache.DeletedFinalStateUnknown); isTombstone {
		obj = d.Obj
	}
	t, ok := obj.(T)
	return t, ok
}

// Key is the namespace/name key of an informer event's object, tombstones
// included.
func Key(obj any) (string, bool) {
	key, err := cache.DeletionHandlingMetaNamespaceKeyFunc(obj)
	return key, err == nil
}

// Handler pairs an informer with the handler a controller registers on it.
type Handler struct {
	Informer cache.SharedIndexInformer
	Handler  cache.ResourceEventHandler
}

// Register registers the handlers and returns what tells that each has
// seen its informer's initial list.
func Register(handlers ...Handler) ([]cache.InformerSynced, error) {
	synced := make([]cache.InformerSynced, 0, len(handlers))
	for _, h := range handlers {
		reg, err := h.Informer.AddEventHandler(h.Handler)
		if err != nil {
			return nil, fmt.Errorf("add event handler: %w", err)
		}
		synced = append(synced, reg.HasSynced)
	}
	return synced, nil
}

// Handle registers one handler and returns what tells that it has seen
// its informer's initial list.
func Handle(inf cache.SharedIndexInformer, h cache.ResourceEventHandler) (cache.InformerSynced, error) {
	synced, err := Register(Handler{Informer: inf, Handler: h})
	if err != nil {
		return nil, err
	}
	return synced[0], nil
}
