package persistentvolume

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/svcnet/svcnet/internal/registry/registrytest"
)

func newPV(mutate func(*corev1.PersistentVolume)) *corev1.PersistentVolume {
	pv := &corev1.PersistentVolume{
		ObjectMeta: metav1.ObjectMeta{Name: "pv1"},
		Spec: corev1.PersistentVolumeSpec{
			Capacity:               corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("10Gi")},
			AccessModes:            []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			PersistentVolumeSource: corev1.PersistentVolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: "/data/pv1"}},
		},
	}
	if mutate != nil {
		mutate(pv)
	}
	return registrytest.Created(strategy{}, pv)
}

func TestDefaults(t *testing.T) {
	pv := newPV(nil)
	if pv.Status.Phase != corev1.VolumePending || pv.Status.LastPhaseTransitionTime == nil {
		t.Errorf("status = %+v", pv.Status)
	}
	if pv.Spec.PersistentVolumeReclaimPolicy != corev1.PersistentVolumeReclaimRetain {
		t.Errorf("reclaim policy = %q", pv.Spec.PersistentVolumeReclaimPolicy)
	}
	if *pv.Spec.VolumeMode != corev1.PersistentVolumeFilesystem || *pv.Spec.HostPath.Type != corev1.HostPathUnset {
		t.Errorf("volumeMode %v hostPath type %v", *pv.Spec.VolumeMode, *pv.Spec.HostPath.Type)
	}
	if got := registrytest.Joined(strategy{}.Validate(pv)); got != "" {
		t.Errorf("defaulted PV invalid: %s", got)
	}
}

func TestValidate(t *testing.T) {
	tests := []struct {
		name   string
		mutate func(*corev1.PersistentVolume)
		want   string
	}{
		{"no access modes", func(pv *corev1.PersistentVolume) { pv.Spec.AccessModes = nil }, "spec.accessModes: Required value"},
		{"bad access mode", func(pv *corev1.PersistentVolume) {
			pv.Spec.AccessModes = []corev1.PersistentVolumeAccessMode{"ReadSometimes"}
		},
			`spec.accessModes: Unsupported value: "ReadSometimes": supported values: "ReadOnlyMany", "ReadWriteMany", "ReadWriteOnce", "ReadWriteOncePod"`},
		{"once pod with others", func(pv *corev1.PersistentVolume) {
			pv.Spec.AccessModes = []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOncePod, corev1.ReadWriteOnce}
		}, "spec.accessModes: Forbidden: may not use ReadWriteOncePod with other access modes"},
		{"no capacity", func(pv *corev1.PersistentVolume) { pv.Spec.Capacity = nil },
			"spec.capacity: Required value\n" + `spec.capacity: Unsupported value: null: supported values: "storage"`},
		{"zero capacity", func(pv *corev1.PersistentVolume) { pv.Spec.Capacity[corev1.ResourceStorage] = resource.MustParse("0") },
			`spec.capacity[storage]: Invalid value: "0": must be greater than zero`},
		{"no source", func(pv *corev1.PersistentVolume) { pv.Spec.HostPath = nil }, "spec: Required value: must specify a volume type"},
		{"two sources", func(pv *corev1.PersistentVolume) {
			pv.Spec.NFS = &corev1.NFSVolumeSource{Server: "nfs", Path: "/x"}
		}, "spec.nfs: Forbidden: may not specify more than 1 volume type"},
		{"relative nfs", func(pv *corev1.PersistentVolume) {
			pv.Spec.HostPath = nil
			pv.Spec.NFS = &corev1.NFSVolumeSource{Server: "nfs", Path: "x"}
		}, `spec.nfs.path: Invalid value: "x": must be an absolute path`},
		{"local without affinity", func(pv *corev1.PersistentVolume) {
			pv.Spec.HostPath = nil
			pv.Spec.Local = &corev1.LocalVolumeSource{Path: "/mnt/disk"}
		}, "spec.nodeAffinity: Required value: Local volume requires node affinity"},
		{"bad reclaim policy", func(pv *corev1.PersistentVolume) { pv.Spec.PersistentVolumeReclaimPolicy = "Keep" },
			`spec.persistentVolumeReclaimPolicy: Unsupported value: "Keep": supported values: "Delete", "Recycle", "Retain"`},
		{"csi", func(pv *corev1.PersistentVolume) {
			pv.Spec.HostPath = nil
			pv.Spec.CSI = &corev1.CSIPersistentVolumeSource{Driver: "csi.example.com", NodePublishSecretRef: &corev1.SecretReference{Name: "s"}}
		}, "spec.csi.volumeHandle: Required value\nspec.csi.nodePublishSecretRef.namespace: Required value"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := registrytest.Joined(strategy{}.Validate(newPV(tt.mutate))); got != tt.want {
				t.Errorf("got\n%s\nwant\n%s", got, tt.want)
			}
		})
	}
}

func TestValidateUpdate(t *testing.T) {
	old := newPV(nil)
	moved := old.DeepCopy()
	moved.Spec.HostPath.Path = "/data/elsewhere"
	if got := registrytest.Joined(strategy{}.ValidateUpdate(moved, old)); !strings.HasPrefix(got, "spec.persistentvolumesource: Forbidden: spec.persistentvolumesource is immutable after creation\n") {
		t.Errorf("got %q", got)
	}
	block := old.DeepCopy()
	block.Spec.VolumeMode = ptr.To(corev1.PersistentVolumeBlock)
	if got := registrytest.Joined(strategy{}.ValidateUpdate(block, old)); got != `volumeMode: Invalid value: "Block": field is immutable` {
		t.Errorf("got %q", got)
	}
	claimed := old.DeepCopy()
	claimed.Spec.ClaimRef = &corev1.ObjectReference{Namespace: "default", Name: "data"}
	claimed.Spec.Capacity[corev1.ResourceStorage] = resource.MustParse("20Gi")
	if got := registrytest.Joined(strategy{}.ValidateUpdate(claimed, old)); got != "" {
		t.Errorf("binding and resizing rejected: %s", got)
	}
}

func TestColumns(t *testing.T) {
	pv := newPV(func(pv *corev1.PersistentVolume) {
		pv.Spec.AccessModes = []corev1.PersistentVolumeAccessMode{corev1.ReadWriteMany, corev1.ReadWriteOnce, corev1.ReadWriteOnce}
		pv.Spec.ClaimRef = &corev1.ObjectReference{Namespace: "default", Name: "data"}
		pv.Spec.StorageClassName = "standard"
	})
	pv.Status.Phase = corev1.VolumeBound
	cols := Resource().Columns
	if got := strings.Join(registrytest.Names(cols), ","); got != "Name,Capacity,Access Modes,Reclaim Policy,Status,Claim,StorageClass,VolumeAttributesClass,Reason,Age,VolumeMode" {
		t.Errorf("columns = %s", got)
	}
	if got := registrytest.TextRow(t, cols, pv); got != "pv1|10Gi|RWO,RWX|Retain|Bound|default/data|standard|<unset>||Filesystem" {
		t.Errorf("cells = %s", got)
	}
	if cols[len(cols)-1].Priority != 1 {
		t.Error("VolumeMode is a wide column")
	}
	pv.Annotations = map[string]string{corev1.BetaStorageClassAnnotation: "legacy"}
	now := metav1.Now()
	pv.DeletionTimestamp = &now
	if cols[6].Cell(pv) != "legacy" || cols[4].Cell(pv) != "Terminating" {
		t.Errorf("class %v status %v", cols[6].Cell(pv), cols[4].Cell(pv))
	}
	if got := AccessModesString([]corev1.PersistentVolumeAccessMode{corev1.ReadWriteOncePod, corev1.ReadOnlyMany}); got != "ROX,RWOP" {
		t.Errorf("access modes = %s", got)
	}
}
