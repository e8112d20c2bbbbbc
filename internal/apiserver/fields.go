package apiserver

import (
	"fmt"
	"log/slog"
	"sync"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/managedfields"
	"k8s.io/client-go/applyconfigurations"

	"github.com/svcnet/svcnet/internal/registry"
)

// fieldManagers tracks metadata.managedFields for every write and performs
// server-side apply, using apimachinery's field manager over the schemas
// client-go embeds for the built-in types.
type fieldManagers struct {
	tc managedfields.TypeConverter
	// conv converts between the versions managers wrote at.
	conv storageConverter
	mu   sync.Mutex
	m    map[managerKey]*managedfields.FieldManager
}

// managerKey names a field manager: a resource (a custom resource's
// changes with its definition) and a subresource.
type managerKey struct {
	res *registry.Resource
	sub string
}

func newFieldManagers(set *registry.Set) *fieldManagers {
	return &fieldManagers{tc: applyconfigurations.NewTypeConverter(registry.Scheme), conv: storageConverter{set},
		m: map[managerKey]*managedfields.FieldManager{}}
}

// defaulter runs a kind's strategy defaults, so that applied configurations
// compare against defaulted objects as upstream's do.
type defaulter struct{ res *registry.Resource }

func (d defaulter) Default(obj runtime.Object) { d.res.Strategy.Default(obj) }

func (f *fieldManagers) get(res *registry.Resource, sub string) (*managedfields.FieldManager, error) {
	k := managerKey{res, sub}
	f.mu.Lock()
	defer f.mu.Unlock()
	if fm, ok := f.m[k]; ok {
		return fm, nil
	}
	var fm *managedfields.FieldManager
	var err error
	if res.Unstructured != nil {
		// The hub is the served version itself, as upstream's custom
		// resource handler has it: what apply returns is written as is.
		fm, err = managedfields.NewDefaultCRDFieldManager(res.TypeConverter, unstructuredConverter{}, defaulter{res}, unstructuredConverter{},
			res.Kind, res.Kind.GroupVersion(), sub, nil)
	} else {
		tc := res.TypeConverter
		if tc == nil {
			tc = f.tc
		}
		fm, err = managedfields.NewDefaultFieldManager(tc, f.conv, defaulter{res}, registry.Scheme,
			res.Kind, res.Kind.GroupVersion(), sub, nil)
	}
	if err != nil {
		return nil, fmt.Errorf("field manager for %s: %w", res.Kind, err)
	}
	f.m[k] = fm
	return fm, nil
}

// update records manager's ownership of what changed from live to next.
// Tracking never fails a write: on error the object is stored as given.
func (f *fieldManagers) update(res *registry.Resource, sub string, live, next runtime.Object, manager string) runtime.Object {
	fm, err := f.get(res, sub)
	if err != nil {
		slog.Warn("managed fields not tracked", "kind", res.Kind, "err", err)
		return next
	}
	return fm.UpdateNoErrors(live, next, manager)
}

// apply merges an applied configuration into live as manager, through
// the subresource sub ("" or "status").
func (f *fieldManagers) apply(res *registry.Resource, sub string, live, applied runtime.Object, manager string, force bool) (runtime.Object, error) {
	fm, err := f.get(res, sub)
	if err != nil {
		return nil, err
	}
	return fm.Apply(live, applied, manager, force)
}

// unstructuredConverter makes and converts objects without a Go type for
// the field manager: versions of a custom resource differ only in
// apiVersion (upstream's None conversion).
type unstructuredConverter struct{}

func (unstructuredConverter) New(gvk schema.GroupVersionKind) (runtime.Object, error) {
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(gvk)
	return u, nil
}

func (unstructuredConverter) Convert(in, out, _ interface{}) error {
	src, ok := in.(*unstructured.Unstructured)
	dst, ok2 := out.(*unstructured.Unstructured)
	if !ok || !ok2 {
		return fmt.Errorf("unstructured conversion of %T to %T", in, out)
	}
	dst.Object = runtime.DeepCopyJSON(src.Object)
	return nil
}

func (unstructuredConverter) ConvertToVersion(in runtime.Object, target runtime.GroupVersioner) (runtime.Object, error) {
	u, ok := in.(*unstructured.Unstructured)
	if !ok {
		return nil, fmt.Errorf("unstructured conversion of %T", in)
	}
	gvk, ok := target.KindForGroupVersionKinds([]schema.GroupVersionKind{u.GroupVersionKind()})
	if !ok {
		return nil, fmt.Errorf("%s cannot be converted to %v", u.GroupVersionKind(), target)
	}
	out := u.DeepCopy()
	out.SetGroupVersionKind(gvk)
	return out, nil
}

func (unstructuredConverter) ConvertFieldLabel(_ schema.GroupVersionKind, label, value string) (string, string, error) {
	return label, value, nil
}

// storageConverter converts typed objects for the field managers, which
// compare an object with what managers wrote at other versions: between
// a resource's served and stored versions (registry.StorageVersion) by
// its hooks, otherwise as the scheme does.
type storageConverter struct{ set *registry.Set }

func (c storageConverter) Convert(in, out, ctx interface{}) error {
	return registry.Scheme.Convert(in, out, ctx)
}

func (c storageConverter) ConvertToVersion(in runtime.Object, target runtime.GroupVersioner) (runtime.Object, error) {
	from := kindOf(in)
	is := func(k schema.GroupVersionKind) bool {
		to, ok := target.KindForGroupVersionKinds([]schema.GroupVersionKind{k})
		return ok && to == k && k != from
	}
	for _, r := range c.set.All() {
		switch {
		case r.Storage == nil:
		case from == r.Kind && is(r.Storage.Kind):
			return r.Storage.ToStorage(in)
		case from == r.Storage.Kind && is(r.Kind):
			return r.Storage.FromStorage(in)
		}
	}
	return registry.Scheme.ConvertToVersion(in, target)
}

func (c storageConverter) ConvertFieldLabel(gvk schema.GroupVersionKind, label, value string) (string, string, error) {
	return registry.Scheme.ConvertFieldLabel(gvk, label, value)
}
