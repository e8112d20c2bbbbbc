// Package registry describes every API resource svcnet serves: its names for
// discovery, its place in etcd, and the strategy that defaults, validates and
// prepares objects of that kind before they are stored. It follows upstream's
// pkg/registry: one small folder per kind under internal/registry/<kind>/, all
// implementing the same hooks, so that adding a kind never means adding a
// branch to the API server.
package registry

import (
	"context"
	"fmt"
	"sort"
	"sync"

	"k8s.io/apimachinery/pkg/api/validation"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/managedfields"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/svcnet/svcnet/internal/storage"
)

// Strategy holds a kind's own rules. Generic rules (object metadata, status
// and generation handling, namespace existence) live in the API server.
type Strategy interface {
	// Default fills in defaulted fields, as upstream's SetDefaults_* do. It
	// runs on every write, before validation.
	Default(obj runtime.Object)
	// PrepareForCreate clears what a create may not set.
	PrepareForCreate(obj runtime.Object)
	// PrepareForUpdate carries over from old what an update may not change.
	PrepareForUpdate(obj, old runtime.Object)
	// Validate checks a new object.
	Validate(obj runtime.Object) field.ErrorList
	// ValidateUpdate checks an update against the stored object.
	ValidateUpdate(obj, old runtime.Object) field.ErrorList
}

// Base is the do-nothing Strategy that kinds embed and override.
type Base struct{}

func (Base) Default(runtime.Object)                             {}
func (Base) PrepareForCreate(runtime.Object)                    {}
func (Base) PrepareForUpdate(_, _ runtime.Object)               {}
func (Base) Validate(runtime.Object) field.ErrorList            { return nil }
func (Base) ValidateUpdate(_, _ runtime.Object) field.ErrorList { return nil }

// Column is one column of a `kubectl get` table with the function that fills
// its cell for an object.
type Column struct {
	metav1.TableColumnDefinition
	Cell func(obj runtime.Object) interface{}
	// Undeclared gives every row this cell without a column definition,
	// as upstream's IPAddress printer does with its age: kubectl prints
	// only the declared columns. Undeclared columns come last.
	Undeclared bool
}

// Resource is everything the API server needs to serve one resource.
type Resource struct {
	Kind       schema.GroupVersionKind // the served group, version and kind
	Resource   string                  // plural, lower case: "services"
	Singular   string                  // "service"
	ShortNames []string
	Categories []string // "all" makes `kubectl get all` include it
	Namespaced bool

	// NameValidation checks metadata.name; nil means a DNS-1123 subdomain.
	NameValidation validation.ValidateNameFunc
	// GenerateName makes a name from metadata.generateName; nil appends
	// five random characters, as upstream's SimpleNameGenerator.
	GenerateName func(base string) string
	// Status means the kind has a status subresource: the main resource
	// ignores status changes and a create starts with an empty status.
	Status bool
	// KeepStatusOnCreate keeps the status given on create (nodes, events).
	KeepStatusOnCreate bool
	// Generation means metadata.generation starts at 1 and is bumped on every
	// spec change.
	Generation bool
	// Scale, when set, serves the scale subresource (autoscaling/v1 Scale).
	Scale *ScaleAccess
	// ReturnDeletedObject answers a completed delete with the object rather
	// than a Success Status.
	ReturnDeletedObject bool
	Strategy            Strategy
	// Columns are the table columns for `kubectl get`; nil gives NAME and AGE.
	Columns []Column
	// Fields returns the selectable fields beyond metadata.name and
	// metadata.namespace (for example spec.nodeName for pods).
	Fields func(obj runtime.Object) fields.Set
	// Create, when set, makes the resource virtual, as upstream's review
	// kinds: nothing is stored, create is its only verb, and a create
	// (defaulted and validated by the Strategy) answers what Create returns
	// for it. The request's user is in ctx (authn.UserFrom); namespace is
	// the URL's.
	Create func(ctx context.Context, namespace string, obj runtime.Object) (runtime.Object, error)
	// View, when set, makes the resource a read-only view of state kept
	// elsewhere (metrics.k8s.io's NodeMetrics and PodMetrics): nothing is
	// stored, and get and list are its only verbs.
	View *View
	// Actions are subresources taking only create, each of its own kind
	// (serviceaccounts/token takes a TokenRequest): nothing is stored, and
	// the create answers what the action returns.
	Actions map[string]Action
	// Subresources are update subresources beyond status and scale
	// (certificatesigningrequests/approval): get, update and patch of the
	// whole object, each under rules of its own.
	Subresources map[string]Subresource
	// Unstructured, when set, means the resource's objects have no Go
	// type, as custom resources: they are *unstructured.Unstructured,
	// read and written as JSON or YAML only, under the rules it holds.
	Unstructured *Unstructured
	// Storage, when set, means the objects are stored as another version
	// of the kind (another Resource serves that version from the same
	// prefix) and are converted on every read and write, as upstream's
	// storage versions.
	Storage *StorageVersion
	// StoragePrefix is where the objects live in etcd; empty is
	// "/registry/<resource>/", as upstream's built-in kinds.
	StoragePrefix string
	// TypeConverter describes the objects for server-side apply; nil is
	// client-go's, which knows the types of k8s.io/api.
	TypeConverter managedfields.TypeConverter
}

// Unstructured holds what the API server needs of a resource whose
// objects have no Go type (upstream's custom resource handler).
type Unstructured struct {
	// StorageVersion is the version objects are stored at.
	StorageVersion string
	// Converter converts objects between the definition's versions by
	// its conversion strategy: None changes only apiVersion, Webhook
	// asks the definition's conversion webhook. It does not change its
	// argument.
	Converter runtime.ObjectConvertor
	// Prune drops the fields the schema does not declare from a decoded
	// object and returns their paths ("spec.foo"), as upstream's pruning.
	Prune func(obj map[string]interface{}) []string
}

// StorageVersion converts the objects of a resource served at one version
// and stored at another.
type StorageVersion struct {
	// Kind is the stored kind.
	Kind schema.GroupVersionKind
	// ToStorage converts a served object to the stored kind, with that
	// kind's defaults; FromStorage converts a stored object to the
	// served kind. Neither changes its argument.
	ToStorage, FromStorage func(runtime.Object) (runtime.Object, error)
}

// Prefix is the etcd prefix holding the resource's objects.
func (r *Resource) Prefix() string {
	if r.StoragePrefix != "" {
		return r.StoragePrefix
	}
	return "/registry/" + r.Resource + "/"
}

// Subresource is an update subresource whose writes change only part of
// the object, as upstream's approval strategy of CertificateSigningRequests.
type Subresource struct {
	// PrepareForUpdate carries over from old what a write through the
	// subresource may not change, in place of the Strategy's.
	PrepareForUpdate func(obj, old runtime.Object)
	// ValidateUpdate checks the write, in place of the Strategy's.
	ValidateUpdate func(obj, old runtime.Object) field.ErrorList
}

// View answers the reads of a read-only resource.
type View struct {
	// Get returns the named object, or an API error (NotFound).
	Get func(ctx context.Context, namespace, name string) (runtime.Object, error)
	// List returns the objects of namespace ("" for every namespace, and
	// for a cluster-scoped resource); the API server applies the
	// request's label and field selectors.
	List func(ctx context.Context, namespace string) ([]runtime.Object, error)
}

// Action is a create-only subresource.
type Action struct {
	// Kind is what the create posts and gets back.
	Kind schema.GroupVersionKind
	// Create acts on the object named by the URL with the posted one (its
	// kind's defaults applied); the request's user is in ctx.
	Create func(ctx context.Context, namespace, name string, obj runtime.Object) (runtime.Object, error)
}

// ScaleAccess reads and writes the replica count of a scalable kind.
type ScaleAccess struct {
	// Get returns spec.replicas, status.replicas and the selector string.
	Get func(obj runtime.Object) (spec, status int32, selector string)
	// Set writes spec.replicas.
	Set func(obj runtime.Object, replicas int32)
}

// GroupResource returns the resource with its group.
func (r *Resource) GroupResource() schema.GroupResource {
	return schema.GroupResource{Group: r.Kind.Group, Resource: r.Resource}
}

// GroupVersionResource returns the resource with its group and version.
func (r *Resource) GroupVersionResource() schema.GroupVersionResource {
	return r.Kind.GroupVersion().WithResource(r.Resource)
}

// ListKind is the kind of a list of this resource.
func (r *Resource) ListKind() schema.GroupVersionKind {
	return r.Kind.GroupVersion().WithKind(r.Kind.Kind + "List")
}

// Set is every served resource, indexed for the API server's routing: the
// built-in ones it is made with, and those added and removed while the
// server runs (custom resources, as their definitions come and go).
type Set struct {
	mu    sync.RWMutex
	gen   uint64 // bumped on every change
	all   []*Resource
	byGVR map[schema.GroupVersionResource]*Resource
	byGVK map[schema.GroupVersionKind]*Resource
	// owned maps an owner (a CustomResourceDefinition's name) to what it
	// added.
	owned map[string][]*Resource
	// changed, made when someone waits for the next change, is closed
	// on it.
	changed chan struct{}
}

// NewSet indexes resources and rejects duplicates.
func NewSet(resources ...*Resource) (*Set, error) {
	s := &Set{byGVR: map[schema.GroupVersionResource]*Resource{},
		byGVK: map[schema.GroupVersionKind]*Resource{}, owned: map[string][]*Resource{}}
	for _, r := range resources {
		gvr := r.GroupVersionResource()
		if _, dup := s.byGVR[gvr]; dup {
			return nil, fmt.Errorf("resource %s registered twice", gvr)
		}
		s.index(r)
	}
	s.sort()
	return s, nil
}

func (s *Set) index(r *Resource) {
	if r.Strategy == nil {
		r.Strategy = Base{}
	}
	s.byGVR[r.GroupVersionResource()] = r
	s.byGVK[r.Kind] = r
	s.all = append(s.all, r)
}

func (s *Set) sort() {
	sort.SliceStable(s.all, func(i, j int) bool { return s.all[i].Resource < s.all[j].Resource })
}

// Replace makes resources the ones owner serves, in place of what it
// served before; none removes them. A resource another owner or the
// built-in set already serves is refused.
func (s *Set) Replace(owner string, resources ...*Resource) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	mine := map[schema.GroupVersionResource]bool{}
	for _, r := range s.owned[owner] {
		mine[r.GroupVersionResource()] = true
	}
	for _, r := range resources {
		gvr := r.GroupVersionResource()
		if _, taken := s.byGVR[gvr]; taken && !mine[gvr] {
			return fmt.Errorf("resource %s is already served", gvr)
		}
	}
	old := s.owned[owner]
	s.all = without(s.all, old)
	for _, r := range old {
		delete(s.byGVR, r.GroupVersionResource())
		delete(s.byGVK, r.Kind)
	}
	delete(s.owned, owner)
	for _, r := range resources {
		s.index(r)
	}
	if len(resources) > 0 {
		s.owned[owner] = resources
	}
	s.sort()
	s.gen++
	if s.changed != nil {
		close(s.changed)
		s.changed = nil
	}
	return nil
}

// without returns all without the resources of drop.
func without(all, drop []*Resource) []*Resource {
	if len(drop) == 0 {
		return all
	}
	gone := map[*Resource]bool{}
	for _, r := range drop {
		gone[r] = true
	}
	out := make([]*Resource, 0, len(all))
	for _, r := range all {
		if !gone[r] {
			out = append(out, r)
		}
	}
	return out
}

// Generation changes whenever the set does, so that what is computed from
// it (discovery, OpenAPI) knows when to compute again.
func (s *Set) Generation() uint64 {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.gen
}

// Changed returns a channel that is closed at the set's next change, so
// that a loop following the served group versions (the APIService
// registration) reads the set again: take the channel, read the set, then
// wait on it.
func (s *Set) Changed() <-chan struct{} {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.changed == nil {
		s.changed = make(chan struct{})
	}
	return s.changed
}

// All returns the resources sorted by plural name.
func (s *Set) All() []*Resource {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return append([]*Resource(nil), s.all...)
}

// ByGVR finds a resource by group, version and plural.
func (s *Set) ByGVR(gvr schema.GroupVersionResource) *Resource {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.byGVR[gvr]
}

// ByGVK finds a resource by its kind.
func (s *Set) ByGVK(gvk schema.GroupVersionKind) *Resource {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.byGVK[gvk]
}

// GroupVersions returns the served group-versions, core first, then groups in
// name order.
func (s *Set) GroupVersions() []schema.GroupVersion {
	seen := map[schema.GroupVersion]bool{}
	var out []schema.GroupVersion
	for _, r := range s.All() {
		gv := r.Kind.GroupVersion()
		if !seen[gv] {
			seen[gv] = true
			out = append(out, gv)
		}
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Group != out[j].Group {
			return out[i].Group < out[j].Group
		}
		return out[i].Version < out[j].Version
	})
	return out
}

// StatusUpdater is implemented by strategies whose status writes keep some
// of the stored metadata or status.
type StatusUpdater interface {
	// PrepareForStatusUpdate carries over from old what a status write
	// may not change (upstream's status strategy): by default it stores
	// status and metadata (labels, annotations, finalizers, owner
	// references), never spec.
	PrepareForStatusUpdate(obj, old runtime.Object)
}

// UpdateAdmitter is implemented by strategies whose updates are refused
// after asking what the writer may do, as upstream's validating admission
// plugins (CertificateApproval, CertificateSigning).
type UpdateAdmitter interface {
	// AdmitUpdate runs on an update through subresource sub ("" for the
	// object itself) once it is prepared and validated, with the
	// requesting user in ctx. An error (an API error, upstream's
	// Forbidden) refuses the write.
	AdmitUpdate(ctx context.Context, sub string, obj, old runtime.Object) error
}

// Admitter is implemented by strategies whose new objects are changed or
// refused after reading other objects, as upstream's admission plugins
// (the ServiceAccount admission of pods).
type Admitter interface {
	// Admit runs on create, after Default and before PrepareForCreate
	// and validation, with the requesting user in ctx. An error (an API
	// error, upstream's Forbidden) refuses the create.
	Admit(ctx context.Context, obj runtime.Object) error
}

// Deleter is implemented by strategies whose objects are not removed at once
// on delete: graceful pod termination, namespace finalization, protected
// objects.
type Deleter interface {
	// PrepareForDelete may refuse the delete (returning an API error), or
	// mark obj as being deleted and return pending=true, in which case obj
	// is stored instead of removed.
	PrepareForDelete(obj runtime.Object, opts *metav1.DeleteOptions) (pending bool, err error)
}

// DeleteRefuser is implemented by strategies that refuse the delete of
// some objects by their name alone, as upstream's PriorityClass storage
// refuses the system classes: a DELETE of one object asks before anything
// is read (a missing object is refused too); a deletecollection, which
// upstream's store runs without that check, does not ask.
type DeleteRefuser interface {
	// RefuseDelete returns the refusal (an API error) of deleting name,
	// or nil.
	RefuseDelete(name string) error
}

// Writer is implemented by strategies whose objects own state stored beside
// them in etcd, such as the Service IP and port allocation bitmaps.
type Writer interface {
	// PrepareWrite runs after validation, right before the object is
	// stored, with the object to store (nil on delete) and the stored one
	// (nil on create). It may fill fields of obj (allocated values) and
	// returns the conditions and operations that must commit in the same
	// etcd transaction as the object. When one of those conditions fails
	// the whole write starts again from a fresh read. With dryRun nothing
	// will be committed. Unless it fails, it returns done, which the API
	// server calls with the outcome of the write (nil once committed), or
	// with nil at once for a dry run.
	PrepareWrite(ctx context.Context, obj, old runtime.Object, dryRun bool) (extra storage.Extra, done func(error), err error)
}
