package persistentvolumeclaim

import (
	"context"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

type fakeClasses []*storagev1.StorageClass

func (f fakeClasses) List(context.Context) ([]*storagev1.StorageClass, error) { return f, nil }

func (f fakeClasses) Get(_ context.Context, name string) (*storagev1.StorageClass, error) {
	for _, c := range f {
		if c.Name == name {
			return c, nil
		}
	}
	return nil, apierrors.NewNotFound(storagev1.Resource("storageclasses"), name)
}

func class(name string, age time.Duration, isDefault, expand bool) *storagev1.StorageClass {
	c := &storagev1.StorageClass{ObjectMeta: metav1.ObjectMeta{Name: name, CreationTimestamp: metav1.NewTime(time.Unix(1e9, 0).Add(-age))},
		AllowVolumeExpansion: &expand}
	if isDefault {
		c.Annotations = map[string]string{"storageclass.kubernetes.io/is-default-class": "true"}
	}
	return c
}

func TestDefaultStorageClass(t *testing.T) {
	classes := fakeClasses{class("old", time.Hour, true, false), class("standard", 0, true, true), class("plain", 0, false, false)}
	for _, tc := range []struct {
		name   string
		mutate func(*corev1.PersistentVolumeClaim)
		want   string // "<nil>" none
	}{
		{"no class gets the newest default", nil, "standard"},
		{"an explicit class stays", func(c *corev1.PersistentVolumeClaim) { c.Spec.StorageClassName = ptr.To("plain") }, "plain"},
		{"the empty class asks for none", func(c *corev1.PersistentVolumeClaim) { c.Spec.StorageClassName = ptr.To("") }, ""},
		{"the beta annotation counts", func(c *corev1.PersistentVolumeClaim) {
			c.Annotations = map[string]string{corev1.BetaStorageClassAnnotation: "plain"}
		}, "<nil>"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Name: "data"}}
			if tc.mutate != nil {
				tc.mutate(c)
			}
			if err := (strategy{classes: classes}).Admit(context.Background(), c); err != nil {
				t.Fatal(err)
			}
			if got := ptr.Deref(c.Spec.StorageClassName, "<nil>"); got != tc.want {
				t.Errorf("class %q, want %q", got, tc.want)
			}
			if len(c.Finalizers) != 1 || c.Finalizers[0] != Finalizer {
				t.Errorf("finalizers %v", c.Finalizers)
			}
		})
	}
}

func TestResizeAdmission(t *testing.T) {
	classes := fakeClasses{class("standard", 0, true, true), class("fixed", 0, false, false)}
	claim := func(class string, phase corev1.PersistentVolumeClaimPhase, size string) *corev1.PersistentVolumeClaim {
		return &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Name: "data"},
			Spec: corev1.PersistentVolumeClaimSpec{StorageClassName: &class,
				Resources: corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse(size)}}},
			Status: corev1.PersistentVolumeClaimStatus{Phase: phase}}
	}
	for _, tc := range []struct {
		name     string
		old, new *corev1.PersistentVolumeClaim
		want     string
	}{
		{"expandable", claim("standard", corev1.ClaimBound, "1Gi"), claim("standard", corev1.ClaimBound, "2Gi"), ""},
		{"same size", claim("fixed", corev1.ClaimBound, "1Gi"), claim("fixed", corev1.ClaimBound, "1Gi"), ""},
		{"not expandable", claim("fixed", corev1.ClaimBound, "1Gi"), claim("fixed", corev1.ClaimBound, "2Gi"),
			`persistentvolumeclaims "data" is forbidden: only dynamically provisioned pvc can be resized and the storageclass that provisions the pvc must support resize`},
		{"no such class", claim("gone", corev1.ClaimBound, "1Gi"), claim("gone", corev1.ClaimBound, "2Gi"),
			`persistentvolumeclaims "data" is forbidden: only dynamically provisioned pvc can be resized and the storageclass that provisions the pvc must support resize`},
		{"unbound", claim("standard", corev1.ClaimPending, "1Gi"), claim("standard", corev1.ClaimPending, "2Gi"),
			`persistentvolumeclaims "data" is forbidden: Only bound persistent volume claims can be expanded`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := (strategy{classes: classes}).AdmitUpdate(context.Background(), "", tc.new, tc.old)
			got := ""
			if err != nil {
				got = err.Error()
				if !apierrors.IsForbidden(err) {
					t.Errorf("not a 403: %v", err)
				}
			}
			if got != tc.want {
				t.Errorf("got %q\nwant %q", got, tc.want)
			}
		})
	}
}
