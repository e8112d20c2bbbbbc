package e2e

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/clientcmd"
)

// eventLog records what an informer delivered, per object.
type eventLog struct {
	mu       sync.Mutex
	adds     map[string]int
	updates  map[string]int
	deletes  map[string]int
	problems []string
}

func newEventLog() *eventLog {
	return &eventLog{adds: map[string]int{}, updates: map[string]int{}, deletes: map[string]int{}}
}

func (l *eventLog) handler() cache.ResourceEventHandlerFuncs {
	return cache.ResourceEventHandlerFuncs{
		AddFunc: func(obj interface{}) {
			l.mu.Lock()
			defer l.mu.Unlock()
			l.adds[obj.(*corev1.Service).Name]++
		},
		UpdateFunc: func(oldObj, newObj interface{}) {
			o, n := oldObj.(*corev1.Service), newObj.(*corev1.Service)
			l.mu.Lock()
			defer l.mu.Unlock()
			if o.ResourceVersion == n.ResourceVersion {
				l.problems = append(l.problems, "duplicate event for "+n.Name+" at "+n.ResourceVersion)
			}
			l.updates[n.Name]++
		},
		DeleteFunc: func(obj interface{}) {
			if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
				obj = d.Obj
				l.mu.Lock()
				l.problems = append(l.problems, "missed delete of "+obj.(*corev1.Service).Name)
				l.mu.Unlock()
			}
			l.mu.Lock()
			defer l.mu.Unlock()
			l.deletes[obj.(*corev1.Service).Name]++
		},
	}
}

// TestInformerExactCopyAcrossRestart: a client-go informer on services keeps
// an exact copy through creates, updates and deletes, and through a restart
// of the API server, with no missed or duplicated event.
func TestInformerExactCopyAcrossRestart(t *testing.T) {
	t.Parallel()
	c := startCluster(t)
	cfg, err := clientcmd.BuildConfigFromFlags("", c.kubeconfig())
	if err != nil {
		t.Fatal(err)
	}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	factory := informers.NewSharedInformerFactory(cs, 0)
	inf := factory.Core().V1().Services().Informer()
	log := newEventLog()
	if _, err := inf.AddEventHandler(log.handler()); err != nil {
		t.Fatal(err)
	}
	factory.Start(ctx.Done())
	defer func() { cancel(); factory.Shutdown() }()
	if !cache.WaitForCacheSync(ctx.Done(), inf.HasSynced) {
		t.Fatal("informer did not sync")
	}

	svcs := cs.CoreV1().Services("default")
	mk := func(name string) {
		t.Helper()
		_, err := svcs.Create(ctx, &corev1.Service{
			ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"round": "0"}},
			Spec:       corev1.ServiceSpec{Selector: map[string]string{"app": name}, Ports: []corev1.ServicePort{{Port: 80}}},
		}, metav1.CreateOptions{})
		if err != nil {
			t.Fatalf("create %s: %v", name, err)
		}
	}
	relabel := func(name, round string) {
		t.Helper()
		_, err := svcs.Patch(ctx, name, types.MergePatchType, []byte(`{"metadata":{"labels":{"round":"`+round+`"}}}`), metav1.PatchOptions{})
		if err != nil {
			t.Fatalf("patch %s: %v", name, err)
		}
	}
	del := func(name string) {
		t.Helper()
		if err := svcs.Delete(ctx, name, metav1.DeleteOptions{}); err != nil {
			t.Fatalf("delete %s: %v", name, err)
		}
	}
	wantUpdates := map[string]int{}
	for i := 0; i < 10; i++ {
		mk(fmt.Sprintf("s%d", i))
	}
	for i := 0; i < 6; i++ {
		relabel(fmt.Sprintf("s%d", i), "1")
		wantUpdates[fmt.Sprintf("s%d", i)]++
	}
	for i := 0; i < 3; i++ {
		del(fmt.Sprintf("s%d", i))
	}
	converged(t, ctx, cs, inf)

	c.restart()

	for i := 10; i < 15; i++ {
		mk(fmt.Sprintf("s%d", i))
	}
	for i := 3; i < 8; i++ {
		relabel(fmt.Sprintf("s%d", i), "2")
		wantUpdates[fmt.Sprintf("s%d", i)]++
	}
	del("s9")
	del("s10")
	converged(t, ctx, cs, inf)

	log.mu.Lock()
	defer log.mu.Unlock()
	if len(log.problems) > 0 {
		t.Errorf("informer problems: %s", strings.Join(log.problems, "; "))
	}
	for i := 0; i < 15; i++ {
		name := fmt.Sprintf("s%d", i)
		if log.adds[name] != 1 {
			t.Errorf("%s: %d adds, want 1", name, log.adds[name])
		}
		if log.updates[name] != wantUpdates[name] {
			t.Errorf("%s: %d updates, want %d", name, log.updates[name], wantUpdates[name])
		}
	}
	for _, name := range []string{"s0", "s1", "s2", "s9", "s10"} {
		if log.deletes[name] != 1 {
			t.Errorf("%s: %d deletes, want 1", name, log.deletes[name])
		}
	}
}

// converged waits until the informer's store equals a fresh list: the same
// names at the same resourceVersions.
func converged(t *testing.T, ctx context.Context, cs kubernetes.Interface, inf cache.SharedIndexInformer) {
	t.Helper()
	snapshot := func(items []*corev1.Service) string {
		var s []string
		for _, it := range items {
			s = append(s, it.Namespace+"/"+it.Name+"@"+it.ResourceVersion)
		}
		sort.Strings(s)
		return strings.Join(s, " ")
	}
	eventually(t, 30*time.Second, func() string {
		l, err := cs.CoreV1().Services("").List(ctx, metav1.ListOptions{})
		if err != nil {
			return err.Error()
		}
		var server, cached []*corev1.Service
		for i := range l.Items {
			server = append(server, &l.Items[i])
		}
		for _, o := range inf.GetStore().List() {
			cached = append(cached, o.(*corev1.Service))
		}
		if a, b := snapshot(server), snapshot(cached); a != b {
			return fmt.Sprintf("server %s\ninformer %s", a, b)
		}
		return ""
	})
}
