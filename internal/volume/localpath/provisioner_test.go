package localpath

import (
	"context"
	"fmt"
	"os"
	"testing"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	storagehelpers "k8s.io/component-helpers/storage/volume"
	"k8s.io/utils/ptr"

	"github.com/svcnet/svcnet/internal/controller"
	"github.com/svcnet/svcnet/internal/controller/controllertest"
)

func TestLocalProvisioner(t *testing.T) {
	dir := t.TempDir()
	mode := storagev1.VolumeBindingWaitForFirstConsumer
	sc := &storagev1.StorageClass{ObjectMeta: metav1.ObjectMeta{Name: "standard"}, Provisioner: LocalProvisioner,
		VolumeBindingMode: &mode, ReclaimPolicy: ptr.To(corev1.PersistentVolumeReclaimDelete), AllowVolumeExpansion: ptr.To(true)}
	claim := func(name, node string) *corev1.PersistentVolumeClaim {
		return &corev1.PersistentVolumeClaim{
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default", UID: types.UID("uid-c" + name[:1] + name), Annotations: map[string]string{
				storagehelpers.AnnStorageProvisioner: LocalProvisioner, storagehelpers.AnnSelectedNode: node}},
			Spec: corev1.PersistentVolumeClaimSpec{StorageClassName: ptr.To("standard"),
				AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
				Resources:   corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}}},
		}
	}
	cs := controllertest.NewClient(sc, claim("mine", "n1"), claim("other", "n2"))
	controllertest.Start(t, cs, func(ctx context.Context, d controller.Deps) []func(context.Context) {
		p, err := New(ctx, Config{Client: d.Client, Informers: d.Informers, Metrics: d.Metrics, Provisioner: LocalProvisioner, Dir: dir, NodeName: "n1"})
		if err != nil {
			t.Fatal(err)
		}
		return []func(context.Context){p.Run}
	})
	ctx := context.Background()
	var pv *corev1.PersistentVolume
	controllertest.Eventually(t, func() string {
		var err error
		pv, err = cs.CoreV1().PersistentVolumes().Get(ctx, "pvc-uid-cmmine", metav1.GetOptions{})
		if err != nil {
			return err.Error()
		}
		return ""
	})
	path := dir + "/pvc-uid-cmmine_default_mine"
	if pv.Spec.HostPath == nil || pv.Spec.HostPath.Path != path || pv.Spec.ClaimRef.Name != "mine" ||
		pv.Annotations[storagehelpers.AnnDynamicallyProvisioned] != LocalProvisioner ||
		pv.Spec.PersistentVolumeReclaimPolicy != corev1.PersistentVolumeReclaimDelete ||
		pv.Spec.NodeAffinity.Required.NodeSelectorTerms[0].MatchExpressions[0].Values[0] != "n1" {
		t.Fatalf("volume %+v", pv.Spec)
	}
	if fi, err := os.Stat(path); err != nil || !fi.IsDir() {
		t.Fatalf("directory: %v", err)
	}
	if _, err := cs.CoreV1().PersistentVolumes().Get(ctx, "pvc-uid-coother", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("provisioned another node's claim: %v", err)
	}

	// Bound, then resized.
	c, _ := cs.CoreV1().PersistentVolumeClaims("default").Get(ctx, "mine", metav1.GetOptions{})
	c.Spec.VolumeName = pv.Name
	c.Spec.Resources.Requests[corev1.ResourceStorage] = resource.MustParse("3Gi")
	c.Status = corev1.PersistentVolumeClaimStatus{Phase: corev1.ClaimBound, Capacity: pv.Spec.Capacity}
	if _, err := cs.CoreV1().PersistentVolumeClaims("default").Update(ctx, c, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	controllertest.Eventually(t, func() string {
		c, _ := cs.CoreV1().PersistentVolumeClaims("default").Get(ctx, "mine", metav1.GetOptions{})
		v, _ := cs.CoreV1().PersistentVolumes().Get(ctx, pv.Name, metav1.GetOptions{})
		claimSize, volumeSize := c.Status.Capacity[corev1.ResourceStorage], v.Spec.Capacity[corev1.ResourceStorage]
		if claimSize.String() != "3Gi" || volumeSize.String() != "3Gi" {
			return fmt.Sprintf("claim %s volume %s", claimSize.String(), volumeSize.String())
		}
		return ""
	})

	// Released: the directory, then the volume, go.
	v, _ := cs.CoreV1().PersistentVolumes().Get(ctx, pv.Name, metav1.GetOptions{})
	v.Status.Phase = corev1.VolumeReleased
	if _, err := cs.CoreV1().PersistentVolumes().UpdateStatus(ctx, v, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	controllertest.Eventually(t, func() string {
		if _, err := cs.CoreV1().PersistentVolumes().Get(ctx, pv.Name, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
			return "volume still there"
		}
		if _, err := os.Stat(path); !os.IsNotExist(err) {
			return "directory still there"
		}
		return ""
	})
}
