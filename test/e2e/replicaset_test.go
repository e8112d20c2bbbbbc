package e2e

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"
)

const replicaSetManifest = `apiVersion: apps/v1
kind: ReplicaSet
metadata:
  name: web
spec:
  replicas: 3
  selector:
    matchLabels:
      app: web
  template:
    metadata:
      labels:
        app: web
    spec:
      containers:
      - name: web
        image: nginx
`

func TestReplicaSetKeepsReplicas(t *testing.T) {
	t.Parallel()
	const ns = "rs-test"
	c := startCluster(t)
	c.createNamespace(ns)
	startFakeKubelet(t, c.clientset(), ns)
	c.withStdin(replicaSetManifest, "apply", "-n", ns, "-f", "-")

	// webPods lists the pods labelled app=web as "name phase owner".
	webPods := func() []string {
		out := c.must("get", "pods", "-n", ns, "-l", "app=web", "-o",
			`jsonpath={range .items[*]}{.metadata.name} {.status.phase} {.metadata.ownerReferences[*].name}{"\n"}{end}`)
		return strings.Fields(strings.ReplaceAll(strings.TrimSpace(out), " ", "/"))
	}
	converge := func(n int) []string {
		t.Helper()
		var pods []string
		eventually(t, 30*time.Second, func() string {
			// NAME DESIRED CURRENT READY AGE
			rs := strings.Fields(c.must("get", "rs", "web", "-n", ns, "--no-headers"))
			want := fmt.Sprint(n)
			if rs[1] != want || rs[2] != want || rs[3] != want {
				return fmt.Sprintf("kubectl get rs web: %v, want DESIRED/CURRENT/READY %d", rs, n)
			}
			pods = webPods()
			if len(pods) != n {
				return fmt.Sprintf("pods %v, want %d", pods, n)
			}
			for _, p := range pods {
				if !strings.HasSuffix(p, "/Running/web") {
					return fmt.Sprintf("pod %s is not Running and owned by web", p)
				}
			}
			return ""
		})
		names := make([]string, len(pods))
		for i, p := range pods {
			names[i] = strings.Split(p, "/")[0]
		}
		return names
	}

	pods := converge(3)
	status := c.must("get", "rs", "web", "-n", ns, "-o",
		"jsonpath={.status.fullyLabeledReplicas} {.status.availableReplicas} {.status.terminatingReplicas} {.status.observedGeneration}")
	if status != "3 3 0 1" {
		t.Errorf("status fullyLabeled/available/terminating/observedGeneration: %q, want 3 3 0 1", status)
	}
	events := c.must("get", "events", "-n", ns, "--field-selector", "involvedObject.kind=ReplicaSet,involvedObject.name=web")
	if !strings.Contains(events, "SuccessfulCreate") || !strings.Contains(events, "Created pod: "+pods[0]) {
		t.Errorf("events of the ReplicaSet:\n%s", events)
	}

	c.must("scale", "rs", "web", "-n", ns, "--replicas=5")
	converge(5)
	c.must("scale", "rs", "web", "-n", ns, "--replicas=1")
	pods = converge(1)

	// A deleted pod is replaced.
	c.must("delete", "pod", pods[0], "-n", ns)
	replaced := converge(1)
	if replaced[0] == pods[0] {
		t.Fatalf("pod %s was not replaced", pods[0])
	}

	// A pod relabelled out of the selector is released and replaced.
	c.must("label", "pod", replaced[0], "-n", ns, "app=debug", "--overwrite")
	eventually(t, 30*time.Second, func() string {
		if refs := c.must("get", "pod", replaced[0], "-n", ns, "-o", "jsonpath={.metadata.ownerReferences}"); refs != "" {
			return fmt.Sprintf("released pod still has owner references %s", refs)
		}
		return ""
	})
	if now := converge(1); slices.Contains(now, replaced[0]) {
		t.Fatalf("the released pod %s still counts", replaced[0])
	}

	// Deleting the ReplicaSet deletes its pods (garbage collector), not
	// the released one.
	c.must("delete", "rs", "web", "-n", ns)
	eventually(t, 30*time.Second, func() string {
		if pods := webPods(); len(pods) != 0 {
			return fmt.Sprintf("pods left after deleting the ReplicaSet: %v", pods)
		}
		return ""
	})
	c.must("get", "pod", replaced[0], "-n", ns)
}

// TestReplicationController: a core/v1 ReplicationController keeps its
// replicas (its selector defaulted from the template's labels) as
// upstream's replication manager does, with pods it owns, its
// DESIRED/CURRENT/READY columns, `kubectl scale rc` through its scale
// subresource, Events naming it, and its pods collected when it goes.
func TestReplicationController(t *testing.T) {
	t.Parallel()
	const ns = "rc-test"
	c := startCluster(t)
	c.createNamespace(ns)
	startFakeKubelet(t, c.clientset(), ns)
	c.withStdin(`apiVersion: v1
kind: ReplicationController
metadata: {name: web}
spec:
  replicas: 2
  template:
    metadata: {labels: {app: rc-web}}
    spec:
      containers: [{name: web, image: nginx}]
`, "apply", "-n", ns, "-f", "-")
	converge := func(n int) {
		t.Helper()
		eventually(t, 30*time.Second, func() string {
			// NAME DESIRED CURRENT READY AGE
			rc := strings.Fields(c.must("get", "rc", "web", "-n", ns, "--no-headers"))
			want := fmt.Sprint(n)
			if len(rc) < 4 || rc[1] != want || rc[2] != want || rc[3] != want {
				return fmt.Sprintf("kubectl get rc web: %v, want DESIRED/CURRENT/READY %d", rc, n)
			}
			owners := strings.Fields(c.must("get", "pods", "-n", ns, "-l", "app=rc-web", "-o",
				`jsonpath={range .items[*]}{.metadata.ownerReferences[0].kind}/{.metadata.ownerReferences[0].name}{" "}{end}`))
			if len(owners) != n || slices.ContainsFunc(owners, func(o string) bool { return o != "ReplicationController/web" }) {
				return fmt.Sprintf("pods' owners %v, want %d owned by ReplicationController/web", owners, n)
			}
			return ""
		})
	}
	converge(2)
	if sel := c.must("get", "rc", "web", "-n", ns, "-o", "jsonpath={.spec.selector}"); sel != `{"app":"rc-web"}` {
		t.Errorf("selector %s, want the template's labels", sel)
	}
	c.must("scale", "rc", "web", "-n", ns, "--replicas=3")
	converge(3)
	events := c.must("get", "events", "-n", ns, "--field-selector", "involvedObject.kind=ReplicationController,reason=SuccessfulCreate", "-o", "jsonpath={.items[*].source.component}")
	if !strings.Contains(events, "replication-controller") {
		t.Errorf("SuccessfulCreate events of the ReplicationController from %q, want replication-controller", events)
	}
	// The same Events read through events.k8s.io/v1: regarding, note,
	// reportingController.
	eventsV1 := c.must("get", "events.v1.events.k8s.io", "-n", ns, "--field-selector", "regarding.kind=ReplicationController,reason=SuccessfulCreate",
		"-o", `jsonpath={range .items[*]}{.regarding.name} {.note}{"\n"}{end}`)
	if !strings.Contains(eventsV1, "web Created pod: web-") {
		t.Errorf("events.k8s.io/v1 events of the ReplicationController:\n%s", eventsV1)
	}
	c.must("delete", "rc", "web", "-n", ns)
	eventually(t, 30*time.Second, func() string {
		if out := c.must("get", "pods", "-n", ns, "-l", "app=rc-web", "-o", "name"); out != "" {
			return "pods left after the ReplicationController went: " + out
		}
		return ""
	})
}
