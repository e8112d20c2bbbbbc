package e2e

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"
)

// readyNode registers a Node as a node agent would, Ready with room for
// pods, through the API; no agent runs it.
func readyNode(t *testing.T, c *cluster, name string) {
	t.Helper()
	ctx := context.Background()
	cs := c.clientset()
	if _, err := cs.CoreV1().Nodes().Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name,
		Labels: map[string]string{corev1.LabelHostname: name}}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	// Node IPAM writes the new Node too: retry as a kubelet does.
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		n, err := cs.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		now := metav1.Now()
		n.Status.Allocatable = corev1.ResourceList{
			corev1.ResourceCPU: resource.MustParse("4"), corev1.ResourceMemory: resource.MustParse("8Gi"), corev1.ResourcePods: resource.MustParse("110"),
		}
		n.Status.Capacity = n.Status.Allocatable
		n.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue, Reason: "KubeletReady",
			Message: "kubelet is posting ready status", LastHeartbeatTime: now, LastTransitionTime: now}}
		_, err = cs.CoreV1().Nodes().UpdateStatus(ctx, n, metav1.UpdateOptions{})
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
}

// TestScheduler places pods on Nodes registered through the API, as a
// user sees it with kubectl: the NODE column, the Scheduled event, and a
// pod whose nodeSelector no node matches staying Pending with upstream's
// FailedScheduling message until a node is labelled to match.
func TestScheduler(t *testing.T) {
	t.Parallel()
	c := startCluster(t)
	// Without --netns no node agent runs, so no Node registers itself.
	if out := c.must("get", "nodes", "-o", "name"); strings.TrimSpace(out) != "" {
		t.Fatalf("nodes before the test registered any:\n%s", out)
	}
	c.must("run", "early", "--image=nginx")
	eventually(t, 20*time.Second, func() string {
		out, _ := c.kubectl("", "get", "events", "--field-selector", "involvedObject.name=early", "-o", "jsonpath={.items[*].message}")
		if !strings.Contains(out, "no nodes available to schedule pods") {
			return "events of a pod with no node to go to: " + out
		}
		return ""
	})

	nodes := []string{"node-1", "node-2", "node-3"}
	for _, n := range nodes {
		readyNode(t, c, n)
	}
	eventually(t, 20*time.Second, func() string {
		if out := c.must("get", "pod", "early", "-o", "wide", "--no-headers"); !strings.Contains(out, " node-") {
			return "the pod waiting for nodes, once they came:\n" + out
		}
		return ""
	})
	for i := range 3 {
		c.must("run", fmt.Sprintf("web-%d", i), "--image=nginx", "--labels=app=web")
	}
	// Equal nodes share the pods out: the least requested node wins, so
	// the three web pods go where the early one is not.
	eventually(t, 20*time.Second, func() string {
		out := c.must("get", "pods", "-o", "wide", "--no-headers")
		var placed []string
		for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
			if f := strings.Fields(line); len(f) >= 7 && slices.Contains(nodes, f[6]) {
				placed = append(placed, f[6])
			}
		}
		slices.Sort(placed)
		if len(placed) != 4 || !slices.Equal(slices.Compact(placed), nodes) {
			return "NODE column:\n" + out
		}
		return ""
	})
	web0 := c.must("get", "pod", "web-0", "-o", "jsonpath={.spec.nodeName}")
	eventually(t, 10*time.Second, func() string {
		out := c.must("describe", "pod", "web-0")
		if !strings.Contains(out, "Successfully assigned default/web-0 to "+web0) || !strings.Contains(out, "default-scheduler") {
			return "kubectl describe pod web-0:\n" + out
		}
		return ""
	})

	c.must("run", "ssd", "--image=nginx", `--overrides={"spec":{"nodeSelector":{"disk":"ssd"}}}`)
	want := "0/3 nodes are available: 3 node(s) didn't match Pod's node affinity/selector. preemption: 0/3 nodes are available: 3 Preemption is not helpful for scheduling."
	eventually(t, 20*time.Second, func() string {
		out := c.must("get", "events", "--field-selector", "involvedObject.name=ssd,reason=FailedScheduling", "-o", "jsonpath={.items[*].message}")
		if !strings.Contains(out, want) {
			return "FailedScheduling events of ssd: " + out
		}
		return ""
	})
	if out := c.must("describe", "pod", "ssd"); !strings.Contains(out, "FailedScheduling") || !strings.Contains(out, want) {
		t.Errorf("kubectl describe pod ssd:\n%s", out)
	}
	if out := c.must("get", "pod", "ssd", "-o", `jsonpath={.status.phase} {.status.conditions[?(@.type=="PodScheduled")].reason}`); out != "Pending Unschedulable" {
		t.Errorf("pod ssd: %q, want Pending Unschedulable", out)
	}

	c.must("label", "node", "node-2", "disk=ssd")
	eventually(t, 20*time.Second, func() string {
		out := c.must("get", "pod", "ssd", "-o", "wide", "--no-headers")
		if f := strings.Fields(out); len(f) < 7 || f[6] != "node-2" {
			return "after labelling node-2:\n" + out
		}
		return ""
	})
	if out := c.must("get", "events", "--field-selector", "involvedObject.name=ssd,reason=Scheduled", "-o", "jsonpath={.items[*].message}"); !strings.Contains(out, "Successfully assigned default/ssd to node-2") {
		t.Errorf("Scheduled event of ssd: %q", out)
	}
}

// spreadDeployment is a Deployment whose pods must not share a node.
const spreadDeployment = `apiVersion: apps/v1
kind: Deployment
metadata:
  name: spread
spec:
  replicas: 4
  selector:
    matchLabels: {app: spread}
  template:
    metadata:
      labels: {app: spread}
    spec:
      affinity:
        podAntiAffinity:
          requiredDuringSchedulingIgnoredDuringExecution:
          - labelSelector:
              matchLabels: {app: spread}
            matchLabelKeys: [pod-template-hash]
            topologyKey: kubernetes.io/hostname
      containers:
      - name: app
        image: nginx
`

// TestSchedulerPodAntiAffinity scales a Deployment with required pod
// anti-affinity on the hostname past the nodes: one replica per node, and
// the one left over Pending with upstream's FailedScheduling message.
func TestSchedulerPodAntiAffinity(t *testing.T) {
	t.Parallel()
	c := startCluster(t)
	nodes := []string{"node-1", "node-2", "node-3"}
	for _, n := range nodes {
		readyNode(t, c, n)
	}
	c.withStdin(spreadDeployment, "apply", "-f", "-")
	var pending string
	eventually(t, 30*time.Second, func() string {
		out := c.must("get", "pods", "-l", "app=spread", "-o", `jsonpath={range .items[*]}{.metadata.name} {.spec.nodeName}{"\n"}{end}`)
		var placed []string
		pending = ""
		for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
			switch f := strings.Fields(line); len(f) {
			case 2:
				placed = append(placed, f[1])
			case 1:
				pending = f[0]
			}
		}
		slices.Sort(placed)
		if !slices.Equal(placed, nodes) || pending == "" {
			return "pods of the Deployment and their nodes:\n" + out
		}
		return ""
	})
	want := "0/3 nodes are available: 3 node(s) didn't match pod anti-affinity rules. preemption: 0/3 nodes are available: 3 No preemption victims found for incoming pod."
	eventually(t, 20*time.Second, func() string {
		out := c.must("get", "events", "--field-selector", "involvedObject.name="+pending+",reason=FailedScheduling", "-o", "jsonpath={.items[*].message}")
		if !strings.Contains(out, want) {
			return "FailedScheduling events of " + pending + ": " + out
		}
		return ""
	})
	if out := c.must("get", "pod", pending, "-o", `jsonpath={.status.phase} {.status.conditions[?(@.type=="PodScheduled")].reason}`); out != "Pending Unschedulable" {
		t.Errorf("pod %s: %q, want Pending Unschedulable", pending, out)
	}
	if out := c.must("describe", "pod", pending); !strings.Contains(out, want) {
		t.Errorf("kubectl describe pod %s:\n%s", pending, out)
	}
	// The API server merged matchLabelKeys into the pod's selector.
	hash := c.must("get", "pod", pending, "-o", "jsonpath={.metadata.labels.pod-template-hash}")
	term := c.must("get", "pod", pending, "-o", "jsonpath={.spec.affinity.podAntiAffinity.requiredDuringSchedulingIgnoredDuringExecution[0].labelSelector.matchExpressions}")
	if want := `[{"key":"pod-template-hash","operator":"In","values":["` + hash + `"]}]`; hash == "" || term != want {
		t.Errorf("pod %s's anti-affinity matchExpressions = %s, want %s", pending, term, want)
	}
	// A key both in the selector and in matchLabelKeys is refused once
	// merged, in upstream's words.
	out, err := c.kubectl(twiceSpread, "apply", "-f", "-")
	if want := `The Pod "twice" is invalid: spec.topologySpreadConstraints[0][0]: Invalid value: "app": exists in both matchLabelKeys and labelSelector`; err == nil || !strings.Contains(out, want) {
		t.Errorf("kubectl apply of a pod with app in matchLabels and matchLabelKeys: %v\n%s\nwant %s", err, out, want)
	}
}

const twiceSpread = `apiVersion: v1
kind: Pod
metadata:
  name: twice
  labels: {app: spread}
spec:
  topologySpreadConstraints:
  - maxSkew: 1
    topologyKey: kubernetes.io/hostname
    whenUnsatisfiable: DoNotSchedule
    labelSelector:
      matchLabels: {app: spread}
    matchLabelKeys: [app]
  containers:
  - name: app
    image: nginx
`
