package e2e

import (
	"fmt"
	"strings"
	"testing"
	"time"
)

// TestHostPort plays upstream's HostPort conformance test: three pods
// share hostPort 54323, on the node's loopback and on its address over
// TCP, and on its address over UDP; a hostNetwork pod on the node reaches
// each of them, and each answers with its own name.
func TestHostPort(t *testing.T) {
	t.Parallel()
	needRoot(t)
	c := startNodeCluster(t)
	nodeIP := c.jsonpath("node", nodeName, `{.status.addresses[?(@.type=="InternalIP")].address}`)
	if nodeIP == "" {
		t.Fatal("the node has no InternalIP")
	}
	var manifest strings.Builder
	for _, p := range []struct{ name, hostIP, protocol string }{
		{"pod1", "127.0.0.1", "TCP"}, {"pod2", nodeIP, "TCP"}, {"pod3", nodeIP, "UDP"},
	} {
		fmt.Fprintf(&manifest, `apiVersion: v1
kind: Pod
metadata: {name: %s}
spec:
  nodeName: %s
  terminationGracePeriodSeconds: 1
  containers:
  - name: agnhost
    image: registry.k8s.io/e2e-test-images/agnhost:2.53
    args: [netexec, --http-port=8080, --udp-port=8080]
    ports: [{containerPort: 8080, hostPort: 54323, hostIP: %q, protocol: %s}]
---
`, p.name, nodeName, p.hostIP, p.protocol)
	}
	manifest.WriteString(`apiVersion: v1
kind: Pod
metadata: {name: host-exec}
spec:
  nodeName: ` + nodeName + `
  hostNetwork: true
  terminationGracePeriodSeconds: 1
  containers:
  - name: agnhost
    image: registry.k8s.io/e2e-test-images/agnhost:2.53
`)
	c.withStdin(manifest.String(), "apply", "-f", "-")
	for _, p := range []string{"pod1", "pod2", "pod3", "host-exec"} {
		c.waitReady(p, "True", 60*time.Second)
	}
	for cmd, want := range map[string]string{
		"curl -g -s --connect-timeout 5 --interface " + nodeIP + " http://127.0.0.1:54323/hostname": "pod1",
		"curl -g -s --connect-timeout 5 http://" + nodeIP + ":54323/hostname":                       "pod2",
		"echo hostname | nc -u -w 5 " + nodeIP + " 54323":                                           "pod3",
	} {
		eventually(t, 30*time.Second, func() string {
			if out, err := c.kubectl("", "exec", "host-exec", "--", "/bin/sh", "-c", cmd); err != nil || strings.TrimSpace(out) != want {
				return fmt.Sprintf("%s: %v %q, want %s", cmd, err, out, want)
			}
			return ""
		})
	}
	// Pods bound by hand meet no scheduler: the node's admission rejects
	// one whose host port is taken (on all addresses, which pod1's and
	// pod2's addresses are part of) and one that asks for more cpu than
	// the node has (the node's own pods request 200m); neither runs.
	c.withStdin(`apiVersion: v1
kind: Pod
metadata: {name: port-taken}
spec:
  nodeName: `+nodeName+`
  containers:
  - name: agnhost
    image: registry.k8s.io/e2e-test-images/agnhost:2.53
    ports: [{containerPort: 8080, hostPort: 54323}]
---
apiVersion: v1
kind: Pod
metadata: {name: too-big}
spec:
  nodeName: `+nodeName+`
  containers:
  - name: agnhost
    image: registry.k8s.io/e2e-test-images/agnhost:2.53
    resources: {requests: {cpu: "1000"}}
`, "apply", "-f", "-")
	for pod, want := range map[string]string{
		"port-taken": "Failed NodePorts Pod was rejected: Predicate NodePorts failed: node(s) didn't have free ports for the requested pod ports",
		"too-big":    "Failed OutOfcpu Pod was rejected: Node didn't have enough resource: cpu, requested: 1000000, used: 200, capacity: ",
	} {
		eventually(t, 30*time.Second, func() string {
			if got := c.jsonpath("pod", pod, "{.status.phase} {.status.reason} {.status.message}"); !strings.HasPrefix(got, want) {
				return fmt.Sprintf("pod %s: %q, want %q", pod, got, want)
			}
			return ""
		})
		if got := c.jsonpath("pod", pod, "{.status.containerStatuses}"); got != "" {
			t.Errorf("the rejected pod %s has container statuses: %s", pod, got)
		}
	}
	if ev := c.must("get", "events", "--field-selector", "involvedObject.name=port-taken,type=Warning", "-o", "jsonpath={.items[*].reason}"); ev != "NodePorts" {
		t.Errorf("Warning events of the rejected pod: %q, want NodePorts", ev)
	}
	// The mapping goes with its pod: nothing listens on the node's port,
	// which refuses (a mapping left to the gone pod's address would time
	// out or find no route).
	c.must("delete", "pod", "pod2", "--wait")
	eventually(t, 30*time.Second, func() string {
		out, err := c.kubectl("", "exec", "host-exec", "--", "/bin/sh", "-c", "nc -z -v -w 2 "+nodeIP+" 54323")
		if err == nil || !strings.Contains(out, "Connection refused") {
			return fmt.Sprintf("nc %s 54323 after pod2 was deleted: %v %q, want Connection refused", nodeIP, err, out)
		}
		return ""
	})
}
