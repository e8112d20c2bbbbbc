package e2e

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/retry"
)

// fakeKubelet plays the node agent for the pods of one namespace in a
// cluster that runs none: it registers a Ready node, for the scheduler to
// bind the pods to, makes each pod bound to it Running with an IP and Ready
// (unless held), and completes graceful deletions at once, as a kubelet
// whose processes exit on SIGTERM would.
type fakeKubelet struct {
	t    *testing.T
	cs   kubernetes.Interface
	node string

	mu     sync.Mutex
	held   bool
	lister func() []*corev1.Pod
	nextIP atomic.Uint32
}

// startFakeKubelet runs a fake kubelet for namespace ns until the test
// ends.
func startFakeKubelet(t *testing.T, cs kubernetes.Interface, ns string) *fakeKubelet {
	t.Helper()
	k := &fakeKubelet{t: t, cs: cs, node: "fake-node"}
	ctx, cancel := context.WithCancel(context.Background())
	node := &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: k.node, Labels: map[string]string{corev1.LabelHostname: k.node}},
	}
	if _, err := cs.CoreV1().Nodes().Create(ctx, node, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatalf("register %s: %v", k.node, err)
	}
	// Node IPAM writes the new Node too: retry as a kubelet does.
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		node, err := cs.CoreV1().Nodes().Get(ctx, k.node, metav1.GetOptions{})
		if err != nil {
			return err
		}
		capacity := corev1.ResourceList{
			corev1.ResourceCPU:    resource.MustParse("64"),
			corev1.ResourceMemory: resource.MustParse("256Gi"),
			corev1.ResourcePods:   resource.MustParse("1000"),
		}
		node.Status.Capacity, node.Status.Allocatable = capacity, capacity
		node.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue, Reason: "KubeletReady",
			LastHeartbeatTime: metav1.Now(), LastTransitionTime: metav1.Now()}}
		_, err = cs.CoreV1().Nodes().UpdateStatus(ctx, node, metav1.UpdateOptions{})
		return err
	})
	if err != nil {
		t.Fatalf("node status: %v", err)
	}

	factory := informers.NewSharedInformerFactoryWithOptions(cs, 0, informers.WithNamespace(ns))
	pods := factory.Core().V1().Pods()
	k.lister = func() []*corev1.Pod {
		list, _ := pods.Lister().List(labels.Everything())
		return list
	}
	if _, err := pods.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { k.handle(ctx, obj.(*corev1.Pod)) },
		UpdateFunc: func(_, obj any) { k.handle(ctx, obj.(*corev1.Pod)) },
	}); err != nil {
		t.Fatal(err)
	}
	factory.Start(ctx.Done())
	t.Cleanup(func() {
		cancel()
		factory.Shutdown()
	})
	return k
}

// hold keeps pods that start from now on Running but not Ready, until
// release.
func (k *fakeKubelet) hold() {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.held = true
}

// release makes every held pod Ready and stops holding.
func (k *fakeKubelet) release() {
	k.mu.Lock()
	k.held = false
	k.mu.Unlock()
	for _, p := range k.lister() {
		k.handle(context.Background(), p)
	}
}

// readyOne makes one running pod Ready while the others stay held, to
// pace workloads that wait for each pod in turn.
func (k *fakeKubelet) readyOne(ns, name string) {
	k.t.Helper()
	ctx := context.Background()
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		pod, err := k.cs.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		return k.setStatus(ctx, pod, true)
	})
	if err != nil {
		k.t.Fatalf("make %s Ready: %v", name, err)
	}
}

// handle moves one pod along its life; informer handlers of one informer
// run one at a time.
func (k *fakeKubelet) handle(ctx context.Context, pod *corev1.Pod) {
	client := k.cs.CoreV1().Pods(pod.Namespace)
	var err error
	switch {
	case pod.DeletionTimestamp != nil:
		err = client.Delete(ctx, pod.Name, metav1.DeleteOptions{GracePeriodSeconds: new(int64), Preconditions: &metav1.Preconditions{UID: &pod.UID}})
	case pod.Spec.NodeName != k.node:
		return
	case pod.Status.Phase == "" || pod.Status.Phase == corev1.PodPending:
		k.mu.Lock()
		held := k.held
		k.mu.Unlock()
		err = k.setStatus(ctx, pod, !held)
	case pod.Status.Phase == corev1.PodRunning && !podReady(pod):
		k.mu.Lock()
		held := k.held
		k.mu.Unlock()
		if !held {
			err = k.setStatus(ctx, pod, true)
		}
	}
	if err != nil && ctx.Err() == nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
		k.t.Logf("fake kubelet: pod %s/%s: %v", pod.Namespace, pod.Name, err)
	}
}

func (k *fakeKubelet) setStatus(ctx context.Context, pod *corev1.Pod, ready bool) error {
	pod = pod.DeepCopy()
	ip := pod.Status.PodIP
	if ip == "" {
		n := k.nextIP.Add(1)
		ip = fmt.Sprintf("10.244.%d.%d", 100+n/250, 1+n%250)
	}
	readyStatus := corev1.ConditionFalse
	if ready {
		readyStatus = corev1.ConditionTrue
	}
	now := metav1.Now()
	pod.Status.Phase = corev1.PodRunning
	pod.Status.PodIP, pod.Status.PodIPs = ip, []corev1.PodIP{{IP: ip}}
	pod.Status.Conditions = []corev1.PodCondition{
		{Type: corev1.PodScheduled, Status: corev1.ConditionTrue, LastTransitionTime: now},
		{Type: corev1.PodReady, Status: readyStatus, LastTransitionTime: now},
	}
	_, err := k.cs.CoreV1().Pods(pod.Namespace).UpdateStatus(ctx, pod, metav1.UpdateOptions{})
	return err
}

func podReady(pod *corev1.Pod) bool {
	for _, c := range pod.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}
