package persistentvolumeclaim

import (
	"context"
	"errors"
	"fmt"
	"slices"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	storagehelpers "k8s.io/component-helpers/storage/volume"

	"github.com/svcnet/svcnet/internal/registry/storageclass"
)

// Finalizer is upstream's kubernetes.io/pvc-protection, which the
// pvc-protection controller removes once no pod uses the claim.
const Finalizer = "kubernetes.io/pvc-protection"

// Classes reads the StorageClasses, for the default class of new claims
// and the resize check; nil leaves claims without a default and refuses
// every resize.
type Classes interface {
	List(ctx context.Context) ([]*storagev1.StorageClass, error)
	Get(ctx context.Context, name string) (*storagev1.StorageClass, error)
}

// Admit is upstream's DefaultStorageClass admission plugin, then its
// StorageObjectInUseProtection: a new claim that names no class, neither
// by storageClassName nor by the beta annotation, gets the default
// StorageClass (annotated storageclass.kubernetes.io/is-default-class:
// "true"; of several, the newest, then the first by name), and every new
// claim the kubernetes.io/pvc-protection finalizer.
func (s strategy) Admit(ctx context.Context, obj runtime.Object) error {
	pvc := obj.(*corev1.PersistentVolumeClaim)
	if s.classes != nil && !storagehelpers.PersistentVolumeClaimHasClass(pvc) {
		classes, err := s.classes.List(ctx)
		if err != nil {
			return apierrors.NewForbidden(corev1.Resource("persistentvolumeclaims"), pvc.Name, fmt.Errorf("failed to get default storage class: %w", err))
		}
		if def := storageclass.DefaultClass(classes); def != nil {
			pvc.Spec.StorageClassName = &def.Name
		}
	}
	if !slices.Contains(pvc.Finalizers, Finalizer) {
		pvc.Finalizers = append(pvc.Finalizers, Finalizer)
	}
	return nil
}

// AdmitUpdate is upstream's PersistentVolumeClaimResize admission plugin:
// a larger request is allowed on a bound claim whose StorageClass (the
// same before and after) has allowVolumeExpansion.
func (s strategy) AdmitUpdate(ctx context.Context, sub string, obj, old runtime.Object) error {
	if sub != "" {
		return nil
	}
	pvc, prev := obj.(*corev1.PersistentVolumeClaim), old.(*corev1.PersistentVolumeClaim)
	newSize, oldSize := pvc.Spec.Resources.Requests[corev1.ResourceStorage], prev.Spec.Resources.Requests[corev1.ResourceStorage]
	if newSize.Cmp(oldSize) <= 0 {
		return nil
	}
	if prev.Status.Phase != corev1.ClaimBound {
		return apierrors.NewForbidden(corev1.Resource("persistentvolumeclaims"), pvc.Name, errors.New("Only bound persistent volume claims can be expanded"))
	}
	if !s.allowResize(ctx, pvc, prev) {
		return apierrors.NewForbidden(corev1.Resource("persistentvolumeclaims"), pvc.Name,
			errors.New("only dynamically provisioned pvc can be resized and the storageclass that provisions the pvc must support resize"))
	}
	return nil
}

// allowResize: the claim's class, unchanged, exists and allows expansion.
func (s strategy) allowResize(ctx context.Context, pvc, prev *corev1.PersistentVolumeClaim) bool {
	class := storagehelpers.GetPersistentVolumeClaimClass(pvc)
	if s.classes == nil || class == "" || class != storagehelpers.GetPersistentVolumeClaimClass(prev) {
		return false
	}
	sc, err := s.classes.Get(ctx, class)
	return err == nil && sc.AllowVolumeExpansion != nil && *sc.AllowVolumeExpansion
}
