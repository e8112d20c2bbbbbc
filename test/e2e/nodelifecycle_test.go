package e2e

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"
)

// createReadyNode creates a Node that reports Ready and its Lease, as a
// node agent registering would.
func createReadyNode(t *testing.T, cs kubernetes.Interface, name string) {
	t.Helper()
	ctx := context.Background()
	now := metav1.Now()
	node := &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Status: corev1.NodeStatus{Conditions: []corev1.NodeCondition{{
			Type: corev1.NodeReady, Status: corev1.ConditionTrue, Reason: "KubeletReady",
			Message: "kubelet is posting ready status", LastHeartbeatTime: now, LastTransitionTime: now,
		}}},
	}
	if _, err := cs.CoreV1().Nodes().Create(ctx, node, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	lease := &coordinationv1.Lease{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: corev1.NamespaceNodeLease},
		Spec: coordinationv1.LeaseSpec{HolderIdentity: ptr.To(name), LeaseDurationSeconds: ptr.To[int32](40),
			RenewTime: &metav1.MicroTime{Time: time.Now()}},
	}
	if _, err := cs.CoordinationV1().Leases(corev1.NamespaceNodeLease).Create(ctx, lease, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// keepRenewing renews a node's Lease every second until the test ends,
// as a live node agent does.
func keepRenewing(t *testing.T, cs kubernetes.Interface, name string) {
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	t.Cleanup(func() {
		cancel()
		wg.Wait()
	})
	leases := cs.CoordinationV1().Leases(corev1.NamespaceNodeLease)
	wg.Go(func() {
		tick := time.NewTicker(time.Second)
		defer tick.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
			l, err := leases.Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				continue
			}
			l.Spec.RenewTime = &metav1.MicroTime{Time: time.Now()}
			_, _ = leases.Update(ctx, l, metav1.UpdateOptions{})
		}
	})
}

// TestSilentNodeTaintedAndPodsEvicted plays two node agents: one keeps
// renewing its Lease, the other stops. The silent node turns Unknown with
// the unreachable taints, its pods lose Ready, a pod tolerating the taint
// for 2s is deleted after that time, and pods tolerating it longer stay.
func TestSilentNodeTaintedAndPodsEvicted(t *testing.T) {
	t.Parallel()
	c := startCluster(t, "--node-monitor-period=500ms", "--node-monitor-grace-period=4s")
	cs := c.clientset()
	ctx := context.Background()
	createReadyNode(t, cs, "alive")
	keepRenewing(t, cs, "alive")
	createReadyNode(t, cs, "lost")

	unreachable := func(seconds *int64) []corev1.Toleration {
		return []corev1.Toleration{{Key: corev1.TaintNodeUnreachable, Operator: corev1.TolerationOpExists,
			Effect: corev1.TaintEffectNoExecute, TolerationSeconds: seconds}}
	}
	pods := map[string][]corev1.Toleration{"web": nil, "fast": unreachable(ptr.To[int64](2)), "stay": unreachable(nil)}
	ips := map[string]string{"web": "10.244.9.2", "fast": "10.244.9.3", "stay": "10.244.9.4"}
	for name, tolerations := range pods {
		p := testPod("default", name, map[string]string{"app": "nlc"})
		p.Spec.NodeName = "lost"
		p.Spec.Tolerations = tolerations
		if _, err := cs.CoreV1().Pods("default").Create(ctx, p, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		setPodStatus(t, cs, "default", name, ips[name], true)
	}
	// DefaultTolerationSeconds gave "web" 300s on not-ready and unreachable nodes.
	if got := c.must("get", "pod", "web", "-o", `jsonpath={.spec.tolerations[*].tolerationSeconds}`); got != "300 300" {
		t.Errorf("web's tolerationSeconds = %q, want the defaults 300 300", got)
	}

	jsonpath := func(kind, name, path string) string {
		out, _ := c.kubectl("", "get", kind, name, "-o", "jsonpath="+path)
		return strings.TrimSpace(out)
	}
	eventually(t, 20*time.Second, func() string {
		ready := jsonpath("node", "lost", `{.status.conditions[?(@.type=="Ready")].status}/{.status.conditions[?(@.type=="Ready")].reason}/{.status.conditions[?(@.type=="Ready")].message}`)
		if ready != "Unknown/NodeStatusUnknown/Kubelet stopped posting node status." {
			return "lost node's Ready condition: " + ready
		}
		taints := jsonpath("node", "lost", `{range .spec.taints[*]}{.key}:{.effect} {end}`)
		if !strings.Contains(taints, "node.kubernetes.io/unreachable:NoSchedule") || !strings.Contains(taints, "node.kubernetes.io/unreachable:NoExecute") {
			return "lost node's taints: " + taints
		}
		return ""
	})
	eventually(t, 10*time.Second, func() string {
		if got := jsonpath("pod", "web", `{.status.conditions[?(@.type=="Ready")].status}`); got != "False" {
			return "web on the lost node is Ready=" + got
		}
		return ""
	})
	eventually(t, 15*time.Second, func() string {
		if got := jsonpath("pod", "fast", "{.metadata.deletionTimestamp}"); got == "" {
			return "pod tolerating unreachable for 2s is not being deleted"
		}
		return ""
	})
	// The eviction came no sooner than the toleration allowed: the delete
	// (its deletionTimestamp less the grace period) against the taint's
	// timeAdded, both to the second, so 2s of toleration shows as ≥ 1s.
	taintAdded, err := time.Parse(time.RFC3339, jsonpath("node", "lost", `{.spec.taints[?(@.effect=="NoExecute")].timeAdded}`))
	if err != nil {
		t.Fatalf("the unreachable NoExecute taint's timeAdded: %v", err)
	}
	deletion, err := time.Parse(time.RFC3339, jsonpath("pod", "fast", "{.metadata.deletionTimestamp}"))
	if err != nil {
		t.Fatalf("fast's deletionTimestamp: %v", err)
	}
	grace, err := time.ParseDuration(jsonpath("pod", "fast", "{.metadata.deletionGracePeriodSeconds}") + "s")
	if err != nil {
		t.Fatalf("fast's deletionGracePeriodSeconds: %v", err)
	}
	if waited := deletion.Add(-grace).Sub(taintAdded); waited < time.Second {
		t.Errorf("fast deleted %v after the taint, before its 2s toleration", waited)
	}
	events := c.must("get", "events", "--field-selector", "reason=TaintManagerEviction", "-o", "jsonpath={.items[*].message}")
	if !strings.Contains(events, "Marking for deletion Pod default/fast") {
		t.Errorf("TaintManagerEviction events = %q", events)
	}
	if got := jsonpath("pod", "fast", `{.status.conditions[?(@.type=="DisruptionTarget")].reason}`); got != "DeletionByTaintManager" {
		t.Errorf("fast's DisruptionTarget reason = %q", got)
	}
	for _, name := range []string{"web", "stay"} {
		if got := jsonpath("pod", name, "{.metadata.deletionTimestamp}"); got != "" {
			t.Errorf("pod %s tolerating the taint longer was deleted at %s", name, got)
		}
	}
	alive := jsonpath("node", "alive", `{.status.conditions[?(@.type=="Ready")].status} {.spec.taints}`)
	if alive != "True" {
		t.Errorf("node renewing its Lease: %q, want Ready and untainted", alive)
	}
}
