package controller

import (
	"context"
	"fmt"
	"log/slog"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
)

// NewRecorder returns a recorder that writes core/v1 Events as component
// (what `kubectl describe` and `kubectl get events` show) and logs them at
// debug level. Its broadcaster stops when ctx ends.
func NewRecorder(ctx context.Context, client kubernetes.Interface, component string) record.EventRecorder {
	b := record.NewBroadcaster(record.WithContext(ctx))
	b.StartRecordingToSink(&typedcorev1.EventSinkImpl{Interface: client.CoreV1().Events("")})
	b.StartEventWatcher(func(e *corev1.Event) {
		slog.Debug("event", "component", component, "object", e.InvolvedObject.Kind+" "+e.InvolvedObject.Namespace+"/"+e.InvolvedObject.Name,
			"type", e.Type, "reason", e.Reason, "message", e.Message)
	})
	context.AfterFunc(ctx, b.Shutdown)
	return b.NewRecorder(scheme.Scheme, corev1.EventSource{Component: component})
}

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
