package endpointutil

import (
	"fmt"
	"slices"
	"sort"
	"strings"
	"sync"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/validation"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/cache"

	"github.com/svcnet/svcnet/internal/informer"
)

// EndpointKey is an endpoint's identity: its sorted addresses, hostname
// and target. Everything else about an endpoint (conditions, node, zone,
// hints) may change in place.
func EndpointKey(ep *discoveryv1.Endpoint) string {
	addrs := slices.Clone(ep.Addresses)
	slices.Sort(addrs)
	var b strings.Builder
	b.WriteString(strings.Join(addrs, ","))
	b.WriteByte('|')
	if ep.Hostname != nil {
		b.WriteString(*ep.Hostname)
	}
	b.WriteByte('|')
	if ep.TargetRef != nil {
		b.WriteString(ep.TargetRef.Namespace + "/" + ep.TargetRef.Name)
	}
	return b.String()
}

// EndpointSet holds desired endpoints by identity.
type EndpointSet map[string]*discoveryv1.Endpoint

// Insert adds ep under its identity.
func (s EndpointSet) Insert(ep *discoveryv1.Endpoint) { s[EndpointKey(ep)] = ep }

// Sorted lists the endpoints in identity order, so that slices fill the
// same way every time.
func (s EndpointSet) Sorted() []*discoveryv1.Endpoint {
	keys := make([]string, 0, len(s))
	for k := range s {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	out := make([]*discoveryv1.Endpoint, len(keys))
	for i, k := range keys {
		out[i] = s[k]
	}
	return out
}

// SameEndpoint says whether two endpoints of one identity are equal in
// everything else that is published, ignoring the target's resourceVersion.
func SameEndpoint(a, b *discoveryv1.Endpoint) bool {
	ta, tb := a.TargetRef, b.TargetRef
	if ta != nil && tb != nil {
		ca, cb := *ta, *tb
		ca.ResourceVersion, cb.ResourceVersion = "", ""
		if ca != cb {
			return false
		}
	} else if (ta == nil) != (tb == nil) {
		return false
	}
	return apiequality.Semantic.DeepEqual(a.NodeName, b.NodeName) &&
		apiequality.Semantic.DeepEqual(a.Zone, b.Zone) &&
		apiequality.Semantic.DeepEqual(a.Conditions, b.Conditions) &&
		apiequality.Semantic.DeepEqual(a.Hints, b.Hints)
}

// PortsKey identifies a set of endpoint ports regardless of order; nil and
// empty are the same set.
func PortsKey(ports []discoveryv1.EndpointPort) string {
	items := make([]string, len(ports))
	for i, p := range ports {
		var name, proto, app string
		var port int32
		if p.Name != nil {
			name = *p.Name
		}
		if p.Protocol != nil {
			proto = string(*p.Protocol)
		}
		if p.Port != nil {
			port = *p.Port
		}
		if p.AppProtocol != nil {
			app = *p.AppProtocol
		}
		items[i] = fmt.Sprintf("%s/%s/%d/%s", name, proto, port, app)
	}
	sort.Strings(items)
	return strings.Join(items, ",")
}

// SlicePrefix is the generateName of a new slice for the Service or
// Endpoints name: "<name>-" when that is a valid prefix, else name.
func SlicePrefix(name string) string {
	prefix := name + "-"
	if len(validation.NameIsDNSSubdomain(prefix, true)) != 0 {
		return name
	}
	return prefix
}

// ServiceKey is the namespace/name of the Service a slice belongs to, from
// its kubernetes.io/service-name label.
func ServiceKey(slice *discoveryv1.EndpointSlice) (string, bool) {
	name := slice.Labels[discoveryv1.LabelServiceName]
	return slice.Namespace + "/" + name, name != ""
}

// deletionExpected marks a slice the controller deleted.
const deletionExpected = -1

// SliceTracker remembers the generation of every slice a controller wrote,
// per Service (or Endpoints), so that the controller can tell its own
// writes coming back through the informer from changes made by others, and
// notice when its cache is older than its writes.
type SliceTracker struct {
	mu       sync.Mutex
	services map[types.NamespacedName]*trackedService
}

type trackedService struct {
	uid         types.UID
	generations map[types.UID]int64
}

// NewSliceTracker returns an empty tracker.
func NewSliceTracker() *SliceTracker {
	return &SliceTracker{services: map[types.NamespacedName]*trackedService{}}
}

func owner(slice *discoveryv1.EndpointSlice) types.NamespacedName {
	return types.NamespacedName{Namespace: slice.Namespace, Name: slice.Labels[discoveryv1.LabelServiceName]}
}

// generations returns the tracked generations of the slice's owner,
// creating them when create is set. The caller holds mu.
func (t *SliceTracker) generations(nn types.NamespacedName, create bool) map[types.UID]int64 {
	s := t.services[nn]
	if s == nil {
		if !create {
			return nil
		}
		s = &trackedService{generations: map[types.UID]int64{}}
		t.services[nn] = s
	}
	return s.generations
}

// Written records a slice as the controller's create or update returned it.
func (t *SliceTracker) Written(slice *discoveryv1.EndpointSlice) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.generations(owner(slice), true)[slice.UID] = slice.Generation
}

// Deleted records that the controller deleted a slice.
func (t *SliceTracker) Deleted(slice *discoveryv1.EndpointSlice) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.generations(owner(slice), true)[slice.UID] = deletionExpected
}

// ShouldSync says whether an observed slice is news to the controller:
// untracked, or newer than the controller's own write.
func (t *SliceTracker) ShouldSync(slice *discoveryv1.EndpointSlice) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	g, ok := t.generations(owner(slice), false)[slice.UID]
	return !ok || slice.Generation > g
}

// ObserveDeletion forgets a deleted slice and says whether the controller
// itself deleted it. Unlike upstream, a slice this process never wrote
// (say, written by the previous leader) counts as unexpected, so that a
// slice deleted by hand always comes back.
func (t *SliceTracker) ObserveDeletion(slice *discoveryv1.EndpointSlice) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	gens := t.generations(owner(slice), false)
	g, ok := gens[slice.UID]
	delete(gens, slice.UID)
	return ok && g == deletionExpected
}

// Stale says whether the cached slices of a Service are older than the
// controller's writes: a slice older than written, a deleted slice still
// listed, or a written slice missing. A Service recreated under the same
// name starts afresh.
func (t *SliceTracker) Stale(namespace, name string, uid types.UID, cached []*discoveryv1.EndpointSlice) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	nn := types.NamespacedName{Namespace: namespace, Name: name}
	s := t.services[nn]
	if s == nil {
		t.services[nn] = &trackedService{uid: uid, generations: map[types.UID]int64{}}
		return false
	}
	if s.uid != "" && uid != "" && s.uid != uid {
		s.generations = map[types.UID]int64{}
	}
	s.uid = uid
	seen := make(map[types.UID]bool, len(cached))
	for _, slice := range cached {
		seen[slice.UID] = true
		if g, ok := s.generations[slice.UID]; ok && (g == deletionExpected || g > slice.Generation) {
			return true
		}
	}
	for id, g := range s.generations {
		if g != deletionExpected && !seen[id] {
			return true
		}
	}
	return false
}

// Forget drops everything tracked for a Service.
func (t *SliceTracker) Forget(namespace, name string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	delete(t.services, types.NamespacedName{Namespace: namespace, Name: name})
}

// OwnedBy says whether the slice has an owner reference to the object.
func OwnedBy(slice *discoveryv1.EndpointSlice, kind string, uid types.UID) bool {
	for _, o := range slice.OwnerReferences {
		if o.UID == uid && o.Kind == kind && o.APIVersion == corev1.SchemeGroupVersion.String() {
			return true
		}
	}
	return false
}

// SliceEvents returns the handlers of the slice informer of a controller
// whose slices carry managedBy: for a slice of its own that someone else
// created, changed or deleted (the tracker tells the controller's own
// writes apart), and for slices moved between Services or controllers by a
// label change, it calls queue with the Service (or Endpoints) key.
func SliceEvents(managedBy string, tracker *SliceTracker, queue func(key string)) cache.ResourceEventHandlerFuncs {
	managed := func(s *discoveryv1.EndpointSlice) bool { return s.Labels[discoveryv1.LabelManagedBy] == managedBy }
	queueFor := func(s *discoveryv1.EndpointSlice) {
		if key, ok := ServiceKey(s); ok {
			queue(key)
		}
	}
	return cache.ResourceEventHandlerFuncs{
		AddFunc: func(obj any) {
			if s, ok := obj.(*discoveryv1.EndpointSlice); ok && managed(s) && tracker.ShouldSync(s) {
				queueFor(s)
			}
		},
		UpdateFunc: func(old, cur any) {
			prev, ok1 := old.(*discoveryv1.EndpointSlice)
			s, ok2 := cur.(*discoveryv1.EndpointSlice)
			if !ok1 || !ok2 {
				return
			}
			// Label changes keep the generation, so they are looked at here.
			if prev.Labels[discoveryv1.LabelServiceName] != s.Labels[discoveryv1.LabelServiceName] {
				queueFor(prev)
				queueFor(s)
				return
			}
			if managed(prev) != managed(s) || (managed(s) && tracker.ShouldSync(s)) {
				queueFor(s)
			}
		},
		DeleteFunc: func(obj any) {
			if s, ok := informer.Object[*discoveryv1.EndpointSlice](obj); ok && managed(s) && !tracker.ObserveDeletion(s) {
				queueFor(s)
			}
		},
	}
}
