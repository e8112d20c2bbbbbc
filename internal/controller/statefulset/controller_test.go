package statefulset

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"sort"
	"strings"
	"sync/atomic"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/utils/ptr"

	"github.com/svcnet/svcnet/internal/controller"
	"github.com/svcnet/svcnet/internal/controller/controllertest"
)

const ns = "default"

var ctx = context.Background()

// world is a fake API server with a controller running against it. Pods
// are created Pending, as the API server does; with autoReady they are
// created Running and Ready instead, as if a kubelet started them at once.
type world struct {
	t         *testing.T
	cs        *fake.Clientset
	autoReady atomic.Bool
	// deleted lists the names of the pods deleted, in order.
	deleted chan string
}

func start(t *testing.T, autoReady bool, objects ...runtime.Object) *world {
	t.Helper()
	w := &world{t: t, cs: controllertest.NewClient(objects...), deleted: make(chan string, 100)}
	w.autoReady.Store(autoReady)
	w.cs.PrependReactor("create", "pods", func(a k8stesting.Action) (bool, runtime.Object, error) {
		pod := a.(k8stesting.CreateAction).GetObject().(*corev1.Pod)
		pod.Status = corev1.PodStatus{Phase: corev1.PodPending}
		if w.autoReady.Load() {
			pod.Status = readyStatus()
		}
		return false, nil, nil
	})
	// A delete honours its UID precondition, as on the API server; only
	// deletions that happen are listed.
	w.cs.PrependReactor("delete", "pods", func(a k8stesting.Action) (bool, runtime.Object, error) {
		d := a.(k8stesting.DeleteAction)
		stored, err := w.cs.Tracker().Get(a.GetResource(), a.GetNamespace(), d.GetName())
		if err != nil {
			return true, nil, err
		}
		if pre := d.GetDeleteOptions().Preconditions; pre != nil && pre.UID != nil && *pre.UID != stored.(*corev1.Pod).UID {
			return true, nil, apierrors.NewConflict(a.GetResource().GroupResource(), d.GetName(), fmt.Errorf("the UID in the precondition (%s) does not match the UID in record (%s)", *pre.UID, stored.(*corev1.Pod).UID))
		}
		w.deleted <- d.GetName()
		return false, nil, nil
	})
	controllertest.Start(t, w.cs, func(ctx context.Context, d controller.Deps) []func(context.Context) {
		c, err := New(ctx, d, Options{Workers: 2})
		if err != nil {
			t.Fatal(err)
		}
		return []func(context.Context){c.Run}
	})
	return w
}

func readyStatus() corev1.PodStatus {
	return corev1.PodStatus{Phase: corev1.PodRunning, Conditions: []corev1.PodCondition{
		{Type: corev1.PodReady, Status: corev1.ConditionTrue, LastTransitionTime: metav1.Now()}}}
}

func web(replicas int32, change ...func(*appsv1.StatefulSet)) *appsv1.StatefulSet {
	labels := map[string]string{"app": "nginx"}
	set := &appsv1.StatefulSet{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: ns, UID: "uid-web", Generation: 1},
		Spec: appsv1.StatefulSetSpec{
			Replicas:            &replicas,
			Selector:            &metav1.LabelSelector{MatchLabels: labels},
			ServiceName:         "nginx",
			PodManagementPolicy: appsv1.OrderedReadyPodManagement,
			UpdateStrategy: appsv1.StatefulSetUpdateStrategy{Type: appsv1.RollingUpdateStatefulSetStrategyType,
				RollingUpdate: &appsv1.RollingUpdateStatefulSetStrategy{Partition: ptr.To[int32](0), MaxUnavailable: ptr.To(intstr.FromInt32(1))}},
			RevisionHistoryLimit: ptr.To[int32](10),
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "nginx", Image: "nginx:1.25"}}},
			},
			VolumeClaimTemplates: []corev1.PersistentVolumeClaim{{
				ObjectMeta: metav1.ObjectMeta{Name: "www"},
				Spec: corev1.PersistentVolumeClaimSpec{AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
					Resources: corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}}},
			}},
		},
	}
	for _, c := range change {
		c(set)
	}
	return set
}

func (w *world) pods() []corev1.Pod {
	list, err := w.cs.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		w.t.Fatal(err)
	}
	sort.Slice(list.Items, func(i, j int) bool { return list.Items[i].Name < list.Items[j].Name })
	return list.Items
}

// podNames lists the pods as "name" or "name(revision)" when withRevision.
func (w *world) podNames(withRevision bool) string {
	var out []string
	for _, p := range w.pods() {
		if withRevision {
			out = append(out, p.Name+"("+p.Labels[appsv1.StatefulSetRevisionLabel]+")")
		} else {
			out = append(out, p.Name)
		}
	}
	return strings.Join(out, ",")
}

func (w *world) wantPods(want string) {
	w.t.Helper()
	controllertest.Eventually(w.t, func() string {
		if got := w.podNames(false); got != want {
			return fmt.Sprintf("pods %q, want %q", got, want)
		}
		return ""
	})
}

// ready makes the pod Running and Ready, as its kubelet would.
func (w *world) ready(name string) {
	w.t.Helper()
	w.podStatus(name, func(st *corev1.PodStatus) { *st = readyStatus() })
}

// podStatus changes the pod's status, as its kubelet would.
func (w *world) podStatus(name string, change func(*corev1.PodStatus)) {
	w.t.Helper()
	controllertest.RetryOnConflict(w.t, func() error {
		pod, err := w.cs.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		change(&pod.Status)
		_, err = w.cs.CoreV1().Pods(ns).UpdateStatus(ctx, pod, metav1.UpdateOptions{})
		return err
	})
}

func (w *world) set() *appsv1.StatefulSet {
	set, err := w.cs.AppsV1().StatefulSets(ns).Get(ctx, "web", metav1.GetOptions{})
	if err != nil {
		w.t.Fatal(err)
	}
	return set
}

func (w *world) change(f func(*appsv1.StatefulSet)) {
	w.t.Helper()
	controllertest.RetryOnConflict(w.t, func() error {
		set := w.set()
		f(set)
		_, err := w.cs.AppsV1().StatefulSets(ns).Update(ctx, set, metav1.UpdateOptions{})
		return err
	})
}

// wantStatus waits until status, rendered by render, is want.
func (w *world) wantStatus(want string) {
	w.t.Helper()
	controllertest.Eventually(w.t, func() string {
		if got := renderStatus(w.set()); got != want {
			return fmt.Sprintf("status %s, want %s", got, want)
		}
		return ""
	})
}

func renderStatus(set *appsv1.StatefulSet) string {
	s := set.Status
	return fmt.Sprintf("gen=%d replicas=%d ready=%d available=%d current=%d updated=%d", s.ObservedGeneration, s.Replicas,
		s.ReadyReplicas, s.AvailableReplicas, s.CurrentReplicas, s.UpdatedReplicas)
}

func (w *world) revisions() []appsv1.ControllerRevision {
	list, err := w.cs.AppsV1().ControllerRevisions(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		w.t.Fatal(err)
	}
	sort.Slice(list.Items, func(i, j int) bool { return list.Items[i].Revision < list.Items[j].Revision })
	return list.Items
}

func (w *world) events() []string {
	list, err := w.cs.CoreV1().Events(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		w.t.Fatal(err)
	}
	var out []string
	for _, e := range list.Items {
		out = append(out, e.Reason+": "+e.Message)
	}
	return out
}

func TestOrderedCreationWithClaims(t *testing.T) {
	w := start(t, false, web(3))
	w.wantPods("web-0")
	// web-1 waits for web-0 to be Running and Ready.
	w.wantStatus("gen=1 replicas=1 ready=0 available=0 current=1 updated=1")
	if got := w.podNames(false); got != "web-0" {
		t.Fatalf("pods before web-0 is ready: %s", got)
	}
	w.ready("web-0")
	w.wantPods("web-0,web-1")
	w.ready("web-1")
	w.wantPods("web-0,web-1,web-2")
	w.ready("web-2")
	w.wantStatus("gen=1 replicas=3 ready=3 available=3 current=3 updated=3")

	set := w.set()
	revs := w.revisions()
	if len(revs) != 1 || revs[0].Revision != 1 || !strings.HasPrefix(revs[0].Name, "web-") ||
		set.Status.CurrentRevision != revs[0].Name || set.Status.UpdateRevision != revs[0].Name {
		t.Fatalf("revisions %v, status %+v", revs, set.Status)
	}
	if ref := metav1.GetControllerOf(&revs[0]); ref == nil || ref.UID != set.UID {
		t.Errorf("revision not controlled by the set: %+v", revs[0].OwnerReferences)
	}
	for i, pod := range w.pods() {
		name := fmt.Sprintf("web-%d", i)
		if pod.Spec.Hostname != name || pod.Spec.Subdomain != "nginx" {
			t.Errorf("%s: hostname %q subdomain %q", name, pod.Spec.Hostname, pod.Spec.Subdomain)
		}
		wantLabels := map[string]string{"app": "nginx", appsv1.StatefulSetPodNameLabel: name, appsv1.PodIndexLabel: fmt.Sprint(i),
			appsv1.StatefulSetRevisionLabel: revs[0].Name}
		for k, v := range wantLabels {
			if pod.Labels[k] != v {
				t.Errorf("%s: label %s=%q, want %q", name, k, pod.Labels[k], v)
			}
		}
		if ref := metav1.GetControllerOf(&pod); ref == nil || ref.UID != set.UID || ref.Kind != "StatefulSet" {
			t.Errorf("%s: controller %+v", name, ref)
		}
		if v := pod.Spec.Volumes; len(v) != 1 || v[0].Name != "www" || v[0].PersistentVolumeClaim == nil || v[0].PersistentVolumeClaim.ClaimName != "www-"+name {
			t.Errorf("%s: volumes %+v", name, v)
		}
		claim, err := w.cs.CoreV1().PersistentVolumeClaims(ns).Get(ctx, "www-"+name, metav1.GetOptions{})
		if err != nil {
			t.Fatalf("claim of %s: %v", name, err)
		}
		if claim.Labels["app"] != "nginx" || len(claim.OwnerReferences) != 0 {
			t.Errorf("claim %s: labels %v owners %v (Retain keeps claims unowned)", claim.Name, claim.Labels, claim.OwnerReferences)
		}
	}
	controllertest.Eventually(t, func() string {
		events := w.events()
		for _, want := range []string{
			"SuccessfulCreate: create Claim www-web-0 Pod web-0 in StatefulSet web success",
			"SuccessfulCreate: create Pod web-0 in StatefulSet web successful",
			"SuccessfulCreate: create Pod web-2 in StatefulSet web successful",
		} {
			if !slices.Contains(events, want) {
				return fmt.Sprintf("no event %q in %q", want, events)
			}
		}
		return ""
	})
}

func TestOrdinalsStart(t *testing.T) {
	w := start(t, true, web(2, func(s *appsv1.StatefulSet) { s.Spec.Ordinals = &appsv1.StatefulSetOrdinals{Start: 5} }))
	w.wantPods("web-5,web-6")
	w.wantStatus("gen=1 replicas=2 ready=2 available=2 current=2 updated=2")
}

func TestScaleDownFromHighestOrdinal(t *testing.T) {
	w := start(t, true, web(3))
	w.wantStatus("gen=1 replicas=3 ready=3 available=3 current=3 updated=3")
	w.change(func(s *appsv1.StatefulSet) { s.Spec.Replicas = ptr.To[int32](1) })
	w.wantPods("web-0")
	if first, second := <-w.deleted, <-w.deleted; first != "web-2" || second != "web-1" {
		t.Errorf("deleted %s then %s, want web-2 then web-1", first, second)
	}
	w.wantStatus("gen=2 replicas=1 ready=1 available=1 current=1 updated=1")
	// Retain keeps the claims of the pods scaled away.
	if _, err := w.cs.CoreV1().PersistentVolumeClaims(ns).Get(ctx, "www-web-2", metav1.GetOptions{}); err != nil {
		t.Errorf("claim of a scaled down pod: %v", err)
	}
}

func TestScaleDownWaitsForUnhealthyPods(t *testing.T) {
	w := start(t, false, web(3))
	for _, pods := range []string{"web-0", "web-0,web-1", "web-0,web-1,web-2"} {
		w.wantPods(pods)
		w.ready(pods[len(pods)-5:])
	}
	w.wantStatus("gen=1 replicas=3 ready=3 available=3 current=3 updated=3")
	// web-0 turns unready: OrderedReady deletes nothing until it is back.
	w.podStatus("web-0", func(st *corev1.PodStatus) { st.Conditions[0].Status = corev1.ConditionFalse })
	w.wantStatus("gen=1 replicas=3 ready=2 available=2 current=3 updated=3")
	w.change(func(s *appsv1.StatefulSet) { s.Spec.Replicas = ptr.To[int32](2) })
	w.wantStatus("gen=2 replicas=3 ready=2 available=2 current=3 updated=3")
	if got := w.podNames(false); got != "web-0,web-1,web-2" {
		t.Fatalf("scale down went ahead with web-0 unready: %s", got)
	}
	w.ready("web-0")
	w.wantPods("web-0,web-1")
}

func TestParallelCreatesAndDeletesAtOnce(t *testing.T) {
	w := start(t, false, web(3, func(s *appsv1.StatefulSet) { s.Spec.PodManagementPolicy = appsv1.ParallelPodManagement }))
	w.wantPods("web-0,web-1,web-2") // none of them Ready
	w.change(func(s *appsv1.StatefulSet) { s.Spec.Replicas = ptr.To[int32](0) })
	w.wantPods("")
}

func TestFailedPodIsRecreated(t *testing.T) {
	w := start(t, true, web(1))
	w.wantStatus("gen=1 replicas=1 ready=1 available=1 current=1 updated=1")
	pod := w.pods()[0]
	w.podStatus(pod.Name, func(st *corev1.PodStatus) { st.Phase = corev1.PodFailed })
	controllertest.Eventually(t, func() string {
		pods := w.pods()
		if len(pods) != 1 || pods[0].UID == pod.UID || pods[0].Status.Phase != corev1.PodRunning {
			return fmt.Sprintf("pods %s, want web-0 recreated", w.podNames(false))
		}
		return ""
	})
}

func TestRollingUpdateWithPartition(t *testing.T) {
	w := start(t, true, web(3))
	w.wantStatus("gen=1 replicas=3 ready=3 available=3 current=3 updated=3")
	oldRev := w.set().Status.CurrentRevision
	w.change(func(s *appsv1.StatefulSet) {
		s.Spec.Template.Spec.Containers[0].Image = "nginx:1.26"
		s.Spec.UpdateStrategy.RollingUpdate.Partition = ptr.To[int32](1)
	})
	w.wantStatus("gen=2 replicas=3 ready=3 available=3 current=1 updated=2")
	set := w.set()
	newRev := set.Status.UpdateRevision
	if set.Status.CurrentRevision != oldRev || newRev == oldRev {
		t.Fatalf("revisions current %s update %s, old %s", set.Status.CurrentRevision, newRev, oldRev)
	}
	if first, second := <-w.deleted, <-w.deleted; first != "web-2" || second != "web-1" {
		t.Errorf("updated %s then %s, want web-2 then web-1", first, second)
	}
	want := fmt.Sprintf("web-0(%s),web-1(%s),web-2(%s)", oldRev, newRev, newRev)
	if got := w.podNames(true); got != want {
		t.Errorf("pods %s, want %s", got, want)
	}
	for _, p := range w.pods() {
		if image := p.Spec.Containers[0].Image; (p.Name == "web-0") != (image == "nginx:1.25") {
			t.Errorf("%s runs %s", p.Name, image)
		}
	}
	if revs := w.revisions(); len(revs) != 2 || revs[1].Name != newRev || revs[1].Revision != 2 {
		t.Errorf("revisions %+v", revs)
	}

	// Partition 0 finishes the rollout: the update revision becomes current.
	w.change(func(s *appsv1.StatefulSet) { s.Spec.UpdateStrategy.RollingUpdate.Partition = ptr.To[int32](0) })
	w.wantStatus("gen=3 replicas=3 ready=3 available=3 current=3 updated=3")
	if s := w.set().Status; s.CurrentRevision != newRev || s.UpdateRevision != newRev {
		t.Errorf("after the rollout current %s update %s, want %s", s.CurrentRevision, s.UpdateRevision, newRev)
	}
}

func TestOnDeleteUpdatesOnlyDeletedPods(t *testing.T) {
	w := start(t, true, web(2, func(s *appsv1.StatefulSet) {
		s.Spec.UpdateStrategy = appsv1.StatefulSetUpdateStrategy{Type: appsv1.OnDeleteStatefulSetStrategyType}
	}))
	w.wantStatus("gen=1 replicas=2 ready=2 available=2 current=2 updated=2")
	w.change(func(s *appsv1.StatefulSet) { s.Spec.Template.Spec.Containers[0].Image = "nginx:1.26" })
	w.wantStatus("gen=2 replicas=2 ready=2 available=2 current=2 updated=0")
	if err := w.cs.CoreV1().Pods(ns).Delete(ctx, "web-1", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	w.wantStatus("gen=2 replicas=2 ready=2 available=2 current=1 updated=1")
	for _, p := range w.pods() {
		if image := p.Spec.Containers[0].Image; (p.Name == "web-1") != (image == "nginx:1.26") {
			t.Errorf("%s runs %s", p.Name, image)
		}
	}
}

func TestRevisionHistory(t *testing.T) {
	// No pods, so that only the current and update revisions are live.
	w := start(t, true, web(0))
	image := func(tag string) {
		w.change(func(s *appsv1.StatefulSet) { s.Spec.Template.Spec.Containers[0].Image = "nginx:" + tag })
		gen := w.set().Generation
		controllertest.Eventually(t, func() string {
			if s := w.set().Status; s.ObservedGeneration != gen || s.CurrentRevision != s.UpdateRevision {
				return fmt.Sprintf("status %+v not at generation %d", s, gen)
			}
			return ""
		})
	}
	render := func() string {
		var out []string
		for _, r := range w.revisions() {
			var data struct {
				Spec struct {
					Template corev1.PodTemplateSpec `json:"template"`
				} `json:"spec"`
			}
			if err := json.Unmarshal(r.Data.Raw, &data); err != nil {
				t.Fatal(err)
			}
			out = append(out, fmt.Sprintf("%d:%s", r.Revision, data.Spec.Template.Spec.Containers[0].Image))
		}
		return strings.Join(out, ",")
	}
	controllertest.Eventually(t, func() string {
		if got := render(); got != "1:nginx:1.25" {
			return "revisions " + got
		}
		return ""
	})
	image("1.26")
	image("1.25") // a rollback renumbers the earlier revision
	if got := render(); got != "2:nginx:1.26,3:nginx:1.25" {
		t.Errorf("after a rollback: revisions %s", got)
	}
	w.change(func(s *appsv1.StatefulSet) { s.Spec.RevisionHistoryLimit = ptr.To[int32](1) })
	image("1.27")
	image("1.28")
	controllertest.Eventually(t, func() string {
		if got := render(); got != "4:nginx:1.27,5:nginx:1.28" {
			return "with a history limit of 1: revisions " + got
		}
		return ""
	})
}

func TestRetentionPolicyDelete(t *testing.T) {
	w := start(t, true, web(2, func(s *appsv1.StatefulSet) {
		s.Spec.PersistentVolumeClaimRetentionPolicy = &appsv1.StatefulSetPersistentVolumeClaimRetentionPolicy{
			WhenDeleted: appsv1.DeletePersistentVolumeClaimRetentionPolicyType, WhenScaled: appsv1.DeletePersistentVolumeClaimRetentionPolicyType}
	}))
	w.wantStatus("gen=1 replicas=2 ready=2 available=2 current=2 updated=2")
	owners := func(claim string) string {
		c, err := w.cs.CoreV1().PersistentVolumeClaims(ns).Get(ctx, claim, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return "gone"
		}
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, r := range c.OwnerReferences {
			out = append(out, fmt.Sprintf("%s/%s controller=%v", r.Kind, r.Name, r.Controller != nil && *r.Controller))
		}
		return strings.Join(out, ",")
	}
	controllertest.Eventually(t, func() string {
		if got := owners("www-web-1"); got != "StatefulSet/web controller=true" {
			return "owners of www-web-1 in range: " + got
		}
		return ""
	})
	web1 := w.pods()[1]
	w.change(func(s *appsv1.StatefulSet) { s.Spec.Replicas = ptr.To[int32](1) })
	w.wantPods("web-0")
	// Before web-1 went, its claim was handed to it, for the garbage
	// collector to delete with it.
	if got := owners("www-web-1"); got != "Pod/web-1 controller=true" {
		t.Errorf("owners of a scaled down claim: %s", got)
	}
	c, _ := w.cs.CoreV1().PersistentVolumeClaims(ns).Get(ctx, "www-web-1", metav1.GetOptions{})
	if c.OwnerReferences[0].UID != web1.UID {
		t.Errorf("claim owned by pod uid %s, want %s", c.OwnerReferences[0].UID, web1.UID)
	}
	if got := owners("www-web-0"); got != "StatefulSet/web controller=true" {
		t.Errorf("owners of a kept claim: %s", got)
	}
}

func TestAdoptsOrphanPods(t *testing.T) {
	orphan := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "web-0", Namespace: ns, UID: "uid-orphan", Labels: map[string]string{"app": "nginx"}},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "nginx", Image: "nginx:1.25"}}},
		Status:     readyStatus(),
	}
	stranger := orphan.DeepCopy()
	stranger.Name, stranger.UID = "db-0", "uid-stranger"
	// OnDelete, for the adopted pod (which has no revision yet) to stay.
	w := start(t, true, web(1, func(s *appsv1.StatefulSet) {
		s.Spec.UpdateStrategy = appsv1.StatefulSetUpdateStrategy{Type: appsv1.OnDeleteStatefulSetStrategyType}
	}), orphan, stranger)
	controllertest.Eventually(t, func() string {
		pod, err := w.cs.CoreV1().Pods(ns).Get(ctx, "web-0", metav1.GetOptions{})
		if err != nil {
			return err.Error()
		}
		if ref := metav1.GetControllerOf(pod); pod.UID != "uid-orphan" || ref == nil || ref.UID != "uid-web" {
			return fmt.Sprintf("web-0 uid %s owners %+v", pod.UID, pod.OwnerReferences)
		}
		if pod.Labels[appsv1.StatefulSetPodNameLabel] != "web-0" {
			return fmt.Sprintf("adopted pod's identity not fixed: %v", pod.Labels)
		}
		return ""
	})
	if pod, _ := w.cs.CoreV1().Pods(ns).Get(ctx, "db-0", metav1.GetOptions{}); len(pod.OwnerReferences) != 0 {
		t.Errorf("a pod not named as a member was adopted: %+v", pod.OwnerReferences)
	}
}

func TestMinReadySeconds(t *testing.T) {
	w := start(t, true, web(2, func(s *appsv1.StatefulSet) { s.Spec.MinReadySeconds = 1 }))
	// web-0 is Ready at once but available only a second later; web-1
	// waits for that.
	w.wantStatus("gen=1 replicas=1 ready=1 available=0 current=1 updated=1")
	if got := w.podNames(false); got != "web-0" {
		t.Fatalf("pods while web-0 is not yet available: %s", got)
	}
	w.wantStatus("gen=1 replicas=2 ready=2 available=2 current=2 updated=2")
}
