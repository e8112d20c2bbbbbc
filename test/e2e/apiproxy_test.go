package e2e

import (
	"strings"
	"testing"
	"time"
)

// TestAPIServerProxy: pods/proxy and services/proxy pass requests on to a
// pod at [scheme:]name[:port] (the pod's first declared port by default)
// and to a ready endpoint of a Service's port, the path after /proxy
// being the target's; a missing pod is NotFound and a Service without
// ready endpoints is ServiceUnavailable, as kube-apiserver answers.
func TestAPIServerProxy(t *testing.T) {
	needRoot(t)
	c := startNodeCluster(t)
	c.withStdin(`apiVersion: v1
kind: Pod
metadata: {name: echo, labels: {app: echo}}
spec:
  nodeName: `+nodeName+`
  terminationGracePeriodSeconds: 2
  containers:
  - name: web
    image: registry.k8s.io/e2e-test-images/agnhost:2.53
    args: [netexec, --http-port=8080]
    ports: [{containerPort: 8080}]
---
apiVersion: v1
kind: Service
metadata: {name: echo}
spec:
  selector: {app: echo}
  ports: [{name: web, port: 80, targetPort: 8080}]
---
apiVersion: v1
kind: Service
metadata: {name: empty}
spec:
  selector: {app: none}
  ports: [{port: 80}]
`, "apply", "-f", "-")
	c.waitReady("echo", "True", 60*time.Second)
	for path, want := range map[string]string{
		"/api/v1/namespaces/default/pods/echo/proxy/hostname":             "echo",
		"/api/v1/namespaces/default/pods/http:echo:8080/proxy/echo?msg=a": "a",
		"/api/v1/namespaces/default/services/echo/proxy/echo?msg=b":       "b",
		"/api/v1/namespaces/default/services/echo:web/proxy/hostname":     "echo",
	} {
		eventually(t, 30*time.Second, func() string {
			if out, err := c.kubectl("", "get", "--raw", path); err != nil || out != want {
				return "GET " + path + ": " + out
			}
			return ""
		})
	}
	if out, err := c.kubectl("", "get", "--raw", "/api/v1/namespaces/default/pods/missing/proxy/"); err == nil || !strings.Contains(out, `pods "missing" not found`) {
		t.Errorf("proxy to a missing pod: %v %q", err, out)
	}
	if out, err := c.kubectl("", "get", "--raw", "/api/v1/namespaces/default/services/empty/proxy/"); err == nil || !strings.Contains(out, `no endpoints available for service "empty"`) {
		t.Errorf("proxy to a Service without endpoints: %v %q", err, out)
	}
}
