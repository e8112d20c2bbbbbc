package quota

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apiserver/pkg/admission"
	quotav1 "k8s.io/apiserver/pkg/quota/v1"
	"k8s.io/utils/ptr"
)

// claim is a ReadWriteOnce claim of storage in class (none when "").
func claim(name, class, storage string) *corev1.PersistentVolumeClaim {
	pvc := &corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: name},
		Spec: corev1.PersistentVolumeClaimSpec{
			AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
		},
	}
	if class != "" {
		pvc.Spec.StorageClassName = ptr.To(class)
	}
	if storage != "" {
		pvc.Spec.Resources.Requests = rl("storage", storage)
	}
	return pvc
}

func claimWith(pvc *corev1.PersistentVolumeClaim, change func(*corev1.PersistentVolumeClaim)) *corev1.PersistentVolumeClaim {
	change(pvc)
	return pvc
}

func TestResourceByStorageClass(t *testing.T) {
	if got := ResourceByStorageClass("gold", corev1.ResourceRequestsStorage); got != "gold.storageclass.storage.k8s.io/requests.storage" {
		t.Errorf("got %s", got)
	}
	if got := ResourceByStorageClass("local-path", corev1.ResourcePersistentVolumeClaims); got != "local-path.storageclass.storage.k8s.io/persistentvolumeclaims" {
		t.Errorf("got %s", got)
	}
}

func TestPVCUsage(t *testing.T) {
	e := NewPersistentVolumeClaimEvaluator(nil)
	for _, tc := range []struct {
		name string
		pvc  *corev1.PersistentVolumeClaim
		want corev1.ResourceList
	}{
		{"no class", claim("data", "", "10Gi"),
			rl("persistentvolumeclaims", "1", "count/persistentvolumeclaims", "1", "requests.storage", "10Gi")},
		{"class", claim("data", "gold", "10Gi"),
			rl("persistentvolumeclaims", "1", "count/persistentvolumeclaims", "1", "requests.storage", "10Gi",
				"gold.storageclass.storage.k8s.io/persistentvolumeclaims", "1", "gold.storageclass.storage.k8s.io/requests.storage", "10Gi")},
		{"empty class", claimWith(claim("data", "", "1Gi"), func(p *corev1.PersistentVolumeClaim) { p.Spec.StorageClassName = ptr.To("") }),
			rl("persistentvolumeclaims", "1", "count/persistentvolumeclaims", "1", "requests.storage", "1Gi")},
		{"beta annotation wins", claimWith(claim("data", "gold", "1Gi"), func(p *corev1.PersistentVolumeClaim) {
			p.Annotations = map[string]string{corev1.BetaStorageClassAnnotation: "silver"}
		}), rl("persistentvolumeclaims", "1", "count/persistentvolumeclaims", "1", "requests.storage", "1Gi",
			"silver.storageclass.storage.k8s.io/persistentvolumeclaims", "1", "silver.storageclass.storage.k8s.io/requests.storage", "1Gi")},
		{"no storage request", claim("data", "gold", ""),
			rl("persistentvolumeclaims", "1", "count/persistentvolumeclaims", "1", "gold.storageclass.storage.k8s.io/persistentvolumeclaims", "1")},
		{"fraction of a byte rounded up", claim("data", "gold", "1500m"),
			rl("persistentvolumeclaims", "1", "count/persistentvolumeclaims", "1", "requests.storage", "2",
				"gold.storageclass.storage.k8s.io/persistentvolumeclaims", "1", "gold.storageclass.storage.k8s.io/requests.storage", "2")},
		{"allocated more than requested", claimWith(claim("data", "", "1Gi"), func(p *corev1.PersistentVolumeClaim) {
			p.Status.AllocatedResources = rl("storage", "5Gi")
			p.Status.Capacity = rl("storage", "1Gi")
		}), rl("persistentvolumeclaims", "1", "count/persistentvolumeclaims", "1", "requests.storage", "5Gi")},
		{"allocated less than requested (expansion asked)", claimWith(claim("data", "", "20Gi"), func(p *corev1.PersistentVolumeClaim) {
			p.Status.AllocatedResources = rl("storage", "10Gi")
		}), rl("persistentvolumeclaims", "1", "count/persistentvolumeclaims", "1", "requests.storage", "20Gi")},
		{"allocated but nothing requested", claimWith(claim("data", "", ""), func(p *corev1.PersistentVolumeClaim) {
			p.Status.AllocatedResources = rl("storage", "10Gi")
		}), rl("persistentvolumeclaims", "1", "count/persistentvolumeclaims", "1")},
		{"bound claim: capacity does not count", claimWith(claim("data", "", "1G"), func(p *corev1.PersistentVolumeClaim) {
			p.Spec.VolumeName = "pv-1"
			p.Status.Phase = corev1.ClaimBound
			p.Status.Capacity = rl("storage", "2Gi")
		}), rl("persistentvolumeclaims", "1", "count/persistentvolumeclaims", "1", "requests.storage", "1G")},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := e.Usage(tc.pvc)
			if err != nil {
				t.Fatal(err)
			}
			checkList(t, "usage", got, tc.want)
		})
	}
	if _, err := e.Usage(webPod()); err == nil {
		t.Error("usage of a pod: no error")
	}
}

func TestPVCMatchingResources(t *testing.T) {
	e := NewPersistentVolumeClaimEvaluator(nil)
	got := e.MatchingResources([]corev1.ResourceName{
		"persistentvolumeclaims", "count/persistentvolumeclaims", "requests.storage",
		"gold.storageclass.storage.k8s.io/requests.storage", "gold.storageclass.storage.k8s.io/persistentvolumeclaims",
		"gold.storageclass.storage.k8s.io/limits.storage", "storage", "limits.storage", "pods", "requests.ephemeral-storage",
	})
	want := []corev1.ResourceName{
		"persistentvolumeclaims", "count/persistentvolumeclaims", "requests.storage",
		"gold.storageclass.storage.k8s.io/requests.storage", "gold.storageclass.storage.k8s.io/persistentvolumeclaims",
	}
	if !equalNames(got, want) {
		t.Errorf("matching resources\n got  %v\n want %v", got, want)
	}
}

func TestPVCScopes(t *testing.T) {
	e := NewPersistentVolumeClaimEvaluator(nil)
	anyClass := exists(corev1.ResourceQuotaScopeVolumeAttributesClass)
	none := scope(corev1.ResourceQuotaScopeVolumeAttributesClass, corev1.ScopeSelectorOpDoesNotExist)
	gold := scope(corev1.ResourceQuotaScopeVolumeAttributesClass, corev1.ScopeSelectorOpIn, "gold")
	notGold := scope(corev1.ResourceQuotaScopeVolumeAttributesClass, corev1.ScopeSelectorOpNotIn, "gold")
	podScope := exists(corev1.ResourceQuotaScopeBestEffort)
	all := []corev1.ScopedResourceSelectorRequirement{anyClass, none, gold, notGold, podScope}
	for _, tc := range []struct {
		name string
		pvc  *corev1.PersistentVolumeClaim
		want []corev1.ScopedResourceSelectorRequirement
	}{
		{"no class", claim("data", "", "1Gi"), []corev1.ScopedResourceSelectorRequirement{none, notGold}},
		{"empty class name", claimWith(claim("data", "", "1Gi"), func(p *corev1.PersistentVolumeClaim) {
			p.Spec.VolumeAttributesClassName = ptr.To("")
		}), []corev1.ScopedResourceSelectorRequirement{none, notGold}},
		{"gold asked", claimWith(claim("data", "", "1Gi"), func(p *corev1.PersistentVolumeClaim) {
			p.Spec.VolumeAttributesClassName = ptr.To("gold")
		}), []corev1.ScopedResourceSelectorRequirement{anyClass, gold}},
		{"silver asked", claimWith(claim("data", "", "1Gi"), func(p *corev1.PersistentVolumeClaim) {
			p.Spec.VolumeAttributesClassName = ptr.To("silver")
		}), []corev1.ScopedResourceSelectorRequirement{anyClass, notGold}},
		{"moving from gold to silver", claimWith(claim("data", "", "1Gi"), func(p *corev1.PersistentVolumeClaim) {
			p.Spec.VolumeAttributesClassName = ptr.To("silver")
			p.Status.CurrentVolumeAttributesClassName = ptr.To("gold")
		}), []corev1.ScopedResourceSelectorRequirement{anyClass, gold, notGold}},
		{"modification to gold in progress", claimWith(claim("data", "", "1Gi"), func(p *corev1.PersistentVolumeClaim) {
			p.Spec.VolumeAttributesClassName = ptr.To("silver")
			p.Status.CurrentVolumeAttributesClassName = ptr.To("silver")
			p.Status.ModifyVolumeStatus = &corev1.ModifyVolumeStatus{TargetVolumeAttributesClassName: "gold", Status: corev1.PersistentVolumeClaimModifyVolumeInProgress}
		}), []corev1.ScopedResourceSelectorRequirement{anyClass, gold, notGold}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := e.MatchingScopes(tc.pvc, all)
			if err != nil {
				t.Fatal(err)
			}
			if !equalScopes(got, tc.want) {
				t.Errorf("scopes\n got  %v\n want %v", got, tc.want)
			}
		})
	}

	goldClaim := claimWith(claim("data", "", "1Gi"), func(p *corev1.PersistentVolumeClaim) { p.Spec.VolumeAttributesClassName = ptr.To("gold") })
	q := &corev1.ResourceQuota{
		Spec:   corev1.ResourceQuotaSpec{ScopeSelector: &corev1.ScopeSelector{MatchExpressions: []corev1.ScopedResourceSelectorRequirement{gold}}},
		Status: corev1.ResourceQuotaStatus{Hard: rl("requests.storage", "100Gi")},
	}
	for pvc, want := range map[*corev1.PersistentVolumeClaim]bool{goldClaim: true, claim("plain", "", "1Gi"): false} {
		if got, err := e.Matches(q, pvc); err != nil || got != want {
			t.Errorf("%s: matches %v, %v; want %v", pvc.Name, got, err, want)
		}
	}
}

func TestPVCHandles(t *testing.T) {
	e := NewPersistentVolumeClaimEvaluator(nil)
	pvc := claim("data", "gold", "10Gi")
	grown := claimWith(claim("data", "gold", "10Gi"), func(p *corev1.PersistentVolumeClaim) { p.Status.AllocatedResources = rl("storage", "20Gi") })
	for _, tc := range []struct {
		name        string
		obj, old    runtime.Object
		subresource string
		op          admission.Operation
		want        bool
	}{
		{"create", pvc, nil, "", admission.Create, true},
		{"update", pvc, pvc, "", admission.Update, true},
		{"delete", nil, pvc, "", admission.Delete, false},
		{"status, allocation grown", grown, pvc, "status", admission.Update, true},
		// Upstream's comparison sees a change in every status update.
		{"status, nothing changed", pvc, pvc, "status", admission.Update, true},
		{"status of no claims", nil, nil, "status", admission.Update, false},
		{"other subresource", pvc, pvc, "scale", admission.Update, false},
	} {
		if got := e.Handles(attrs(tc.obj, tc.old, "persistentvolumeclaims", tc.subresource, tc.op)); got != tc.want {
			t.Errorf("%s: handles %v, want %v", tc.name, got, tc.want)
		}
	}
}

func TestPVCUsageStats(t *testing.T) {
	f := listers(t, map[schema.GroupVersionResource][]runtime.Object{
		pvcsResource: {
			claim("db", "gold", "50Gi"),
			claim("cache", "silver", "10Gi"),
			claimWith(claim("logs", "gold", "5Gi"), func(p *corev1.PersistentVolumeClaim) { p.Spec.VolumeAttributesClassName = ptr.To("fast") }),
			claimWith(claim("elsewhere", "gold", "1Ti"), func(p *corev1.PersistentVolumeClaim) { p.Namespace = "team-b" }),
		},
	})
	e := NewPersistentVolumeClaimEvaluator(f)
	names := []corev1.ResourceName{"persistentvolumeclaims", "requests.storage",
		"gold.storageclass.storage.k8s.io/requests.storage", "bronze.storageclass.storage.k8s.io/persistentvolumeclaims"}
	stats, err := e.UsageStats(quotav1.UsageStatsOptions{Namespace: "team-a", Resources: names})
	if err != nil {
		t.Fatal(err)
	}
	// UsageStats gives every usage of the matching claims, zero for names
	// asked of none; the quota keeps the names it limits.
	checkList(t, "team-a", quotav1.Mask(stats.Used, names), rl("persistentvolumeclaims", "3", "requests.storage", "65Gi",
		"gold.storageclass.storage.k8s.io/requests.storage", "55Gi", "bronze.storageclass.storage.k8s.io/persistentvolumeclaims", "0"))

	stats, err = e.UsageStats(quotav1.UsageStatsOptions{
		Namespace: "team-a", Resources: names,
		ScopeSelector: &corev1.ScopeSelector{MatchExpressions: []corev1.ScopedResourceSelectorRequirement{exists(corev1.ResourceQuotaScopeVolumeAttributesClass)}},
	})
	if err != nil {
		t.Fatal(err)
	}
	checkList(t, "team-a, with a volume attributes class", quotav1.Mask(stats.Used, names), rl("persistentvolumeclaims", "1", "requests.storage", "5Gi",
		"gold.storageclass.storage.k8s.io/requests.storage", "5Gi", "bronze.storageclass.storage.k8s.io/persistentvolumeclaims", "0"))
}
