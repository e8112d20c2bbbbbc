package persistentvolume

import (
	"context"
	"errors"
	"fmt"
	"os"
	"regexp"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	storagehelpers "k8s.io/component-helpers/storage/volume"
)

// reclaimVolume applies the reclaim policy of a released volume: Retain
// keeps it Released with its data; Delete deletes it, once the data is
// gone (an external provisioner removes both itself).
func (c *Controller) reclaimVolume(ctx context.Context, volume *corev1.PersistentVolume) error {
	switch volume.Spec.PersistentVolumeReclaimPolicy {
	case corev1.PersistentVolumeReclaimRetain:
		return nil
	case corev1.PersistentVolumeReclaimDelete:
		return c.deleteVolumeOperation(ctx, volume)
	case corev1.PersistentVolumeReclaimRecycle:
		// No volume plugin here recycles.
		return c.updateVolumePhaseWithEvent(ctx, volume, corev1.VolumeFailed, reasonVolumeFailedRecycle, "No recycler plugin found for the volume!")
	default:
		return c.updateVolumePhaseWithEvent(ctx, volume, corev1.VolumeFailed, reasonVolumeUnknownReclaim, "Volume has unrecognized PersistentVolumeReclaimPolicy")
	}
}

// deleteVolumeOperation is upstream's: on a fresh read of a volume that is
// still released, the volume's deleter removes the data and the volume is
// deleted; a volume an external provisioner made waits for it; a volume
// no deleter handles goes Failed with the reason.
func (c *Controller) deleteVolumeOperation(ctx context.Context, volume *corev1.PersistentVolume) error {
	fresh, err := c.client.CoreV1().PersistentVolumes().Get(ctx, volume.Name, metav1.GetOptions{})
	if err != nil || fresh.DeletionTimestamp != nil {
		return nil
	}
	if released, err := c.isVolumeReleased(ctx, fresh); err != nil || !released {
		return err
	}
	if by := fresh.Annotations[storagehelpers.AnnDynamicallyProvisioned]; by != "" && !strings.HasPrefix(by, "kubernetes.io/") {
		return nil // the external provisioner deletes it
	}
	if err := c.deleteData(fresh); err != nil {
		return c.updateVolumePhaseWithEvent(ctx, fresh, corev1.VolumeFailed, reasonVolumeFailedDelete, err.Error())
	}
	err = c.client.CoreV1().PersistentVolumes().Delete(ctx, fresh.Name, metav1.DeleteOptions{})
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("delete volume %s: %w", fresh.Name, err)
	}
	return nil
}

// isVolumeReleased: the volume is bound to a claim that is gone, or that
// is bound to another volume.
func (c *Controller) isVolumeReleased(ctx context.Context, volume *corev1.PersistentVolume) (bool, error) {
	if volume.Spec.ClaimRef == nil || volume.Spec.ClaimRef.UID == "" {
		return false, nil
	}
	claim, err := c.claimOf(ctx, volume)
	if err != nil {
		return false, err
	}
	return claim == nil || claim.Spec.VolumeName != "" && claim.Spec.VolumeName != volume.Name, nil
}

// deleteData is the in-tree deleter of the volume's source: hostPath's,
// for paths under /tmp only, as upstream's; no other source has one.
func (c *Controller) deleteData(volume *corev1.PersistentVolume) error {
	if volume.Spec.HostPath == nil {
		return fmt.Errorf("error getting deleter volume plugin for volume %q: %w", volume.Name, errors.New("no deletable volume plugin matched"))
	}
	return c.deleteHostPath(volume.Spec.HostPath.Path)
}

// tmpPath is what upstream's hostPath deleter accepts (unanchored, as
// upstream's).
var tmpPath = regexp.MustCompile("/tmp/.+")

// removeTmpHostPath is upstream's hostPath deleter.
func removeTmpHostPath(path string) error {
	if !tmpPath.MatchString(path) {
		return fmt.Errorf("host_path deleter only supports /tmp/.+ but received provided %s", path)
	}
	return os.RemoveAll(path)
}
