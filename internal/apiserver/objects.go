package apiserver

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/google/uuid"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/validation"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	utilrand "k8s.io/apimachinery/pkg/util/rand"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/utils/ptr"

	"github.com/svcnet/svcnet/internal/admission"
	"github.com/svcnet/svcnet/internal/auth/authn"
	"github.com/svcnet/svcnet/internal/registry"
	"github.com/svcnet/svcnet/internal/storage"
)

// This file is the generic write path every resource goes through: the
// metadata rules upstream's registry applies (uid, timestamps, generation,
// status handling, finalizers, graceful deletion), the kind's strategy, and
// one etcd transaction per write.

// maxNameAttempts bounds, as upstream's, the names a create with
// generateName tries when the generated one is taken. An unconditional
// update or delete, like upstream's GuaranteedUpdate, retries on
// concurrent changes until it applies or the request ends.
const maxNameAttempts = 8

// maxExtraRetries bounds, separately, the retries of writes whose
// registry.Writer conditions failed: the node port bitmap is shared by
// every Service write that takes or frees a node port, and a dynamic
// cluster IP picked from a cache that lags fails until the cache catches
// up, so these conditions fail far more often than any one object's.
const maxExtraRetries = 200

// retryExtra reports whether err is a failed Writer condition that may be
// retried, counting it in n.
func retryExtra(err error, n *int) bool {
	if !errors.Is(err, storage.ErrExtraFailed) || *n >= maxExtraRetries {
		return false
	}
	*n++
	return true
}

// writeOptions are the query parameters shared by every write.
type writeOptions struct {
	dryRun  bool
	manager string
	// applied: the object comes from server-side apply, which already set
	// its managedFields.
	applied bool
}

func key(res *registry.Resource, ns, name string) string {
	if res.Namespaced {
		return res.Prefix() + ns + "/" + name
	}
	return res.Prefix() + name
}

// prefix is the etcd prefix of a list; ns "" lists all namespaces.
func prefix(res *registry.Resource, ns string) string {
	if res.Namespaced && ns != "" {
		return res.Prefix() + ns + "/"
	}
	return res.Prefix()
}

func rvOf(obj runtime.Object) int64 {
	a, err := meta.Accessor(obj)
	if err != nil {
		return 0
	}
	rv, _ := strconv.ParseInt(a.GetResourceVersion(), 10, 64)
	return rv
}

// storageError turns a storage error into the API error upstream answers.
func storageError(err error, res *registry.Resource, name string) error {
	if _, ok := err.(apierrors.APIStatus); ok {
		return err // already an API error (from a registry.Writer)
	}
	gr := res.GroupResource()
	switch {
	case errors.Is(err, storage.ErrNotFound):
		return apierrors.NewNotFound(gr, name)
	case errors.Is(err, storage.ErrExists):
		return apierrors.NewAlreadyExists(gr, name)
	case errors.Is(err, storage.ErrConflict):
		return apierrors.NewConflict(gr, name, errors.New(optimisticLockMsg))
	case errors.Is(err, storage.ErrTooLarge):
		return apierrors.NewRequestEntityTooLargeError(err.Error())
	case errors.Is(err, storage.ErrNoSpace):
		// Upstream passes etcd's error on as it is: a 500 without a
		// reason, whose message kubectl prints after "Error from server".
		return &apierrors.StatusError{ErrStatus: metav1.Status{
			Status: metav1.StatusFailure, Code: http.StatusInternalServerError, Message: storage.ErrNoSpace.Error(),
		}}
	}
	var c *storage.CompactedError
	if errors.As(err, &c) {
		return apierrors.NewResourceExpired(fmt.Sprintf("too old resource version: %d (%d)", c.Requested, c.Compacted))
	}
	return apierrors.NewInternalError(err)
}

// optimisticLockMsg is upstream's text for a stale resourceVersion.
const optimisticLockMsg = "the object has been modified; please apply your changes to the latest version and try again"

func (s *Server) get(ctx context.Context, res *registry.Resource, ns, name string) (runtime.Object, error) {
	obj, err := s.store.Get(ctx, key(res, ns, name))
	if err != nil {
		return nil, storageError(err, res, name)
	}
	return served(res, obj)
}

// checkNamespace is upstream's NamespaceLifecycle admission for creates.
func (s *Server) checkNamespace(ctx context.Context, res *registry.Resource, ns, name string) error {
	if !res.Namespaced {
		return nil
	}
	obj, err := s.store.Get(ctx, key(s.namespaces, "", ns))
	if errors.Is(err, storage.ErrNotFound) {
		return apierrors.NewNotFound(s.namespaces.GroupResource(), ns)
	}
	if err != nil {
		return storageError(err, s.namespaces, ns)
	}
	a, _ := meta.Accessor(obj)
	if a.GetDeletionTimestamp() != nil {
		msg := fmt.Sprintf("unable to create new content in namespace %s because it is being terminated", ns)
		err := apierrors.NewForbidden(res.GroupResource(), name, errors.New(msg))
		// As upstream's NamespaceLifecycle admission: controllers drop
		// their work on this cause.
		err.ErrStatus.Details.Causes = append(err.ErrStatus.Details.Causes,
			metav1.StatusCause{Type: corev1.NamespaceTerminatingCause, Message: msg, Field: "metadata.namespace"})
		return err
	}
	return nil
}

func (s *Server) validateCreate(res *registry.Resource, obj runtime.Object) error {
	a, _ := meta.Accessor(obj)
	nameFn := res.NameValidation
	if nameFn == nil {
		nameFn = validation.NameIsDNSSubdomain
	}
	errs := validation.ValidateObjectMetaAccessor(a, res.Namespaced, nameFn, field.NewPath("metadata"))
	errs = append(errs, res.Strategy.Validate(obj)...)
	if len(errs) > 0 {
		return apierrors.NewInvalid(res.Kind.GroupKind(), a.GetName(), errs)
	}
	return nil
}

// placeIn sets a new object's namespace to the URL's ns (none for a
// cluster-scoped kind); an object naming another is refused.
func placeIn(res *registry.Resource, ns string, obj runtime.Object) (metav1.Object, error) {
	a, err := meta.Accessor(obj)
	if err != nil {
		return nil, apierrors.NewBadRequest(err.Error())
	}
	if !res.Namespaced {
		a.SetNamespace("")
		return a, nil
	}
	if a.GetNamespace() == "" {
		a.SetNamespace(ns)
	} else if ns != "" && a.GetNamespace() != ns {
		return nil, apierrors.NewBadRequest("the namespace of the provided object does not match the namespace sent on the request")
	}
	return a, nil
}

// create stores a new object of res in namespace ns.
func (s *Server) create(ctx context.Context, res *registry.Resource, ns string, obj runtime.Object, o writeOptions) (runtime.Object, error) {
	a, err := placeIn(res, ns, obj)
	if err != nil {
		return nil, err
	}
	if a.GetResourceVersion() != "" {
		return nil, apierrors.NewBadRequest("resourceVersion should not be set on objects to be created")
	}
	if err := s.checkNamespace(ctx, res, a.GetNamespace(), a.GetName()); err != nil {
		return nil, err
	}
	a.SetUID(types.UID(uuid.NewString()))
	a.SetCreationTimestamp(metav1.NewTime(time.Now().Truncate(time.Second)))
	a.SetDeletionTimestamp(nil)
	a.SetDeletionGracePeriodSeconds(nil)
	a.SetSelfLink("")
	if res.Status && !res.KeepStatusOnCreate {
		resetStatus(obj)
	}
	if res.Generation {
		a.SetGeneration(1)
	} else {
		a.SetGeneration(0)
	}
	res.Strategy.Default(obj)
	if ad, ok := res.Strategy.(registry.Admitter); ok {
		if err := ad.Admit(ctx, obj); err != nil {
			return nil, err
		}
	}
	if err := s.mutate(ctx, admission.Create, res, "", a.GetNamespace(), a.GetName(), obj, nil, o.dryRun); err != nil {
		return nil, err
	}
	generated := a.GetName() == "" && a.GetGenerateName() != ""
	nameFrom := res.GenerateName
	if nameFrom == nil {
		nameFrom = generateName
	}
	// As upstream's store, the name is generated before PrepareForCreate
	// (a Job's labels carry it), so each new name prepares a fresh copy
	// of the request.
	request, prepared := obj, false
	extraRetries := 0
	for attempt := 0; ; attempt++ {
		if generated {
			obj = request.DeepCopyObject()
			if a, err = meta.Accessor(obj); err != nil {
				return nil, apierrors.NewInternalError(err)
			}
			a.SetName(nameFrom(a.GetGenerateName()))
			prepared = false
		}
		if !prepared {
			res.Strategy.PrepareForCreate(obj)
			prepared = true
		}
		if err := s.validateCreate(res, obj); err != nil {
			return nil, err
		}
		if err := s.admit(ctx, admission.Create, res, "", a.GetNamespace(), a.GetName(), obj, nil, o.dryRun); err != nil {
			return nil, err
		}
		// The Writer fills allocated values into a copy, so that a retry
		// starts again from the request.
		next := obj.DeepCopyObject()
		if !o.applied {
			empty, err := newObject(res)
			if err != nil {
				return nil, err
			}
			next = s.fields.update(res, "", empty, next, o.manager)
		}
		extra, done, err := prepareWrite(ctx, res, next, nil, o.dryRun)
		if retryExtra(err, &extraRetries) {
			continue
		}
		if err != nil {
			return nil, err
		}
		if o.dryRun {
			done(nil)
			return next, nil
		}
		stored, err := toStorage(res, next)
		if err != nil {
			done(err)
			return nil, err
		}
		out, err := s.store.Create(ctx, key(res, a.GetNamespace(), a.GetName()), stored, extra)
		done(err)
		if retryExtra(err, &extraRetries) || (attempt+1 < maxNameAttempts && errors.Is(err, storage.ErrExists) && generated) {
			continue
		}
		if err != nil {
			return nil, storageError(err, res, a.GetName())
		}
		return served(res, out)
	}
}

// prepareWrite runs the kind's registry.Writer hook, if it has one. done is
// to be called with the write's outcome.
func prepareWrite(ctx context.Context, res *registry.Resource, obj, old runtime.Object, dryRun bool) (extra storage.Extra, done func(error), err error) {
	w, ok := res.Strategy.(registry.Writer)
	if !ok {
		return storage.Extra{}, func(error) {}, nil
	}
	return w.PrepareWrite(ctx, obj, old, dryRun)
}

// mutateFunc computes the desired object from the stored one. cur is nil
// when the object does not exist and the caller allows creating it.
type mutateFunc func(cur runtime.Object) (runtime.Object, error)

// update performs a read-modify-write of one object (or of its status or
// scale when sub says so). A desired object carrying a resourceVersion is
// a precondition: a different stored version is a 409 Conflict. Without
// one, the write retries on concurrent changes.
func (s *Server) update(ctx context.Context, res *registry.Resource, ns, name, sub string, o writeOptions,
	allowCreate bool, mutate mutateFunc) (obj runtime.Object, created bool, err error) {
	extraRetries := 0
	for {
		cur, err := s.get(ctx, res, ns, name)
		if apierrors.IsNotFound(err) {
			if !allowCreate {
				return nil, false, apierrors.NewNotFound(res.GroupResource(), name)
			}
			desired, err := mutate(nil)
			if err != nil {
				return nil, false, err
			}
			if a, _ := meta.Accessor(desired); a != nil && a.GetName() != name {
				return nil, false, apierrors.NewBadRequest(fmt.Sprintf("the name of the object (%s) does not match the name on the URL (%s)", a.GetName(), name))
			}
			// A create carries no resourceVersion.
			meta.NewAccessor().SetResourceVersion(desired, "")
			out, err := s.create(ctx, res, ns, desired, o)
			if apierrors.IsAlreadyExists(err) {
				continue
			}
			return out, err == nil, err
		}
		if err != nil {
			return nil, false, err
		}
		desired, err := mutate(cur.DeepCopyObject())
		if err != nil {
			return nil, false, err
		}
		next, conditional, err := s.prepareUpdate(ctx, res, ns, name, sub, cur, desired, o)
		if err != nil {
			return nil, false, err
		}
		if next == nil { // nothing changed
			return cur, false, nil
		}
		if err := s.admit(ctx, admission.Update, res, sub, ns, name, next, cur, o.dryRun); err != nil {
			return nil, false, err
		}
		if finalized(next, cur) {
			if o.dryRun {
				return next, false, s.dryRunDelete(ctx, res, cur)
			}
			out, err := s.deleteStored(ctx, res, ns, name, cur)
			if retryExtra(err, &extraRetries) || (errors.Is(err, storage.ErrConflict) && !conditional) {
				continue
			}
			if err != nil {
				return nil, false, storageError(err, res, name)
			}
			return out, false, nil
		}
		extra, done, err := prepareWrite(ctx, res, next, cur, o.dryRun)
		if retryExtra(err, &extraRetries) {
			continue
		}
		if err != nil {
			return nil, false, err
		}
		if o.dryRun {
			done(nil)
			return next, false, nil
		}
		stored, err := toStorage(res, next)
		if err != nil {
			done(err)
			return nil, false, err
		}
		out, err := s.store.Update(ctx, key(res, ns, name), stored, rvOf(cur), extra)
		done(err)
		if retryExtra(err, &extraRetries) || ((errors.Is(err, storage.ErrConflict) || errors.Is(err, storage.ErrNotFound)) && !conditional) {
			continue
		}
		if err != nil {
			return nil, false, storageError(err, res, name)
		}
		out, err = served(res, out)
		return out, false, err
	}
}

// admit asks the admission chain's validating plugins about a write by
// ctx's user.
func (s *Server) admit(ctx context.Context, op admission.Operation, res *registry.Resource, sub, ns, name string, obj, old runtime.Object, dryRun bool) error {
	if s.admission == nil {
		return nil
	}
	return s.admission.Validate(ctx, attributes(ctx, op, res, sub, ns, name, obj, old, dryRun))
}

// mutate lets the admission chain's mutating plugins change obj, a create
// or an update by ctx's user (or see a delete or connect), and prunes and
// defaults it again as upstream does a webhook's patched object.
func (s *Server) mutate(ctx context.Context, op admission.Operation, res *registry.Resource, sub, ns, name string, obj, old runtime.Object, dryRun bool) error {
	m, ok := s.admission.(admission.Mutator)
	if !ok {
		return nil
	}
	if err := m.Admit(ctx, attributes(ctx, op, res, sub, ns, name, obj, old, dryRun)); err != nil {
		return err
	}
	if sub != "" || obj == nil {
		return nil
	}
	// A custom resource loses the fields its schema does not declare, as
	// upstream's defaulter of custom resources prunes.
	if u, ok := obj.(*unstructured.Unstructured); ok && res.Unstructured != nil && res.Unstructured.Prune != nil {
		res.Unstructured.Prune(u.Object)
	}
	res.Strategy.Default(obj)
	return nil
}

// attributes describe a write to admission: the kind is the object's, the
// version the resource's, the options those of the operation.
func attributes(ctx context.Context, op admission.Operation, res *registry.Resource, sub, ns, name string, obj, old runtime.Object, dryRun bool) *admission.Attributes {
	u, _ := authn.UserFrom(ctx)
	kind := res.Kind
	for _, o := range []runtime.Object{obj, old} {
		if o == nil {
			continue
		}
		if gvk := o.GetObjectKind().GroupVersionKind(); !gvk.Empty() {
			kind = gvk
		} else if gvks, _, err := registry.Scheme.ObjectKinds(o); err == nil && len(gvks) > 0 {
			kind = gvks[0]
		}
		break
	}
	var dry []string
	if dryRun {
		dry = []string{metav1.DryRunAll}
	}
	var options runtime.Object
	switch op {
	case admission.Create:
		options = &metav1.CreateOptions{TypeMeta: metav1.TypeMeta{APIVersion: "meta.k8s.io/v1", Kind: "CreateOptions"}, DryRun: dry}
	case admission.Update:
		options = &metav1.UpdateOptions{TypeMeta: metav1.TypeMeta{APIVersion: "meta.k8s.io/v1", Kind: "UpdateOptions"}, DryRun: dry}
	case admission.Delete:
		options = &metav1.DeleteOptions{TypeMeta: metav1.TypeMeta{APIVersion: "meta.k8s.io/v1", Kind: "DeleteOptions"}, DryRun: dry}
	}
	return &admission.Attributes{Operation: op, Resource: res.GroupResource(), Kind: kind, Version: res.Kind.Version,
		Subresource: sub, Namespace: ns, Name: name, Object: obj, OldObject: old, User: u, DryRun: dryRun, Options: options}
}

// finalized: the object was being deleted, with no grace period left (a
// pod on a node waits for its node's final delete), and its last
// finalizer is gone: as upstream's ShouldDeleteDuringUpdate.
func finalized(next, cur runtime.Object) bool {
	n, _ := meta.Accessor(next)
	c, _ := meta.Accessor(cur)
	if len(n.GetFinalizers()) > 0 || c.GetDeletionTimestamp() == nil || pendingNamespace(next) {
		return false
	}
	grace := c.GetDeletionGracePeriodSeconds()
	return grace == nil || *grace == 0
}

// prepareUpdate applies the metadata rules and the strategy to desired, and
// the strategy's admission with the writer in ctx. It returns nil when the
// write would change nothing.
func (s *Server) prepareUpdate(ctx context.Context, res *registry.Resource, ns, name, sub string, cur, desired runtime.Object, o writeOptions) (runtime.Object, bool, error) {
	a, err := meta.Accessor(desired)
	if err != nil {
		return nil, false, apierrors.NewBadRequest(err.Error())
	}
	ca, _ := meta.Accessor(cur)
	if a.GetName() != name {
		return nil, false, apierrors.NewBadRequest(fmt.Sprintf("the name of the object (%s) does not match the name on the URL (%s)", a.GetName(), name))
	}
	if res.Namespaced {
		if a.GetNamespace() == "" {
			a.SetNamespace(ns)
		} else if a.GetNamespace() != ns {
			return nil, false, apierrors.NewBadRequest("the namespace of the provided object does not match the namespace sent on the request")
		}
	} else {
		a.SetNamespace("")
	}
	conditional := a.GetResourceVersion() != ""
	if conditional && a.GetResourceVersion() != ca.GetResourceVersion() {
		return nil, false, apierrors.NewConflict(res.GroupResource(), name, errors.New(optimisticLockMsg))
	}
	if uid := a.GetUID(); uid != "" && uid != ca.GetUID() {
		return nil, false, apierrors.NewConflict(res.GroupResource(), name,
			fmt.Errorf("Precondition failed: UID in precondition: %v, UID in object meta: %v", uid, ca.GetUID()))
	}
	if sub == "status" {
		// A status write changes status and metadata, never spec, as
		// upstream's status strategies; some keep more (StatusUpdater).
		next := withStatusOf(cur, desired)
		na, _ := meta.Accessor(next)
		na.SetManagedFields(a.GetManagedFields())
		na.SetLabels(a.GetLabels())
		na.SetAnnotations(a.GetAnnotations())
		na.SetFinalizers(a.GetFinalizers())
		na.SetOwnerReferences(a.GetOwnerReferences())
		if su, ok := res.Strategy.(registry.StatusUpdater); ok {
			su.PrepareForStatusUpdate(next, cur)
		}
		desired, a = next, na
	}
	if sub != "binding" {
		if err := s.mutate(ctx, admission.Update, res, sub, ns, name, desired, cur, o.dryRun); err != nil {
			return nil, false, err
		}
	}
	a.SetUID(ca.GetUID())
	a.SetCreationTimestamp(ca.GetCreationTimestamp())
	a.SetDeletionTimestamp(ca.GetDeletionTimestamp())
	a.SetDeletionGracePeriodSeconds(ca.GetDeletionGracePeriodSeconds())
	a.SetGeneration(ca.GetGeneration())
	a.SetSelfLink("")
	a.SetResourceVersion(ca.GetResourceVersion())
	subres, ownRules := res.Subresources[sub]
	if sub != "status" && sub != "binding" && !ownRules && res.Status {
		copyStatus(desired, cur)
	}
	res.Strategy.Default(desired)
	switch {
	case sub == "":
		res.Strategy.PrepareForUpdate(desired, cur)
	case ownRules:
		subres.PrepareForUpdate(desired, cur)
	}
	// A binding sets spec.nodeName without a new generation, as
	// upstream's binding writes the pod directly.
	if res.Generation && sub != "binding" && !specEqual(desired, cur) {
		a.SetGeneration(ca.GetGeneration() + 1)
	}
	errs := validation.ValidateObjectMetaAccessorUpdate(a, ca, field.NewPath("metadata"))
	nameFn := res.NameValidation
	if nameFn == nil {
		nameFn = validation.NameIsDNSSubdomain
	}
	errs = append(errs, validation.ValidateObjectMetaAccessor(a, res.Namespaced, nameFn, field.NewPath("metadata"))...)
	switch {
	case ownRules:
		errs = append(errs, subres.ValidateUpdate(desired, cur)...)
	case sub != "binding": // a binding sets spec.nodeName, which pod updates may not
		errs = append(errs, res.Strategy.ValidateUpdate(desired, cur)...)
	}
	if len(errs) > 0 {
		return nil, false, apierrors.NewInvalid(res.Kind.GroupKind(), name, errs)
	}
	if ad, ok := res.Strategy.(registry.UpdateAdmitter); ok {
		if err := ad.AdmitUpdate(ctx, sub, desired, cur); err != nil {
			return nil, false, err
		}
	}
	if !o.applied {
		desired = s.fields.update(res, sub, cur, desired, o.manager)
	}
	// An object read through an older encryption key or provider is
	// written again even unchanged, as upstream's stale reads are: that
	// rotates keys (storage.Store.Stale).
	if same, err := s.sameStored(cur, desired); err != nil {
		return nil, false, apierrors.NewInternalError(err)
	} else if same && !s.store.Stale(key(res, ns, name), rvOf(cur)) {
		return nil, conditional, nil
	}
	return desired, conditional, nil
}

// sameStored reports whether two objects would store the same bytes.
func (s *Server) sameStored(a, b runtime.Object) (bool, error) {
	ea, err := registry.JSONCodec{}.Encode(a)
	if err != nil {
		return false, err
	}
	eb, err := registry.JSONCodec{}.Encode(b)
	if err != nil {
		return false, err
	}
	return bytes.Equal(ea, eb), nil
}

// pendingNamespace: a namespace keeps existing while spec.finalizers has
// entries (the namespace controller empties it through /finalize), even
// without metadata finalizers.
func pendingNamespace(obj runtime.Object) bool {
	ns, ok := obj.(*corev1.Namespace)
	return ok && len(ns.Spec.Finalizers) > 0
}

// remove deletes one object, honouring preconditions, finalizers,
// propagation policy and the kind's graceful deletion. deleted is false when
// the object was only marked for deletion.
func (s *Server) remove(ctx context.Context, res *registry.Resource, ns, name string, opts *metav1.DeleteOptions, dryRun bool) (obj runtime.Object, deleted bool, err error) {
	extraRetries := 0
	for {
		cur, err := s.get(ctx, res, ns, name)
		if err != nil {
			return nil, false, err
		}
		a, _ := meta.Accessor(cur)
		if p := opts.Preconditions; p != nil {
			if p.UID != nil && *p.UID != a.GetUID() {
				return nil, false, apierrors.NewConflict(res.GroupResource(), name,
					fmt.Errorf("Precondition failed: UID in precondition: %v, UID in object meta: %v", *p.UID, a.GetUID()))
			}
			if p.ResourceVersion != nil && *p.ResourceVersion != a.GetResourceVersion() {
				return nil, false, apierrors.NewConflict(res.GroupResource(), name,
					fmt.Errorf("Precondition failed: ResourceVersion in precondition: %v, ResourceVersion in object meta: %v", *p.ResourceVersion, a.GetResourceVersion()))
			}
		}
		if err := s.mutate(ctx, admission.Delete, res, "", ns, name, nil, cur, dryRun); err != nil {
			return nil, false, err
		}
		if err := s.admit(ctx, admission.Delete, res, "", ns, name, nil, cur, dryRun); err != nil {
			return nil, false, err
		}
		next := cur.DeepCopyObject()
		na, _ := meta.Accessor(next)
		pending := false
		if d, ok := res.Strategy.(registry.Deleter); ok {
			if pending, err = d.PrepareForDelete(next, opts); err != nil {
				return nil, false, err
			}
		}
		if policy := opts.PropagationPolicy; policy != nil {
			switch *policy {
			case metav1.DeletePropagationOrphan:
				addFinalizer(na, metav1.FinalizerOrphanDependents)
			case metav1.DeletePropagationForeground:
				addFinalizer(na, metav1.FinalizerDeleteDependents)
			}
		} else if opts.OrphanDependents != nil && *opts.OrphanDependents {
			addFinalizer(na, metav1.FinalizerOrphanDependents)
		}
		if pending || len(na.GetFinalizers()) > 0 || pendingNamespace(next) {
			if na.GetDeletionTimestamp() == nil {
				now := metav1.NewTime(time.Now().Truncate(time.Second))
				na.SetDeletionTimestamp(&now)
				var zero int64
				if na.GetDeletionGracePeriodSeconds() == nil {
					na.SetDeletionGracePeriodSeconds(&zero)
				}
			}
			// As upstream's BeforeDelete and markAsDeleting: a deletion
			// that starts (or shortens its grace) is a new generation of
			// an object that counts them.
			if ca, _ := meta.Accessor(cur); na.GetGeneration() > 0 && (ca.GetDeletionTimestamp() == nil ||
				!ptr.Equal(ca.GetDeletionGracePeriodSeconds(), na.GetDeletionGracePeriodSeconds())) {
				na.SetGeneration(na.GetGeneration() + 1)
			}
			if dryRun {
				return next, false, nil
			}
			if same, _ := s.sameStored(cur, next); same {
				return cur, false, nil
			}
			stored, err := toStorage(res, next)
			if err != nil {
				return nil, false, err
			}
			out, err := s.store.Update(ctx, key(res, ns, name), stored, rvOf(cur), storage.Extra{})
			if errors.Is(err, storage.ErrConflict) {
				continue
			}
			if err != nil {
				return nil, false, storageError(err, res, name)
			}
			out, err = served(res, out)
			return out, false, err
		}
		if dryRun {
			return cur, true, s.dryRunDelete(ctx, res, cur)
		}
		out, err := s.deleteStored(ctx, res, ns, name, cur)
		if retryExtra(err, &extraRetries) || errors.Is(err, storage.ErrConflict) {
			continue
		}
		if err != nil {
			return nil, false, storageError(err, res, name)
		}
		return out, true, nil
	}
}

// deleteStored removes cur from etcd, with what its kind's Writer releases
// in the same transaction. Errors are storage errors, for the caller's
// retry rules.
func (s *Server) deleteStored(ctx context.Context, res *registry.Resource, ns, name string, cur runtime.Object) (runtime.Object, error) {
	extra, done, err := prepareWrite(ctx, res, nil, cur, false)
	if err != nil {
		return nil, err
	}
	out, err := s.store.Delete(ctx, key(res, ns, name), rvOf(cur), extra)
	done(err)
	if err != nil {
		return nil, err
	}
	return served(res, out)
}

// dryRunDelete runs the Writer's checks of a delete without committing.
func (s *Server) dryRunDelete(ctx context.Context, res *registry.Resource, cur runtime.Object) error {
	_, done, err := prepareWrite(ctx, res, nil, cur, true)
	if err == nil {
		done(nil)
	}
	return err
}

func addFinalizer(a metav1.Object, f string) {
	for _, x := range a.GetFinalizers() {
		if x == f {
			return
		}
	}
	a.SetFinalizers(append(a.GetFinalizers(), f))
}

// generateName is a name made from generateName as upstream's: the base
// cut to 58 characters, then 5 random ones, so that it fits the 63 of a
// DNS label.
func generateName(base string) string {
	const maxNameLength, randomLength = 63, 5
	if max := maxNameLength - randomLength; len(base) > max {
		base = base[:max]
	}
	return base + utilrand.String(randomLength)
}
