package addons

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	"github.com/svcnet/svcnet/internal/volume/localpath"
)

// The StorageClasses of the local-storage add-on.
const (
	// StandardClass is kind's default class: a directory on the node the
	// pod lands on, bound when the pod is scheduled.
	StandardClass = "standard"
	// SharedClass is a directory every node of a one-machine cluster
	// sees, for ReadWriteMany claims.
	SharedClass = "shared"
	// defaultClassAnnotation marks the default StorageClass.
	defaultClassAnnotation = "storageclass.kubernetes.io/is-default-class"
)

// ApplyStorage creates or updates the StorageClasses standard (the
// default, unless another class already is; WaitForFirstConsumer,
// svcnet.io/local-path) and shared (Immediate, svcnet.io/shared-path),
// both with reclaim policy Delete and volume expansion allowed.
func ApplyStorage(ctx context.Context, client kubernetes.Interface) error {
	classes, err := client.StorageV1().StorageClasses().List(ctx, metav1.ListOptions{})
	if err != nil {
		return fmt.Errorf("list storage classes: %w", err)
	}
	otherDefault := false
	for _, c := range classes.Items {
		if c.Name != StandardClass && c.Annotations[defaultClassAnnotation] == "true" {
			otherDefault = true
		}
	}
	for _, sc := range []*storagev1.StorageClass{
		storageClass(StandardClass, localpath.LocalProvisioner, storagev1.VolumeBindingWaitForFirstConsumer, !otherDefault),
		storageClass(SharedClass, localpath.SharedProvisioner, storagev1.VolumeBindingImmediate, false),
	} {
		if err := apply(ctx, client.StorageV1().StorageClasses(), sc); err != nil {
			return err
		}
	}
	return nil
}

func storageClass(name, provisioner string, mode storagev1.VolumeBindingMode, isDefault bool) *storagev1.StorageClass {
	sc := &storagev1.StorageClass{
		TypeMeta:             metav1.TypeMeta{Kind: "StorageClass", APIVersion: "storage.k8s.io/v1"},
		ObjectMeta:           metav1.ObjectMeta{Name: name},
		Provisioner:          provisioner,
		ReclaimPolicy:        ptr.To(corev1.PersistentVolumeReclaimDelete),
		VolumeBindingMode:    &mode,
		AllowVolumeExpansion: ptr.To(true),
	}
	if isDefault {
		sc.Annotations = map[string]string{defaultClassAnnotation: "true"}
	}
	return sc
}
