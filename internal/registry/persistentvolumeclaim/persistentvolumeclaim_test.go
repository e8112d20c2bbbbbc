package persistentvolumeclaim

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/svcnet/svcnet/internal/registry/registrytest"
)

func newClaim(mutate func(*corev1.PersistentVolumeClaim)) *corev1.PersistentVolumeClaim {
	c := &corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Name: "data", Namespace: "default"},
		Spec: corev1.PersistentVolumeClaimSpec{
			AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			Resources: corev1.VolumeResourceRequirements{
				Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}},
		},
	}
	if mutate != nil {
		mutate(c)
	}
	return registrytest.Created(strategy{}, c)
}

func TestCreate(t *testing.T) {
	c := newClaim(nil)
	if c.Status.Phase != corev1.ClaimPending || *c.Spec.VolumeMode != corev1.PersistentVolumeFilesystem {
		t.Fatalf("phase %q mode %v", c.Status.Phase, *c.Spec.VolumeMode)
	}
	tests := []struct {
		name   string
		mutate func(*corev1.PersistentVolumeClaim)
		want   string
	}{
		{"valid", nil, ""},
		{"no access modes", func(c *corev1.PersistentVolumeClaim) { c.Spec.AccessModes = nil },
			"spec.accessModes: Required value: at least 1 access mode is required"},
		{"no storage", func(c *corev1.PersistentVolumeClaim) { c.Spec.Resources.Requests = nil },
			"spec.resources[storage]: Required value"},
		{"zero storage", func(c *corev1.PersistentVolumeClaim) {
			c.Spec.Resources.Requests[corev1.ResourceStorage] = resource.MustParse("0")
		}, `spec.resources[storage]: Invalid value: "0": must be greater than zero`},
		{"bad class", func(c *corev1.PersistentVolumeClaim) { c.Spec.StorageClassName = ptr.To("Fast_SSD") },
			`spec.storageClassName: Invalid value: "Fast_SSD": a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')`},
		{"data source kind", func(c *corev1.PersistentVolumeClaim) {
			c.Spec.DataSource = &corev1.TypedLocalObjectReference{Kind: "Secret", Name: "s"}
		}, `spec.dataSource: Invalid value: "Secret": must be 'PersistentVolumeClaim' when referencing the default apiGroup`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := registrytest.Joined(strategy{}.Validate(newClaim(tt.mutate))); got != tt.want {
				t.Errorf("got\n%s\nwant\n%s", got, tt.want)
			}
		})
	}
}

func TestUpdate(t *testing.T) {
	const immutable = "spec: Forbidden: spec is immutable after creation except resources.requests and volumeAttributesClassName for bound claims\n"
	bound := func(c *corev1.PersistentVolumeClaim) {
		c.Spec.VolumeName = "pv1"
		c.Status.Phase = corev1.ClaimBound
		c.Status.Capacity = corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}
	}
	tests := []struct {
		name       string
		old        func(*corev1.PersistentVolumeClaim)
		change     func(*corev1.PersistentVolumeClaim)
		wantPrefix string
	}{
		{"bind", nil, func(c *corev1.PersistentVolumeClaim) { c.Spec.VolumeName = "pv1" }, ""},
		{"set class once", nil, func(c *corev1.PersistentVolumeClaim) { c.Spec.StorageClassName = ptr.To("standard") }, ""},
		{"grow bound", bound, func(c *corev1.PersistentVolumeClaim) {
			c.Spec.Resources.Requests[corev1.ResourceStorage] = resource.MustParse("5Gi")
		}, ""},
		{"grow unbound", nil, func(c *corev1.PersistentVolumeClaim) {
			c.Spec.Resources.Requests[corev1.ResourceStorage] = resource.MustParse("5Gi")
		}, immutable},
		{"shrink bound", bound, func(c *corev1.PersistentVolumeClaim) {
			c.Spec.Resources.Requests[corev1.ResourceStorage] = resource.MustParse("500Mi")
		}, "spec.resources.requests.storage: Forbidden: field can not be less than status.capacity"},
		{"rebind", bound, func(c *corev1.PersistentVolumeClaim) { c.Spec.VolumeName = "pv2" }, immutable},
		{"access modes", nil, func(c *corev1.PersistentVolumeClaim) {
			c.Spec.AccessModes = []corev1.PersistentVolumeAccessMode{corev1.ReadWriteMany}
		}, immutable},
		{"annotation class", func(c *corev1.PersistentVolumeClaim) {
			c.Annotations = map[string]string{corev1.BetaStorageClassAnnotation: "old"}
		}, func(c *corev1.PersistentVolumeClaim) { c.Annotations[corev1.BetaStorageClassAnnotation] = "new" },
			`metadata.annotations.volume.beta.kubernetes.io/storage-class: Invalid value: "new": field is immutable`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			old := newClaim(nil)
			if tt.old != nil {
				tt.old(old) // after creation, which resets the status
			}
			updated := old.DeepCopy()
			tt.change(updated)
			got := registrytest.Joined(strategy{}.ValidateUpdate(updated, old))
			if (tt.wantPrefix == "") != (got == "") || !strings.HasPrefix(got, tt.wantPrefix) {
				t.Errorf("got %q, want prefix %q", got, tt.wantPrefix)
			}
		})
	}
}

func TestColumns(t *testing.T) {
	c := newClaim(func(c *corev1.PersistentVolumeClaim) { c.Spec.StorageClassName = ptr.To("standard") })
	if got := registrytest.TextRow(t, Resource(nil).Columns, c); got != "data|Pending||||standard|<unset>|Filesystem" {
		t.Errorf("pending cells = %s", got)
	}
	c.Spec.VolumeName = "pv1"
	c.Status.Phase = corev1.ClaimBound
	c.Status.Capacity = corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("10Gi")}
	c.Status.AccessModes = []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce}
	if got := registrytest.TextRow(t, Resource(nil).Columns, c); got != "data|Bound|pv1|10Gi|RWO|standard|<unset>|Filesystem" {
		t.Errorf("bound cells = %s", got)
	}
}
