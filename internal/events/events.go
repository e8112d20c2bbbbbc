// Package events records core/v1 Events for svcnet's components, what
// `kubectl describe` and `kubectl get events` show: the controllers', the
// node agent's, the proxy's and the load balancer's.
package events

import (
	"context"
	"log/slog"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
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
