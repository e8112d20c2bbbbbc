package endpointutil

import (
	"context"
	"fmt"
	"slices"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// SliceWrites are the slice writes one sync plans.
type SliceWrites struct {
	Create, Update, Delete []*discoveryv1.EndpointSlice
}

// Add appends another plan's writes.
func (w *SliceWrites) Add(o SliceWrites) {
	w.Create = append(w.Create, o.Create...)
	w.Update = append(w.Update, o.Update...)
	w.Delete = append(w.Delete, o.Delete...)
}

// Reuse turns each create paired with a delete of the same address type
// into an update of the slice that would be deleted, when reusable says
// that slice may be reused: one write instead of two.
func (w *SliceWrites) Reuse(reusable func(*discoveryv1.EndpointSlice) bool) {
	var keep []*discoveryv1.EndpointSlice
	for _, s := range w.Delete {
		i := slices.IndexFunc(w.Create, func(n *discoveryv1.EndpointSlice) bool { return n.AddressType == s.AddressType })
		if i < 0 || !reusable(s) {
			keep = append(keep, s)
			continue
		}
		reused := w.Create[i]
		w.Create = slices.Delete(w.Create, i, i+1)
		reused.Name, reused.GenerateName, reused.ResourceVersion = s.Name, "", s.ResourceVersion
		w.Update = append(w.Update, reused)
	}
	w.Delete = keep
}

// Writer applies plans for one owner (a Service or Endpoints object).
type Writer struct {
	Client  kubernetes.Interface
	Tracker *SliceTracker
	// Owner names the owner in errors, as "Service ns/name".
	Owner string
	// NoCreates is set while the owner is being deleted: the garbage
	// collector is removing its slices, and new ones would race it.
	NoCreates bool
	// Prepare, when set, edits each slice about to be created or updated.
	Prepare func(*discoveryv1.EndpointSlice)
}

// Apply creates, updates and deletes, recording each write in the
// tracker; in a terminating namespace, creates are dropped silently. wrote
// says whether anything was written.
func (w Writer) Apply(ctx context.Context, namespace string, plan SliceWrites) (wrote bool, err error) {
	api := w.Client.DiscoveryV1().EndpointSlices(namespace)
	prepare := func(s *discoveryv1.EndpointSlice) {
		if w.Prepare != nil {
			w.Prepare(s)
		}
	}
	if !w.NoCreates {
		for _, s := range plan.Create {
			prepare(s)
			created, err := api.Create(ctx, s, metav1.CreateOptions{})
			if apierrors.HasStatusCause(err, corev1.NamespaceTerminatingCause) {
				return wrote, nil
			}
			if err != nil {
				return wrote, fmt.Errorf("failed to create EndpointSlice for %s: %w", w.Owner, err)
			}
			wrote = true
			w.Tracker.Written(created)
		}
	}
	for _, s := range plan.Update {
		prepare(s)
		updated, err := api.Update(ctx, s, metav1.UpdateOptions{})
		if err != nil {
			return wrote, fmt.Errorf("failed to update %s EndpointSlice for %s: %w", s.Name, w.Owner, err)
		}
		wrote = true
		w.Tracker.Written(updated)
	}
	for _, s := range plan.Delete {
		err := api.Delete(ctx, s.Name, metav1.DeleteOptions{})
		if err != nil && !apierrors.IsNotFound(err) {
			return wrote, fmt.Errorf("failed to delete %s EndpointSlice for %s: %w", s.Name, w.Owner, err)
		}
		wrote = true
		w.Tracker.Deleted(s)
	}
	return wrote, nil
}
