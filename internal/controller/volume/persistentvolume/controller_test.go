package persistentvolume

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"
	storagehelpers "k8s.io/component-helpers/storage/volume"
	"k8s.io/utils/ptr"

	"github.com/svcnet/svcnet/internal/controller"
	"github.com/svcnet/svcnet/internal/controller/controllertest"
)

func volume(name, size string, mutate ...func(*corev1.PersistentVolume)) *corev1.PersistentVolume {
	pv := &corev1.PersistentVolume{
		ObjectMeta: metav1.ObjectMeta{Name: name, UID: types.UID("uid-pv-" + name)},
		Spec: corev1.PersistentVolumeSpec{
			Capacity:                      corev1.ResourceList{corev1.ResourceStorage: resource.MustParse(size)},
			AccessModes:                   []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			PersistentVolumeReclaimPolicy: corev1.PersistentVolumeReclaimRetain,
			PersistentVolumeSource:        corev1.PersistentVolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: "/data/" + name}},
		},
		Status: corev1.PersistentVolumeStatus{Phase: corev1.VolumeAvailable},
	}
	for _, m := range mutate {
		m(pv)
	}
	return pv
}

func claim(name, size string, mutate ...func(*corev1.PersistentVolumeClaim)) *corev1.PersistentVolumeClaim {
	pvc := &corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default", UID: types.UID("uid-pvc-" + name)},
		Spec: corev1.PersistentVolumeClaimSpec{
			AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			Resources:   corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse(size)}},
		},
		Status: corev1.PersistentVolumeClaimStatus{Phase: corev1.ClaimPending},
	}
	for _, m := range mutate {
		m(pvc)
	}
	return pvc
}

func class(name, provisioner string, mode storagev1.VolumeBindingMode, isDefault bool) *storagev1.StorageClass {
	sc := &storagev1.StorageClass{ObjectMeta: metav1.ObjectMeta{Name: name}, Provisioner: provisioner, VolumeBindingMode: &mode}
	if isDefault {
		sc.Annotations = map[string]string{"storageclass.kubernetes.io/is-default-class": "true"}
	}
	return sc
}

func noClass(c *corev1.PersistentVolumeClaim) { c.Spec.StorageClassName = ptr.To("") }

func TestFindBestMatch(t *testing.T) {
	rwx := func(pv *corev1.PersistentVolume) {
		pv.Spec.AccessModes = []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce, corev1.ReadWriteMany}
	}
	labelled := func(pv *corev1.PersistentVolume) { pv.Labels = map[string]string{"type": "local"} }
	fast := func(pv *corev1.PersistentVolume) { pv.Spec.StorageClassName = "fast" }
	selector := func(c *corev1.PersistentVolumeClaim) {
		c.Spec.Selector = &metav1.LabelSelector{MatchLabels: map[string]string{"type": "local"}}
	}
	tests := []struct {
		name    string
		volumes []*corev1.PersistentVolume
		claim   *corev1.PersistentVolumeClaim
		delay   bool
		want    string
	}{
		{"smallest that fits", []*corev1.PersistentVolume{volume("a", "10Gi"), volume("b", "5Gi"), volume("c", "1Gi")}, claim("c", "2Gi"), false, "b"},
		{"none big enough", []*corev1.PersistentVolume{volume("a", "5Gi")}, claim("c", "10Gi"), false, ""},
		{"fewest access modes first", []*corev1.PersistentVolume{volume("a", "2Gi", rwx), volume("b", "10Gi")}, claim("c", "1Gi"), false, "b"},
		{"access modes must all be offered", []*corev1.PersistentVolume{volume("a", "5Gi")},
			claim("c", "1Gi", func(c *corev1.PersistentVolumeClaim) {
				c.Spec.AccessModes = []corev1.PersistentVolumeAccessMode{corev1.ReadWriteMany}
			}), false, ""},
		{"selector", []*corev1.PersistentVolume{volume("a", "2Gi"), volume("b", "5Gi", labelled)}, claim("c", "1Gi", selector), false, "b"},
		{"class", []*corev1.PersistentVolume{volume("a", "2Gi"), volume("b", "5Gi", fast)},
			claim("c", "1Gi", func(c *corev1.PersistentVolumeClaim) { c.Spec.StorageClassName = ptr.To("fast") }), false, "b"},
		{"not available", []*corev1.PersistentVolume{volume("a", "2Gi", func(pv *corev1.PersistentVolume) { pv.Status.Phase = corev1.VolumeReleased })},
			claim("c", "1Gi"), false, ""},
		{"pre-bound wins", []*corev1.PersistentVolume{volume("a", "2Gi"), volume("b", "50Gi", func(pv *corev1.PersistentVolume) {
			pv.Spec.ClaimRef = &corev1.ObjectReference{Namespace: "default", Name: "c"}
		})}, claim("c", "1Gi"), false, "b"},
		{"delayed binding leaves unbound volumes to the scheduler", []*corev1.PersistentVolume{volume("a", "2Gi")}, claim("c", "1Gi"), true, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			pv, err := findBestMatch(tt.claim, tt.volumes, tt.delay)
			if err != nil {
				t.Fatal(err)
			}
			got := ""
			if pv != nil {
				got = pv.Name
			}
			if got != tt.want {
				t.Errorf("got %q, want %q", got, tt.want)
			}
		})
	}
}

// start runs the controller on a fake API holding objects; paths records
// the hostPath deleter's calls.
func start(t *testing.T, objects ...runtime.Object) (*fake.Clientset, func() []string) {
	t.Helper()
	cs := controllertest.NewClient(objects...)
	var mu sync.Mutex
	var paths []string
	controllertest.Start(t, cs, func(ctx context.Context, d controller.Deps) []func(context.Context) {
		c, err := New(ctx, d)
		if err != nil {
			t.Fatal(err)
		}
		c.deleteHostPath = func(path string) error {
			mu.Lock()
			defer mu.Unlock()
			paths = append(paths, path)
			if !tmpPath.MatchString(path) {
				return removeTmpHostPath(path) // refuses without removing
			}
			return nil
		}
		return []func(context.Context){c.Run}
	})
	return cs, func() []string {
		mu.Lock()
		defer mu.Unlock()
		return slices.Compact(slices.Sorted(slices.Values(paths)))
	}
}

func getClaim(cs *fake.Clientset, name string) *corev1.PersistentVolumeClaim {
	c, err := cs.CoreV1().PersistentVolumeClaims("default").Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		return &corev1.PersistentVolumeClaim{}
	}
	return c
}

func getVolume(cs *fake.Clientset, name string) (*corev1.PersistentVolume, error) {
	return cs.CoreV1().PersistentVolumes().Get(context.Background(), name, metav1.GetOptions{})
}

// waitEvent waits for an event of the object with reason and message.
func waitEvent(t *testing.T, cs *fake.Clientset, object, reason, message string) {
	t.Helper()
	controllertest.Eventually(t, func() string {
		list, _ := cs.CoreV1().Events("").List(context.Background(), metav1.ListOptions{})
		var seen []string
		for _, e := range list.Items {
			if e.InvolvedObject.Name == object && e.Reason == reason && e.Message == message {
				return ""
			}
			seen = append(seen, e.Reason+": "+e.Message)
		}
		return fmt.Sprintf("no event %s %q of %s; have %q", reason, message, object, seen)
	})
}

func TestBindStatic(t *testing.T) {
	pv := volume("pv-5g", "5Gi", func(pv *corev1.PersistentVolume) { pv.Labels = map[string]string{"type": "local"} })
	pvc := claim("data", "2Gi", noClass, func(c *corev1.PersistentVolumeClaim) {
		c.Spec.Selector = &metav1.LabelSelector{MatchLabels: map[string]string{"type": "local"}}
	})
	cs, _ := start(t, pv, pvc, volume("small", "1Gi"))
	controllertest.Eventually(t, func() string {
		c := getClaim(cs, "data")
		size := c.Status.Capacity[corev1.ResourceStorage]
		if c.Status.Phase != corev1.ClaimBound || c.Spec.VolumeName != "pv-5g" || size.String() != "5Gi" ||
			c.Annotations[storagehelpers.AnnBindCompleted] != "yes" || c.Annotations[storagehelpers.AnnBoundByController] != "yes" {
			return fmt.Sprintf("claim not bound: %+v %v", c.Status, c.Annotations)
		}
		v, _ := getVolume(cs, "pv-5g")
		if v.Status.Phase != corev1.VolumeBound || v.Spec.ClaimRef == nil || v.Spec.ClaimRef.UID != pvc.UID ||
			v.Annotations[storagehelpers.AnnBoundByController] != "yes" || v.Status.LastPhaseTransitionTime == nil {
			return fmt.Sprintf("volume not bound: %+v %+v", v.Status, v.Spec.ClaimRef)
		}
		return ""
	})
}

func TestPendingEvents(t *testing.T) {
	cs, _ := start(t, volume("pv-5g", "5Gi"),
		claim("big", "10Gi", noClass),
		claim("missing", "1Gi", func(c *corev1.PersistentVolumeClaim) { c.Spec.StorageClassName = ptr.To("gold") }),
		claim("later", "1Gi", func(c *corev1.PersistentVolumeClaim) { c.Spec.StorageClassName = ptr.To("standard") }),
		claim("made", "1Gi", func(c *corev1.PersistentVolumeClaim) { c.Spec.StorageClassName = ptr.To("ext") }),
		class("standard", "svcnet.io/local-path", storagev1.VolumeBindingWaitForFirstConsumer, false),
		class("ext", "example.com/nfs", storagev1.VolumeBindingImmediate, false),
	)
	waitEvent(t, cs, "big", "FailedBinding", "no persistent volumes available for this claim and no storage class is set")
	waitEvent(t, cs, "missing", "ProvisioningFailed", `storageclass.storage.k8s.io "gold" not found`)
	waitEvent(t, cs, "later", "WaitForFirstConsumer", "waiting for first consumer to be created before binding")
	waitEvent(t, cs, "made", "ExternalProvisioning", "Waiting for a volume to be created either by the external provisioner 'example.com/nfs' or manually by the system administrator. If volume creation is delayed, please verify that the provisioner is running and correctly registered.")
	c := getClaim(cs, "made")
	if c.Annotations[storagehelpers.AnnStorageProvisioner] != "example.com/nfs" || c.Annotations[storagehelpers.AnnBetaStorageProvisioner] != "example.com/nfs" {
		t.Errorf("provisioner annotations %v", c.Annotations)
	}
	if c := getClaim(cs, "big"); c.Status.Phase != corev1.ClaimPending {
		t.Errorf("big claim %s", c.Status.Phase)
	}
}

func TestWaitForPodScheduled(t *testing.T) {
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "default"}, Spec: corev1.PodSpec{Volumes: []corev1.Volume{{
		Name: "data", VolumeSource: corev1.VolumeSource{PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: "data"}}}}}}
	cs, _ := start(t, pod, claim("data", "1Gi", func(c *corev1.PersistentVolumeClaim) { c.Spec.StorageClassName = ptr.To("standard") }),
		class("standard", "svcnet.io/local-path", storagev1.VolumeBindingWaitForFirstConsumer, true))
	waitEvent(t, cs, "data", "WaitForPodScheduled", "waiting for pod web to be scheduled")
}

func TestRetroactiveDefaultClass(t *testing.T) {
	cs, _ := start(t, claim("data", "1Gi"), class("standard", "svcnet.io/local-path", storagev1.VolumeBindingWaitForFirstConsumer, true))
	controllertest.Eventually(t, func() string {
		if c := getClaim(cs, "data"); ptr.Deref(c.Spec.StorageClassName, "<nil>") != "standard" {
			return "class " + ptr.Deref(c.Spec.StorageClassName, "<nil>")
		}
		return ""
	})
	// A claim that asked for no class keeps none.
	cs, _ = start(t, claim("none", "1Gi", noClass), class("standard", "svcnet.io/local-path", storagev1.VolumeBindingWaitForFirstConsumer, true))
	waitEvent(t, cs, "none", "FailedBinding", "no persistent volumes available for this claim and no storage class is set")
	if c := getClaim(cs, "none"); ptr.Deref(c.Spec.StorageClassName, "<nil>") != "" {
		t.Errorf("class %q", ptr.Deref(c.Spec.StorageClassName, "<nil>"))
	}
}

// released is a volume bound to a claim that is gone.
func released(name string, policy corev1.PersistentVolumeReclaimPolicy, path string, mutate ...func(*corev1.PersistentVolume)) *corev1.PersistentVolume {
	return volume(name, "1Gi", append([]func(*corev1.PersistentVolume){func(pv *corev1.PersistentVolume) {
		pv.Spec.PersistentVolumeReclaimPolicy = policy
		pv.Spec.HostPath.Path = path
		pv.Spec.ClaimRef = &corev1.ObjectReference{Namespace: "default", Name: "gone", UID: "uid-gone"}
		pv.Status.Phase = corev1.VolumeBound
	}}, mutate...)...)
}

func TestReclaim(t *testing.T) {
	cs, paths := start(t,
		released("retain", corev1.PersistentVolumeReclaimRetain, "/data/retain"),
		released("delete-tmp", corev1.PersistentVolumeReclaimDelete, "/tmp/vol"),
		released("delete-data", corev1.PersistentVolumeReclaimDelete, "/data/vol"),
		released("provisioned", corev1.PersistentVolumeReclaimDelete, "/var/lib/x", func(pv *corev1.PersistentVolume) {
			pv.Annotations = map[string]string{storagehelpers.AnnDynamicallyProvisioned: "svcnet.io/local-path"}
		}),
	)
	controllertest.Eventually(t, func() string {
		if _, err := getVolume(cs, "delete-tmp"); !apierrors.IsNotFound(err) {
			return "delete-tmp still there"
		}
		for name, want := range map[string]corev1.PersistentVolumePhase{
			"retain": corev1.VolumeReleased, "delete-data": corev1.VolumeFailed, "provisioned": corev1.VolumeReleased,
		} {
			if v, _ := getVolume(cs, name); v == nil || v.Status.Phase != want {
				return fmt.Sprintf("%s not %s", name, want)
			}
		}
		return ""
	})
	waitEvent(t, cs, "delete-data", "VolumeFailedDelete", "host_path deleter only supports /tmp/.+ but received provided /data/vol")
	if v, _ := getVolume(cs, "delete-data"); v.Status.Message != "host_path deleter only supports /tmp/.+ but received provided /data/vol" {
		t.Errorf("message %q", v.Status.Message)
	}
	// The provisioned volume waits for its provisioner; Retain deletes nothing.
	if got := paths(); !slices.Equal(got, []string{"/data/vol", "/tmp/vol"}) {
		t.Errorf("deleter called for %q", got)
	}
}

func TestUnboundVolumeAvailable(t *testing.T) {
	cs, _ := start(t, volume("new", "1Gi", func(pv *corev1.PersistentVolume) { pv.Status.Phase = corev1.VolumePending }))
	controllertest.Eventually(t, func() string {
		if v, _ := getVolume(cs, "new"); v == nil || v.Status.Phase != corev1.VolumeAvailable {
			return "not Available"
		}
		return ""
	})
}
