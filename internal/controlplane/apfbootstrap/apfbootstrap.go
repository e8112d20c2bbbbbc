// Package apfbootstrap writes, at API server start, the API Priority and
// Fairness configuration kube-apiserver's bootstrap ensurer does
// (pkg/registry/flowcontrol/rest and pkg/registry/flowcontrol/ensurer),
// from upstream's own definitions (k8s.io/apiserver's
// pkg/apis/flowcontrol/bootstrap): the suggested PriorityLevelConfigurations
// and FlowSchemas, then the mandatory ones. A missing object is created; an
// existing one has its spec brought back to the bootstrap one when it
// differs (after defaulting) and it is to be kept up to date: always for a
// mandatory object, and for a suggested one when its
// apf.kubernetes.io/autoupdate-spec annotation says true or, without a
// boolean there, when its generation is still 1. The annotation is set to
// what was decided, as upstream does.
//
// Upstream runs this periodically and also deletes auto-updated objects no
// longer in the bootstrap set; here it runs once, at start, and deletes
// nothing.
package apfbootstrap

import (
	"context"
	"fmt"
	"strconv"

	flowcontrolv1 "k8s.io/api/flowcontrol/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apiserver/pkg/apis/flowcontrol/bootstrap"
	"k8s.io/client-go/kubernetes"

	"github.com/svcnet/svcnet/internal/registry/flowschema"
	"github.com/svcnet/svcnet/internal/registry/prioritylevelconfiguration"
)

// fieldManager is upstream's ensurer's.
const fieldManager = "api-priority-and-fairness-config-producer-v1"

// Ensure creates the missing bootstrap configuration objects and updates
// the stale ones, in upstream's order: suggested levels, suggested
// schemas, mandatory levels, mandatory schemas. A concurrent update of an
// object is left for the writer to win.
func Ensure(ctx context.Context, client kubernetes.Interface) error {
	pls := plOps(client)
	fss := fsOps(client)
	if err := ensureAll(ctx, pls, bootstrap.SuggestedPriorityLevelConfigurations, false); err != nil {
		return err
	}
	if err := ensureAll(ctx, fss, bootstrap.SuggestedFlowSchemas, false); err != nil {
		return err
	}
	if err := ensureAll(ctx, pls, bootstrap.MandatoryPriorityLevelConfigurations, true); err != nil {
		return err
	}
	return ensureAll(ctx, fss, bootstrap.MandatoryFlowSchemas, true)
}

// object is what ensure needs of a configuration object.
type object interface {
	metav1.Object
	comparable
}

// ops reads and writes one kind of configuration object.
type ops[T object] struct {
	kind   string
	get    func(ctx context.Context, name string) (T, error)
	create func(ctx context.Context, obj T) error
	update func(ctx context.Context, obj T) error
	// specEqualish says whether the defaulted bootstrap spec is the
	// current one; withSpec is a copy of current with want's spec.
	specEqualish func(want, current T) bool
	withSpec     func(current, want T) T
	deepCopy     func(T) T
}

func plOps(c kubernetes.Interface) ops[*flowcontrolv1.PriorityLevelConfiguration] {
	api := c.FlowcontrolV1().PriorityLevelConfigurations()
	return ops[*flowcontrolv1.PriorityLevelConfiguration]{
		kind: "PriorityLevelConfiguration",
		get: func(ctx context.Context, name string) (*flowcontrolv1.PriorityLevelConfiguration, error) {
			return api.Get(ctx, name, metav1.GetOptions{})
		},
		create: func(ctx context.Context, o *flowcontrolv1.PriorityLevelConfiguration) error {
			_, err := api.Create(ctx, o, metav1.CreateOptions{FieldManager: fieldManager})
			return err
		},
		update: func(ctx context.Context, o *flowcontrolv1.PriorityLevelConfiguration) error {
			_, err := api.Update(ctx, o, metav1.UpdateOptions{FieldManager: fieldManager})
			return err
		},
		specEqualish: func(want, current *flowcontrolv1.PriorityLevelConfiguration) bool {
			w := want.DeepCopy()
			prioritylevelconfiguration.SetDefaults(w)
			// The exempt level's shares and lendable percent are the
			// administrator's.
			if want.Name == flowcontrolv1.PriorityLevelConfigurationNameExempt {
				if current.Spec.Exempt == nil {
					return false
				}
				w.Spec.Exempt.NominalConcurrencyShares = current.Spec.Exempt.NominalConcurrencyShares
				w.Spec.Exempt.LendablePercent = current.Spec.Exempt.LendablePercent
			}
			return apiequality.Semantic.DeepEqual(w.Spec, current.Spec)
		},
		withSpec: func(current, want *flowcontrolv1.PriorityLevelConfiguration) *flowcontrolv1.PriorityLevelConfiguration {
			out := current.DeepCopy()
			out.Spec = *want.Spec.DeepCopy()
			return out
		},
		deepCopy: (*flowcontrolv1.PriorityLevelConfiguration).DeepCopy,
	}
}

func fsOps(c kubernetes.Interface) ops[*flowcontrolv1.FlowSchema] {
	api := c.FlowcontrolV1().FlowSchemas()
	return ops[*flowcontrolv1.FlowSchema]{
		kind: "FlowSchema",
		get: func(ctx context.Context, name string) (*flowcontrolv1.FlowSchema, error) {
			return api.Get(ctx, name, metav1.GetOptions{})
		},
		create: func(ctx context.Context, o *flowcontrolv1.FlowSchema) error {
			_, err := api.Create(ctx, o, metav1.CreateOptions{FieldManager: fieldManager})
			return err
		},
		update: func(ctx context.Context, o *flowcontrolv1.FlowSchema) error {
			_, err := api.Update(ctx, o, metav1.UpdateOptions{FieldManager: fieldManager})
			return err
		},
		specEqualish: func(want, current *flowcontrolv1.FlowSchema) bool {
			w := want.Spec.DeepCopy()
			flowschema.SetDefaults(w)
			return apiequality.Semantic.DeepEqual(w, &current.Spec)
		},
		withSpec: func(current, want *flowcontrolv1.FlowSchema) *flowcontrolv1.FlowSchema {
			out := current.DeepCopy()
			out.Spec = *want.Spec.DeepCopy()
			return out
		},
		deepCopy: (*flowcontrolv1.FlowSchema).DeepCopy,
	}
}

func ensureAll[T object](ctx context.Context, o ops[T], boots []T, mandatory bool) error {
	for _, b := range boots {
		if err := ensure(ctx, o, b, mandatory); err != nil {
			return err
		}
	}
	return nil
}

// ensure is upstream's EnsureConfiguration.
func ensure[T object](ctx context.Context, o ops[T], boot T, mandatory bool) error {
	name := boot.GetName()
	var current T
	for {
		var err error
		current, err = o.get(ctx, name)
		if err == nil {
			break
		}
		if !apierrors.IsNotFound(err) {
			return fmt.Errorf("get %s %q: %w", o.kind, name, err)
		}
		err = o.create(ctx, o.deepCopy(boot))
		if err == nil {
			return nil
		}
		if !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("create %s %q: %w", o.kind, name, err)
		}
	}
	revised, ok := revise(o, current, boot, mandatory)
	if !ok {
		return nil
	}
	if err := o.update(ctx, revised); err != nil && !apierrors.IsConflict(err) {
		return fmt.Errorf("update %s %q: %w", o.kind, name, err)
	}
	return nil
}

// revise is upstream's ReviseIfNeeded: the object to write, if any.
func revise[T object](o ops[T], current, boot T, mandatory bool) (T, bool) {
	autoUpdate := mandatory || shouldUpdateSpec(current)
	updateAnnotation := true
	if v, ok := current.GetAnnotations()[flowcontrolv1.AutoUpdateAnnotationKey]; ok {
		if b, err := strconv.ParseBool(v); err == nil && b == autoUpdate {
			updateAnnotation = false
		}
	}
	specChanged := autoUpdate && !o.specEqualish(boot, current)
	if !updateAnnotation && !specChanged {
		var zero T
		return zero, false
	}
	revised := o.deepCopy(current)
	if specChanged {
		revised = o.withSpec(current, boot)
	}
	if updateAnnotation {
		a := revised.GetAnnotations()
		if a == nil {
			a = map[string]string{}
		}
		a[flowcontrolv1.AutoUpdateAnnotationKey] = strconv.FormatBool(autoUpdate)
		revised.SetAnnotations(a)
	}
	return revised, true
}

// shouldUpdateSpec is upstream's: the annotation's boolean, else whether
// nobody changed the spec since it was created (generation 1).
func shouldUpdateSpec(obj metav1.Object) bool {
	if b, err := strconv.ParseBool(obj.GetAnnotations()[flowcontrolv1.AutoUpdateAnnotationKey]); err == nil {
		return b
	}
	return obj.GetGeneration() == 1
}
