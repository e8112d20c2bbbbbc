package persistentvolume

import (
	"context"
	"fmt"
	"reflect"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	storagehelpers "k8s.io/component-helpers/storage/volume"

	"github.com/svcnet/svcnet/internal/registry/storageclass"
)

// Upstream's event reasons.
const (
	reasonFailedBinding         = "FailedBinding"
	reasonVolumeMismatch        = "VolumeMismatch"
	reasonWaitForFirstConsumer  = "WaitForFirstConsumer"
	reasonWaitForPodScheduled   = "WaitForPodScheduled"
	reasonProvisioningFailed    = "ProvisioningFailed"
	reasonExternalProvisioning  = "ExternalProvisioning"
	reasonClaimLost             = "ClaimLost"
	reasonClaimMisbound         = "ClaimMisbound"
	reasonVolumeFailedDelete    = "VolumeFailedDelete"
	reasonVolumeFailedRecycle   = "VolumeFailedRecycle"
	reasonVolumeUnknownReclaim  = "VolumeUnknownReclaimPolicy"
	messageNoVolumeNoClass      = "no persistent volumes available for this claim and no storage class is set"
	messageWaitForFirstConsumer = "waiting for first consumer to be created before binding"
)

// syncClaim is upstream's: a claim whose binding the controller has not
// completed is matched, else its binding is checked.
func (c *Controller) syncClaim(ctx context.Context, claim *corev1.PersistentVolumeClaim) error {
	if !metav1.HasAnnotation(claim.ObjectMeta, storagehelpers.AnnBindCompleted) {
		return c.syncUnboundClaim(ctx, claim)
	}
	return c.syncBoundClaim(ctx, claim)
}

func (c *Controller) syncUnboundClaim(ctx context.Context, claim *corev1.PersistentVolumeClaim) error {
	if claim.Spec.VolumeName == "" {
		delayBinding, err := storagehelpers.IsDelayBindingMode(claim, c.classes)
		if err != nil {
			return err
		}
		volumes, err := c.volumes.List(labels.Everything())
		if err != nil {
			return err
		}
		volume, err := findBestMatch(claim, volumes, delayBinding)
		if err != nil {
			c.recorder.Event(claim, corev1.EventTypeWarning, reasonFailedBinding, err.Error())
			return err
		}
		if volume != nil {
			return c.bind(ctx, volume, claim)
		}
		if updated, err := c.assignDefaultStorageClass(ctx, claim); updated || err != nil {
			return err
		}
		switch {
		case delayBinding && !storagehelpers.IsDelayBindingProvisioning(claim):
			c.emitEventForUnboundDelayBindingClaim(claim)
		case storagehelpers.GetPersistentVolumeClaimClass(claim) != "":
			return c.provisionClaim(ctx, claim)
		default:
			c.recorder.Event(claim, corev1.EventTypeNormal, reasonFailedBinding, messageNoVolumeNoClass)
		}
		_, err = c.updateClaimStatus(ctx, claim, corev1.ClaimPending, nil)
		return err
	}
	// The user asked for a volume by name.
	volume, err := c.volumes.Get(claim.Spec.VolumeName)
	switch {
	case apierrors.IsNotFound(err):
		_, err = c.updateClaimStatus(ctx, claim, corev1.ClaimPending, nil)
		return err
	case err != nil:
		return err
	case volume.Spec.ClaimRef == nil:
		if err := checkVolumeSatisfyClaim(volume, claim); err != nil {
			c.recorder.Event(claim, corev1.EventTypeWarning, reasonVolumeMismatch,
				fmt.Sprintf("Cannot bind to requested volume %q: %s", volume.Name, err))
			_, err = c.updateClaimStatus(ctx, claim, corev1.ClaimPending, nil)
			return err
		}
		return c.bind(ctx, volume, claim)
	case storagehelpers.IsVolumeBoundToClaim(volume, claim):
		return c.bind(ctx, volume, claim)
	case !metav1.HasAnnotation(claim.ObjectMeta, storagehelpers.AnnBoundByController):
		// Claimed by another claim: wait for it to be released.
		_, err = c.updateClaimStatus(ctx, claim, corev1.ClaimPending, nil)
		return err
	default:
		return fmt.Errorf("invalid binding of claim %q to volume %q: claim already bound to %q",
			claim.Namespace+"/"+claim.Name, claim.Spec.VolumeName, volume.Spec.ClaimRef.Namespace+"/"+volume.Spec.ClaimRef.Name)
	}
}

func (c *Controller) syncBoundClaim(ctx context.Context, claim *corev1.PersistentVolumeClaim) error {
	if claim.Spec.VolumeName == "" {
		_, err := c.updateClaimStatusWithEvent(ctx, claim, corev1.ClaimLost, corev1.EventTypeWarning, reasonClaimLost,
			"Bound claim has lost reference to PersistentVolume. Data on the volume is lost!")
		return err
	}
	volume, err := c.volumes.Get(claim.Spec.VolumeName)
	switch {
	case apierrors.IsNotFound(err):
		_, err = c.updateClaimStatusWithEvent(ctx, claim, corev1.ClaimLost, corev1.EventTypeWarning, reasonClaimLost,
			"Bound claim has lost its PersistentVolume. Data on the volume is lost!")
		return err
	case err != nil:
		return err
	case volume.Spec.ClaimRef == nil, volume.Spec.ClaimRef.UID == claim.UID:
		return c.bind(ctx, volume, claim)
	default:
		_, err = c.updateClaimStatusWithEvent(ctx, claim, corev1.ClaimLost, corev1.EventTypeWarning, reasonClaimMisbound,
			"Two claims are bound to the same volume, this one is bound incorrectly")
		return err
	}
}

// syncVolume is upstream's: it keeps the volume's phase in line with its
// claim, releases and reclaims the volume of a deleted claim, and unbinds
// a volume the controller bound to a claim that got another one.
func (c *Controller) syncVolume(ctx context.Context, volume *corev1.PersistentVolume) error {
	ref := volume.Spec.ClaimRef
	if ref == nil || ref.UID == "" {
		// Unused, or reserved for a claim whose sync binds it.
		_, err := c.updateVolumePhase(ctx, volume, corev1.VolumeAvailable, "")
		return err
	}
	claim, err := c.claimOf(ctx, volume)
	if err != nil {
		return err
	}
	switch {
	case claim == nil:
		if volume.Status.Phase != corev1.VolumeReleased && volume.Status.Phase != corev1.VolumeFailed {
			if volume, err = c.updateVolumePhase(ctx, volume, corev1.VolumeReleased, ""); err != nil {
				return err
			}
		}
		return c.reclaimVolume(ctx, volume)
	case claim.Spec.VolumeName == "":
		if storagehelpers.CheckVolumeModeMismatches(&claim.Spec, &volume.Spec) {
			c.recorder.Event(volume, corev1.EventTypeWarning, reasonVolumeMismatch,
				fmt.Sprintf("Cannot bind PersistentVolume to requested PersistentVolumeClaim %q due to incompatible volumeMode.", claim.Name))
			c.recorder.Event(claim, corev1.EventTypeWarning, reasonVolumeMismatch,
				fmt.Sprintf("Cannot bind PersistentVolume %q to requested PersistentVolumeClaim due to incompatible volumeMode.", volume.Name))
			return nil
		}
		if metav1.HasAnnotation(volume.ObjectMeta, storagehelpers.AnnBoundByController) {
			if _, err := c.updateVolumePhase(ctx, volume, corev1.VolumeAvailable, ""); err != nil {
				return err
			}
		}
		c.claimQueue.Add(claim.Namespace + "/" + claim.Name)
		return nil
	case claim.Spec.VolumeName == volume.Name:
		_, err := c.updateVolumePhase(ctx, volume, corev1.VolumeBound, "")
		return err
	case metav1.HasAnnotation(volume.ObjectMeta, storagehelpers.AnnDynamicallyProvisioned) &&
		volume.Spec.PersistentVolumeReclaimPolicy == corev1.PersistentVolumeReclaimDelete:
		// Provisioned for a claim that got another volume: not needed.
		if volume.Status.Phase != corev1.VolumeReleased && volume.Status.Phase != corev1.VolumeFailed {
			if volume, err = c.updateVolumePhase(ctx, volume, corev1.VolumeReleased, ""); err != nil {
				return err
			}
		}
		return c.reclaimVolume(ctx, volume)
	default:
		return c.unbindVolume(ctx, volume)
	}
}

// claimOf is the claim a volume's claimRef names, nil when it is gone or
// is another claim of the same name: the cache is asked, then the API
// server, so that a claim the cache has not seen yet does not release its
// volume.
func (c *Controller) claimOf(ctx context.Context, volume *corev1.PersistentVolume) (*corev1.PersistentVolumeClaim, error) {
	ref := volume.Spec.ClaimRef
	claim, err := c.claims.PersistentVolumeClaims(ref.Namespace).Get(ref.Name)
	if err != nil && !apierrors.IsNotFound(err) {
		return nil, err
	}
	released := volume.Status.Phase == corev1.VolumeReleased || volume.Status.Phase == corev1.VolumeFailed
	if (claim == nil && !released) || (claim != nil && claim.UID != ref.UID) {
		claim, err = c.client.CoreV1().PersistentVolumeClaims(ref.Namespace).Get(ctx, ref.Name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return nil, nil
		}
		if err != nil {
			return nil, fmt.Errorf("get claim %s/%s: %w", ref.Namespace, ref.Name, err)
		}
	}
	if claim == nil || claim.UID != ref.UID {
		return nil, nil
	}
	return claim, nil
}

// checkVolumeSatisfyClaim is upstream's check of a volume a claim names.
func checkVolumeSatisfyClaim(volume *corev1.PersistentVolume, claim *corev1.PersistentVolumeClaim) error {
	requested := claim.Spec.Resources.Requests[corev1.ResourceStorage]
	capacity := volume.Spec.Capacity[corev1.ResourceStorage]
	if capacity.Cmp(requested) < 0 {
		return fmt.Errorf("requested PV is too small")
	}
	if storagehelpers.GetPersistentVolumeClass(volume) != storagehelpers.GetPersistentVolumeClaimClass(claim) {
		return fmt.Errorf("storageClassName does not match")
	}
	if storagehelpers.CheckVolumeModeMismatches(&claim.Spec, &volume.Spec) {
		return fmt.Errorf("incompatible volumeMode")
	}
	if !storagehelpers.CheckAccessModes(claim, volume) {
		return fmt.Errorf("incompatible accessMode")
	}
	return nil
}

// assignDefaultStorageClass gives a claim that has no class the default
// one (upstream's retroactive default StorageClass assignment).
func (c *Controller) assignDefaultStorageClass(ctx context.Context, claim *corev1.PersistentVolumeClaim) (bool, error) {
	if storagehelpers.PersistentVolumeClaimHasClass(claim) {
		return false, nil
	}
	classes, err := c.classes.List(labels.Everything())
	if err != nil {
		return false, err
	}
	class := storageclass.DefaultClass(classes)
	if class == nil {
		return false, nil
	}
	claim = claim.DeepCopy()
	claim.Spec.StorageClassName = &class.Name
	if _, err := c.client.CoreV1().PersistentVolumeClaims(claim.Namespace).Update(ctx, claim, metav1.UpdateOptions{}); err != nil {
		return false, fmt.Errorf("assign storage class %s to claim %s/%s: %w", class.Name, claim.Namespace, claim.Name, err)
	}
	return true, nil
}

// emitEventForUnboundDelayBindingClaim tells why a WaitForFirstConsumer
// claim waits: for a pod, or for its pods to be scheduled.
func (c *Controller) emitEventForUnboundDelayBindingClaim(claim *corev1.PersistentVolumeClaim) {
	reason, message := reasonWaitForFirstConsumer, messageWaitForFirstConsumer
	pods, _ := c.pods.Pods(claim.Namespace).List(labels.Everything())
	var names []string
	for _, pod := range pods {
		if pod.Spec.NodeName == "" && usesClaim(pod, claim.Name) {
			names = append(names, pod.Name)
		}
	}
	slices.Sort(names)
	switch len(names) {
	case 0:
	case 1:
		reason, message = reasonWaitForPodScheduled, fmt.Sprintf("waiting for pod %s to be scheduled", names[0])
	default:
		reason, message = reasonWaitForPodScheduled, fmt.Sprintf("waiting for pods %s to be scheduled", strings.Join(names, ","))
	}
	c.recorder.Event(claim, corev1.EventTypeNormal, reason, message)
}

// usesClaim reports whether a pod names the claim in its volumes.
func usesClaim(pod *corev1.Pod, claim string) bool {
	for _, v := range pod.Spec.Volumes {
		if v.PersistentVolumeClaim != nil && v.PersistentVolumeClaim.ClaimName == claim {
			return true
		}
	}
	return false
}

// provisionClaim hands the claim to its class's provisioner: every one is
// external here, so the claim is annotated with the provisioner's name,
// which provisions claims that carry it.
func (c *Controller) provisionClaim(ctx context.Context, claim *corev1.PersistentVolumeClaim) error {
	class, err := c.classes.Get(storagehelpers.GetPersistentVolumeClaimClass(claim))
	if err != nil {
		c.recorder.Event(claim, corev1.EventTypeWarning, reasonProvisioningFailed, err.Error())
		return nil
	}
	if claim.Annotations[storagehelpers.AnnStorageProvisioner] != class.Provisioner ||
		claim.Annotations[storagehelpers.AnnBetaStorageProvisioner] != class.Provisioner {
		claim = claim.DeepCopy()
		metav1.SetMetaDataAnnotation(&claim.ObjectMeta, storagehelpers.AnnStorageProvisioner, class.Provisioner)
		metav1.SetMetaDataAnnotation(&claim.ObjectMeta, storagehelpers.AnnBetaStorageProvisioner, class.Provisioner)
		if claim, err = c.client.CoreV1().PersistentVolumeClaims(claim.Namespace).Update(ctx, claim, metav1.UpdateOptions{}); err != nil {
			return fmt.Errorf("annotate claim with its provisioner: %w", err)
		}
	}
	c.recorder.Event(claim, corev1.EventTypeNormal, reasonExternalProvisioning, fmt.Sprintf(
		"Waiting for a volume to be created either by the external provisioner '%s' or manually by the system administrator. If volume creation is delayed, please verify that the provisioner is running and correctly registered.",
		class.Provisioner))
	return nil
}

// bind binds volume and claim to each other, in upstream's order: the
// volume's claimRef, its phase, the claim's volumeName, its status.
func (c *Controller) bind(ctx context.Context, volume *corev1.PersistentVolume, claim *corev1.PersistentVolumeClaim) error {
	volume, dirty, err := storagehelpers.GetBindVolumeToClaim(volume, claim)
	if err != nil {
		return err
	}
	if dirty {
		if volume, err = c.client.CoreV1().PersistentVolumes().Update(ctx, volume, metav1.UpdateOptions{}); err != nil {
			return fmt.Errorf("bind volume %s to claim %s/%s: %w", volume.Name, claim.Namespace, claim.Name, err)
		}
	}
	if volume, err = c.updateVolumePhase(ctx, volume, corev1.VolumeBound, ""); err != nil {
		return err
	}
	if claim, err = c.bindClaimToVolume(ctx, claim, volume); err != nil {
		return err
	}
	_, err = c.updateClaimStatus(ctx, claim, corev1.ClaimBound, volume)
	return err
}

func (c *Controller) bindClaimToVolume(ctx context.Context, claim *corev1.PersistentVolumeClaim, volume *corev1.PersistentVolume) (*corev1.PersistentVolumeClaim, error) {
	clone, dirty := claim.DeepCopy(), false
	if claim.Spec.VolumeName != volume.Name {
		clone.Spec.VolumeName = volume.Name
		if !metav1.HasAnnotation(clone.ObjectMeta, storagehelpers.AnnBoundByController) {
			metav1.SetMetaDataAnnotation(&clone.ObjectMeta, storagehelpers.AnnBoundByController, "yes")
		}
		dirty = true
	}
	if !metav1.HasAnnotation(clone.ObjectMeta, storagehelpers.AnnBindCompleted) {
		metav1.SetMetaDataAnnotation(&clone.ObjectMeta, storagehelpers.AnnBindCompleted, "yes")
		dirty = true
	}
	if !dirty {
		return claim, nil
	}
	out, err := c.client.CoreV1().PersistentVolumeClaims(claim.Namespace).Update(ctx, clone, metav1.UpdateOptions{})
	if err != nil {
		return nil, fmt.Errorf("bind claim %s/%s to volume %s: %w", claim.Namespace, claim.Name, volume.Name, err)
	}
	return out, nil
}

// unbindVolume undoes the controller's binding of a volume (a volume the
// user pre-bound keeps its claimRef without the UID).
func (c *Controller) unbindVolume(ctx context.Context, volume *corev1.PersistentVolume) error {
	clone := volume.DeepCopy()
	if metav1.HasAnnotation(volume.ObjectMeta, storagehelpers.AnnBoundByController) {
		clone.Spec.ClaimRef = nil
		delete(clone.Annotations, storagehelpers.AnnBoundByController)
		if len(clone.Annotations) == 0 {
			clone.Annotations = nil
		}
	} else {
		clone.Spec.ClaimRef.UID = ""
	}
	out, err := c.client.CoreV1().PersistentVolumes().Update(ctx, clone, metav1.UpdateOptions{})
	if err != nil {
		return fmt.Errorf("unbind volume %s: %w", volume.Name, err)
	}
	_, err = c.updateVolumePhase(ctx, out, corev1.VolumeAvailable, "")
	return err
}

// updateClaimStatus sets the claim's phase and, from its volume, its
// access modes and (when it becomes Bound) capacity; without a volume
// both are cleared.
func (c *Controller) updateClaimStatus(ctx context.Context, claim *corev1.PersistentVolumeClaim, phase corev1.PersistentVolumeClaimPhase, volume *corev1.PersistentVolume) (*corev1.PersistentVolumeClaim, error) {
	clone, dirty := claim.DeepCopy(), false
	if claim.Status.Phase != phase {
		clone.Status.Phase, dirty = phase, true
	}
	if volume == nil {
		if claim.Status.AccessModes != nil || claim.Status.Capacity != nil {
			clone.Status.AccessModes, clone.Status.Capacity, dirty = nil, nil, true
		}
	} else {
		if !reflect.DeepEqual(claim.Status.AccessModes, volume.Spec.AccessModes) {
			clone.Status.AccessModes, dirty = volume.Spec.AccessModes, true
		}
		if claim.Status.Phase != phase {
			want := volume.Spec.Capacity[corev1.ResourceStorage]
			if have, ok := claim.Status.Capacity[corev1.ResourceStorage]; !ok || want.Cmp(have) != 0 {
				clone.Status.Capacity, dirty = volume.Spec.Capacity, true
			}
		}
	}
	if !dirty {
		return claim, nil
	}
	out, err := c.client.CoreV1().PersistentVolumeClaims(claim.Namespace).UpdateStatus(ctx, clone, metav1.UpdateOptions{})
	if err != nil {
		return nil, fmt.Errorf("update status of claim %s/%s: %w", claim.Namespace, claim.Name, err)
	}
	return out, nil
}

// updateClaimStatusWithEvent moves the claim to phase (without a volume)
// and says why, once.
func (c *Controller) updateClaimStatusWithEvent(ctx context.Context, claim *corev1.PersistentVolumeClaim, phase corev1.PersistentVolumeClaimPhase, eventType, reason, message string) (*corev1.PersistentVolumeClaim, error) {
	if claim.Status.Phase == phase {
		return claim, nil
	}
	out, err := c.updateClaimStatus(ctx, claim, phase, nil)
	if err != nil {
		return nil, err
	}
	c.recorder.Event(out, eventType, reason, message)
	return out, nil
}

// updateVolumePhase sets the volume's phase, its message and when it
// moved there.
func (c *Controller) updateVolumePhase(ctx context.Context, volume *corev1.PersistentVolume, phase corev1.PersistentVolumePhase, message string) (*corev1.PersistentVolume, error) {
	if volume.Status.Phase == phase {
		return volume, nil
	}
	clone := volume.DeepCopy()
	now := metav1.Now()
	clone.Status.Phase, clone.Status.Message, clone.Status.LastPhaseTransitionTime = phase, message, &now
	out, err := c.client.CoreV1().PersistentVolumes().UpdateStatus(ctx, clone, metav1.UpdateOptions{})
	if err != nil {
		return nil, fmt.Errorf("set volume %s %s: %w", volume.Name, phase, err)
	}
	return out, nil
}

// updateVolumePhaseWithEvent moves the volume to phase and says why, once.
func (c *Controller) updateVolumePhaseWithEvent(ctx context.Context, volume *corev1.PersistentVolume, phase corev1.PersistentVolumePhase, reason, message string) error {
	if volume.Status.Phase == phase {
		return nil
	}
	out, err := c.updateVolumePhase(ctx, volume, phase, message)
	if err != nil {
		return err
	}
	c.recorder.Event(out, corev1.EventTypeWarning, reason, message)
	return nil
}
