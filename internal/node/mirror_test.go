package node

import (
	"context"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/cache"

	"github.com/svcnet/svcnet/internal/controller/controllertest"
	"github.com/svcnet/svcnet/internal/logs"
)

const testNode = "n1"

// component is a fake component: its start time and health, as the test
// sets them.
type component struct {
	mu      sync.Mutex
	started time.Time
	health  error
	checks  atomic.Int32
}

func (c *component) set(started time.Time, health error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.started, c.health = started, health
}

func (c *component) staticPod(name, log string) StaticPod {
	return StaticPod{
		Pod: &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: metav1.NamespaceSystem,
				Labels: map[string]string{"component": name, "tier": "control-plane"}},
			Spec: corev1.PodSpec{
				HostNetwork:       true,
				PriorityClassName: "system-node-critical",
				Containers: []corev1.Container{{Name: name, Image: "registry.k8s.io/" + name + ":v1.37.2",
					Command: []string{"svcnet", "apiserver"}}},
			},
		},
		Log: log,
		Started: func() time.Time {
			c.mu.Lock()
			defer c.mu.Unlock()
			return c.started
		},
		Healthy: func(context.Context) error {
			c.checks.Add(1)
			c.mu.Lock()
			defer c.mu.Unlock()
			return c.health
		},
	}
}

// staticAgent is an agent with only what static pods need, on a fake API
// with the Node, its informers started; run starts the static pods' loop.
type staticAgent struct {
	*Agent
	client *fake.Clientset
	cancel context.CancelFunc
	done   chan struct{}
}

func newStaticAgent(t *testing.T, specs ...StaticPod) *staticAgent {
	t.Helper()
	client := controllertest.NewClient(&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: testNode, UID: "node-uid"}})
	ctx, cancel := context.WithCancel(context.Background())
	a := &Agent{cfg: Config{NodeName: testNode}, client: client, nodeIP: net.ParseIP("192.0.2.10"),
		workers: map[types.UID]*podWorker{}, runCtx: ctx}
	factory := informers.NewSharedInformerFactory(client, 0)
	pods, nodes := factory.Core().V1().Pods(), factory.Core().V1().Nodes()
	a.podLister, a.nodeLister = pods.Lister(), nodes.Lister()
	a.static = newStaticPods(a, specs, time.Now())
	a.static.period = 20 * time.Millisecond
	if _, err := pods.Informer().AddEventHandler(a.podHandler(ctx)); err != nil {
		t.Fatal(err)
	}
	factory.Start(ctx.Done())
	if !cache.WaitForCacheSync(ctx.Done(), pods.Informer().HasSynced, nodes.Informer().HasSynced) {
		t.Fatal("caches did not sync")
	}
	s := &staticAgent{Agent: a, client: client, cancel: cancel}
	t.Cleanup(func() {
		s.stop()
		factory.Shutdown()
	})
	return s
}

func (s *staticAgent) run() {
	s.done = make(chan struct{})
	go func() {
		defer close(s.done)
		s.static.run(s.runCtx)
	}()
}

func (s *staticAgent) stop() {
	s.cancel()
	if s.done != nil {
		<-s.done
	}
}

func (s *staticAgent) get(t *testing.T, name string) *corev1.Pod {
	t.Helper()
	p, err := s.client.CoreV1().Pods(metav1.NamespaceSystem).Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		return nil
	}
	return p
}

// wait polls until cond has nothing to say about the mirror pod name.
func (s *staticAgent) wait(t *testing.T, name string, cond func(*corev1.Pod) string) *corev1.Pod {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		p := s.get(t, name)
		why := "no mirror pod"
		if p != nil {
			why = cond(p)
		}
		if why == "" {
			return p
		}
		if time.Now().After(deadline) {
			t.Fatalf("mirror pod %s: %s", name, why)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func conditionStatus(p *corev1.Pod, t corev1.PodConditionType) *corev1.PodCondition {
	return findCondition(p.Status.Conditions, t)
}

func ready(p *corev1.Pod) string {
	if c := conditionStatus(p, corev1.PodReady); c == nil || c.Status != corev1.ConditionTrue {
		return "not Ready"
	}
	return ""
}

func TestMirrorPodOfAStaticPod(t *testing.T) {
	var api component
	started := time.Now().Add(-time.Minute).Truncate(time.Second)
	api.set(started, nil)
	s := newStaticAgent(t, api.staticPod("kube-apiserver", ""))
	s.run()
	p := s.wait(t, "kube-apiserver-n1", ready)

	hash := p.Annotations[configHashAnnotation]
	if len(hash) != 32 || p.Annotations[configMirrorAnnotation] != hash || p.Annotations[configSourceAnnotation] != "file" {
		t.Errorf("annotations %v: want config.hash (32 hex digits) = config.mirror, config.source file", p.Annotations)
	}
	if _, err := time.Parse(time.RFC3339Nano, p.Annotations[configSeenAnnotation]); err != nil {
		t.Errorf("config.seen: %v", err)
	}
	if p.Labels["component"] != "kube-apiserver" || p.Labels["tier"] != "control-plane" {
		t.Errorf("labels %v", p.Labels)
	}
	if refs := p.OwnerReferences; len(refs) != 1 || refs[0].Kind != "Node" || refs[0].APIVersion != "v1" || refs[0].Name != testNode ||
		refs[0].UID != "node-uid" || refs[0].Controller == nil || !*refs[0].Controller {
		t.Errorf("ownerReferences %+v: want the Node, as controller", refs)
	}
	if p.Spec.NodeName != testNode || !p.Spec.HostNetwork || len(p.Spec.Tolerations) != 1 ||
		p.Spec.Tolerations[0] != (corev1.Toleration{Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute}) {
		t.Errorf("spec: node %q, hostNetwork %v, tolerations %+v", p.Spec.NodeName, p.Spec.HostNetwork, p.Spec.Tolerations)
	}

	st := p.Status
	if st.Phase != corev1.PodRunning || st.PodIP != "192.0.2.10" || st.HostIP != "192.0.2.10" || len(st.PodIPs) != 1 || st.StartTime == nil {
		t.Errorf("status: phase %s, podIP %s, hostIP %s, startTime %v", st.Phase, st.PodIP, st.HostIP, st.StartTime)
	}
	var types []string
	for _, c := range st.Conditions {
		types = append(types, string(c.Type)+"="+string(c.Status))
	}
	if got := strings.Join(types, " "); got != "PodReadyToStartContainers=True Initialized=True Ready=True ContainersReady=True PodScheduled=True" {
		t.Errorf("conditions %s", got)
	}
	if len(st.ContainerStatuses) != 1 {
		t.Fatalf("container statuses %+v", st.ContainerStatuses)
	}
	cs := st.ContainerStatuses[0]
	if cs.Name != "kube-apiserver" || !cs.Ready || cs.Started == nil || !*cs.Started || cs.RestartCount != 0 ||
		cs.State.Running == nil || !cs.State.Running.StartedAt.Time.Equal(started) ||
		cs.Image != "registry.k8s.io/kube-apiserver:v1.37.2" || cs.ImageID == "" || !strings.HasPrefix(cs.ContainerID, "svcnet://") {
		t.Errorf("container status %+v", cs)
	}

	// The same manifest on a later start has the same hash: the mirror pod
	// stays, with the same container ID while the component runs.
	if again := newStaticPods(s.Agent, []StaticPod{api.staticPod("kube-apiserver", "")}, time.Now()); again.pods[0].hash != hash {
		t.Errorf("hash %s on a second start, was %s", again.pods[0].hash, hash)
	}
	time.Sleep(100 * time.Millisecond)
	if later := s.get(t, p.Name); later.UID != p.UID || later.Status.ContainerStatuses[0].ContainerID != cs.ContainerID {
		t.Errorf("the mirror pod changed while nothing did: uid %s (was %s), container %s (was %s)",
			later.UID, p.UID, later.Status.ContainerStatuses[0].ContainerID, cs.ContainerID)
	}
}

func TestMirrorPodReadinessFollowsTheHealthCheck(t *testing.T) {
	var proxy component
	s := newStaticAgent(t, proxy.staticPod("kube-proxy", ""))
	s.run()
	p := s.wait(t, "kube-proxy-n1", func(p *corev1.Pod) string {
		if len(p.Status.ContainerStatuses) == 0 {
			return "no status"
		}
		return ""
	})
	cs := p.Status.ContainerStatuses[0]
	if p.Status.Phase != corev1.PodPending || cs.State.Waiting == nil || cs.State.Waiting.Reason != "ContainerCreating" || cs.Ready || cs.ContainerID != "" {
		t.Errorf("not started: phase %s, container %+v", p.Status.Phase, cs)
	}
	if proxy.checks.Load() != 0 {
		t.Error("a component that has not started was checked")
	}

	proxy.set(time.Now(), errors.New("no sync yet"))
	notReady := func(p *corev1.Pod) string {
		c := conditionStatus(p, corev1.PodReady)
		cr := conditionStatus(p, corev1.ContainersReady)
		switch {
		case p.Status.Phase != corev1.PodRunning:
			return "phase " + string(p.Status.Phase)
		case c == nil || c.Status != corev1.ConditionFalse || c.Reason != "ContainersNotReady" || c.Message != "containers with unready status: [kube-proxy]":
			return "Ready condition"
		case cr == nil || cr.Status != corev1.ConditionFalse || cr.Reason != "ContainersNotReady":
			return "ContainersReady condition"
		case p.Status.ContainerStatuses[0].State.Running == nil || p.Status.ContainerStatuses[0].Ready:
			return "container state"
		}
		return ""
	}
	p = s.wait(t, "kube-proxy-n1", notReady)
	since := conditionStatus(p, corev1.PodReady).LastTransitionTime

	proxy.set(proxy.Started(), nil)
	p = s.wait(t, "kube-proxy-n1", ready)
	if c := conditionStatus(p, corev1.PodReady); c.Reason != "" || c.Message != "" {
		t.Errorf("Ready: %+v", c)
	}
	proxy.set(proxy.Started(), errors.New("last sync too old"))
	p = s.wait(t, "kube-proxy-n1", notReady)
	if c := conditionStatus(p, corev1.PodReady); c.LastTransitionTime.Before(&since) {
		t.Errorf("Ready=False again keeps the transition time of before: %v", c.LastTransitionTime)
	}
}

func (c *component) Started() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.started
}

func TestMirrorPodMadeAnew(t *testing.T) {
	var api component
	api.set(time.Now(), nil)
	s := newStaticAgent(t, api.staticPod("kube-apiserver", ""))
	// An orphan: a mirror pod on this node of a static pod it does not have.
	orphan := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "old-n1", Namespace: metav1.NamespaceSystem,
		Annotations: map[string]string{configMirrorAnnotation: "x"}}, Spec: corev1.PodSpec{NodeName: testNode}}
	if _, err := s.client.CoreV1().Pods(orphan.Namespace).Create(context.Background(), orphan, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	s.run()
	first := s.wait(t, "kube-apiserver-n1", ready)
	s.wait(t, "kube-apiserver-n1", func(*corev1.Pod) string {
		if s.get(t, "old-n1") != nil {
			return "the orphan mirror pod is still there"
		}
		return ""
	})

	pods := s.client.CoreV1().Pods(metav1.NamespaceSystem)
	if err := pods.Delete(context.Background(), first.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	second := s.wait(t, first.Name, func(p *corev1.Pod) string {
		if p.UID == first.UID {
			return "not made anew"
		}
		return ready(p)
	})

	// Being deleted (a graceful deletion): it goes at once, and comes back.
	deleting := second.DeepCopy()
	deleting.DeletionTimestamp = &metav1.Time{Time: time.Now()}
	if _, err := pods.Update(context.Background(), deleting, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	third := s.wait(t, first.Name, func(p *corev1.Pod) string {
		if p.UID == second.UID || p.DeletionTimestamp != nil {
			return "the mirror pod being deleted is still there"
		}
		return ready(p)
	})

	// Of another manifest (an older hash): replaced.
	outdated := third.DeepCopy()
	outdated.Annotations[configMirrorAnnotation] = "0123"
	if _, err := pods.Update(context.Background(), outdated, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	s.wait(t, first.Name, func(p *corev1.Pod) string {
		if p.UID == third.UID {
			return "the outdated mirror pod is still there"
		}
		if p.Annotations[configMirrorAnnotation] != p.Annotations[configHashAnnotation] {
			return "hash"
		}
		return ""
	})
}

func TestMirrorPodsAreNotRun(t *testing.T) {
	var api component
	s := newStaticAgent(t, api.staticPod("kube-apiserver", ""))
	mirror := s.static.pods[0].pod.DeepCopy()
	mirror.UID = "mirror-uid"
	mirror.Annotations[configMirrorAnnotation] = s.static.pods[0].hash
	h := s.podHandler(s.runCtx)
	h.OnAdd(mirror, false)
	h.OnUpdate(mirror, mirror)
	h.OnDelete(mirror)
	if len(s.workers) != 0 {
		t.Errorf("the agent started pod workers for a mirror pod: %v", s.workers)
	}
	select {
	case <-s.static.wake:
	default:
		t.Error("a mirror pod's events do not wake the static pods")
	}
}

func TestMirrorPodsRemovedOnStop(t *testing.T) {
	var api, proxy component
	api.set(time.Now(), nil)
	proxy.set(time.Now(), nil)
	s := newStaticAgent(t, api.staticPod("kube-apiserver", ""), proxy.staticPod("kube-proxy", ""))
	s.run()
	s.wait(t, "kube-apiserver-n1", ready)
	s.wait(t, "kube-proxy-n1", ready)
	s.stop()
	// (Once stopped, the agent starts no worker for it.)
	other := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "default"}, Spec: corev1.PodSpec{NodeName: testNode}}
	if _, err := s.client.CoreV1().Pods("default").Create(context.Background(), other, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	s.static.removeAll(context.Background())
	for _, name := range []string{"kube-apiserver-n1", "kube-proxy-n1"} {
		if _, err := s.client.CoreV1().Pods(metav1.NamespaceSystem).Get(context.Background(), name, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
			t.Errorf("mirror pod %s after removeAll: %v", name, err)
		}
	}
	if _, err := s.client.CoreV1().Pods("default").Get(context.Background(), "web", metav1.GetOptions{}); err != nil {
		t.Errorf("removeAll removed another pod: %v", err)
	}
}

func TestStaticPodLogs(t *testing.T) {
	var api component
	path := filepath.Join(t.TempDir(), "kube-apiserver.log")
	f, err := logs.Create(path, logs.MaxFileSize)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	for _, l := range []string{"starting", "API server serving", "third"} {
		_, _ = f.Write([]byte(l + "\n"))
	}
	api.set(time.Now(), nil)
	s := newStaticAgent(t, api.staticPod("kube-apiserver", path))
	s.run()
	s.wait(t, "kube-apiserver-n1", ready)
	s.wait(t, "kube-apiserver-n1", func(*corev1.Pod) string {
		if _, err := s.podLister.Pods(metav1.NamespaceSystem).Get("kube-apiserver-n1"); err != nil {
			return "not in the cache yet"
		}
		return ""
	})
	srv := &server{agent: s.Agent}
	get := func(container, query string) (int, string) {
		req := httptest.NewRequest("GET", "/containerLogs/kube-system/kube-apiserver-n1/"+container+"?"+query, nil)
		req.SetPathValue("namespace", "kube-system")
		req.SetPathValue("pod", "kube-apiserver-n1")
		req.SetPathValue("container", container)
		rec := httptest.NewRecorder()
		srv.containerLogs(rec, req)
		return rec.Code, rec.Body.String()
	}
	if code, body := get("kube-apiserver", ""); code != http.StatusOK || body != "starting\nAPI server serving\nthird\n" {
		t.Errorf("log: %d %q", code, body)
	}
	if code, body := get("kube-apiserver", "tailLines=1&timestamps=true"); code != http.StatusOK || !strings.HasSuffix(body, "Z third\n") || strings.Count(body, "\n") != 1 {
		t.Errorf("tail 1 with timestamps: %d %q", code, body)
	}
	if code, body := get("kube-apiserver", "previous=true"); code != http.StatusBadRequest || !strings.Contains(body, `previous terminated container \"kube-apiserver\" in pod \"kube-apiserver-n1\" not found`) {
		t.Errorf("previous: %d %s", code, body)
	}
	if code, body := get("etcd", ""); code != http.StatusBadRequest || !strings.Contains(body, "container etcd is not valid for pod kube-apiserver-n1") {
		t.Errorf("another container: %d %s", code, body)
	}

	// Follow: what the component logs later comes through until the
	// client goes.
	ctx, cancel := context.WithCancel(context.Background())
	req := httptest.NewRequestWithContext(ctx, "GET", "/containerLogs/kube-system/kube-apiserver-n1/kube-apiserver?follow=true&tailLines=0", nil)
	req.SetPathValue("namespace", "kube-system")
	req.SetPathValue("pod", "kube-apiserver-n1")
	req.SetPathValue("container", "kube-apiserver")
	w := &syncRecorder{ResponseRecorder: httptest.NewRecorder()}
	done := make(chan struct{})
	go func() {
		defer close(done)
		srv.containerLogs(w, req)
	}()
	// Once the reader is past what was there (tailLines=0 shows none of
	// it), the component logs another line.
	for !w.flushed() {
		time.Sleep(10 * time.Millisecond)
	}
	time.Sleep(300 * time.Millisecond)
	_, _ = f.Write([]byte("later\n"))
	deadline := time.Now().Add(5 * time.Second)
	for !strings.Contains(w.body(), "later\n") && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	cancel()
	<-done
	if got := w.body(); got != "later\n" {
		t.Errorf("followed: %q", got)
	}
}

// syncRecorder lets the test read a response being written.
type syncRecorder struct {
	mu sync.Mutex
	*httptest.ResponseRecorder
}

func (r *syncRecorder) Write(p []byte) (int, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.ResponseRecorder.Write(p)
}

func (r *syncRecorder) Flush() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.ResponseRecorder.Flush()
}

func (r *syncRecorder) flushed() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.Flushed
}

func (r *syncRecorder) body() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.Body.String()
}
