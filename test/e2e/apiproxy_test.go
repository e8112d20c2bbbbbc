package e2e

import (
	"io"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
)

// TestAPIServerProxy: pods/proxy and services/proxy pass requests on to a
// pod at [scheme:]name[:port] (the pod's first declared port by default)
// and to a ready endpoint of a Service's port, the path after /proxy
// being the target's, and nodes/proxy to the node's kubelet; a missing
// pod is NotFound and a Service without ready endpoints is
// ServiceUnavailable, as kube-apiserver answers.
func TestAPIServerProxy(t *testing.T) {
	t.Parallel()
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
kind: Pod
metadata: {name: porter}
spec:
  nodeName: `+nodeName+`
  terminationGracePeriodSeconds: 2
  containers:
  - name: porter
    image: registry.k8s.io/e2e-test-images/agnhost:2.53
    args: [porter]
    env:
    - {name: SERVE_PORT_1080, value: '<a href="/rewriteme">test</a>'}
    - {name: SERVE_TLS_PORT_443, value: 'tls baz'}
    ports: [{containerPort: 1080}, {containerPort: 443}]
---
apiVersion: v1
kind: Pod
metadata: {name: host-echo}
spec:
  nodeName: `+nodeName+`
  hostNetwork: true
  hostname: ignored
  terminationGracePeriodSeconds: 2
  containers:
  - name: web
    image: registry.k8s.io/e2e-test-images/agnhost:2.53
    args: [netexec, --http-port=18080]
---
apiVersion: v1
kind: Service
metadata: {name: empty}
spec:
  selector: {app: none}
  ports: [{port: 80}]
`, "apply", "-f", "-")
	c.waitReady("echo", "True", 60*time.Second)
	c.waitReady("host-echo", "True", 60*time.Second)
	c.waitReady("porter", "True", 60*time.Second)
	kubeletPort, err := c.kubectl("", "get", "node", nodeName, "-o", "jsonpath={.status.daemonEndpoints.kubeletEndpoint.Port}")
	if err != nil || kubeletPort == "" {
		t.Fatalf("kubelet port: %v %q", err, kubeletPort)
	}
	for path, want := range map[string]string{
		"/api/v1/namespaces/default/pods/echo/proxy/hostname":             "echo",
		"/api/v1/namespaces/default/pods/http:echo:8080/proxy/echo?msg=a": "a",
		"/api/v1/namespaces/default/services/echo/proxy/echo?msg=b":       "b",
		"/api/v1/namespaces/default/services/echo:web/proxy/hostname":     "echo",
		// Links in an HTML answer come back through the API server, as
		// upstream's Proxy conformance test checks with agnhost porter.
		"/api/v1/namespaces/default/pods/http:porter:1080/proxy/": `<a href="/api/v1/namespaces/default/pods/http:porter:1080/proxy/rewriteme">test</a>`,
		"/api/v1/namespaces/default/pods/https:porter:443/proxy/": "tls baz",
		// nodes/proxy: the kubelet, by default or at its own port, and
		// another port on the node's address.
		"/api/v1/nodes/" + nodeName + "/proxy/healthz":                     "ok",
		"/api/v1/nodes/" + nodeName + ":" + kubeletPort + "/proxy/healthz": "ok",
		"/api/v1/nodes/" + nodeName + ":18080/proxy/echo?msg=c":            "c",
		// A host-network pod's hostname is the node's, spec.hostname
		// ignored (upstream's issue 67019).
		"/api/v1/nodes/" + nodeName + ":18080/proxy/hostname": nodeName,
	} {
		eventually(t, 30*time.Second, func() string {
			if out, err := c.kubectl("", "get", "--raw", path); err != nil || out != want {
				return "GET " + path + ": " + out
			}
			return ""
		})
	}
	// The kubelet's /pods lists the node's pods; /logs/ lists its log
	// directory (the conformance tests' "proxy logs on node").
	if out, err := c.kubectl("", "get", "--raw", "/api/v1/nodes/"+nodeName+"/proxy/pods"); err != nil || !strings.Contains(out, `"kind":"PodList"`) || !strings.Contains(out, `"name":"host-echo"`) {
		t.Errorf("nodes/proxy/pods: %v %.300q", err, out)
	}
	if out, err := c.kubectl("", "get", "--raw", "/api/v1/nodes/"+nodeName+"/proxy/logs/"); err != nil || !strings.Contains(out, "<pre>") {
		t.Errorf("nodes/proxy/logs/: %v %.300q", err, out)
	}
	// The kubelet's /metrics, which the e2e framework's debug dump reads
	// at the kubelet's port after every failed test.
	out, err := c.kubectl("", "get", "--raw", "/api/v1/nodes/"+nodeName+":"+kubeletPort+"/proxy/metrics")
	if err != nil || !strings.Contains(out, `kubelet_node_name{node="`+nodeName+`"} 1`) {
		t.Errorf("nodes/proxy/metrics: %v %.300q", err, out)
	}
	// The two pods of the test are among the node's running ones.
	m := regexp.MustCompile(`(?m)^kubelet_running_pods (\d+)$`).FindStringSubmatch(out)
	if len(m) < 2 {
		t.Errorf("no kubelet_running_pods in %.300q", out)
	} else if n, _ := strconv.Atoi(m[1]); n < 2 {
		t.Errorf("kubelet_running_pods %d, want at least the test's 2", n)
	}
	// A GET of a target's root without its slash is redirected to it.
	cfg, err := clientcmd.BuildConfigFromFlags("", c.kubeconfig())
	if err != nil {
		t.Fatal(err)
	}
	rt, err := rest.TransportFor(cfg)
	if err != nil {
		t.Fatal(err)
	}
	for _, path := range []string{"/api/v1/namespaces/default/pods/echo/proxy", "/api/v1/namespaces/default/services/echo/proxy"} {
		req, _ := http.NewRequest(http.MethodGet, cfg.Host+path+"?method=GET", nil)
		resp, err := rt.RoundTrip(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if loc := resp.Header.Get("Location"); resp.StatusCode != http.StatusMovedPermanently || loc != path+"/?method=GET" {
			t.Errorf("GET %s: %d to %q, want 301 to %s/?method=GET", path, resp.StatusCode, loc, path)
		}
	}
	// The caller's credentials stop at the API server: the pod sees no
	// Authorization header (netexec's /header echoes it).
	c.must("create", "clusterrolebinding", "proxy-caller", "--clusterrole=cluster-admin", "--serviceaccount=default:default")
	withToken := rest.AnonymousClientConfig(cfg)
	withToken.BearerToken = strings.TrimSpace(c.must("create", "token", "default"))
	tokenRT, err := rest.TransportFor(withToken)
	if err != nil {
		t.Fatal(err)
	}
	req, _ := http.NewRequest(http.MethodGet, cfg.Host+"/api/v1/namespaces/default/pods/http:echo:8080/proxy/header?key=Authorization", nil)
	resp, err := tokenRT.RoundTrip(req)
	if err != nil {
		t.Fatal(err)
	}
	seen, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || len(seen) != 0 {
		t.Errorf("the pod saw Authorization %q (%d), want none", seen, resp.StatusCode)
	}
	if out, err := c.kubectl("", "get", "--raw", "/api/v1/namespaces/default/pods/missing/proxy/"); err == nil || !strings.Contains(out, `pods "missing" not found`) {
		t.Errorf("proxy to a missing pod: %v %q", err, out)
	}
	if out, err := c.kubectl("", "get", "--raw", "/api/v1/namespaces/default/services/empty/proxy/"); err == nil || !strings.Contains(out, `no endpoints available for service "empty"`) {
		t.Errorf("proxy to a Service without endpoints: %v %q", err, out)
	}
}
