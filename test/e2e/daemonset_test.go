package e2e

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"strings"
	"testing"
	"time"
)

// drainStream runs `kubectl drain node --ignore-daemonsets
// --delete-emptydir-data` and sends each line it prints, on standard
// output (progress) or error (the refused evictions), to lines, which is
// closed when drain ends; stop ends it.
func drainStream(t *testing.T, c *cluster, node string) (lines <-chan string, stop func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	cmd := c.kubectlCommand(ctx, []string{"drain", node, "--ignore-daemonsets", "--delete-emptydir-data", "--timeout=180s"})
	pr, pw := io.Pipe()
	cmd.Stdout, cmd.Stderr = pw, pw
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	out := make(chan string, 1000)
	go func() {
		_ = cmd.Wait()
		_ = pw.Close()
	}()
	go func() {
		defer close(out)
		sc := bufio.NewScanner(pr)
		for sc.Scan() {
			out <- sc.Text()
		}
	}()
	return out, cancel
}

// TestDaemonSetAndDrain runs on `svcnet up --nodes 3`: a DaemonSet runs
// one pod on each node and rolls an image change node by node (never more
// than maxUnavailable nodes without an available pod), `kubectl rollout
// history/undo` go back; then `kubectl drain` of a node keeps the
// DaemonSet's pod, is refused by a PodDisruptionBudget (429, retried) until
// a replacement is ready elsewhere, and evicts the rest.
func TestDaemonSetAndDrain(t *testing.T) {
	t.Parallel()
	m := newMachine(t)
	prefix := fmt.Sprintf("ds%d", os.Getpid())
	c := startOnMachine(t, m, "--nodes", "3", "--node-name", prefix)
	nodes := []string{prefix + "-1", prefix + "-2", prefix + "-3"}
	const ns = "ds-e2e"
	c.createNamespace(ns)

	t.Run("RollsNodeByNode", func(t *testing.T) {
		c.withStdin(`apiVersion: apps/v1
kind: DaemonSet
metadata: {name: web, namespace: ds-e2e}
spec:
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web}}
    spec:
      terminationGracePeriodSeconds: 2
      containers:
      - name: web
        image: nginx
        readinessProbe: {httpGet: {path: /, port: 80}, periodSeconds: 1}
`, "apply", "-f", "-")
		c.must("-n", ns, "rollout", "status", "daemonset/web", "--timeout=90s")
		podNodes := func() map[string]string {
			out := c.must("-n", ns, "get", "pods", "-l", "app=web", "-o",
				`jsonpath={range .items[*]}{.metadata.name}={.spec.nodeName}={.spec.containers[0].image} {end}`)
			got := map[string]string{}
			for _, f := range strings.Fields(out) {
				p := strings.Split(f, "=")
				got[p[1]] = p[2]
			}
			return got
		}
		if got := podNodes(); len(got) != 3 || got[nodes[0]] != "nginx" || got[nodes[1]] != "nginx" || got[nodes[2]] != "nginx" {
			t.Fatalf("daemon pods by node: %v, want one nginx on each of %v", got, nodes)
		}
		if got := c.must("-n", ns, "get", "ds", "web", "--no-headers"); !strings.HasPrefix(strings.Join(strings.Fields(got), " "), "web 3 3 3 3 3 <none>") {
			t.Errorf("kubectl get ds: %s", got)
		}
		// The pods are pinned to their nodes as upstream's: a
		// metadata.name node affinity, and the default tolerations.
		pinned := c.must("-n", ns, "get", "pods", "-l", "app=web", "-o",
			`jsonpath={.items[0].spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms[0].matchFields[0].key} {.items[0].spec.tolerations[*].key}`)
		if !strings.HasPrefix(pinned, "metadata.name node.kubernetes.io/not-ready node.kubernetes.io/unreachable") {
			t.Errorf("daemon pod affinity and tolerations: %s", pinned)
		}

		// Watch every change of the pods while the image rolls.
		lines := make(chan string, 1000)
		stop := c.kubectlStream(lines, "-n", ns, "get", "pods", "-l", "app=web", "-w", "--output-watch-events", "-o",
			`jsonpath={.type} {.object.metadata.name} {.object.spec.nodeName} {.object.spec.containers[0].image} {.object.metadata.deletionTimestamp} {.object.status.conditions[?(@.type=="Ready")].status}{"\n"}`)
		// The rollout starts only once the watch has listed the three
		// ready pods, so no old pod can go down before it is seen up.
		var events []string
		for listed := time.After(30 * time.Second); len(events) < 3; {
			select {
			case l := <-lines:
				events = append(events, l)
			case <-listed:
				stop()
				t.Fatalf("the pod watch listed %d of the 3 daemon pods in 30s:\n%s", len(events), strings.Join(events, "\n"))
			}
		}
		c.must("-n", ns, "set", "image", "daemonset/web", "web=httpd")
		c.must("-n", ns, "rollout", "status", "daemonset/web", "--timeout=120s")
		stop()
		for drained := false; !drained; {
			select {
			case l := <-lines:
				events = append(events, l)
			default:
				drained = true
			}
		}
		type pod struct {
			node, image string
			up          bool // ready and not being deleted
		}
		pods := map[string]*pod{}
		minUp, replaced, started := 3, []string{}, false
		for _, l := range events {
			f := strings.Fields(l)
			if len(f) < 4 {
				continue
			}
			p := &pod{node: f[2], image: f[3]}
			switch {
			case f[0] == "DELETED":
				delete(pods, f[1])
			default:
				p.up = len(f) == 5 && f[4] == "True"
				if old, ok := pods[f[1]]; ok && old.up && !p.up && p.image == "nginx" {
					replaced = append(replaced, p.node)
				}
				pods[f[1]] = p
			}
			upNodes := map[string]bool{}
			for _, p := range pods {
				if p.up {
					upNodes[p.node] = true
				}
			}
			// Measured from when the watch has listed the three.
			started = started || len(upNodes) == 3
			if started {
				minUp = min(minUp, len(upNodes))
			}
		}
		if !started || minUp < 2 {
			t.Errorf("during the rollout only %d node(s) had an available pod: more than maxUnavailable (1) at once\n%s", minUp, strings.Join(events, "\n"))
		}
		if len(replaced) != 3 || replaced[0] == replaced[1] || replaced[1] == replaced[2] || replaced[0] == replaced[2] {
			t.Errorf("old pods went down on nodes %v, want each node once, one after the other", replaced)
		}
		if got := podNodes(); len(got) != 3 || got[nodes[0]] != "httpd" || got[nodes[1]] != "httpd" || got[nodes[2]] != "httpd" {
			t.Fatalf("daemon pods by node after the rollout: %v", got)
		}
		if out := c.must("-n", ns, "rollout", "history", "daemonset/web"); !strings.Contains(out, "1 ") || !strings.Contains(out, "2 ") {
			t.Errorf("rollout history: %s", out)
		}
		c.must("-n", ns, "rollout", "undo", "daemonset/web")
		c.must("-n", ns, "rollout", "status", "daemonset/web", "--timeout=120s")
		if got := podNodes(); len(got) != 3 || got[nodes[0]] != "nginx" || got[nodes[1]] != "nginx" || got[nodes[2]] != "nginx" {
			t.Fatalf("daemon pods by node after undo: %v", got)
		}
	})

	t.Run("DrainRespectsPDB", func(t *testing.T) {
		c.must("-n", ns, "create", "deployment", "app", "--image=nginx", "--replicas=2")
		c.must("-n", ns, "rollout", "status", "deployment/app", "--timeout=90s")
		c.must("-n", ns, "create", "poddisruptionbudget", "app", "--selector=app=app", "--min-available=2")
		eventually(t, 30*time.Second, func() string {
			got := c.must("-n", ns, "get", "pdb", "app", "-o", "jsonpath={.status.currentHealthy}/{.status.desiredHealthy}/{.status.disruptionsAllowed}/{.status.conditions[0].reason}")
			if got != "2/2/0/InsufficientPods" {
				return "pdb status " + got
			}
			return ""
		})
		node := strings.Fields(c.must("-n", ns, "get", "pods", "-l", "app=app", "-o", "jsonpath={.items[*].spec.nodeName}"))[0]
		// drain runs in the background; it must keep retrying while the
		// budget allows nothing.
		lines, stop := drainStream(t, c.cluster, node)
		refused := false
		for !refused {
			select {
			case l, ok := <-lines:
				if !ok {
					t.Fatal("drain ended before a budget refused it")
				}
				refused = strings.Contains(l, "Cannot evict pod as it would violate the pod's disruption budget.")
			case <-time.After(60 * time.Second):
				t.Fatal("drain was not refused by the budget")
			}
		}
		if got := c.must("get", "node", node, "-o", "jsonpath={.spec.unschedulable}"); got != "true" {
			t.Errorf("drained node unschedulable=%q", got)
		}
		// A third replica lands elsewhere; once it is ready the budget
		// allows one disruption and drain evicts the pod.
		c.must("-n", ns, "scale", "deployment/app", "--replicas=3")
		done := false
		for !done {
			select {
			case l, ok := <-lines:
				if !ok {
					t.Fatal("drain ended without draining")
				}
				done = strings.Contains(l, "node/"+node+" drained")
			case <-time.After(120 * time.Second):
				t.Fatal("drain did not complete after a replacement became ready")
			}
		}
		stop()
		if out := c.must("-n", ns, "get", "pods", "-l", "app=app", "-o", "jsonpath={.items[*].spec.nodeName}"); strings.Contains(out, node) {
			t.Errorf("app pods still on the drained node: %s", out)
		}
		if out := c.must("-n", ns, "get", "pods", "-l", "app=web", "--field-selector", "spec.nodeName="+node, "-o", "name"); strings.Count(out, "pod/") != 1 {
			t.Errorf("the DaemonSet's pod on the drained node: %q, want it kept", out)
		}
		c.must("uncordon", node)
		if got := c.must("get", "node", node, "-o", "jsonpath={.spec.unschedulable}"); got != "" {
			t.Errorf("uncordoned node unschedulable=%q", got)
		}
	})
}
