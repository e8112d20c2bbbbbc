package e2e

import (
	"fmt"
	"strings"
	"testing"
	"time"
)

func TestProxyUserspace(t *testing.T) {
	c := startNodeCluster(t, "--proxy-mode", "userspace")
	// Cluster IPs reach the userspace proxy only where they are local
	// addresses of the node: route the Service range locally (docs/proxy.md).
	c.execIn(t, "ip", "route", "add", "local", "10.96.0.0/12", "dev", "lo")
	c.labeledPod("nginx-a", "nginx", "nginx", "    ports: [{containerPort: 80}]\n")
	c.labeledPod("client", "client", "busybox", "    command: [sleep, \"3600\"]\n")
	c.withStdin(seedManifest, "apply", "-f", "-")
	c.waitReady("nginx-a", "True", 30*time.Second)
	c.waitReady("client", "True", 30*time.Second)
	c.readyEndpoints("nginx", 1)
	nodePort := c.jsonpath("service", "nginx", "{.spec.ports[0].nodePort}")
	ext := outsideClient(t, c.netns, 0)
	nodeURL := fmt.Sprintf("http://%s:%s/", ext.nodeIP, nodePort)
	clusterURL := "http://" + c.jsonpath("service", "nginx", "{.spec.clusterIP}") + ":8080/"

	for _, r := range []struct{ from, url string }{{ext.ns, nodeURL}, {c.netnsOf("client"), clusterURL}} {
		eventually(t, 10*time.Second, func() string {
			if out, err := wget(t, r.from, r.url); err != nil || podName(out) != "nginx-a" {
				return fmt.Sprintf("GET %s from %s: %v: %s", r.url, r.from, err, out)
			}
			return ""
		})
	}
	if out := c.execIn(t, "nft", "list", "ruleset"); strings.Contains(out, proxyTable) {
		t.Errorf("in userspace mode the node has our nftables table:\n%s", out)
	}

	// No endpoints: the connection is closed at once.
	c.must("delete", "pod", "nginx-a")
	c.readyEndpoints("nginx", 0)
	eventually(t, 5*time.Second, func() string {
		start := time.Now()
		out, err := wget(t, ext.ns, nodeURL)
		if took := time.Since(start); err == nil || took > time.Second {
			return fmt.Sprintf("GET the NodePort without endpoints after %s: %v: %s", took, err, out)
		}
		return ""
	})
}
