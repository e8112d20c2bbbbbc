// Package proxy is svcnet's kube-proxy core: a change tracker turns
// informer events on Services and EndpointSlices into a pending change per
// Service, and a sync loop hands the merged changes to a backend (nftables,
// or the userspace proxy) at most once per minimum sync period (except for a
// change that gives traffic the verdict it lacks: a new Service, or a
// rejected Service's first endpoints, synced at once), with a
// full resync on start and on a timer. Backends see the same Update whatever
// they program, so they share the tracking, the endpoint choice (ready
// ones, else serving terminating ones), the metrics and the health-check
// servers of externalTrafficPolicy Local.
package proxy

import (
	"maps"
	"reflect"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/types"
)

// Change is one Service's state before (as last handed to the backend)
// and after the pending events; nil means absent.
type Change struct {
	Previous, Current *Service
}

// Update is what a backend applies in one sync.
type Update struct {
	// Full asks the backend to rebuild everything from Services rather
	// than apply Changed alone.
	Full bool
	// Services is every Service after the update, by name.
	Services map[types.NamespacedName]*Service
	// Changed are the Services that differ from the previous update.
	Changed map[types.NamespacedName]Change
}

// Tracker accumulates Service and EndpointSlice events. Any number of
// events for one Service between two syncs merge into one pending change,
// and a change that cancels itself out (an add then a delete) is no
// change at all.
type Tracker struct {
	node string

	mu       sync.Mutex
	services map[types.NamespacedName]*corev1.Service
	slices   map[types.NamespacedName]map[string]*discoveryv1.EndpointSlice
	// dirty names the Services with events since the last Take, with the
	// EndpointSlice change times (last-change-trigger-time) seen for them.
	dirty map[types.NamespacedName][]time.Time
	// applied is the state handed out by the last Take.
	applied map[types.NamespacedName]*Service
	// rejecting names the applied Services that backends reject on some
	// port for want of endpoints; urgent names the Services whose pending
	// state needs a sync at once (see noteUrgent).
	rejecting map[types.NamespacedName]bool
	urgent    map[types.NamespacedName]bool
}

// NewTracker tracks Services for the node named node (its endpoints are
// the local ones).
func NewTracker(node string) *Tracker {
	return &Tracker{
		node:      node,
		services:  map[types.NamespacedName]*corev1.Service{},
		slices:    map[types.NamespacedName]map[string]*discoveryv1.EndpointSlice{},
		dirty:     map[types.NamespacedName][]time.Time{},
		applied:   map[types.NamespacedName]*Service{},
		rejecting: map[types.NamespacedName]bool{},
		urgent:    map[types.NamespacedName]bool{},
	}
}

// ServiceUpdated records svc's new state; nil current means deleted (then
// old names it).
func (t *Tracker) ServiceUpdated(old, current *corev1.Service) {
	obj := current
	if obj == nil {
		obj = old
	}
	if obj == nil {
		return
	}
	name := types.NamespacedName{Namespace: obj.Namespace, Name: obj.Name}
	t.mu.Lock()
	defer t.mu.Unlock()
	if current == nil {
		delete(t.services, name)
	} else {
		t.services[name] = current
	}
	if _, ok := t.dirty[name]; !ok {
		t.dirty[name] = nil
	}
	t.noteUrgent(name)
}

// SliceUpdated records an EndpointSlice's new state, or its deletion.
func (t *Tracker) SliceUpdated(slice *discoveryv1.EndpointSlice, deleted bool) {
	svc := slice.Labels[discoveryv1.LabelServiceName]
	if svc == "" {
		return
	}
	name := types.NamespacedName{Namespace: slice.Namespace, Name: svc}
	t.mu.Lock()
	defer t.mu.Unlock()
	if deleted {
		delete(t.slices[name], slice.Name)
		if len(t.slices[name]) == 0 {
			delete(t.slices, name)
		}
	} else {
		if t.slices[name] == nil {
			t.slices[name] = map[string]*discoveryv1.EndpointSlice{}
		}
		t.slices[name][slice.Name] = slice
	}
	times := t.dirty[name]
	if ts, err := time.Parse(time.RFC3339, slice.Annotations[corev1.EndpointsLastChangeTriggerTime]); err == nil && !deleted {
		times = append(times, ts)
	}
	t.dirty[name] = times
	t.noteUrgent(name)
}

// noteUrgent records whether name's pending state gives traffic a
// verdict the applied state lacks, so that it must not wait for the
// minimum sync period:
//   - a new Service with cluster IP ports: until they are programmed,
//     connections to them (cluster DNS answers the name at once) leave
//     un-NATed, and conntrack keeps every retransmission of theirs on that
//     path for minutes;
//   - the first usable endpoints of a port that backends reject for want
//     of them (in an address family).
//
// Only new and rejecting Services pay for building the pending state.
func (t *Tracker) noteUrgent(name types.NamespacedName) {
	prev, applied := t.applied[name]
	if applied && !t.rejecting[name] {
		return
	}
	switch cur := t.pending(name); {
	case cur == nil:
		delete(t.urgent, name)
	case !applied && len(cur.Ports) > 0, applied && unrejects(prev, cur):
		t.urgent[name] = true
	default:
		delete(t.urgent, name)
	}
}

// Urgent reports whether the pending changes must be synced at once (see
// noteUrgent).
func (t *Tracker) Urgent() bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return len(t.urgent) > 0
}

// pending is name's Service as the events so far make it, nil when it
// does not exist.
func (t *Tracker) pending(name types.NamespacedName) *Service {
	svc, ok := t.services[name]
	if !ok {
		return nil
	}
	list := make([]*discoveryv1.EndpointSlice, 0, len(t.slices[name]))
	for _, s := range t.slices[name] {
		list = append(list, s)
	}
	return newService(svc, list, t.node)
}

// Pending reports whether events wait for a Take.
func (t *Tracker) Pending() bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return len(t.dirty) > 0
}

// Take hands out the merged pending changes (full: every Service) and the
// trigger times of the EndpointSlice changes they carry, and clears them.
func (t *Tracker) Take(full bool) (Update, []time.Time) {
	t.mu.Lock()
	defer t.mu.Unlock()
	u := Update{Full: full, Changed: map[types.NamespacedName]Change{}}
	var triggers []time.Time
	for name, times := range t.dirty {
		triggers = append(triggers, times...)
		cur := t.pending(name)
		prev := t.applied[name]
		if reflect.DeepEqual(prev, cur) {
			continue
		}
		u.Changed[name] = Change{Previous: prev, Current: cur}
		if cur == nil {
			delete(t.applied, name)
		} else {
			t.applied[name] = cur
		}
		if cur != nil && cur.rejects() {
			t.rejecting[name] = true
		} else {
			delete(t.rejecting, name)
		}
	}
	clear(t.dirty)
	clear(t.urgent)
	u.Services = maps.Clone(t.applied)
	return u, triggers
}
