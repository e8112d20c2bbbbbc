package e2e

import (
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"
)

// TestProxyList reads the node's data plane back with `svcnet proxy
// list`: kube-dns's frontends and a test Service's go to their pods' IPs,
// a Service without endpoints is rejected, and a rule deleted by hand in
// the node's table takes its endpoint out of the list, and `svcnet doctor`
// reports the drift.
func TestProxyList(t *testing.T) {
	t.Parallel()
	c := startNodeCluster(t)
	c.withStdin(`apiVersion: v1
kind: Pod
metadata: {name: web-1, labels: {app: web}}
spec:
  nodeName: `+nodeName+`
  terminationGracePeriodSeconds: 1
  containers: [{name: nginx, image: "nginx:1.25"}]
---
apiVersion: v1
kind: Service
metadata: {name: web}
spec:
  clusterIP: 10.96.100.20
  selector: {app: web}
  ports: [{port: 80}]
---
apiVersion: v1
kind: Service
metadata: {name: empty}
spec:
  clusterIP: 10.96.100.21
  selector: {app: none}
  ports: [{protocol: UDP, port: 53}]
`, "apply", "-f", "-")
	c.waitReady("web-1", "True", 60*time.Second)
	podIP := c.jsonpath("pod", "web-1", "{.status.podIP}")
	list := func() (string, error) {
		cmd := exec.Command(binary, "proxy", "list", "--node", nodeName)
		cmd.Env = append(os.Environ(), "KUBECONFIG="+c.kubeconfig())
		out, err := cmd.CombinedOutput()
		return string(out), err
	}
	var out string
	eventually(t, 30*time.Second, func() string {
		var err error
		if out, err = list(); err != nil {
			return "svcnet proxy list: " + err.Error() + "\n" + out
		}
		for _, want := range []string{
			"10.96.100.20:80/TCP → " + podIP + ":80/TCP",
			"10.96.100.21:53/UDP → reject (no endpoints)",
			"10.96.0.10:53/UDP → ",
			"10.96.0.10:53/TCP → ",
		} {
			if !strings.Contains(out, want) {
				return "svcnet proxy list lacks " + want + ":\n" + out
			}
		}
		return ""
	})
	if !strings.HasPrefix(out, "node/"+nodeName+"\n") || !strings.Contains(out, "default/web") || !strings.Contains(out, "kube-system/kube-dns:dns") {
		t.Errorf("svcnet proxy list:\n%s", out)
	}

	// Delete the web Service's endpoint chain's DNAT by hand: the list
	// says what the kernel has.
	rules, err := exec.Command("ip", "netns", "exec", c.netns, "nft", "-a", "list", "table", "ip", "svcnet").CombinedOutput()
	if err != nil {
		t.Fatalf("nft list: %v\n%s", err, rules)
	}
	chain, handle := "", ""
	for _, line := range strings.Split(string(rules), "\n") {
		line = strings.TrimSpace(line)
		if strings.HasPrefix(line, "chain endpoint-") && strings.Contains(line, "default/web/tcp/") {
			chain = strings.Fields(line)[1]
			handle = ""
		}
		if chain != "" && handle == "" && strings.Contains(line, "dnat") {
			handle = line[strings.LastIndex(line, " ")+1:]
			break
		}
	}
	if chain == "" || handle == "" {
		t.Fatalf("no DNAT rule of default/web in the node's table:\n%s", rules)
	}
	if b, err := exec.Command("ip", "netns", "exec", c.netns, "nft", "delete", "rule", "ip", "svcnet", chain, "handle", handle).CombinedOutput(); err != nil {
		t.Fatalf("nft delete rule: %v\n%s", err, b)
	}
	if out, err = list(); err != nil || !strings.Contains(out, "10.96.100.20:80/TCP → no backends") {
		t.Errorf("after the DNAT's deletion (%v):\n%s", err, out)
	}
	// The doctor reports the drift.
	cmd := exec.Command(binary, "doctor", "svc/web")
	cmd.Env = append(os.Environ(), "KUBECONFIG="+c.kubeconfig())
	doc, err := cmd.CombinedOutput()
	if want := "error DataPlaneDrift: On node " + nodeName + ", 10.96.100.20:80/TCP goes to no backend, but the EndpointSlices list " + podIP + ":80 as ready."; err == nil || !strings.Contains(string(doc), want) {
		t.Errorf("svcnet doctor svc/web after the DNAT's deletion (%v), want %q:\n%s", err, want, doc)
	}
}
