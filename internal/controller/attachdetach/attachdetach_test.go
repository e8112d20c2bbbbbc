package attachdetach

import (
	"context"
	"fmt"
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/svcnet/svcnet/internal/controller"
	"github.com/svcnet/svcnet/internal/controller/controllertest"
)

const ns = "default"

func node(name string) *corev1.Node {
	return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}}
}

func volume(name string, mode corev1.PersistentVolumeAccessMode) *corev1.PersistentVolume {
	return &corev1.PersistentVolume{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: corev1.PersistentVolumeSpec{
			AccessModes:            []corev1.PersistentVolumeAccessMode{mode},
			Capacity:               corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")},
			PersistentVolumeSource: corev1.PersistentVolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: "/srv/" + name}},
		},
	}
}

func claim(name, pv string) *corev1.PersistentVolumeClaim {
	return &corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec:       corev1.PersistentVolumeClaimSpec{VolumeName: pv},
		Status:     corev1.PersistentVolumeClaimStatus{Phase: corev1.ClaimBound},
	}
}

func pod(name, namespace, node, claim string) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: namespace, UID: types.UID("uid-" + name)},
		Spec: corev1.PodSpec{NodeName: node, Volumes: []corev1.Volume{{Name: "v",
			VolumeSource: corev1.VolumeSource{PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: claim}}}}},
	}
}

func start(t *testing.T, objects ...runtime.Object) *fake.Clientset {
	t.Helper()
	cs := controllertest.NewClient(objects...)
	controllertest.Start(t, cs, func(ctx context.Context, d controller.Deps) []func(context.Context) {
		c, err := New(ctx, d)
		if err != nil {
			t.Fatal(err)
		}
		return []func(context.Context){c.Run}
	})
	return cs
}

func wantAttached(t *testing.T, cs *fake.Clientset, node string, want ...string) {
	t.Helper()
	controllertest.Eventually(t, func() string {
		n, err := cs.CoreV1().Nodes().Get(context.Background(), node, metav1.GetOptions{})
		if err != nil {
			return err.Error()
		}
		var got []string
		for _, v := range n.Status.VolumesAttached {
			got = append(got, string(v.Name))
		}
		if !slices.Equal(got, want) {
			return fmt.Sprintf("node %s has %v attached, want %v", node, got, want)
		}
		return ""
	})
}

func wantEvent(t *testing.T, cs *fake.Clientset, namespace, pod, want string) {
	t.Helper()
	controllertest.Eventually(t, func() string {
		list, err := cs.CoreV1().Events(namespace).List(context.Background(), metav1.ListOptions{})
		if err != nil {
			return err.Error()
		}
		var got []string
		for _, e := range list.Items {
			if e.InvolvedObject.Name == pod {
				got = append(got, e.Source.Component+" "+e.Type+" "+e.Reason+": "+e.Message)
			}
		}
		if !slices.Contains(got, ControllerName+" Warning FailedAttachVolume: "+want) {
			return fmt.Sprintf("events of %s: %q, want %q", pod, got, want)
		}
		return ""
	})
}

// TestMultiAttach: a ReadWriteOnce PV is attached to the first node that
// asks; a pod on another node gets upstream's Multi-Attach event, and the
// volume once the first node's pods are gone. Pods of one node share it.
func TestMultiAttach(t *testing.T) {
	ctx := context.Background()
	cs := start(t, node("a"), node("b"), volume("disk", corev1.ReadWriteOnce), claim("data", "disk"),
		pod("first", ns, "a", "data"), pod("second", ns, "a", "data"))
	wantAttached(t, cs, "a", "kubernetes.io/host-path/disk")
	if _, err := cs.CoreV1().Pods(ns).Create(ctx, pod("elsewhere", ns, "b", "data"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	wantEvent(t, cs, ns, "elsewhere", `Multi-Attach error for volume "disk" Volume is already used by pod(s) first, second`)
	wantAttached(t, cs, "b")
	for _, p := range []string{"first", "second"} {
		if err := cs.CoreV1().Pods(ns).Delete(ctx, p, metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	wantAttached(t, cs, "a")
	wantAttached(t, cs, "b", "kubernetes.io/host-path/disk")
}

// TestMultiAttachOtherNamespaces: the holders in other namespaces are
// counted, not named.
func TestMultiAttachOtherNamespaces(t *testing.T) {
	other := claim("data", "disk")
	other.Namespace = "team"
	cs := start(t, node("a"), node("b"), volume("disk", corev1.ReadWriteOnce), claim("data", "disk"), other,
		pod("holder", "team", "a", "data"))
	wantAttached(t, cs, "a", "kubernetes.io/host-path/disk")
	if _, err := cs.CoreV1().Pods(ns).Create(context.Background(), pod("late", ns, "b", "data"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	wantEvent(t, cs, ns, "late", `Multi-Attach error for volume "disk" Volume is already used by 1 pod(s) in different namespaces`)
}

// TestReadWriteMany: a ReadWriteMany PV is attached to every node that
// uses it; an unbound claim attaches nothing.
func TestReadWriteMany(t *testing.T) {
	cs := start(t, node("a"), node("b"), volume("shared", corev1.ReadWriteMany), claim("data", "shared"),
		&corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Name: "pending", Namespace: ns}},
		pod("x", ns, "a", "data"), pod("y", ns, "b", "data"), pod("z", ns, "b", "pending"))
	wantAttached(t, cs, "a", "kubernetes.io/host-path/shared")
	wantAttached(t, cs, "b", "kubernetes.io/host-path/shared")
}
