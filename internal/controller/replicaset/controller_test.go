package replicaset

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	clocktesting "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"

	"github.com/svcnet/svcnet/internal/controller"
	"github.com/svcnet/svcnet/internal/controller/controllertest"
	"github.com/svcnet/svcnet/internal/controller/expectations"
)

const ns = "default"

var (
	app    = map[string]string{"app": "web"}
	rsGVR  = appsv1.SchemeGroupVersion.WithResource("replicasets")
	podGVR = corev1.SchemeGroupVersion.WithResource("pods")
)

func newClient(objects ...runtime.Object) *fake.Clientset {
	cs := controllertest.NewClient(objects...)
	// The controller patches pods (adoption, release) with strategic merge
	// patches only.
	cs.PrependReactor("patch", "*", func(a k8stesting.Action) (bool, runtime.Object, error) {
		if p := a.(k8stesting.PatchAction); p.GetResource() != podGVR || p.GetPatchType() != types.StrategicMergePatchType {
			return true, nil, fmt.Errorf("unexpected patch %v", a)
		}
		return false, nil, nil
	})
	return cs
}

// run starts the controller over cs; configure may adjust it before it
// runs.
func run(t *testing.T, cs *fake.Clientset, configure func(*Controller)) {
	t.Helper()
	controllertest.Start(t, cs, func(ctx context.Context, d controller.Deps) []func(context.Context) {
		c, err := New(ctx, d, Options{Workers: 2})
		if err != nil {
			t.Fatal(err)
		}
		if configure != nil {
			configure(c)
		}
		return []func(context.Context){c.Run}
	})
}

func replicaSet(name string, replicas int32) *appsv1.ReplicaSet {
	return &appsv1.ReplicaSet{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, UID: types.UID("uid-" + name), Generation: 1},
		Spec: appsv1.ReplicaSetSpec{
			Replicas: ptr.To(replicas),
			Selector: &metav1.LabelSelector{MatchLabels: app},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "web", "tier": "front"}, Annotations: map[string]string{"note": "x"}},
				Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "web", Image: "nginx"}}},
			},
		},
	}
}

// pod is a pod of rs (an orphan when rs is nil) bound to node.
func pod(name, node string, rs *appsv1.ReplicaSet) *corev1.Pod {
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, UID: types.UID("uid-" + name), Labels: map[string]string{"app": "web"}},
		Spec:       corev1.PodSpec{NodeName: node},
		Status:     corev1.PodStatus{Phase: corev1.PodPending},
	}
	if rs != nil {
		p.OwnerReferences = []metav1.OwnerReference{*metav1.NewControllerRef(rs, appsv1.SchemeGroupVersion.WithKind("ReplicaSet"))}
	}
	return p
}

// ready makes a pod Running and Ready since the given time.
func ready(p *corev1.Pod, since time.Time) *corev1.Pod {
	p.Status.Phase = corev1.PodRunning
	p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue, LastTransitionTime: metav1.NewTime(since)}}
	return p
}

// owned lists the names of the pods rs controls, sorted.
func owned(t *testing.T, cs *fake.Clientset, rs string) []string {
	t.Helper()
	list, err := cs.CoreV1().Pods(ns).List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, p := range list.Items {
		if ref := metav1.GetControllerOf(&p); ref != nil && ref.Name == rs {
			names = append(names, p.Name)
		}
	}
	slices.Sort(names)
	return names
}

// waitStatus waits until rs's status, as rendered by show, is want.
func waitStatus(t *testing.T, cs *fake.Clientset, name, want string) *appsv1.ReplicaSet {
	t.Helper()
	var rs *appsv1.ReplicaSet
	controllertest.Eventually(t, func() string {
		var err error
		if rs, err = cs.AppsV1().ReplicaSets(ns).Get(context.Background(), name, metav1.GetOptions{}); err != nil {
			return err.Error()
		}
		if got := show(rs); got != want {
			return fmt.Sprintf("status of %s: %s, want %s", name, got, want)
		}
		return ""
	})
	return rs
}

// show renders the status counts as
// replicas/fullyLabeled/ready/available/terminating@observedGeneration.
func show(rs *appsv1.ReplicaSet) string {
	s := rs.Status
	return fmt.Sprintf("%d/%d/%d/%d/%d@%d", s.Replicas, s.FullyLabeledReplicas, s.ReadyReplicas, s.AvailableReplicas,
		ptr.Deref(s.TerminatingReplicas, -1), s.ObservedGeneration)
}

func waitOwned(t *testing.T, cs *fake.Clientset, rs string, n int) []string {
	t.Helper()
	var names []string
	controllertest.Eventually(t, func() string {
		if names = owned(t, cs, rs); len(names) != n {
			return fmt.Sprintf("%s owns %v, want %d pods", rs, names, n)
		}
		return ""
	})
	return names
}

// eventsOf lists the "reason: message" of the Events about rs.
func eventsOf(t *testing.T, cs *fake.Clientset, rs string) []string {
	t.Helper()
	list, err := cs.CoreV1().Events(ns).List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range list.Items {
		if e.InvolvedObject.Kind == "ReplicaSet" && e.InvolvedObject.Name == rs {
			out = append(out, e.Reason+": "+e.Message)
		}
	}
	slices.Sort(out)
	return out
}

func waitEvents(t *testing.T, cs *fake.Clientset, rs string, want ...string) {
	t.Helper()
	slices.Sort(want)
	controllertest.Eventually(t, func() string {
		if got := eventsOf(t, cs, rs); !slices.Equal(got, want) {
			return fmt.Sprintf("events of %s:\n%s\nwant\n%s", rs, strings.Join(got, "\n"), strings.Join(want, "\n"))
		}
		return ""
	})
}

func scale(t *testing.T, cs *fake.Clientset, name string, replicas int32) {
	t.Helper()
	controllertest.RetryOnConflict(t, func() error {
		rs, err := cs.AppsV1().ReplicaSets(ns).Get(context.Background(), name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		rs.Spec.Replicas = ptr.To(replicas)
		_, err = cs.AppsV1().ReplicaSets(ns).Update(context.Background(), rs, metav1.UpdateOptions{})
		return err
	})
}

func TestScaleUpAndDown(t *testing.T) {
	cs := newClient(replicaSet("web", 3))
	run(t, cs, nil)
	names := waitOwned(t, cs, "web", 3)
	waitStatus(t, cs, "web", "3/3/0/0/0@1")

	p, err := cs.CoreV1().Pods(ns).Get(context.Background(), names[0], metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	ref := metav1.GetControllerOf(p)
	if p.GenerateName != "web-" || p.Labels["tier"] != "front" || p.Annotations["note"] != "x" || p.Spec.Containers[0].Image != "nginx" ||
		ref == nil || ref.UID != "uid-web" || ref.Kind != "ReplicaSet" || ref.APIVersion != "apps/v1" || !ptr.Deref(ref.BlockOwnerDeletion, false) {
		t.Errorf("pod from the template: %+v", p.ObjectMeta)
	}
	var want []string
	for _, n := range names {
		want = append(want, "SuccessfulCreate: Created pod: "+n)
	}
	waitEvents(t, cs, "web", want...)

	scale(t, cs, "web", 1)
	kept := waitOwned(t, cs, "web", 1)
	waitStatus(t, cs, "web", "1/1/0/0/0@2")
	for _, n := range names {
		if n != kept[0] {
			want = append(want, "SuccessfulDelete: Deleted pod: "+n)
		}
	}
	waitEvents(t, cs, "web", want...)

	// A deleted pod is replaced.
	if err := cs.CoreV1().Pods(ns).Delete(context.Background(), kept[0], metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	controllertest.Eventually(t, func() string {
		if got := owned(t, cs, "web"); len(got) != 1 || got[0] == kept[0] {
			return fmt.Sprintf("after deleting %s the ReplicaSet owns %v", kept[0], got)
		}
		return ""
	})
}

func TestAdoptAndRelease(t *testing.T) {
	rs := replicaSet("web", 2)
	other := pod("other-owner", "", nil)
	other.OwnerReferences = []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: "else", UID: "uid-else", Controller: ptr.To(true)}}
	cs := newClient(rs, pod("orphan", "node-1", nil), other)
	run(t, cs, nil)
	names := waitOwned(t, cs, "web", 2)
	waitStatus(t, cs, "web", "2/1/0/0/0@1") // the orphan lacks the template's tier label
	if !slices.Contains(names, "orphan") {
		t.Errorf("orphan not adopted: owned %v", names)
	}
	if got := owned(t, cs, "else"); len(got) != 1 {
		t.Errorf("a pod controlled by another owner was taken: %v", got)
	}

	// Relabelled out of the selector: released, and replaced.
	relabel(t, cs, "orphan", map[string]string{"app": "debug"})
	controllertest.Eventually(t, func() string {
		p, err := cs.CoreV1().Pods(ns).Get(context.Background(), "orphan", metav1.GetOptions{})
		if err != nil {
			return err.Error()
		}
		if len(p.OwnerReferences) != 0 {
			return fmt.Sprintf("relabelled pod still has owners %v", p.OwnerReferences)
		}
		if got := owned(t, cs, "web"); len(got) != 2 || slices.Contains(got, "orphan") {
			return fmt.Sprintf("owned %v, want two without orphan", got)
		}
		return ""
	})
	// Both pods now come from the template, with all its labels.
	waitStatus(t, cs, "web", "2/2/0/0/0@1")

	// Relabelled back into the selector: adopted again, and the surplus
	// deleted, unscheduled pods first.
	relabel(t, cs, "orphan", app)
	controllertest.Eventually(t, func() string {
		if got := owned(t, cs, "web"); len(got) != 2 || !slices.Contains(got, "orphan") {
			return fmt.Sprintf("owned %v, want two with orphan", got)
		}
		return ""
	})
}

func TestStatusCountsReadyAvailableTerminating(t *testing.T) {
	rs := replicaSet("web", 2)
	rs.Spec.MinReadySeconds = 2
	now := time.Now()
	gone := ready(pod("gone", "node-1", rs), now.Add(-time.Hour))
	gone.DeletionTimestamp = &metav1.Time{Time: now}
	done := pod("done", "node-1", rs)
	done.Status.Phase = corev1.PodSucceeded
	cs := newClient(rs,
		ready(pod("old", "node-1", rs), now.Add(-time.Hour)),
		ready(pod("new", "node-1", rs), now),
		gone, done)
	run(t, cs, nil)
	// "new" is Ready, not yet available; the sync looks again when it is.
	// "gone" is terminating, "done" counts nowhere.
	waitStatus(t, cs, "web", "2/0/2/1/1@1")
	waitStatus(t, cs, "web", "2/0/2/2/1@1")
	if got := owned(t, cs, "web"); len(got) != 4 {
		t.Errorf("pods %v: the terminating and finished pods must not be replaced or lost", got)
	}
}

func TestFailedCreateCondition(t *testing.T) {
	cs := newClient(replicaSet("web", 3))
	var fail atomic.Bool
	fail.Store(true)
	quota := apierrors.NewForbidden(podGVR.GroupResource(), "", errors.New("exceeded quota: compute, requested: pods=1, used: pods=1, limited: pods=1"))
	cs.PrependReactor("create", "pods", func(a k8stesting.Action) (bool, runtime.Object, error) {
		if fail.Load() {
			return true, nil, quota
		}
		return false, nil, nil
	})
	run(t, cs, nil)
	var rs *appsv1.ReplicaSet
	controllertest.Eventually(t, func() string {
		var err error
		if rs, err = cs.AppsV1().ReplicaSets(ns).Get(context.Background(), "web", metav1.GetOptions{}); err != nil {
			return err.Error()
		}
		if len(rs.Status.Conditions) == 0 {
			return "no ReplicaFailure condition"
		}
		return ""
	})
	c := rs.Status.Conditions[0]
	if c.Type != appsv1.ReplicaSetReplicaFailure || c.Status != corev1.ConditionTrue || c.Reason != "FailedCreate" || c.Message != quota.Error() {
		t.Errorf("condition %+v", c)
	}
	controllertest.Eventually(t, func() string {
		for _, e := range eventsOf(t, cs, "web") {
			if e == "FailedCreate: Error creating: "+quota.Error() {
				return ""
			}
		}
		return fmt.Sprintf("no FailedCreate event in %v", eventsOf(t, cs, "web"))
	})

	fail.Store(false)
	waitOwned(t, cs, "web", 3)
	rs = waitStatus(t, cs, "web", "3/3/0/0/0@1")
	if len(rs.Status.Conditions) != 0 {
		t.Errorf("conditions after recovery: %+v", rs.Status.Conditions)
	}
}

// laggingCache makes pod creations and deletions succeed without
// reaching the informer until deliver: a cache that lags behind the
// controller's writes.
type laggingCache struct {
	cs               *fake.Clientset
	mu               sync.Mutex
	created          []*corev1.Pod
	deleted          []string
	creates, deletes int
}

func lagCache(cs *fake.Clientset) *laggingCache {
	l := &laggingCache{cs: cs}
	cs.PrependReactor("create", "pods", func(a k8stesting.Action) (bool, runtime.Object, error) {
		p := a.(k8stesting.CreateAction).GetObject().(*corev1.Pod).DeepCopy()
		l.mu.Lock()
		defer l.mu.Unlock()
		l.creates++
		p.Name = fmt.Sprintf("%slagging%d", p.GenerateName, l.creates)
		p.UID = types.UID("uid-" + p.Name)
		l.created = append(l.created, p)
		return true, p, nil
	})
	cs.PrependReactor("delete", "pods", func(a k8stesting.Action) (bool, runtime.Object, error) {
		l.mu.Lock()
		defer l.mu.Unlock()
		l.deletes++
		l.deleted = append(l.deleted, a.(k8stesting.DeleteAction).GetName())
		return true, nil, nil
	})
	return l
}

// writes are the creations and deletions issued so far.
func (l *laggingCache) writes() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return fmt.Sprintf("%d creates, %d deletes", l.creates, l.deletes)
}

func (l *laggingCache) waitWrites(t *testing.T, want string) {
	t.Helper()
	controllertest.Eventually(t, func() string {
		if got := l.writes(); got != want {
			return fmt.Sprintf("%s, want %s", got, want)
		}
		return ""
	})
}

// deliver lets the informer see the writes held so far.
func (l *laggingCache) deliver(t *testing.T) {
	t.Helper()
	l.mu.Lock()
	created, deleted := l.created, l.deleted
	l.created, l.deleted = nil, nil
	l.mu.Unlock()
	for _, p := range created {
		if err := l.cs.Tracker().Add(p); err != nil {
			t.Fatal(err)
		}
	}
	for _, name := range deleted {
		if err := l.cs.Tracker().Delete(podGVR, ns, name); err != nil {
			t.Fatal(err)
		}
	}
}

// relabel gives the pod new labels, as a user would.
func relabel(t *testing.T, cs *fake.Clientset, name string, labels map[string]string) {
	t.Helper()
	controllertest.RetryOnConflict(t, func() error {
		p, err := cs.CoreV1().Pods(ns).Get(context.Background(), name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		p.Labels = labels
		_, err = cs.CoreV1().Pods(ns).Update(context.Background(), p, metav1.UpdateOptions{})
		return err
	})
}

// touch changes the ReplicaSet (the fake bumps its generation) and waits
// for the sync that follows to have written its status.
func touch(t *testing.T, cs *fake.Clientset, name string) {
	t.Helper()
	var rs *appsv1.ReplicaSet
	controllertest.RetryOnConflict(t, func() error {
		cur, err := cs.AppsV1().ReplicaSets(ns).Get(context.Background(), name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		cur.Annotations = map[string]string{"touched": time.Now().String()}
		rs, err = cs.AppsV1().ReplicaSets(ns).Update(context.Background(), cur, metav1.UpdateOptions{})
		return err
	})
	controllertest.Eventually(t, func() string {
		got, err := cs.AppsV1().ReplicaSets(ns).Get(context.Background(), name, metav1.GetOptions{})
		if err != nil {
			return err.Error()
		}
		if got.Status.ObservedGeneration != rs.Generation {
			return fmt.Sprintf("observed generation %d, want %d", got.Status.ObservedGeneration, rs.Generation)
		}
		return ""
	})
}

func TestExpectationsWithLaggingCache(t *testing.T) {
	cs := newClient(replicaSet("web", 3))
	l := lagCache(cs)
	run(t, cs, func(c *Controller) { c.burst = 2 })

	// One sync creates at most burst pods; until the informer shows
	// them, later syncs create nothing.
	l.waitWrites(t, "2 creates, 0 deletes")
	for range 3 {
		touch(t, cs, "web")
	}
	if got := l.writes(); got != "2 creates, 0 deletes" {
		t.Fatalf("%s while the cache lagged, want 2 creates", got)
	}
	l.deliver(t)
	l.waitWrites(t, "3 creates, 0 deletes")
	l.deliver(t)
	waitStatus(t, cs, "web", "3/3/0/0/0@4")

	// Deletions wait for the cache as well: the pods it still shows are
	// not deleted twice.
	scale(t, cs, "web", 1)
	l.waitWrites(t, "3 creates, 2 deletes")
	touch(t, cs, "web")
	if got := l.writes(); got != "3 creates, 2 deletes" {
		t.Fatalf("%s while the cache lagged, want 2 deletes", got)
	}
	l.deliver(t)
	waitStatus(t, cs, "web", "1/1/0/0/0@6")
	if got := l.writes(); got != "3 creates, 2 deletes" {
		t.Errorf("%s once the cache caught up", got)
	}
}

func TestExpectationsExpire(t *testing.T) {
	cs := newClient(replicaSet("web", 2))
	l := lagCache(cs)
	clock := clocktesting.NewFakeClock(time.Now())
	run(t, cs, func(c *Controller) {
		c.clock = clock
		c.expectations = expectations.New(clock)
	})
	l.waitWrites(t, "2 creates, 0 deletes")
	clock.Step(expectations.Timeout - time.Second)
	touch(t, cs, "web")
	if got := l.writes(); got != "2 creates, 0 deletes" {
		t.Fatalf("%s before the expectations expired, want 2 creates", got)
	}
	// Creations not observed in five minutes are presumed lost.
	clock.Step(2 * time.Second)
	touch(t, cs, "web")
	l.waitWrites(t, "4 creates, 0 deletes")
}

func TestScaleDownDeletesLeastValuableFirst(t *testing.T) {
	rs := replicaSet("web", 5)
	now := time.Now()
	pods := []runtime.Object{
		rs,
		ready(pod("keep-oldest", "node-1", rs), now.Add(-time.Hour)),
		ready(pod("keep-costly", "node-1", rs), now.Add(-time.Second)),
		ready(pod("ready-newer", "node-1", rs), now.Add(-time.Minute)),
		pod("pending", "node-1", rs),
		pod("unscheduled", "", rs),
	}
	pods[2].(*corev1.Pod).Annotations = map[string]string{corev1.PodDeletionCost: "100"}
	cs := newClient(pods...)
	run(t, cs, nil)
	waitStatus(t, cs, "web", "5/0/3/3/0@1")
	scale(t, cs, "web", 2)
	controllertest.Eventually(t, func() string {
		if got := owned(t, cs, "web"); !slices.Equal(got, []string{"keep-costly", "keep-oldest"}) {
			return fmt.Sprintf("kept %v, want keep-costly and keep-oldest", got)
		}
		return ""
	})
}

func TestReplicaSetBeingDeletedIsLeftToTheGarbageCollector(t *testing.T) {
	rs := replicaSet("web", 2)
	rs.DeletionTimestamp = &metav1.Time{Time: time.Now()}
	rs.Finalizers = []string{"foregroundDeletion"}
	cs := newClient(rs, pod("surplus-1", "node-1", rs), pod("surplus-2", "node-1", rs), pod("surplus-3", "node-1", rs), pod("orphan", "node-1", nil))
	run(t, cs, nil)
	waitStatus(t, cs, "web", "3/0/0/0/0@1")
	if got := owned(t, cs, "web"); len(got) != 3 {
		t.Errorf("a ReplicaSet being deleted changed its pods: owns %v", got)
	}
}
