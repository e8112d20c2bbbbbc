package e2e

import (
	"fmt"
	"strings"
	"testing"
	"time"
)

// quotaPod is a pod asking for cpu.
func quotaPod(name, cpu string) string {
	return fmt.Sprintf(`apiVersion: v1
kind: Pod
metadata:
  name: %s
spec:
  containers:
  - name: web
    image: nginx
    resources:
      requests:
        cpu: %s
`, name, cpu)
}

// TestResourceQuota: a quota made with kubectl create quota has its usage
// computed at once; creates that would pass a limit are refused with
// upstream's message (pods and their cpu, NodePorts, count/ of any
// resource), the quota's REQUEST column shows what is used, and a deleted
// pod gives back what it used.
func TestResourceQuota(t *testing.T) {
	t.Parallel()
	const ns = "quota-e2e"
	c := startCluster(t)
	c.createNamespace(ns)
	c.must("create", "quota", "compute", "-n", ns, "--hard=pods=2,requests.cpu=1,services.nodeports=0,count/deployments.apps=1")
	request := func(want string) {
		t.Helper()
		eventually(t, 30*time.Second, func() string {
			// NAME REQUEST LIMIT AGE
			if got := c.must("get", "quota", "compute", "-n", ns, "--no-headers", "-o", "custom-columns=U:.status.used"); !strings.Contains(got, want) {
				return fmt.Sprintf("quota compute used %s, want %s", got, want)
			}
			return ""
		})
	}
	request("map[count/deployments.apps:0 pods:0 requests.cpu:0 services.nodeports:0]")

	c.withStdin(quotaPod("a", "400m"), "create", "-n", ns, "-f", "-")
	c.withStdin(quotaPod("b", "400m"), "create", "-n", ns, "-f", "-")
	out, err := c.kubectl(quotaPod("c", "400m"), "create", "-n", ns, "-f", "-")
	if want := `Error from server (Forbidden): error when creating "STDIN": pods "c" is forbidden: exceeded quota: compute, requested: pods=1,requests.cpu=400m, used: pods=2,requests.cpu=800m, limited: pods=2,requests.cpu=1`; err == nil || strings.TrimSpace(out) != want {
		t.Errorf("a third pod: %v\n%s\nwant %s", err, out, want)
	}
	if out, err := c.kubectl("", "run", "d", "-n", ns, "--image=nginx"); err == nil || !strings.Contains(out, `pods "d" is forbidden: failed quota: compute: must specify requests.cpu for: d`) {
		t.Errorf("a pod without a cpu request: %v\n%s", err, out)
	}
	if out, err := c.kubectl("", "create", "service", "nodeport", "web", "-n", ns, "--tcp=80:80"); err == nil || !strings.Contains(out, `services "web" is forbidden: exceeded quota: compute, requested: services.nodeports=1, used: services.nodeports=0, limited: services.nodeports=0`) {
		t.Errorf("a NodePort Service: %v\n%s", err, out)
	}
	c.must("create", "service", "clusterip", "web", "-n", ns, "--tcp=80:80")
	c.must("create", "deployment", "one", "-n", ns, "--image=nginx", "--replicas=0")
	if out, err := c.kubectl("", "create", "deployment", "two", "-n", ns, "--image=nginx", "--replicas=0"); err == nil || !strings.Contains(out, `deployments.apps "two" is forbidden: exceeded quota: compute, requested: count/deployments.apps=1, used: count/deployments.apps=1, limited: count/deployments.apps=1`) {
		t.Errorf("a second Deployment: %v\n%s", err, out)
	}
	got := strings.Join(strings.Fields(c.must("get", "quota", "-n", ns)), " ")
	if want := "NAME REQUEST LIMIT AGE compute count/deployments.apps: 1/1, pods: 2/2, requests.cpu: 800m/1, services.nodeports: 0/0"; !strings.HasPrefix(got, want) {
		t.Errorf("kubectl get quota: %s\nwant %s", got, want)
	}

	// The controller gives back what a deleted pod used.
	c.must("delete", "pod", "a", "-n", ns, "--wait=false")
	request("map[count/deployments.apps:1 pods:1 requests.cpu:400m services.nodeports:0]")
	c.withStdin(quotaPod("c", "400m"), "create", "-n", ns, "-f", "-")
	request("map[count/deployments.apps:1 pods:2 requests.cpu:800m services.nodeports:0]")
}
