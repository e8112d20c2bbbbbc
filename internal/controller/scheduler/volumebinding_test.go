package scheduler

import (
	"context"
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	corelisters "k8s.io/client-go/listers/core/v1"
	storagelisters "k8s.io/client-go/listers/storage/v1"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/component-helpers/storage/volume"

	"github.com/svcnet/svcnet/internal/controller/controllertest"
)

func claim(name string, mods ...func(*corev1.PersistentVolumeClaim)) *corev1.PersistentVolumeClaim {
	c := &corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, UID: types.UID("uid-" + name)},
		Spec: corev1.PersistentVolumeClaimSpec{
			AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			Resources:   corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("2Gi")}},
		},
		Status: corev1.PersistentVolumeClaimStatus{Phase: corev1.ClaimPending},
	}
	for _, m := range mods {
		m(c)
	}
	return c
}

func ofClass(class string) func(*corev1.PersistentVolumeClaim) {
	return func(c *corev1.PersistentVolumeClaim) { c.Spec.StorageClassName = &class }
}

func boundTo(pv string) func(*corev1.PersistentVolumeClaim) {
	return func(c *corev1.PersistentVolumeClaim) {
		c.Spec.VolumeName = pv
		c.Status.Phase = corev1.ClaimBound
		metav1.SetMetaDataAnnotation(&c.ObjectMeta, volume.AnnBindCompleted, "yes")
	}
}

func accessModes(modes ...corev1.PersistentVolumeAccessMode) func(*corev1.PersistentVolumeClaim) {
	return func(c *corev1.PersistentVolumeClaim) { c.Spec.AccessModes = modes }
}

// pv is an Available PV of class and size, on node when node is not "".
func pv(name, class, size, node string, mods ...func(*corev1.PersistentVolume)) *corev1.PersistentVolume {
	v := &corev1.PersistentVolume{
		ObjectMeta: metav1.ObjectMeta{Name: name, ResourceVersion: "1"},
		Spec: corev1.PersistentVolumeSpec{
			StorageClassName: class,
			AccessModes:      []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			Capacity:         corev1.ResourceList{corev1.ResourceStorage: resource.MustParse(size)},
			PersistentVolumeSource: corev1.PersistentVolumeSource{
				Local: &corev1.LocalVolumeSource{Path: "/mnt/" + name},
			},
		},
		Status: corev1.PersistentVolumeStatus{Phase: corev1.VolumeAvailable},
	}
	if node != "" {
		v.Spec.NodeAffinity = &corev1.VolumeNodeAffinity{Required: &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{
			expr(corev1.LabelHostname, corev1.NodeSelectorOpIn, node)}}}
	}
	for _, m := range mods {
		m(v)
	}
	return v
}

func class(name, provisioner string, mode storagev1.VolumeBindingMode, mods ...func(*storagev1.StorageClass)) *storagev1.StorageClass {
	c := &storagev1.StorageClass{ObjectMeta: metav1.ObjectMeta{Name: name}, Provisioner: provisioner, VolumeBindingMode: &mode}
	for _, m := range mods {
		m(c)
	}
	return c
}

func usingClaims(names ...string) func(*corev1.Pod) {
	return func(p *corev1.Pod) {
		for _, n := range names {
			p.Spec.Volumes = append(p.Spec.Volumes, corev1.Volume{Name: n,
				VolumeSource: corev1.VolumeSource{PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: n}}})
		}
	}
}

const (
	wffc      = storagev1.VolumeBindingWaitForFirstConsumer
	immediate = storagev1.VolumeBindingImmediate
)

// withVolumes is an offline scheduler that reads claims, PVs and
// classes from objects.
func withVolumes(nodeList []*corev1.Node, assigned []*corev1.Pod, objects ...runtime.Object) *Scheduler {
	s := offline(nodeList, assigned...)
	idx := func() toolscache.Indexer {
		return toolscache.NewIndexer(toolscache.MetaNamespaceKeyFunc, toolscache.Indexers{toolscache.NamespaceIndex: toolscache.MetaNamespaceIndexFunc})
	}
	pvcs, pvs, classes, pods := idx(), idx(), idx(), idx()
	for _, o := range objects {
		switch o.(type) {
		case *corev1.PersistentVolumeClaim:
			_ = pvcs.Add(o)
		case *corev1.PersistentVolume:
			_ = pvs.Add(o)
		case *storagev1.StorageClass:
			_ = classes.Add(o)
		}
	}
	s.volumes = &volumeBinding{pvcs: corelisters.NewPersistentVolumeClaimLister(pvcs), pvs: corelisters.NewPersistentVolumeLister(pvs),
		classes: storagelisters.NewStorageClassLister(classes), pods: corelisters.NewPodLister(pods)}
	return s
}

// TestVolumeFilters places a pod with claims, as upstream's VolumeBinding
// and VolumeRestrictions would, word for word.
func TestVolumeFilters(t *testing.T) {
	two := nodes(node("a"), node("b"))
	local := class("local", volume.NotSupportedProvisioner, wffc)
	standard := class("standard", "svcnet.io/local", wffc)
	onlyA := class("zoned", "svcnet.io/local", wffc, func(c *storagev1.StorageClass) {
		c.AllowedTopologies = []corev1.TopologySelectorTerm{{MatchLabelExpressions: []corev1.TopologySelectorLabelRequirement{
			{Key: corev1.LabelHostname, Values: []string{"a"}}}}}
	})
	rejected := func(msg string) string {
		return "0/2 nodes are available: " + msg + ". preemption: 0/2 nodes are available: 2 " + notHelpful + "."
	}
	tests := []struct {
		name     string
		objects  []runtime.Object
		assigned []*corev1.Pod
		pod      *corev1.Pod
		want     string
	}{
		{"claim not found", nil, nil, pod("p", usingClaims("data")), rejected(`persistentvolumeclaim "data" not found`)},
		{"claim being deleted", []runtime.Object{claim("data", func(c *corev1.PersistentVolumeClaim) { c.DeletionTimestamp = &metav1.Time{Time: time.Now()} })},
			nil, pod("p", usingClaims("data")), rejected(`persistentvolumeclaim "data" is being deleted`)},
		{"claim lost", []runtime.Object{claim("data", func(c *corev1.PersistentVolumeClaim) { c.Spec.VolumeName, c.Status.Phase = "gone", corev1.ClaimLost })},
			nil, pod("p", usingClaims("data")), rejected(`persistentvolumeclaim "data" bound to non-existent persistentvolume "gone"`)},
		{"unbound classless claim", []runtime.Object{claim("data")}, nil, pod("p", usingClaims("data")),
			rejected("pod has unbound immediate PersistentVolumeClaims")},
		{"unbound immediate claim", []runtime.Object{claim("data", ofClass("fast")), class("fast", "x", immediate)}, nil, pod("p", usingClaims("data")),
			rejected("pod has unbound immediate PersistentVolumeClaims")},
		{"bound claim follows its PV", []runtime.Object{claim("data", boundTo("v")), pv("v", "", "5Gi", "b")}, nil, pod("p", usingClaims("data")), "b"},
		{"bound claim whose PV fits no node", []runtime.Object{claim("data", boundTo("v")), pv("v", "", "5Gi", "c")}, nil, pod("p", usingClaims("data")),
			rejected("2 node(s) had volume node affinity conflict")},
		{"bound claim whose PV is gone", []runtime.Object{claim("data", boundTo("v"))}, nil, pod("p", usingClaims("data")),
			rejected("2 node(s) unavailable due to one or more pvc(s) bound to non-existent pv(s)")},
		{"first consumer goes where the PV is", []runtime.Object{claim("data", ofClass("local")), local, pv("v", "local", "5Gi", "b")}, nil,
			pod("p", usingClaims("data")), "b"},
		{"no PV and no provisioner", []runtime.Object{claim("data", ofClass("local")), local}, nil, pod("p", usingClaims("data")),
			rejected("2 node(s) didn't find available persistent volumes to bind")},
		{"PV too small", []runtime.Object{claim("data", ofClass("local")), local, pv("v", "local", "1Gi", "")}, nil, pod("p", usingClaims("data")),
			rejected("2 node(s) didn't find available persistent volumes to bind")},
		{"PV of another access mode", []runtime.Object{claim("data", ofClass("local"), accessModes(corev1.ReadWriteMany)), local, pv("v", "local", "5Gi", "")}, nil,
			pod("p", usingClaims("data")), rejected("2 node(s) didn't find available persistent volumes to bind")},
		{"PV not Available", []runtime.Object{claim("data", ofClass("local")), local,
			pv("v", "local", "5Gi", "", func(v *corev1.PersistentVolume) { v.Status.Phase = corev1.VolumePending })}, nil,
			pod("p", usingClaims("data")), rejected("2 node(s) didn't find available persistent volumes to bind")},
		{"PV the selector does not pick", []runtime.Object{claim("data", ofClass("local"), func(c *corev1.PersistentVolumeClaim) {
			c.Spec.Selector = &metav1.LabelSelector{MatchLabels: map[string]string{"tier": "gold"}}
		}), local, pv("v", "local", "5Gi", "a"), pv("w", "local", "5Gi", "b", func(v *corev1.PersistentVolume) { v.Labels = map[string]string{"tier": "gold"} })},
			nil, pod("p", usingClaims("data")), "b"},
		{"PV taken by another claim", []runtime.Object{claim("data", ofClass("local")), local,
			pv("v", "local", "5Gi", "", func(v *corev1.PersistentVolume) {
				v.Spec.ClaimRef = &corev1.ObjectReference{Namespace: ns, Name: "other"}
			})}, nil,
			pod("p", usingClaims("data")), rejected("2 node(s) didn't find available persistent volumes to bind")},
		{"provisioned anywhere", []runtime.Object{claim("data", ofClass("standard")), standard}, nil, pod("p", usingClaims("data"), selecting(corev1.LabelHostname, "b")), "b"},
		{"provisioned where the class allows", []runtime.Object{claim("data", ofClass("zoned")), onlyA}, nil, pod("p", usingClaims("data")), "a"},
		{"provisioned where the class allows, nowhere else", []runtime.Object{claim("data", ofClass("zoned")), onlyA}, nil,
			pod("p", usingClaims("data"), selecting(corev1.LabelHostname, "b")),
			"0/2 nodes are available: 1 node(s) didn't find available persistent volumes to bind, 1 node(s) didn't match Pod's node affinity/selector. preemption: 0/2 nodes are available: 2 " + notHelpful + "."},
		{"selected node already chosen", []runtime.Object{claim("data", ofClass("standard"), func(c *corev1.PersistentVolumeClaim) {
			metav1.SetMetaDataAnnotation(&c.ObjectMeta, volume.AnnSelectedNode, "a")
		}), standard}, nil, pod("p", usingClaims("data")), "a"},
		{"ReadWriteOncePod claim in use", []runtime.Object{claim("data", boundTo("v"), accessModes(corev1.ReadWriteOncePod)), pv("v", "", "5Gi", "")},
			[]*corev1.Pod{pod("first", onNode("a"), usingClaims("data"))}, pod("p", usingClaims("data")),
			"0/2 nodes are available: 2 " + reasonReadWriteOncePodConflict + ". preemption: 0/2 nodes are available: 2 " + noVictims + "."},
		{"ReadWriteOnce claim shared", []runtime.Object{claim("data", boundTo("v")), pv("v", "", "5Gi", "b")},
			[]*corev1.Pod{pod("first", onNode("b"), usingClaims("data"))}, pod("p", usingClaims("data")), "b"},
		{"ReadWriteOncePod claim free again", []runtime.Object{claim("data", boundTo("v"), accessModes(corev1.ReadWriteOncePod)), pv("v", "", "5Gi", "b")},
			[]*corev1.Pod{pod("first", onNode("b"), usingClaims("data"), func(p *corev1.Pod) { p.Status.Phase = corev1.PodSucceeded })},
			pod("p", usingClaims("data")), "b"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var live []*corev1.Pod
			for _, p := range tt.assigned {
				if !terminal(p) {
					live = append(live, p)
				}
			}
			wantSchedule(t, withVolumes(two, live, tt.objects...), tt.pod, tt.want)
		})
	}
}

// TestAssumedPVs: two pods placed at once with claims of the same size
// take two PVs, the smallest that fit, and the chosen node's binding
// pre-binds the PV or selects the node.
func TestAssumedPVs(t *testing.T) {
	local := class("local", volume.NotSupportedProvisioner, wffc)
	s := withVolumes(nodes(node("a")), nil, claim("one", ofClass("local")), claim("two", ofClass("local")), claim("three", ofClass("local")), local,
		pv("big", "local", "10Gi", "a"), pv("small", "local", "3Gi", "a"))
	var got []string
	for _, c := range []string{"one", "two"} {
		chosen, vols, msg, _ := s.schedule(pod(c, usingClaims(c)))
		if chosen != "a" || vols == nil || len(vols.static) != 1 {
			t.Fatalf("pod %s: node %q, volumes %+v, message %q", c, chosen, vols, msg)
		}
		b := vols.static[0]
		if ref := b.pv.Spec.ClaimRef; ref == nil || ref.Name != c || ref.UID != types.UID("uid-"+c) || b.pv.Annotations[volume.AnnBoundByController] != "yes" || !b.dirty {
			t.Errorf("pod %s pre-binds %s as %+v %v", c, b.pv.Name, ref, b.pv.Annotations)
		}
		got = append(got, b.pv.Name)
	}
	if fmt.Sprint(got) != "[small big]" {
		t.Errorf("PVs taken %v, want [small big]", got)
	}
	wantSchedule(t, s, pod("three", usingClaims("three")),
		"0/1 nodes are available: 1 node(s) didn't find available persistent volumes to bind. preemption: 0/1 nodes are available: 1 "+notHelpful+".")

	s = withVolumes(nodes(node("a"), node("b")), nil, claim("data", ofClass("standard")), class("standard", "svcnet.io/local", wffc))
	chosen, vols, _, _ := s.schedule(pod("p", usingClaims("data")))
	if vols == nil || len(vols.provision) != 1 || vols.provision[0].Annotations[volume.AnnSelectedNode] != chosen {
		t.Errorf("provisioning on %s: %+v", chosen, vols)
	}
}

// TestPreBind runs the binding cycle: the scheduler pre-binds the static
// PV on the chosen node and binds the pod only once the claim is bound
// (the test plays the PV controller); a claim that stays unbound fails
// the attempt after the bind timeout with upstream's event.
func TestPreBind(t *testing.T) {
	ctx := context.Background()
	local := class("local", volume.NotSupportedProvisioner, wffc)
	opts := DefaultOptions()
	opts.BindTimeout = 300 * time.Millisecond
	cs, _ := startWith(t, false, opts, node("a"), node("b"), local, claim("data", ofClass("local")), pv("v", "local", "5Gi", "b"),
		pod("p", usingClaims("data")))
	controllertest.Eventually(t, func() string {
		v, err := cs.CoreV1().PersistentVolumes().Get(ctx, "v", metav1.GetOptions{})
		if err != nil || v.Spec.ClaimRef == nil || v.Spec.ClaimRef.Name != "data" || v.Annotations[volume.AnnBoundByController] != "yes" {
			return fmt.Sprintf("PV not pre-bound: %+v (%v)", v, err)
		}
		return ""
	})
	if n := getPod(t, cs, "p").Spec.NodeName; n != "" {
		t.Fatalf("pod bound to %s before its claim", n)
	}
	wantEvent(t, cs, "p", `Warning FailedScheduling: running PreBind plugin "VolumeBinding": binding volumes: context deadline exceeded`)
	controllertest.Eventually(t, func() string {
		if c := getPod(t, cs, "p").Status.Conditions; len(c) != 1 || c[0].Reason != corev1.PodReasonSchedulerError {
			return fmt.Sprintf("conditions %+v, want PodScheduled False SchedulerError", c)
		}
		return ""
	})
	// As the PV controller: the claim bound to the PV.
	c, err := cs.CoreV1().PersistentVolumeClaims(ns).Get(ctx, "data", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	boundTo("v")(c)
	if _, err := cs.CoreV1().PersistentVolumeClaims(ns).Update(ctx, c, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	wantNode(t, cs, "p", "b")
}
