package garbagecollector

import (
	"slices"
	"sync"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// objectRef identifies an object of any kind.
type objectRef struct {
	APIVersion, Kind, Namespace, Name string
	UID                               types.UID
}

func (r objectRef) String() string {
	if r.Namespace == "" {
		return r.Kind + " " + r.Name
	}
	return r.Kind + " " + r.Namespace + "/" + r.Name
}

// node is one object in the ownership graph. A virtual node is known only
// from an ownerReference, not yet (or never) seen by an informer.
type node struct {
	ref        objectRef
	virtual    bool
	owners     []metav1.OwnerReference
	dependents map[types.UID]*node
	deleting   bool
	finalizers []string
}

func (n *node) has(finalizer string) bool { return slices.Contains(n.finalizers, finalizer) }

// deletingDependents says whether the object waits, in foreground
// deletion, for its blocking dependents to go.
func (n *node) deletingDependents() bool {
	return n.deleting && n.has(metav1.FinalizerDeleteDependents)
}

// blocks says whether the dependent's reference to owner blocks the
// owner's foreground deletion.
func (n *node) blocks(owner types.UID) bool {
	for _, o := range n.owners {
		if o.UID == owner {
			return o.BlockOwnerDeletion != nil && *o.BlockOwnerDeletion
		}
	}
	return false
}

// view is a copy of a node and its dependents for one sync, taken under
// the graph's lock.
type view struct {
	node
	dependents []dependentView
}

type dependentView struct {
	ref      objectRef
	blocking bool
	deleting bool
	// deletingDependents: the dependent waits, in foreground deletion,
	// for dependents of its own.
	deletingDependents bool
}

// absentLimit bounds the memory of deleted UIDs; forgetting one only costs
// a GET.
const absentLimit = 10000

// graph is the ownership graph built from every watched object's
// ownerReferences.
type graph struct {
	mu     sync.Mutex
	nodes  map[types.UID]*node
	absent map[types.UID]bool
	// namespaced says whether a kind is namespaced, to place virtual
	// owners.
	namespaced func(apiVersion, kind string) bool
}

func newGraph(namespaced func(apiVersion, kind string) bool) *graph {
	return &graph{nodes: map[types.UID]*node{}, absent: map[types.UID]bool{}, namespaced: namespaced}
}

// observe applies an added or updated object and returns the UIDs whose
// sync the change calls for.
func (g *graph) observe(ref objectRef, m metav1.Object) []types.UID {
	g.mu.Lock()
	defer g.mu.Unlock()
	n := g.nodes[ref.UID]
	if n == nil {
		n = &node{dependents: map[types.UID]*node{}}
		g.nodes[ref.UID] = n
	}
	wasDeletingDependents := n.deletingDependents()
	var queue []types.UID
	if n.virtual {
		// Dependents judged while the owner was virtual are judged again.
		queue = append(queue, keys(n.dependents)...)
	}
	oldOwners := n.owners
	n.ref, n.virtual = ref, false
	n.owners = m.GetOwnerReferences()
	n.deleting = m.GetDeletionTimestamp() != nil
	n.finalizers = m.GetFinalizers()

	for _, o := range oldOwners {
		owner := g.nodes[o.UID]
		if owner == nil {
			continue
		}
		if i := slices.IndexFunc(n.owners, func(r metav1.OwnerReference) bool { return r.UID == o.UID }); i < 0 {
			delete(owner.dependents, ref.UID)
			if owner.deletingDependents() {
				queue = append(queue, owner.ref.UID) // one blocker fewer
			}
		} else if owner.deletingDependents() && !n.blocks(o.UID) {
			queue = append(queue, owner.ref.UID) // no longer blocking
		}
	}
	for _, o := range n.owners {
		owner := g.nodes[o.UID]
		if owner == nil {
			owner = &node{virtual: true, dependents: map[types.UID]*node{}, ref: objectRef{
				APIVersion: o.APIVersion, Kind: o.Kind, Name: o.Name, UID: o.UID,
			}}
			if g.namespaced(o.APIVersion, o.Kind) {
				owner.ref.Namespace = ref.Namespace
			}
			g.nodes[o.UID] = owner
			queue = append(queue, o.UID) // find out whether it exists
		}
		owner.dependents[ref.UID] = n
		if g.absent[o.UID] || owner.deletingDependents() {
			queue = append(queue, ref.UID)
		}
	}
	switch {
	case n.deleting && n.has(metav1.FinalizerOrphanDependents):
		queue = append(queue, ref.UID)
	case n.deletingDependents() && !wasDeletingDependents:
		queue = append(append(queue, ref.UID), keys(n.dependents)...)
	}
	return queue
}

// remove applies a deleted object (or a virtual one found absent) and
// returns the UIDs whose sync that calls for: its dependents, and owners
// waiting for it.
func (g *graph) remove(uid types.UID) []types.UID {
	g.mu.Lock()
	defer g.mu.Unlock()
	n := g.nodes[uid]
	if n == nil {
		return nil
	}
	delete(g.nodes, uid)
	if len(g.absent) >= absentLimit {
		clear(g.absent)
	}
	g.absent[uid] = true
	queue := keys(n.dependents)
	for _, o := range n.owners {
		if owner := g.nodes[o.UID]; owner != nil {
			delete(owner.dependents, uid)
			if owner.deletingDependents() {
				queue = append(queue, o.UID)
			} else if owner.virtual && len(owner.dependents) == 0 {
				delete(g.nodes, o.UID)
			}
		}
	}
	// Dependents keep their references; they are judged against the
	// absent owner.
	if len(n.dependents) > 0 {
		g.nodes[uid] = &node{ref: n.ref, virtual: true, dependents: n.dependents}
	}
	return queue
}

// view returns a copy of the node for a sync, nil when unknown.
func (g *graph) view(uid types.UID) *view {
	g.mu.Lock()
	defer g.mu.Unlock()
	n := g.nodes[uid]
	if n == nil {
		return nil
	}
	v := &view{node: *n}
	v.owners = slices.Clone(n.owners)
	v.finalizers = slices.Clone(n.finalizers)
	v.node.dependents = nil
	for _, d := range n.dependents {
		v.dependents = append(v.dependents, dependentView{ref: d.ref, blocking: d.blocks(uid), deleting: d.deleting,
			deletingDependents: d.deletingDependents()})
	}
	return v
}

// owner returns what the graph knows of an owner: present says the object
// was observed with that UID; absent that it is known to be gone.
func (g *graph) owner(uid types.UID) (n node, present, absent bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.absent[uid] {
		return node{}, false, true
	}
	if o := g.nodes[uid]; o != nil && !o.virtual {
		return node{ref: o.ref, deleting: o.deleting, finalizers: slices.Clone(o.finalizers)}, true, false
	}
	return node{}, false, false
}

// markAbsent records an owner found gone by a live lookup.
func (g *graph) markAbsent(uid types.UID) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if len(g.absent) >= absentLimit {
		clear(g.absent)
	}
	g.absent[uid] = true
}

func keys(m map[types.UID]*node) []types.UID {
	out := make([]types.UID, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	return out
}
