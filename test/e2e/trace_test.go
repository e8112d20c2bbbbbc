package e2e

import (
	"encoding/json"
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"
)

// TestTrace is docs/trace.md's walkthrough: `svcnet trace` from a client
// pod to seed 003's Service with the selector typo shows the reject rule
// and the refusal; with the selector fixed, the DNAT to the nginx pod that
// answered, no masquerade, the route onto the pod bridge and the
// handshake, also when the Service is named by DNS; from a host-network
// pod, the masquerade; a UDP probe to the cluster DNS hears its answer;
// and no trace table is left behind.
func TestTrace(t *testing.T) {
	t.Parallel()
	c := startNodeCluster(t)
	manifest, err := os.ReadFile("../../docs/examples/doctor.yaml")
	if err != nil {
		t.Fatal(err)
	}
	c.withStdin(string(manifest), "apply", "-f", "-")
	c.must("run", "client", "--image=busybox", "--restart=Never", "--", "sleep", "3600")
	c.withStdin(`apiVersion: v1
kind: Pod
metadata: {name: hostnet}
spec:
  hostNetwork: true
  terminationGracePeriodSeconds: 1
  containers: [{name: main, image: busybox, command: [sleep, "3600"]}]
`, "apply", "-f", "-")
	for _, pod := range []string{"nginx", "client", "hostnet"} {
		c.waitReady(pod, "True", 60*time.Second)
	}
	nginxIP := c.jsonpath("pod", "nginx", "{.status.podIP}")
	trace := func(args ...string) (string, error) {
		if !slices.Contains(args, "--from") {
			args = append([]string{"--from", "pod/client"}, args...)
		}
		cmd := exec.Command(binary, append([]string{"trace"}, args...)...)
		cmd.Env = append(os.Environ(), "KUBECONFIG="+c.kubeconfig())
		out, err := cmd.CombinedOutput()
		return string(out), err
	}
	// wantTrace waits until a trace's output has every line part of want
	// (the node's proxy follows the API within moments).
	wantTrace := func(want []string, args ...string) string {
		t.Helper()
		var out string
		eventually(t, 30*time.Second, func() string {
			var err error
			if out, err = trace(args...); err != nil {
				return "svcnet trace: " + err.Error() + "\n" + out
			}
			for _, w := range want {
				if !strings.Contains(out, w) {
					return "svcnet trace " + strings.Join(args, " ") + " lacks " + w + ":\n" + out
				}
			}
			return ""
		})
		return out
	}

	out := wantTrace([]string{
		"Trace of tcp from pod default/client on node " + nodeName + " to svc/web:80 (Service default/web port http 80/TCP, cluster IP 10.96.100.10)",
		"ip svcnet endpoints-check: ip daddr . meta l4proto . th dport vmap @no-endpoint-services (verdict goto reject-chain)",
		"ip svcnet reject-chain: reject with tcp reset (verdict drop)",
		"rejected at step ",
		"answer: refused (a TCP reset came back)",
	}, "--to", "svc/web:80")
	if strings.Contains(out, "DNAT to") || strings.Contains(out, "route:") {
		t.Errorf("a rejected connection has a DNAT or route:\n%s", out)
	}

	c.must("patch", "service", "web", "-p", `{"spec":{"selector":{"app":"nginx"}}}`)
	wantTrace([]string{
		"ip svcnet services: ip daddr . meta l4proto . th dport vmap @service-ips (verdict goto service-",
		"dnat to " + nginxIP + ":80 (verdict accept)",
		"DNAT to " + nginxIP + ":80 (pod default/nginx on node " + nodeName + ")",
		"masquerade: no, the endpoint sees the pod's address",
		"route: " + nginxIP + " dev svcnet0 src ",
		"(local to node " + nodeName + ")",
		"answer: connected (TCP handshake with " + nginxIP + ":80, which the pod sees as 10.96.100.10:80)",
	}, "--to", "svc/web:http")
	wantTrace([]string{
		"DNS web → 10.96.100.10 (web.default.svc.cluster.local, answered by 10.96.0.10)",
		"DNAT to " + nginxIP + ":80",
		"answer: connected",
	}, "--to", "web:80")

	out, err = trace("--to", "web.default.svc.cluster.local:80", "-o", "json")
	if err != nil {
		t.Fatalf("svcnet trace -o json: %v\n%s", err, out)
	}
	var res struct {
		DNS *struct {
			Query     string   `json:"query"`
			Addresses []string `json:"addresses"`
		} `json:"dns"`
		Steps    []struct{ Chain, Verdict string } `json:"steps"`
		DNAT     string                            `json:"dnat"`
		Endpoint string                            `json:"endpoint"`
		Answer   struct{ Outcome string }          `json:"answer"`
	}
	if err := json.Unmarshal([]byte(out), &res); err != nil {
		t.Fatalf("svcnet trace -o json: %v\n%s", err, out)
	}
	if res.DNS == nil || res.DNS.Query != "web.default.svc.cluster.local." || len(res.DNS.Addresses) != 1 || res.DNS.Addresses[0] != "10.96.100.10" ||
		len(res.Steps) == 0 || res.DNAT != nginxIP+":80" || res.Endpoint != "default/nginx" || res.Answer.Outcome != "connected" {
		t.Errorf("svcnet trace -o json:\n%s", out)
	}

	// From the node's own network: kube-proxy's masquerade of traffic
	// from outside the pod CIDR.
	wantTrace([]string{
		"Trace of tcp from pod default/hostnet on node " + nodeName,
		"probe " + nodeLANIP + ":",
		"ip svcnet nat-output: jump services",
		"ip svcnet masquerading: masquerade fully-random (verdict accept)",
		"DNAT to " + nginxIP + ":80 (pod default/nginx on node " + nodeName + ")",
		"masquerade: yes, the source becomes the node's address",
		"answer: connected",
	}, "--from", "pod/hostnet", "--to", "svc/web")

	// UDP: a DNS question to the cluster DNS, which answers.
	wantTrace([]string{
		"Trace of udp from pod default/client",
		"ip svcnet services: ip daddr . meta l4proto . th dport vmap @service-ips (verdict goto service-",
		"answer: answered (DNS answer to default.svc.cluster.local.: ",
	}, "--to", "10.96.0.10:53", "--protocol", "udp")

	tables, err := exec.Command("ip", "netns", "exec", c.netns, "nft", "list", "tables").CombinedOutput()
	if err != nil || strings.Contains(string(tables), "svcnet-trace") {
		t.Errorf("nft list tables after the traces (%v):\n%s", err, tables)
	}
}
