package deployment

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/client-go/util/retry"
	clocktesting "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"

	"github.com/svcnet/svcnet/internal/controller"
	"github.com/svcnet/svcnet/internal/controller/controllertest"
)

const ns = "default"

// cluster is the controller under test on a fake API in which a stand-in
// for the ReplicaSet controller gives every ReplicaSet as many pods as it
// asks for at once; the pods become available only when released (or at
// once after releaseAll).
type cluster struct {
	t     *testing.T
	cs    *fake.Clientset
	c     *Controller
	clock *clocktesting.FakePassiveClock

	mu      sync.Mutex
	version int  // the last resourceVersion handed out
	ready   bool // new pods are available at once
	// lateDeletes holds back the pod deletions of a scale-down until
	// catchUp: the ReplicaSet keeps its pods and its status meanwhile.
	lateDeletes bool
	violations  []string // broken rollout bounds, seen at writes
	// bounds are the pod and availability limits checked at every
	// ReplicaSet write, zero for none.
	maxPods, minAvailable int32
}

func start(t *testing.T, objects ...runtime.Object) *cluster {
	t.Helper()
	k := &cluster{t: t, cs: controllertest.NewClient(objects...), clock: clocktesting.NewFakePassiveClock(time.Now().Truncate(time.Second))}
	k.cs.PrependReactor("create", "replicasets", k.createReplicaSet)
	k.cs.PrependReactor("update", "replicasets", k.updateReplicaSet)
	k.cs.PrependReactor("update", "deployments", k.updateDeployment)
	controllertest.Start(t, k.cs, func(ctx context.Context, d controller.Deps) []func(context.Context) {
		c, err := New(ctx, d, Options{Workers: 2})
		if err != nil {
			t.Fatal(err)
		}
		c.clock = k.clock
		k.c = c
		return []func(context.Context){c.Run}
	})
	t.Cleanup(func() {
		k.mu.Lock()
		defer k.mu.Unlock()
		for _, v := range k.violations {
			t.Error(v)
		}
	})
	return k
}

var (
	replicaSetsResource = appsv1.SchemeGroupVersion.WithResource("replicasets")
	deploymentsResource = appsv1.SchemeGroupVersion.WithResource("deployments")
)

// createReplicaSet gives a new ReplicaSet its pods.
func (k *cluster) createReplicaSet(a k8stesting.Action) (bool, runtime.Object, error) {
	rs := a.(k8stesting.CreateAction).GetObject().(*appsv1.ReplicaSet)
	k.mu.Lock()
	defer k.mu.Unlock()
	rs.ResourceVersion = k.nextVersion()
	k.playReplicaSetController(rs, appsv1.ReplicaSetStatus{}, 1)
	return false, nil, nil
}

// updateReplicaSet stores a ReplicaSet write atomically with respect to
// the test's own writes: a spec write gets the pods it asks for; a status
// write by the test (release) makes all pods available.
func (k *cluster) updateReplicaSet(a k8stesting.Action) (bool, runtime.Object, error) {
	rs := a.(k8stesting.UpdateAction).GetObject().(*appsv1.ReplicaSet).DeepCopy()
	k.mu.Lock()
	defer k.mu.Unlock()
	stored, err := k.cs.Tracker().Get(replicaSetsResource, rs.Namespace, rs.Name)
	if err != nil {
		return true, nil, err
	}
	old := stored.(*appsv1.ReplicaSet)
	if err := k.checkVersion(rs, old); err != nil {
		return true, nil, err
	}
	if a.GetSubresource() == "status" {
		n := rs.Status.AvailableReplicas
		rs = old.DeepCopy()
		if n < 0 {
			n = rs.Status.Replicas
		}
		rs.Status.AvailableReplicas, rs.Status.ReadyReplicas = n, n
	} else {
		rs.UID = old.UID
		k.playReplicaSetController(rs, old.Status, old.Generation+1)
	}
	rs.ResourceVersion = k.nextVersion()
	return true, rs, k.cs.Tracker().Update(replicaSetsResource, rs, rs.Namespace)
}

// updateDeployment stores a Deployment write as the API server would: a
// status write changes status and annotations, a write of the Deployment
// keeps the stored status and bumps the generation.
func (k *cluster) updateDeployment(a k8stesting.Action) (bool, runtime.Object, error) {
	d := a.(k8stesting.UpdateAction).GetObject().(*appsv1.Deployment).DeepCopy()
	k.mu.Lock()
	defer k.mu.Unlock()
	stored, err := k.cs.Tracker().Get(deploymentsResource, d.Namespace, d.Name)
	if err != nil {
		return true, nil, err
	}
	old := stored.(*appsv1.Deployment)
	if err := k.checkVersion(d, old); err != nil {
		return true, nil, err
	}
	if a.GetSubresource() == "status" {
		next := old.DeepCopy()
		next.Status, next.Annotations = d.Status, d.Annotations
		d = next
	} else {
		d.UID, d.Status, d.Generation = old.UID, old.Status, old.Generation+1
	}
	d.ResourceVersion = k.nextVersion()
	return true, d, k.cs.Tracker().Update(deploymentsResource, d, d.Namespace)
}

func (k *cluster) nextVersion() string {
	k.version++
	return fmt.Sprint(k.version)
}

// checkVersion rejects a write based on an outdated read, as the API
// server does; a write without a resourceVersion is unconditional.
func (k *cluster) checkVersion(obj, stored metav1.Object) error {
	if v := obj.GetResourceVersion(); v != "" && v != stored.GetResourceVersion() {
		return apierrors.NewConflict(schema.GroupResource{Group: "apps", Resource: "objects"}, obj.GetName(), fmt.Errorf("resourceVersion %s, stored %s", v, stored.GetResourceVersion()))
	}
	return nil
}

// playReplicaSetController sets the status a ReplicaSet controller would
// report once it created or deleted pods for a spec write (new pods are
// available only when ready is set; scaling down deletes unavailable pods
// first; with lateDeletes a scale-down waits for catchUp), and checks the
// rollout bounds over the pods of all ReplicaSets. was is the status
// before the write. k.mu is held.
func (k *cluster) playReplicaSetController(rs *appsv1.ReplicaSet, was appsv1.ReplicaSetStatus, generation int64) {
	n := *rs.Spec.Replicas
	rs.Generation = generation
	if k.lateDeletes && n < was.Replicas {
		// The pods to delete still run, and the status still counts them.
		rs.Status = was
	} else {
		available := was.AvailableReplicas
		if k.ready {
			available = n
		}
		available = min(available, n)
		rs.Status = appsv1.ReplicaSetStatus{Replicas: n, ReadyReplicas: available, AvailableReplicas: available,
			FullyLabeledReplicas: n, ObservedGeneration: generation, TerminatingReplicas: ptr.To[int32](0)}
	}
	if k.maxPods == 0 {
		return
	}
	all := slices.DeleteFunc(k.replicaSets(), func(o *appsv1.ReplicaSet) bool { return o.Name == rs.Name })
	all = append(all, rs)
	if pods := sum(all, statusReplicas); pods > k.maxPods {
		k.violations = append(k.violations, fmt.Sprintf("%d pods after writing %s, more than %d: %s", pods, rs.Name, k.maxPods, render(all)))
	}
	if avail := sum(all, availableReplicas); avail < k.minAvailable {
		k.violations = append(k.violations, fmt.Sprintf("%d pods available after writing %s, fewer than %d: %s", avail, rs.Name, k.minAvailable, render(all)))
	}
}

// catchUp carries out the scale-down of the named ReplicaSet that
// lateDeletes held back: its surplus pods go, the available ones last.
func (k *cluster) catchUp(name string) {
	k.t.Helper()
	k.mu.Lock()
	defer k.mu.Unlock()
	stored, err := k.cs.Tracker().Get(replicaSetsResource, ns, name)
	if err != nil {
		k.t.Fatal(err)
	}
	rs := stored.(*appsv1.ReplicaSet).DeepCopy()
	late := k.lateDeletes
	k.lateDeletes = false
	k.playReplicaSetController(rs, rs.Status, rs.Generation)
	k.lateDeletes = late
	rs.ResourceVersion = k.nextVersion()
	if err := k.cs.Tracker().Update(replicaSetsResource, rs, ns); err != nil {
		k.t.Fatal(err)
	}
}

// replicaSets lists the stored ReplicaSets, by revision.
func (k *cluster) replicaSets() []*appsv1.ReplicaSet {
	list, err := k.cs.Tracker().List(replicaSetsResource, appsv1.SchemeGroupVersion.WithKind("ReplicaSet"), ns)
	if err != nil {
		k.t.Error(err)
		return nil
	}
	var out []*appsv1.ReplicaSet
	for _, rs := range list.(*appsv1.ReplicaSetList).Items {
		out = append(out, rs.DeepCopy())
	}
	slices.SortFunc(out, byRevision)
	return out
}

// render shows ReplicaSets as "revision:name=replicas/available".
func render(rss []*appsv1.ReplicaSet) string {
	rss = slices.Clone(rss)
	slices.SortFunc(rss, byRevision)
	var out []string
	for _, rs := range rss {
		out = append(out, fmt.Sprintf("%s:%s=%d/%d", rs.Annotations[RevisionAnnotation], rs.Name, *rs.Spec.Replicas, rs.Status.AvailableReplicas))
	}
	return strings.Join(out, " ")
}

// wantReplicaSets waits until the ReplicaSets render as want.
func (k *cluster) wantReplicaSets(want string) []*appsv1.ReplicaSet {
	k.t.Helper()
	var rss []*appsv1.ReplicaSet
	controllertest.Eventually(k.t, func() string {
		k.mu.Lock()
		rss = k.replicaSets()
		k.mu.Unlock()
		if got := render(rss); got != want {
			return fmt.Sprintf("replica sets: %s, want %s", got, want)
		}
		return ""
	})
	return rss
}

// release makes all pods of the named ReplicaSet available.
func (k *cluster) release(name string) {
	k.t.Helper()
	k.setAvailable(name, -1)
}

// setAvailable makes n pods of the named ReplicaSet available, all for
// a negative n.
func (k *cluster) setAvailable(name string, n int32) {
	k.t.Helper()
	rs := &appsv1.ReplicaSet{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns}}
	rs.Status.AvailableReplicas = n
	if _, err := k.cs.AppsV1().ReplicaSets(ns).UpdateStatus(context.Background(), rs, metav1.UpdateOptions{}); err != nil {
		k.t.Fatal(err)
	}
}

func (k *cluster) setReady(ready bool) {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.ready = ready
}

func (k *cluster) setBounds(maxPods, minAvailable int32) {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.maxPods, k.minAvailable = maxPods, minAvailable
}

func (k *cluster) get(name string) *appsv1.Deployment {
	k.t.Helper()
	d, err := k.cs.AppsV1().Deployments(ns).Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		k.t.Fatal(err)
	}
	return d
}

// change updates a Deployment, again when it conflicts with the
// controller's writes.
func (k *cluster) change(name string, mutate func(*appsv1.Deployment)) {
	k.t.Helper()
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		d := k.get(name)
		mutate(d)
		_, err := k.cs.AppsV1().Deployments(ns).Update(context.Background(), d, metav1.UpdateOptions{})
		return err
	})
	if err != nil {
		k.t.Fatal(err)
	}
}

// wantDeployment waits until cond holds for the stored Deployment.
func (k *cluster) wantDeployment(name string, cond func(d *appsv1.Deployment) string) *appsv1.Deployment {
	k.t.Helper()
	var d *appsv1.Deployment
	controllertest.Eventually(k.t, func() string {
		var err error
		if d, err = k.cs.AppsV1().Deployments(ns).Get(context.Background(), name, metav1.GetOptions{}); err != nil {
			return err.Error()
		}
		return cond(d)
	})
	return d
}

// wantCondition waits for a condition of the given status, reason and
// message.
func (k *cluster) wantCondition(name string, t appsv1.DeploymentConditionType, status corev1.ConditionStatus, reason, message string) *appsv1.Deployment {
	k.t.Helper()
	return k.wantDeployment(name, func(d *appsv1.Deployment) string {
		c := getCondition(d.Status, t)
		if c == nil || c.Status != status || c.Reason != reason || c.Message != message {
			return fmt.Sprintf("%s condition %+v, want %s %s %q", t, c, status, reason, message)
		}
		return ""
	})
}

// wantEvents waits until the Deployment's events include want.
func (k *cluster) wantEvents(want ...string) {
	k.t.Helper()
	controllertest.Eventually(k.t, func() string {
		list, err := k.cs.CoreV1().Events(ns).List(context.Background(), metav1.ListOptions{})
		if err != nil {
			return err.Error()
		}
		var got []string
		for _, e := range list.Items {
			got = append(got, e.Reason+": "+e.Message)
		}
		for _, w := range want {
			if !slices.Contains(got, w) {
				return fmt.Sprintf("events %q lack %q", got, w)
			}
		}
		return ""
	})
}

func deployment(name string, replicas int32) *appsv1.Deployment {
	labels := map[string]string{"app": name}
	quarter := intstr.FromString("25%")
	return &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, UID: types.UID("uid-" + name), Generation: 1,
			Annotations: map[string]string{"kubernetes.io/change-cause": "first"}},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To(replicas),
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "nginx:1"}}},
			},
			Strategy: appsv1.DeploymentStrategy{Type: appsv1.RollingUpdateDeploymentStrategyType,
				RollingUpdate: &appsv1.RollingUpdateDeployment{MaxSurge: &quarter, MaxUnavailable: &quarter}},
			RevisionHistoryLimit:    ptr.To[int32](10),
			ProgressDeadlineSeconds: ptr.To[int32](600),
		},
	}
}

func rollingBounds(d *appsv1.Deployment, surge, unavailable int) {
	s, u := intstr.FromInt(surge), intstr.FromInt(unavailable)
	d.Spec.Strategy.RollingUpdate = &appsv1.RollingUpdateDeployment{MaxSurge: &s, MaxUnavailable: &u}
}

func setImage(image string) func(*appsv1.Deployment) {
	return func(d *appsv1.Deployment) { d.Spec.Template.Spec.Containers[0].Image = image }
}

// rsName is the name of the ReplicaSet of the Deployment's template.
func rsName(d *appsv1.Deployment) string {
	return d.Name + "-" + templateHash(&d.Spec.Template, d.Status.CollisionCount)
}

func TestNewReplicaSet(t *testing.T) {
	d := deployment("web", 2)
	k := start(t, d)
	name := rsName(d)
	k.wantReplicaSets("1:" + name + "=2/0")
	rs := k.replicaSets()[0]
	hash := strings.TrimPrefix(name, "web-")
	if rs.Labels[appsv1.DefaultDeploymentUniqueLabelKey] != hash || rs.Spec.Selector.MatchLabels[appsv1.DefaultDeploymentUniqueLabelKey] != hash ||
		rs.Spec.Template.Labels[appsv1.DefaultDeploymentUniqueLabelKey] != hash || rs.Spec.Template.Labels["app"] != "web" {
		t.Errorf("pod-template-hash %s missing: labels %v, selector %v, template labels %v", hash, rs.Labels, rs.Spec.Selector, rs.Spec.Template.Labels)
	}
	// 25% of 2 surges by one pod (rounded up).
	for k, v := range map[string]string{DesiredReplicasAnnotation: "2", MaxReplicasAnnotation: "3", "kubernetes.io/change-cause": "first"} {
		if rs.Annotations[k] != v {
			t.Errorf("annotation %s=%q, want %q", k, rs.Annotations[k], v)
		}
	}
	if ref := metav1.GetControllerOf(rs); ref == nil || ref.UID != d.UID || ref.Kind != "Deployment" {
		t.Errorf("controller reference %+v", ref)
	}
	k.wantEvents("ScalingReplicaSet: Scaled up replica set " + name + " from 0 to 2")
	k.wantCondition("web", appsv1.DeploymentAvailable, corev1.ConditionFalse, reasonMinimumUnavailable, "Deployment does not have minimum availability.")
	got := k.wantCondition("web", appsv1.DeploymentProgressing, corev1.ConditionTrue, reasonReplicaSetUpdated, fmt.Sprintf("ReplicaSet %q is progressing.", name))
	if got.Annotations[RevisionAnnotation] != "1" {
		t.Errorf("deployment revision %q, want 1", got.Annotations[RevisionAnnotation])
	}

	k.release(name)
	k.wantCondition("web", appsv1.DeploymentAvailable, corev1.ConditionTrue, reasonMinimumAvailable, "Deployment has minimum availability.")
	got = k.wantCondition("web", appsv1.DeploymentProgressing, corev1.ConditionTrue, reasonNewRSAvailable, fmt.Sprintf("ReplicaSet %q has successfully progressed.", name))
	want := appsv1.DeploymentStatus{ObservedGeneration: 1, Replicas: 2, UpdatedReplicas: 2, ReadyReplicas: 2, AvailableReplicas: 2, TerminatingReplicas: ptr.To[int32](0)}
	got.Status.Conditions = nil
	if !apiequality.Semantic.DeepEqual(got.Status, want) {
		t.Errorf("status %+v, want %+v", got.Status, want)
	}
}

// rolledOut starts the controller on a Deployment "web" of replicas
// with the rolling bounds given, and waits until its first ReplicaSet is
// all available and the rollout complete.
func rolledOut(t *testing.T, replicas int32, surge, unavailable int) (*cluster, string) {
	t.Helper()
	d := deployment("web", replicas)
	rollingBounds(d, surge, unavailable)
	k := start(t, d)
	first := rsName(d)
	k.wantReplicaSets(fmt.Sprintf("1:%s=%d/0", first, replicas))
	k.release(first)
	k.wantCondition("web", appsv1.DeploymentProgressing, corev1.ConditionTrue, reasonNewRSAvailable, fmt.Sprintf("ReplicaSet %q has successfully progressed.", first))
	return k, first
}

func TestRollingUpdateRespectsSurgeAndUnavailable(t *testing.T) {
	k, first := rolledOut(t, 4, 1, 1)

	k.setBounds(5, 3)
	k.change("web", setImage("nginx:2"))
	second := rsName(k.get("web"))
	// The new pods never become available: one more pod than replicas,
	// one fewer available, and there the rollout waits.
	k.wantReplicaSets("1:" + first + "=3/3 2:" + second + "=2/0")
	k.wantEvents(
		"ScalingReplicaSet: Scaled up replica set "+second+" from 0 to 1",
		"ScalingReplicaSet: Scaled down replica set "+first+" from 4 to 3",
		"ScalingReplicaSet: Scaled up replica set "+second+" from 1 to 2",
	)
	k.release(second)
	k.wantReplicaSets("1:" + first + "=1/1 2:" + second + "=4/2")
	k.release(second)
	k.wantReplicaSets("1:" + first + "=0/0 2:" + second + "=4/4")
	got := k.wantCondition("web", appsv1.DeploymentProgressing, corev1.ConditionTrue, reasonNewRSAvailable, fmt.Sprintf("ReplicaSet %q has successfully progressed.", second))
	if got.Annotations[RevisionAnnotation] != "2" || got.Status.UpdatedReplicas != 4 || got.Status.Replicas != 4 || got.Status.AvailableReplicas != 4 {
		t.Errorf("revision %q, status %+v", got.Annotations[RevisionAnnotation], got.Status)
	}
}

// TestRollingUpdateWaitsForScaleDownsToBeCarriedOut plays the race
// between the ReplicaSets' controllers that the new one always wins: an
// old ReplicaSet scaled down keeps its pods, and a status that counts
// them, until catchUp. The rollout must neither surge past maxSurge over
// those pods nor count their availability twice.
func TestRollingUpdateWaitsForScaleDownsToBeCarriedOut(t *testing.T) {
	k, first := rolledOut(t, 4, 1, 1)

	k.setBounds(5, 3)
	k.mu.Lock()
	k.lateDeletes = true
	k.mu.Unlock()
	k.change("web", setImage("nginx:2"))
	second := rsName(k.get("web"))
	// One pod surges and one old pod is to go; while it still runs, the
	// new ReplicaSet does not grow.
	k.wantReplicaSets("1:" + first + "=3/4 2:" + second + "=1/0")
	// The surge pod is available: one more old pod may go, not two,
	// although the old status still counts four available.
	k.release(second)
	k.wantReplicaSets("1:" + first + "=2/4 2:" + second + "=1/1")
	k.catchUp(first)
	k.wantReplicaSets("1:" + first + "=2/2 2:" + second + "=3/1")
	k.release(second)
	k.wantReplicaSets("1:" + first + "=0/2 2:" + second + "=3/3")
	k.catchUp(first)
	k.wantReplicaSets("1:" + first + "=0/0 2:" + second + "=4/3")
	k.release(second)
	k.wantCondition("web", appsv1.DeploymentProgressing, corev1.ConditionTrue, reasonNewRSAvailable, fmt.Sprintf("ReplicaSet %q has successfully progressed.", second))
}

func TestRollingUpdateCleansUnhealthyOldPodsFirst(t *testing.T) {
	d := deployment("web", 4)
	rollingBounds(d, 0, 2)
	k := start(t, d)
	first := rsName(d)
	k.wantReplicaSets("1:" + first + "=4/0")
	k.setAvailable(first, 2)
	k.wantReplicaSets("1:" + first + "=4/2")

	// The two old pods that are not available go first, costing no
	// availability; the available ones wait for new pods.
	k.setBounds(4, 2)
	k.change("web", setImage("nginx:2"))
	second := rsName(k.get("web"))
	k.wantReplicaSets("1:" + first + "=2/2 2:" + second + "=2/0")
	k.wantEvents("ScalingReplicaSet: Scaled down replica set "+first+" from 4 to 2", "ScalingReplicaSet: Scaled up replica set "+second+" from 0 to 2")
}

func TestRecreateWaitsForOldPods(t *testing.T) {
	d := deployment("web", 3)
	d.Spec.Strategy = appsv1.DeploymentStrategy{Type: appsv1.RecreateDeploymentStrategyType}
	k := start(t, d)
	k.setReady(true)
	first := rsName(d)
	old := k.wantReplicaSets("1:" + first + "=3/3")[0]
	for i := range 3 {
		pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("%s-%d", first, i), Namespace: ns, Labels: old.Spec.Template.Labels,
			OwnerReferences: []metav1.OwnerReference{*metav1.NewControllerRef(old, appsv1.SchemeGroupVersion.WithKind("ReplicaSet"))}},
			Status: corev1.PodStatus{Phase: corev1.PodRunning}}
		if _, err := k.cs.CoreV1().Pods(ns).Create(context.Background(), pod, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}

	controllertest.Eventually(t, func() string {
		if pods, _ := k.c.pods.Pods(ns).List(labels.Everything()); len(pods) != 3 {
			return fmt.Sprintf("the controller sees %d pods, want 3", len(pods))
		}
		return ""
	})
	k.change("web", setImage("nginx:2"))
	k.wantReplicaSets("1:" + first + "=0/0")
	k.wantDeployment("web", func(d *appsv1.Deployment) string {
		if d.Status.ObservedGeneration != d.Generation || d.Status.Replicas != 0 {
			return fmt.Sprintf("status %+v, want the old ReplicaSet scaled down observed", d.Status)
		}
		return ""
	})
	if got := render(k.replicaSets()); got != "1:"+first+"=0/0" {
		t.Fatalf("while old pods run: %s, want no new ReplicaSet", got)
	}
	for i := range 3 {
		if err := k.cs.CoreV1().Pods(ns).Delete(context.Background(), fmt.Sprintf("%s-%d", first, i), metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	second := rsName(k.get("web"))
	k.wantReplicaSets("1:" + first + "=0/0 2:" + second + "=3/3")
	k.wantEvents("ScalingReplicaSet: Scaled down replica set "+first+" from 3 to 0", "ScalingReplicaSet: Scaled up replica set "+second+" from 0 to 3")
}

func TestPausedDeploymentScalesButDoesNotRollOut(t *testing.T) {
	d := deployment("web", 2)
	k := start(t, d)
	k.setReady(true)
	first := rsName(d)
	k.wantReplicaSets("1:" + first + "=2/2")

	k.change("web", func(d *appsv1.Deployment) { d.Spec.Paused = true })
	k.wantCondition("web", appsv1.DeploymentProgressing, corev1.ConditionUnknown, reasonPaused, "Deployment is paused")
	k.change("web", func(d *appsv1.Deployment) {
		setImage("nginx:2")(d)
		d.Spec.Replicas = ptr.To[int32](5)
	})
	k.wantReplicaSets("1:" + first + "=5/5")
	k.wantDeployment("web", func(d *appsv1.Deployment) string {
		if d.Status.ObservedGeneration != d.Generation || d.Status.AvailableReplicas != 5 {
			return fmt.Sprintf("status %+v", d.Status)
		}
		return ""
	})
	if got := render(k.replicaSets()); got != "1:"+first+"=5/5" {
		t.Fatalf("paused: %s, want no rollout", got)
	}

	k.change("web", func(d *appsv1.Deployment) { d.Spec.Paused = false })
	second := rsName(k.get("web"))
	k.wantReplicaSets("1:" + first + "=0/0 2:" + second + "=5/5")
	k.wantCondition("web", appsv1.DeploymentProgressing, corev1.ConditionTrue, reasonNewRSAvailable, fmt.Sprintf("ReplicaSet %q has successfully progressed.", second))
}

func TestProportionalScaling(t *testing.T) {
	d := deployment("web", 10)
	rollingBounds(d, 3, 2)
	k := start(t, d)
	first := rsName(d)
	k.wantReplicaSets("1:" + first + "=10/0")
	k.release(first)
	k.change("web", setImage("nginx:2"))
	second := rsName(k.get("web"))
	k.wantReplicaSets("1:" + first + "=8/8 2:" + second + "=5/0")

	// 13 pods may run; at 15 replicas 18 may: the 5 more are shared in
	// proportion, 8*18/13 = 11 and 5*18/13 = 7 (rounded).
	k.change("web", func(d *appsv1.Deployment) { d.Spec.Replicas = ptr.To[int32](15) })
	rss := k.wantReplicaSets("1:" + first + "=11/8 2:" + second + "=7/0")
	for _, rs := range rss {
		if rs.Annotations[DesiredReplicasAnnotation] != "15" || rs.Annotations[MaxReplicasAnnotation] != "18" {
			t.Errorf("%s annotations %v", rs.Name, rs.Annotations)
		}
	}
	k.wantEvents("ScalingReplicaSet: Scaled up replica set "+first+" from 8 to 11", "ScalingReplicaSet: Scaled up replica set "+second+" from 5 to 7")

	// Scaling down to zero empties every ReplicaSet.
	k.change("web", func(d *appsv1.Deployment) { d.Spec.Replicas = ptr.To[int32](0) })
	k.wantReplicaSets("1:" + first + "=0/0 2:" + second + "=0/0")
}

func TestRevisionHistoryLimit(t *testing.T) {
	d := deployment("web", 1)
	d.Spec.RevisionHistoryLimit = ptr.To[int32](1)
	k := start(t, d)
	k.setReady(true)
	var names []string
	for i := 1; i <= 4; i++ {
		if i > 1 {
			k.change("web", setImage(fmt.Sprintf("nginx:%d", i)))
		}
		cur := k.get("web")
		names = append(names, rsName(cur))
		k.wantCondition("web", appsv1.DeploymentProgressing, corev1.ConditionTrue, reasonNewRSAvailable, fmt.Sprintf("ReplicaSet %q has successfully progressed.", names[i-1]))
	}
	// One old ReplicaSet is kept besides the new one: the latest.
	k.wantReplicaSets("3:" + names[2] + "=0/0 4:" + names[3] + "=1/1")
}

func TestRollbackReusesReplicaSet(t *testing.T) {
	d := deployment("web", 1)
	k := start(t, d)
	k.setReady(true)
	first := rsName(d)
	k.wantReplicaSets("1:" + first + "=1/1")
	k.change("web", setImage("nginx:2"))
	second := rsName(k.get("web"))
	k.wantReplicaSets("1:" + first + "=0/0 2:" + second + "=1/1")
	k.change("web", setImage("nginx:1"))
	rss := k.wantReplicaSets("2:" + second + "=0/0 3:" + first + "=1/1")
	if h := rss[1].Annotations[RevisionHistoryAnnotation]; h != "1" {
		t.Errorf("revision-history %q, want 1", h)
	}
	k.wantDeployment("web", func(d *appsv1.Deployment) string {
		if r := d.Annotations[RevisionAnnotation]; r != "3" {
			return "deployment revision " + r + ", want 3"
		}
		return ""
	})
}

func TestProgressDeadlineExceeded(t *testing.T) {
	d := deployment("web", 2)
	d.Spec.ProgressDeadlineSeconds = ptr.To[int32](30)
	k := start(t, d)
	name := rsName(d)
	k.wantCondition("web", appsv1.DeploymentProgressing, corev1.ConditionTrue, reasonReplicaSetUpdated, fmt.Sprintf("ReplicaSet %q is progressing.", name))
	// Once the controller has seen the progress it reported, no more is
	// made.
	controllertest.Eventually(t, func() string {
		d, err := k.c.deployments.Deployments(ns).Get("web")
		if err != nil {
			return err.Error()
		}
		if c := getCondition(d.Status, appsv1.DeploymentProgressing); d.Status.UpdatedReplicas != 2 || c == nil || c.Reason != reasonReplicaSetUpdated {
			return fmt.Sprintf("cached status %+v", d.Status)
		}
		return ""
	})

	k.clock.SetTime(k.clock.Now().Add(31 * time.Second))
	k.c.queue.Add(ns + "/web") // what the requeue of a stuck rollout does
	k.wantCondition("web", appsv1.DeploymentProgressing, corev1.ConditionFalse, reasonTimedOut, fmt.Sprintf("ReplicaSet %q has timed out progressing.", name))

	// Progress after the deadline makes it progressing again.
	k.release(name)
	k.wantCondition("web", appsv1.DeploymentProgressing, corev1.ConditionTrue, reasonNewRSAvailable, fmt.Sprintf("ReplicaSet %q has successfully progressed.", name))
}

func TestHashCollision(t *testing.T) {
	d := deployment("web", 1)
	taken := &appsv1.ReplicaSet{
		ObjectMeta: metav1.ObjectMeta{Name: rsName(d), Namespace: ns, UID: "uid-other", Labels: map[string]string{"app": "other"}},
		Spec: appsv1.ReplicaSetSpec{Replicas: ptr.To[int32](0), Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "other"}},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "other"}}}},
	}
	k := start(t, d, taken)
	got := k.wantDeployment("web", func(d *appsv1.Deployment) string {
		if d.Status.CollisionCount == nil || *d.Status.CollisionCount != 1 {
			return fmt.Sprintf("collisionCount %v, want 1", d.Status.CollisionCount)
		}
		return ""
	})
	name := rsName(got)
	controllertest.Eventually(t, func() string {
		rs, err := k.cs.AppsV1().ReplicaSets(ns).Get(context.Background(), name, metav1.GetOptions{})
		if err != nil {
			return err.Error()
		}
		if ref := metav1.GetControllerOf(rs); ref == nil || ref.UID != d.UID {
			return fmt.Sprintf("%s controlled by %v", name, ref)
		}
		return ""
	})
	if other, err := k.cs.AppsV1().ReplicaSets(ns).Get(context.Background(), taken.Name, metav1.GetOptions{}); err != nil || metav1.GetControllerOf(other) != nil {
		t.Errorf("the other ReplicaSet changed: %v %v", other, err)
	}
}

func TestMinReadySecondsFollowsTheDeployment(t *testing.T) {
	d := deployment("web", 1)
	k := start(t, d)
	name := rsName(d)
	k.wantReplicaSets("1:" + name + "=1/0")
	// minReadySeconds is not part of the template: the same ReplicaSet
	// takes it over.
	k.change("web", func(d *appsv1.Deployment) { d.Spec.MinReadySeconds = 10 })
	controllertest.Eventually(t, func() string {
		rs, err := k.cs.AppsV1().ReplicaSets(ns).Get(context.Background(), name, metav1.GetOptions{})
		if err != nil {
			return err.Error()
		}
		if rs.Spec.MinReadySeconds != 10 {
			return fmt.Sprintf("minReadySeconds %d, want 10", rs.Spec.MinReadySeconds)
		}
		return ""
	})
	k.wantReplicaSets("1:" + name + "=1/0")
}
