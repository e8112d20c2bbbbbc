package e2e

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
)

// podBounds watches the pods of one label selector and records every
// moment at which more pods run than allowed or fewer are Ready than
// required (pods being deleted do not count).
type podBounds struct {
	mu                    sync.Mutex
	maxPods, minAvailable int
	pods                  map[string]*corev1.Pod
	violations            []string
	most                  int
}

// watchPodBounds starts the watch; it stops when the test ends.
func watchPodBounds(t *testing.T, cs kubernetes.Interface, ns, selector string, maxPods, minAvailable int) *podBounds {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	list, err := cs.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: selector})
	if err != nil {
		t.Fatal(err)
	}
	w, err := cs.CoreV1().Pods(ns).Watch(ctx, metav1.ListOptions{LabelSelector: selector, ResourceVersion: list.ResourceVersion})
	if err != nil {
		t.Fatal(err)
	}
	b := &podBounds{maxPods: maxPods, minAvailable: minAvailable, pods: map[string]*corev1.Pod{}}
	for i := range list.Items {
		b.pods[list.Items[i].Name] = &list.Items[i]
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for ev := range w.ResultChan() {
			pod, ok := ev.Object.(*corev1.Pod)
			if !ok {
				continue
			}
			b.observe(ev.Type, pod)
		}
	}()
	t.Cleanup(func() {
		cancel()
		w.Stop()
		<-done
	})
	return b
}

func (b *podBounds) observe(typ watch.EventType, pod *corev1.Pod) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if typ == watch.Deleted {
		delete(b.pods, pod.Name)
	} else {
		b.pods[pod.Name] = pod
	}
	running, ready := 0, 0
	var names []string
	for _, p := range b.pods {
		if p.DeletionTimestamp != nil {
			continue
		}
		running++
		if podReady(p) {
			ready++
		}
		names = append(names, fmt.Sprintf("%s(ready=%t)", p.Name, podReady(p)))
	}
	b.most = max(b.most, running)
	slices.Sort(names)
	if running > b.maxPods {
		b.violations = append(b.violations, fmt.Sprintf("%d pods, more than %d: %v", running, b.maxPods, names))
	}
	if ready < b.minAvailable {
		b.violations = append(b.violations, fmt.Sprintf("%d Ready pods, fewer than %d: %v", ready, b.minAvailable, names))
	}
}

// check fails the test for every violation seen since the last check and
// returns the most pods seen at once.
func (b *podBounds) check(t *testing.T) int {
	t.Helper()
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, v := range b.violations {
		t.Error(v)
	}
	b.violations = nil
	return b.most
}

func TestDeploymentLifecycle(t *testing.T) {
	t.Parallel()
	const ns = "deploy-test"
	c := startCluster(t)
	c.createNamespace(ns)
	cs := c.clientset()
	kubelet := startFakeKubelet(t, cs, ns)

	// columns are `kubectl get deploy nginx`'s READY UP-TO-DATE AVAILABLE.
	columns := func() string {
		f := strings.Fields(c.must("get", "deploy", "nginx", "-n", ns, "--no-headers"))
		return strings.Join(f[1:4], " ")
	}
	// pods lists the nginx pods not being deleted, as "name/phase/node".
	pods := func() []string {
		out := c.must("get", "pods", "-n", ns, "-l", "app=nginx", "-o",
			`jsonpath={range .items[*]}{.metadata.name}/{.status.phase}/{.spec.nodeName}/{.metadata.deletionTimestamp}{"\n"}{end}`)
		var list []string
		for _, l := range strings.Fields(out) {
			if deleting := l[strings.LastIndex(l, "/")+1:]; deleting == "" {
				list = append(list, strings.TrimSuffix(l, "/"))
			}
		}
		return list
	}
	// convergeTo waits for the columns want and n pods, each Running
	// and bound to the node.
	convergeTo := func(want string, n int) []string {
		t.Helper()
		var got []string
		eventually(t, 60*time.Second, func() string {
			if cols := columns(); cols != want {
				return fmt.Sprintf("READY UP-TO-DATE AVAILABLE %q, want %q", cols, want)
			}
			got = pods()
			if len(got) != n {
				return fmt.Sprintf("pods %v, want %d", got, n)
			}
			for _, p := range got {
				if !strings.HasSuffix(p, "/Running/fake-node") {
					return fmt.Sprintf("pod %s is not Running on fake-node", p)
				}
			}
			return ""
		})
		return got
	}
	// converge waits for n replicas, all up to date and available.
	converge := func(n int) []string {
		t.Helper()
		return convergeTo(fmt.Sprintf("%d/%d %d %d", n, n, n, n), n)
	}
	// replicaSets lists the Deployment's ReplicaSets as
	// "revision:name=replicas:image", by revision.
	replicaSets := func() []string {
		out := c.must("get", "rs", "-n", ns, "-l", "app=nginx", "-o",
			`jsonpath={range .items[*]}{.metadata.annotations.deployment\.kubernetes\.io/revision}:{.metadata.name}={.spec.replicas}:{.spec.template.spec.containers[0].image}{"\n"}{end}`)
		list := strings.Fields(out)
		slices.SortFunc(list, func(a, b string) int {
			var x, y int
			fmt.Sscanf(a, "%d:", &x)
			fmt.Sscanf(b, "%d:", &y)
			return x - y
		})
		return list
	}
	revision := func() string {
		return c.must("get", "deploy", "nginx", "-n", ns, "-o", `jsonpath={.metadata.annotations.deployment\.kubernetes\.io/revision}`)
	}

	c.must("create", "deployment", "nginx", "--image=nginx", "--replicas=2", "-n", ns)
	converge(2)
	rss := replicaSets()
	if len(rss) != 1 || !strings.HasPrefix(rss[0], "1:nginx-") || !strings.HasSuffix(rss[0], "=2:nginx") {
		t.Fatalf("replica sets %v, want one of revision 1 with 2 replicas", rss)
	}
	first := strings.TrimPrefix(strings.Split(rss[0], "=")[0], "1:")
	if r := revision(); r != "1" {
		t.Errorf("deployment revision %q, want 1", r)
	}
	if header := strings.Fields(strings.SplitN(c.must("get", "deploy", "-n", ns), "\n", 2)[0]); !slices.Equal(header, []string{"NAME", "READY", "UP-TO-DATE", "AVAILABLE", "AGE"}) {
		t.Errorf("kubectl get deploy header %v", header)
	}
	events := c.must("get", "events", "-n", ns, "--field-selector", "involvedObject.kind=Deployment,involvedObject.name=nginx")
	if !strings.Contains(events, "ScalingReplicaSet") || !strings.Contains(events, "Scaled up replica set "+first+" from 0 to 2") {
		t.Errorf("events of the deployment:\n%s", events)
	}

	c.must("scale", "deployment", "nginx", "--replicas=5", "-n", ns)
	converge(5)
	c.must("scale", "deployment", "nginx", "--replicas=1", "-n", ns)
	left := converge(1)

	// A deleted pod is replaced.
	gone := strings.Split(left[0], "/")[0]
	c.must("delete", "pod", gone, "-n", ns)
	if now := converge(1); strings.HasPrefix(now[0], gone+"/") {
		t.Fatalf("pod %s was not replaced: %v", gone, now)
	}

	// A rolling update of 4 replicas (25% surge and unavailability: one
	// pod each) keeps between 3 available and 5 running pods; the new
	// pods are held not Ready until the first step is done.
	c.must("scale", "deployment", "nginx", "--replicas=4", "-n", ns)
	converge(4)
	bounds := watchPodBounds(t, cs, ns, "app=nginx", 5, 3)
	kubelet.hold()
	c.must("set", "image", "deployment/nginx", "nginx=nginx:1.27", "-n", ns)
	eventually(t, 60*time.Second, func() string {
		// The first step: one new pod surges, one old pod goes, one more
		// new pod replaces it; then the rollout waits for availability.
		if cols := columns(); cols != "3/4 2 3" {
			return fmt.Sprintf("READY UP-TO-DATE AVAILABLE %q, want 3/4 2 3 while new pods are held", cols)
		}
		return ""
	})
	status := make(chan string, 1)
	go func() {
		out, err := c.kubectl("", "rollout", "status", "deployment/nginx", "-n", ns, "--timeout=90s")
		status <- fmt.Sprint(out, err)
	}()
	kubelet.release()
	if out := <-status; !strings.Contains(out, `deployment "nginx" successfully rolled out`) || !strings.HasSuffix(out, "<nil>") {
		t.Fatalf("kubectl rollout status: %s", out)
	}
	converge(4)
	if most := bounds.check(t); most != 5 {
		t.Errorf("at most %d pods ran at once, want 5 (replicas + maxSurge)", most)
	}
	rss = replicaSets()
	if len(rss) != 2 || rss[0] != "1:"+first+"=0:nginx" || !strings.HasSuffix(rss[1], "=4:nginx:1.27") || !strings.HasPrefix(rss[1], "2:") {
		t.Fatalf("replica sets after the rollout: %v", rss)
	}
	if r := revision(); r != "2" {
		t.Errorf("deployment revision %q, want 2", r)
	}
	if history := c.must("rollout", "history", "deployment/nginx", "-n", ns); !strings.Contains(history, "REVISION") || !strings.Contains(history, "2 ") {
		t.Errorf("rollout history:\n%s", history)
	}

	// Undo goes back to the first template: its ReplicaSet is reused and
	// becomes revision 3.
	c.must("rollout", "undo", "deployment/nginx", "-n", ns)
	c.must("rollout", "status", "deployment/nginx", "-n", ns, "--timeout=90s")
	converge(4)
	rss = replicaSets()
	if len(rss) != 2 || !strings.HasSuffix(rss[0], "=0:nginx:1.27") || rss[1] != "3:"+first+"=4:nginx" {
		t.Fatalf("replica sets after undo: %v, want %s reused as revision 3", rss, first)
	}
	if image := c.must("get", "deploy", "nginx", "-n", ns, "-o", "jsonpath={.spec.template.spec.containers[0].image}"); image != "nginx" {
		t.Errorf("image after undo %q", image)
	}
	if h := c.must("get", "rs", first, "-n", ns, "-o", `jsonpath={.metadata.annotations.deployment\.kubernetes\.io/revision-history}`); h != "1" {
		t.Errorf("revision-history of %s: %q, want 1", first, h)
	}

	// Restart rolls out the same template with a new annotation.
	c.must("rollout", "restart", "deployment/nginx", "-n", ns)
	c.must("rollout", "status", "deployment/nginx", "-n", ns, "--timeout=90s")
	converge(4)
	if rss = replicaSets(); len(rss) != 3 || !strings.HasPrefix(rss[2], "4:") || !strings.HasSuffix(rss[2], "=4:nginx") {
		t.Fatalf("replica sets after restart: %v", rss)
	}

	// A paused Deployment does not roll out, but scales.
	c.must("rollout", "pause", "deployment/nginx", "-n", ns)
	c.must("set", "image", "deployment/nginx", "nginx=nginx:1.28", "-n", ns)
	c.must("scale", "deployment", "nginx", "--replicas=3", "-n", ns)
	convergeTo("3/3 0 3", 3) // none has the paused template
	eventually(t, 30*time.Second, func() string {
		cond := c.must("get", "deploy", "nginx", "-n", ns, "-o", `jsonpath={.status.conditions[?(@.type=="Progressing")].reason}`)
		if cond != "DeploymentPaused" {
			return "Progressing reason " + cond + ", want DeploymentPaused"
		}
		return ""
	})
	if rss = replicaSets(); len(rss) != 3 {
		t.Fatalf("a paused deployment rolled out: %v", rss)
	}
	c.must("rollout", "resume", "deployment/nginx", "-n", ns)
	c.must("rollout", "status", "deployment/nginx", "-n", ns, "--timeout=90s")
	converge(3)
	if rss = replicaSets(); len(rss) != 4 || !strings.HasSuffix(rss[3], "=3:nginx:1.28") {
		t.Fatalf("replica sets after resume: %v", rss)
	}
	// Undo, restart, scaling and the last rollout kept to the bounds too.
	bounds.check(t)
	available := c.must("get", "deploy", "nginx", "-n", ns, "-o", `jsonpath={.status.conditions[?(@.type=="Available")].message}`)
	progressing := c.must("get", "deploy", "nginx", "-n", ns, "-o", `jsonpath={.status.conditions[?(@.type=="Progressing")].message}`)
	if available != "Deployment has minimum availability." || !strings.HasSuffix(progressing, "has successfully progressed.") {
		t.Errorf("conditions: Available %q, Progressing %q", available, progressing)
	}
}
