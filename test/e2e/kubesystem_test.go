package e2e

import (
	"fmt"
	"strings"
	"testing"
	"time"
)

// components are svcnet up's mirror pods on its one node, as kubeadm's
// static pods (and kube-proxy) show in kube-system.
var components = []string{"etcd", "kube-apiserver", "kube-controller-manager", "kube-proxy", "kube-scheduler"}

// componentsReady waits until `kubectl get pod -n kube-system` lists each
// component's pod of node Running and 1/1 Ready, and returns the lines.
func componentsReady(t *testing.T, c *cluster, node string, names []string) map[string]string {
	t.Helper()
	var rows map[string]string
	eventually(t, 30*time.Second, func() string {
		out, err := c.kubectl("", "get", "pod", "-n", "kube-system")
		if err != nil {
			return out
		}
		rows = map[string]string{}
		for _, l := range strings.Split(out, "\n") {
			if f := strings.Fields(l); len(f) >= 4 {
				rows[f[0]] = strings.Join(f[1:4], " ")
			}
		}
		for _, n := range names {
			if got := rows[n+"-"+node]; got != "1/1 Running 0" {
				return fmt.Sprintf("%s-%s: %q, want 1/1 Running 0; listing:\n%s", n, node, got, out)
			}
		}
		return ""
	})
	return rows
}

// TestNodeKubeSystemComponents: kube-system shows the components as on a
// kubeadm cluster, mirror pods of the node Ready while the component is
// healthy, `kubectl logs` shows each component's own log, and a deleted
// mirror pod comes back.
func TestNodeKubeSystemComponents(t *testing.T) {
	t.Parallel()
	c := startNodeCluster(t)
	componentsReady(t, c.cluster, nodeName, components)

	pod := "kube-apiserver-" + nodeName
	get := func(path string) string {
		return c.must("get", "pod", "-n", "kube-system", pod, "-o", "jsonpath="+path)
	}
	if hash, mirror := get(`{.metadata.annotations.kubernetes\.io/config\.hash}`), get(`{.metadata.annotations.kubernetes\.io/config\.mirror}`); len(hash) != 32 || mirror != hash {
		t.Errorf("config.hash %q, config.mirror %q: want the same hash", hash, mirror)
	}
	for path, want := range map[string]string{
		`{.metadata.annotations.kubernetes\.io/config\.source}`:                            "file",
		`{.metadata.labels.component} {.metadata.labels.tier}`:                             "kube-apiserver control-plane",
		`{.metadata.ownerReferences[0].kind}/{.metadata.ownerReferences[0].name}`:          "Node/" + nodeName,
		`{.metadata.ownerReferences[0].controller}`:                                        "true",
		`{.spec.nodeName} {.spec.hostNetwork} {.spec.priorityClassName}`:                   nodeName + " true system-node-critical",
		`{.spec.containers[0].name} {.spec.containers[0].image}`:                           "kube-apiserver registry.k8s.io/kube-apiserver:v1.37.2",
		`{.spec.containers[0].command[0]} {.spec.containers[0].command[1]}`:                "svcnet apiserver",
		`{.status.podIP} {.status.hostIP}`:                                                 nodeLANIP + " " + nodeLANIP,
		`{.status.containerStatuses[0].restartCount} {.status.containerStatuses[0].ready}`: "0 true",
	} {
		if got := get(path); got != want {
			t.Errorf("%s: %q, want %q", path, got, want)
		}
	}
	if got := c.must("get", "pod", "-n", "kube-system", "kube-proxy-"+nodeName, "-o", "jsonpath={.metadata.labels.k8s-app}"); got != "kube-proxy" {
		t.Errorf("kube-proxy's k8s-app label: %q", got)
	}

	// Each component's log is its own.
	for name, want := range map[string]string{
		"kube-apiserver":          "API server serving",
		"kube-controller-manager": "controller manager starting",
		"kube-scheduler":          "starting controller controller=scheduler",
		"kube-proxy":              "service proxy running node=" + nodeName,
		"etcd":                    `"msg":"ready to serve client requests"`,
	} {
		out := c.must("logs", "-n", "kube-system", name+"-"+nodeName)
		if !strings.Contains(out, want) {
			t.Errorf("kubectl logs %s-%s lacks %q:\n%s", name, nodeName, want, out)
		}
		for _, other := range []string{"node agent running", "node registered"} {
			if strings.Contains(out, other) {
				t.Errorf("kubectl logs %s-%s has the node agent's %q", name, nodeName, other)
			}
		}
	}
	if out := c.must("logs", "-n", "kube-system", pod, "--tail=1", "--timestamps"); strings.Count(out, "\n") != 1 || !strings.Contains(out, "Z ") {
		t.Errorf("--tail=1 --timestamps: %q", out)
	}
	if out := c.fails("logs", "-n", "kube-system", pod, "--previous"); !strings.Contains(out, "previous terminated container") {
		t.Errorf("--previous: %s", out)
	}

	// Deleted (and waited for, as kubectl does), it comes back.
	uid := get("{.metadata.uid}")
	c.must("delete", "pod", "-n", "kube-system", pod, "--timeout=30s")
	eventually(t, 30*time.Second, func() string {
		out, _ := c.kubectl("", "get", "pod", "-n", "kube-system", pod, "-o", `jsonpath={.metadata.uid} {.status.conditions[?(@.type=="Ready")].status}`)
		if f := strings.Fields(out); len(f) != 2 || f[0] == uid || f[1] != "True" {
			return "not back as a new Ready pod: " + out
		}
		return ""
	})
}

// TestProxyNodeShowsItsKubeProxy: `svcnet node` alone shows its own
// kube-proxy, and no control plane.
func TestProxyNodeShowsItsKubeProxy(t *testing.T) {
	t.Parallel()
	c, _, _ := startTwoNodes(t)
	second := nodeName + "-2"
	componentsReady(t, c.cluster, second, []string{"kube-proxy"})
	if out := c.must("get", "pod", "-n", "kube-system", "--field-selector", "spec.nodeName="+second, "-o", "jsonpath={.items[*].metadata.name}"); out != "kube-proxy-"+second {
		t.Errorf("kube-system pods of %s: %q, want only kube-proxy-%s", second, out, second)
	}
	if out := c.must("logs", "-n", "kube-system", "kube-proxy-"+second); !strings.Contains(out, "service proxy running node="+second) {
		t.Errorf("kube-proxy-%s log:\n%s", second, out)
	}
}
