// Package controllerref claims objects for a controlling owner, as
// upstream's ControllerRefManager: an owner keeps the objects whose
// controller reference names it and that its selector still matches,
// adopts orphans that its selector matches, and releases the objects it
// controls that its selector no longer matches. Adoption and release are
// strategic merge patches of metadata.ownerReferences that carry the
// object's UID as a precondition, so a recreated object of the same name is
// never touched. It also builds the pods controllers create from their
// templates, owned from the start.
package controllerref

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"slices"

	corev1 "k8s.io/api/core/v1"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
)

// Patch applies a strategic merge patch to the named object.
type Patch func(ctx context.Context, namespace, name string, patch []byte) error

// Owner is the controller that claims objects; one Owner serves one sync.
type Owner struct {
	// Object is the owner as the controller's cache has it.
	Object metav1.Object
	// Kind is the owner's group, version and kind.
	Kind schema.GroupVersionKind
	// Selector selects the objects the owner wants.
	Selector labels.Selector
	// Fresh reads the owner from the API server, bypassing caches. Before
	// its first adoption the owner is read again: an owner that is gone,
	// recreated under the same name, or being deleted adopts nothing.
	Fresh func(ctx context.Context) (metav1.Object, error)
	// Patch patches a claimed object.
	Patch Patch

	checked bool
}

// Claim returns the objects the owner controls once orphans matching its
// selector are adopted and controlled objects it no longer selects are
// released. Objects controlled by another owner are left alone, and so are
// objects that vanish while being patched.
func Claim[T metav1.Object](ctx context.Context, o *Owner, objects []T) ([]T, error) {
	var claimed []T
	for _, obj := range objects {
		ok, err := o.claim(ctx, obj)
		if err != nil {
			return claimed, err
		}
		if ok {
			claimed = append(claimed, obj)
		}
	}
	return claimed, nil
}

func (o *Owner) claim(ctx context.Context, obj metav1.Object) (bool, error) {
	matches := o.Selector.Matches(labels.Set(obj.GetLabels()))
	if ref := metav1.GetControllerOfNoCopy(obj); ref != nil {
		switch {
		case ref.UID != o.Object.GetUID():
			return false, nil
		case matches:
			return true, nil
		case o.Object.GetDeletionTimestamp() != nil:
			// An owner on its way out releases nothing: the garbage
			// collector deals with what it owns.
			return false, nil
		}
		_, err := o.patch(ctx, obj, "release", o.releasePatch(obj))
		return false, err
	}
	if !matches || o.Object.GetDeletionTimestamp() != nil || obj.GetDeletionTimestamp() != nil ||
		obj.GetNamespace() != o.Object.GetNamespace() {
		return false, nil
	}
	if err := o.canAdopt(ctx); err != nil {
		return false, err
	}
	return o.patch(ctx, obj, "adopt", o.adoptPatch(obj))
}

// canAdopt reads the owner again, once per claim round.
func (o *Owner) canAdopt(ctx context.Context) error {
	if o.checked {
		return nil
	}
	fresh, err := o.Fresh(ctx)
	if err != nil {
		return fmt.Errorf("recheck %s %s/%s before adopting: %w", o.Kind.Kind, o.Object.GetNamespace(), o.Object.GetName(), err)
	}
	if fresh.GetUID() != o.Object.GetUID() {
		return fmt.Errorf("%s %s/%s was recreated (uid %s, want %s): not adopting", o.Kind.Kind, o.Object.GetNamespace(), o.Object.GetName(), fresh.GetUID(), o.Object.GetUID())
	}
	if fresh.GetDeletionTimestamp() != nil {
		return fmt.Errorf("%s %s/%s is being deleted: not adopting", o.Kind.Kind, o.Object.GetNamespace(), o.Object.GetName())
	}
	o.checked = true
	return nil
}

// patch applies an adoption or release and says whether it did; an object
// that is gone, or whose UID no longer matches (it was recreated), is
// skipped.
func (o *Owner) patch(ctx context.Context, obj metav1.Object, what string, data []byte) (bool, error) {
	err := o.Patch(ctx, obj.GetNamespace(), obj.GetName(), data)
	switch {
	case err == nil:
		return true, nil
	case apierrors.IsNotFound(err) || apierrors.IsInvalid(err) || apierrors.IsConflict(err):
		return false, nil
	}
	return false, fmt.Errorf("%s %s/%s for %s %s: %w", what, obj.GetNamespace(), obj.GetName(), o.Kind.Kind, o.Object.GetName(), err)
}

// Resolve is the object of kind that a controller reference names, found
// with get (a lister's Get for the reference's namespace), and only if it
// has the reference's UID: an object recreated under the same name is not
// the owner. It is the zero T for a nil reference or another kind.
func Resolve[T metav1.Object](ref *metav1.OwnerReference, kind schema.GroupVersionKind, get func(name string) (T, error)) T {
	obj, _ := resolve(ref, kind, get)
	return obj
}

// resolve is Resolve saying whether it found the owner.
func resolve[T metav1.Object](ref *metav1.OwnerReference, kind schema.GroupVersionKind, get func(name string) (T, error)) (T, bool) {
	var none T
	if ref == nil || ref.Kind != kind.Kind {
		return none, false
	}
	if gv, err := schema.ParseGroupVersion(ref.APIVersion); err != nil || gv.Group != kind.Group {
		return none, false
	}
	obj, err := get(ref.Name)
	if err != nil || obj.GetUID() != ref.UID {
		return none, false
	}
	return obj, true
}

// NewPod is the pod a controller creates from its template, as upstream's
// GetPodFromTemplate: the template's labels, annotations, finalizers and
// spec, in the owner's namespace, with the owner as its controller. The
// caller names it.
func NewPod(owner metav1.Object, kind schema.GroupVersionKind, t *corev1.PodTemplateSpec) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Namespace:       owner.GetNamespace(),
			Labels:          maps.Clone(t.Labels),
			Annotations:     maps.Clone(t.Annotations),
			Finalizers:      slices.Clone(t.Finalizers),
			OwnerReferences: []metav1.OwnerReference{*metav1.NewControllerRef(owner, kind)},
		},
		Spec: *t.Spec.DeepCopy(),
	}
}

type patchMeta struct {
	Metadata struct {
		OwnerReferences []any     `json:"ownerReferences"`
		UID             types.UID `json:"uid"`
	} `json:"metadata"`
}

func (o *Owner) adoptPatch(obj metav1.Object) []byte {
	var p patchMeta
	p.Metadata.UID = obj.GetUID()
	p.Metadata.OwnerReferences = []any{metav1.NewControllerRef(o.Object, o.Kind)}
	data, _ := json.Marshal(p)
	return data
}

func (o *Owner) releasePatch(obj metav1.Object) []byte {
	var p patchMeta
	p.Metadata.UID = obj.GetUID()
	p.Metadata.OwnerReferences = []any{map[string]any{"$patch": "delete", "uid": o.Object.GetUID()}}
	data, _ := json.Marshal(p)
	return data
}
