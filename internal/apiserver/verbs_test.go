package apiserver

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/utils/ptr"
)

func TestListPagesAndSelectors(t *testing.T) {
	_, cs := newTestServer(t)
	ctx := context.Background()
	cms := cs.CoreV1().ConfigMaps("default")
	for i := 0; i < 7; i++ {
		labels := map[string]string{"parity": []string{"even", "odd"}[i%2]}
		if _, err := cms.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("cm%d", i), Labels: labels}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	var names []string
	cont, rv := "", ""
	for pages := 0; ; pages++ {
		l, err := cms.List(ctx, metav1.ListOptions{Limit: 3, Continue: cont})
		if err != nil {
			t.Fatal(err)
		}
		if rv == "" {
			rv = l.ResourceVersion
		} else if l.ResourceVersion != rv {
			t.Fatalf("page %d read at %s, first page at %s", pages, l.ResourceVersion, rv)
		}
		for _, it := range l.Items {
			names = append(names, it.Name)
		}
		if cont = l.Continue; cont == "" {
			break
		}
		if l.RemainingItemCount == nil || int(*l.RemainingItemCount) != 7-len(names) {
			t.Fatalf("remainingItemCount = %v after %d items", l.RemainingItemCount, len(names))
		}
	}
	if fmt.Sprint(names) != "[cm0 cm1 cm2 cm3 cm4 cm5 cm6]" {
		t.Fatalf("paged names = %v", names)
	}
	odd, err := cms.List(ctx, metav1.ListOptions{LabelSelector: "parity=odd", Limit: 2})
	if err != nil {
		t.Fatal(err)
	}
	if len(odd.Items) != 2 || odd.Items[0].Name != "cm1" || odd.Continue == "" {
		t.Fatalf("filtered page = %d items, continue %q", len(odd.Items), odd.Continue)
	}
	byName, err := cms.List(ctx, metav1.ListOptions{FieldSelector: "metadata.name=cm4"})
	if err != nil || len(byName.Items) != 1 || byName.Items[0].Name != "cm4" {
		t.Fatalf("field selector: %v %v", err, byName)
	}
	_, err = cms.List(ctx, metav1.ListOptions{FieldSelector: "spec.bogus=1"})
	if !apierrors.IsBadRequest(err) || err.Error() != "field label not supported: spec.bogus" {
		t.Fatalf("unsupported field selector: %v", err)
	}
}

func TestWatchResumesAndSelects(t *testing.T) {
	_, cs := newTestServer(t)
	ctx := context.Background()
	cms := cs.CoreV1().ConfigMaps("default")
	a, err := cms.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "a", Labels: map[string]string{"sel": "yes"}}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	// Changes after a's creation, seen by a watch that resumes from it.
	if _, err := cms.Patch(ctx, "a", types.MergePatchType, []byte(`{"metadata":{"labels":{"sel":"no"}}}`), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := cms.Patch(ctx, "a", types.MergePatchType, []byte(`{"metadata":{"labels":{"sel":"yes"}}}`), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	w, err := cms.Watch(ctx, metav1.ListOptions{ResourceVersion: a.ResourceVersion, LabelSelector: "sel=yes"})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	// Leaving the selector is a DELETED, entering it an ADDED.
	for i, want := range []watch.EventType{watch.Deleted, watch.Added} {
		select {
		case ev := <-w.ResultChan():
			if ev.Type != want {
				t.Fatalf("event %d = %s, want %s", i, ev.Type, want)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("event %d not received", i)
		}
	}
}

func TestStatusDryRunAndFinalizers(t *testing.T) {
	_, cs := newTestServer(t)
	ctx := context.Background()
	nss := cs.CoreV1().Namespaces()
	ns, err := nss.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "team"}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if ns.Status.Phase != corev1.NamespaceActive {
		t.Fatalf("phase = %q", ns.Status.Phase)
	}
	// The main resource ignores status; the status subresource changes only status.
	ns.Status.Phase = corev1.NamespaceTerminating
	ns.Labels = map[string]string{"x": "y"}
	up, err := nss.Update(ctx, ns, metav1.UpdateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if up.Status.Phase != corev1.NamespaceActive || up.Labels["x"] != "y" {
		t.Fatalf("main update: phase %q labels %v", up.Status.Phase, up.Labels)
	}
	// As upstream's status strategies: status and metadata, never spec.
	up.Status.Phase = corev1.NamespaceTerminating
	up.Labels = map[string]string{"x": "z"}
	up.Spec.Finalizers = append(up.Spec.Finalizers, "example.com/extra")
	st, err := nss.UpdateStatus(ctx, up, metav1.UpdateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if st.Status.Phase != corev1.NamespaceTerminating || st.Labels["x"] != "z" || slices.Contains(st.Spec.Finalizers, "example.com/extra") {
		t.Fatalf("status update: phase %q labels %v spec %v", st.Status.Phase, st.Labels, st.Spec)
	}

	// dryRun validates and stores nothing.
	cms := cs.CoreV1().ConfigMaps("default")
	if _, err := cms.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "dry"}}, metav1.CreateOptions{DryRun: []string{"All"}}); err != nil {
		t.Fatal(err)
	}
	if _, err := cms.Get(ctx, "dry", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Fatalf("dry-run create stored the object: %v", err)
	}

	// A finalizer holds the object until it is removed.
	if _, err := cms.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "held", Finalizers: []string{"example.com/hold"}}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := cms.Delete(ctx, "held", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	held, err := cms.Get(ctx, "held", metav1.GetOptions{})
	if err != nil || held.DeletionTimestamp == nil {
		t.Fatalf("held object: %v %v", err, held)
	}
	if _, err := cms.Patch(ctx, "held", types.JSONPatchType, []byte(`[{"op":"remove","path":"/metadata/finalizers"}]`), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := cms.Get(ctx, "held", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Fatalf("object survived its last finalizer: %v", err)
	}
}

// A pod on a node, deleted with a grace period, stays through its node's
// status updates (the kubelet reports a terminating pod's readiness) until
// the node deletes it for good; only an object with no grace left goes
// with its last finalizer, as upstream's ShouldDeleteDuringUpdate.
func TestGracefulDeleteOutlivesStatusUpdates(t *testing.T) {
	_, cs := newTestServer(t)
	ctx := context.Background()
	pods := cs.CoreV1().Pods("default")
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "draining"}, Spec: corev1.PodSpec{
		NodeName:   "n1",
		Containers: []corev1.Container{{Name: "web", Image: "nginx"}},
	}}
	if _, err := pods.Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	// A delete that only marks the pod is 200 with the object, as upstream's.
	var code int
	err := cs.CoreV1().RESTClient().Delete().Namespace("default").Resource("pods").Name("draining").
		Body(&metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](60)}).Do(ctx).StatusCode(&code).Error()
	if err != nil || code != http.StatusOK {
		t.Fatalf("graceful delete: %d %v, want 200", code, err)
	}
	cur, err := pods.Get(ctx, "draining", metav1.GetOptions{})
	if err != nil || cur.DeletionTimestamp == nil {
		t.Fatalf("pod after a graceful delete: %v %v", err, cur)
	}
	cur.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionFalse}}
	if _, err := pods.UpdateStatus(ctx, cur, metav1.UpdateOptions{}); err != nil {
		t.Fatalf("status update of a terminating pod: %v", err)
	}
	if got, err := pods.Get(ctx, "draining", metav1.GetOptions{}); err != nil || got.Status.Conditions[0].Status != corev1.ConditionFalse {
		t.Fatalf("terminating pod after its status update: %v %v", err, got)
	}
	if err := pods.Delete(ctx, "draining", metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0)}); err != nil {
		t.Fatal(err)
	}
	if _, err := pods.Get(ctx, "draining", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Fatalf("pod after the node's final delete: %v", err)
	}
}

func TestTerminatingNamespaceRefusesContent(t *testing.T) {
	_, cs := newTestServer(t)
	ctx := context.Background()
	if _, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "going"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := cs.CoreV1().Namespaces().Delete(ctx, "going", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	ns, err := cs.CoreV1().Namespaces().Get(ctx, "going", metav1.GetOptions{})
	if err != nil || ns.DeletionTimestamp == nil {
		t.Fatalf("namespace with finalizers was not kept for finalization: %v %v", err, ns)
	}
	_, err = cs.CoreV1().ConfigMaps("going").Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "late"}}, metav1.CreateOptions{})
	want := `configmaps "late" is forbidden: unable to create new content in namespace going because it is being terminated`
	if !apierrors.IsForbidden(err) || err.Error() != want {
		t.Fatalf("create in terminating namespace: %v", err)
	}
	// Emptying spec.finalizers through /finalize removes the namespace.
	ns.Spec.Finalizers = nil
	if _, err := cs.CoreV1().Namespaces().Finalize(ctx, ns, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := cs.CoreV1().Namespaces().Get(ctx, "going", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Fatalf("finalized namespace still there: %v", err)
	}
}

// TestWatchListInitialEvents: a watch with sendInitialEvents streams the
// current objects, then a bookmark marking their end, as client-go's
// WatchList expects.
func TestWatchListInitialEvents(t *testing.T) {
	_, cs := newTestServer(t)
	ctx := context.Background()
	cms := cs.CoreV1().ConfigMaps("default")
	for _, n := range []string{"a", "b"} {
		if _, err := cms.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: n}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	yes := true
	w, err := cms.Watch(ctx, metav1.ListOptions{SendInitialEvents: &yes, AllowWatchBookmarks: true,
		ResourceVersionMatch: metav1.ResourceVersionMatchNotOlderThan})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	var got []string
	for len(got) < 3 {
		select {
		case ev := <-w.ResultChan():
			cm := ev.Object.(*corev1.ConfigMap)
			entry := string(ev.Type) + ":" + cm.Name
			if ev.Type == watch.Bookmark {
				entry += cm.Annotations["k8s.io/initial-events-end"]
				if cm.ResourceVersion == "" {
					t.Fatal("bookmark without a resourceVersion")
				}
			}
			got = append(got, entry)
		case <-time.After(10 * time.Second):
			t.Fatalf("events so far %v", got)
		}
	}
	if fmt.Sprint(got) != "[ADDED:a ADDED:b BOOKMARK:true]" {
		t.Fatalf("events = %v", got)
	}
}
