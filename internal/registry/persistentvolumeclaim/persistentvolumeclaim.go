// Package persistentvolumeclaim is the PersistentVolumeClaim strategy: a
// new claim is Pending, gets the default StorageClass and the
// pvc-protection finalizer (upstream's DefaultStorageClass and
// StorageObjectInUseProtection admission), its spec is validated as
// upstream and frozen after creation except for binding to a volume and
// resizing a bound claim of a class that allows it (upstream's
// PersistentVolumeClaimResize admission), and `kubectl get pvc` shows the
// bound volume's capacity and access modes.
package persistentvolumeclaim

import (
	"fmt"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apivalidation "k8s.io/apimachinery/pkg/api/validation"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/utils/ptr"

	"github.com/svcnet/svcnet/internal/registry"
	"github.com/svcnet/svcnet/internal/registry/persistentvolume"
	"github.com/svcnet/svcnet/internal/registry/validate"
)

// Resource describes persistent volume claims; classes, when set, gives
// new claims the default StorageClass and allows resizing claims of the
// classes that allow expansion.
func Resource(classes Classes) *registry.Resource {
	return &registry.Resource{
		Kind:                corev1.SchemeGroupVersion.WithKind("PersistentVolumeClaim"),
		Resource:            "persistentvolumeclaims",
		Singular:            "persistentvolumeclaim",
		ShortNames:          []string{"pvc"},
		Namespaced:          true,
		Status:              true,
		ReturnDeletedObject: true,
		Strategy:            strategy{classes: classes},
		Columns:             columns(),
		Fields: func(obj runtime.Object) fields.Set {
			// "name" is an upstream bug kept for compatibility.
			return fields.Set{"name": obj.(*corev1.PersistentVolumeClaim).Name}
		},
	}
}

type strategy struct {
	registry.Base
	classes Classes
}

func (strategy) Default(obj runtime.Object) {
	pvc := obj.(*corev1.PersistentVolumeClaim)
	validate.DefaultPersistentVolumeClaimSpec(&pvc.Spec)
	if pvc.Status.Phase == "" {
		pvc.Status.Phase = corev1.ClaimPending
	}
}

// PrepareForCreate starts the claim Pending (upstream stores an empty status
// and shows Pending through read-time defaulting).
func (strategy) PrepareForCreate(obj runtime.Object) {
	obj.(*corev1.PersistentVolumeClaim).Status = corev1.PersistentVolumeClaimStatus{Phase: corev1.ClaimPending}
}

func (strategy) Validate(obj runtime.Object) field.ErrorList {
	return validate.PersistentVolumeClaimSpec(&obj.(*corev1.PersistentVolumeClaim).Spec, field.NewPath("spec"))
}

// ValidateUpdate follows upstream's ValidatePersistentVolumeClaimUpdate: the
// spec is immutable except that an unbound claim may get its volume name
// and storage class (once), and a bound claim may be resized.
func (strategy) ValidateUpdate(obj, old runtime.Object) field.ErrorList {
	pvc, prev := obj.(*corev1.PersistentVolumeClaim), old.(*corev1.PersistentVolumeClaim)
	errs := validate.PersistentVolumeClaimSpec(&pvc.Spec, field.NewPath("spec"))
	newSpec, oldSpec := pvc.Spec.DeepCopy(), prev.Spec.DeepCopy()
	if prev.Spec.VolumeName == "" {
		oldSpec.VolumeName = newSpec.VolumeName
	}
	beta := corev1.BetaStorageClassAnnotation
	oldClass, oldAnnotated := prev.Annotations[beta]
	newClass, newAnnotated := pvc.Annotations[beta]
	switch {
	case oldAnnotated && prev.Spec.StorageClassName == nil && newSpec.StorageClassName != nil &&
		*newSpec.StorageClassName == oldClass && (!newAnnotated || newClass == oldClass):
		// moving the class from the beta annotation to the field
		newSpec.StorageClassName = nil
	default:
		if newClass != oldClass {
			errs = append(errs, field.Invalid(field.NewPath("metadata").Child("annotations", beta), newClass, apivalidation.FieldImmutableErrorMsg))
		}
		if newSpec.StorageClassName != nil && prev.Spec.StorageClassName == nil &&
			(!oldAnnotated || *newSpec.StorageClassName == oldClass) {
			newSpec.StorageClassName = oldSpec.StorageClassName
		}
	}
	bound := pvc.Status.Phase == corev1.ClaimBound
	if bound && newSpec.Resources.Requests != nil {
		newSpec.Resources.Requests[corev1.ResourceStorage] = prev.Spec.Resources.Requests[corev1.ResourceStorage]
	}
	if bound && newSpec.VolumeAttributesClassName != nil {
		newSpec.VolumeAttributesClassName = oldSpec.VolumeAttributesClassName
	}
	if !apiequality.Semantic.DeepEqual(newSpec, oldSpec) {
		errs = append(errs, field.Forbidden(field.NewPath("spec"), fmt.Sprintf(
			"spec is immutable after creation except resources.requests and volumeAttributesClassName for bound claims\n%v", cmp.Diff(*oldSpec, *newSpec))))
	}
	newSize, oldSize := pvc.Spec.Resources.Requests[corev1.ResourceStorage], prev.Spec.Resources.Requests[corev1.ResourceStorage]
	if newSize.Cmp(oldSize) < 0 && newSize.Cmp(prev.Status.Capacity[corev1.ResourceStorage]) <= 0 {
		errs = append(errs, field.Forbidden(field.NewPath("spec", "resources", "requests", "storage"), "field can not be less than status.capacity"))
	}
	errs = append(errs, apivalidation.ValidateImmutableField(pvc.Spec.VolumeMode, prev.Spec.VolumeMode, field.NewPath("volumeMode"))...)
	if prev.Spec.VolumeAttributesClassName != nil {
		vac := field.NewPath("spec", "volumeAttributesClassName")
		if pvc.Spec.VolumeAttributesClassName == nil {
			errs = append(errs, field.Forbidden(vac, "update from non-nil value to nil is forbidden"))
		} else if *pvc.Spec.VolumeAttributesClassName == "" {
			errs = append(errs, field.Forbidden(vac, "update from non-nil value to an empty string is forbidden"))
		}
	}
	return errs
}

func columns() []registry.Column {
	spec := corev1.PersistentVolumeClaimSpec{}.SwaggerDoc()
	status := corev1.PersistentVolumeClaimStatus{}.SwaggerDoc()
	col := registry.TextColumn[*corev1.PersistentVolumeClaim]
	return []registry.Column{
		registry.NameColumn(),
		col("Status", status["phase"], func(c *corev1.PersistentVolumeClaim) string {
			return persistentvolume.PhaseOrTerminating(c, string(c.Status.Phase))
		}),
		col("Volume", spec["volumeName"], func(c *corev1.PersistentVolumeClaim) string { return c.Spec.VolumeName }),
		col("Capacity", status["capacity"], func(c *corev1.PersistentVolumeClaim) string {
			if c.Spec.VolumeName == "" {
				return ""
			}
			q := c.Status.Capacity[corev1.ResourceStorage]
			return q.String()
		}),
		col("Access Modes", status["accessModes"], func(c *corev1.PersistentVolumeClaim) string {
			if c.Spec.VolumeName == "" {
				return ""
			}
			return persistentvolume.AccessModesString(c.Status.AccessModes)
		}),
		col("StorageClass", "StorageClass of the pvc", func(c *corev1.PersistentVolumeClaim) string {
			return persistentvolume.StorageClass(c, ptr.Deref(c.Spec.StorageClassName, ""))
		}),
		col("VolumeAttributesClass", "VolumeAttributesClass of the pvc", func(c *corev1.PersistentVolumeClaim) string {
			return persistentvolume.ClassOrUnset(c.Spec.VolumeAttributesClassName)
		}),
		registry.AgeColumn(),
		persistentvolume.VolumeModeColumn(spec["volumeMode"], func(c *corev1.PersistentVolumeClaim) *corev1.PersistentVolumeMode {
			return c.Spec.VolumeMode
		}),
	}
}
