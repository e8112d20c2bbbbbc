package e2e

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestDoctor runs `svcnet doctor` (and the kubectl plugin) against the
// broken Services of issue 21's acceptance: seed 003's selector typo, a
// readiness failure, a targetPort the pods do not declare, a named port
// no container has, externalTrafficPolicy Local with endpoints on other
// nodes only, a load balancer without a pool; a healthy Service exits 0,
// its node's data plane in sync and the cluster DNS answering its name.
func TestDoctor(t *testing.T) {
	t.Parallel()
	c := startNodeCluster(t)
	c.withStdin(`apiVersion: v1
kind: Pod
metadata: {name: nginx, labels: {app: nginx}}
spec:
  nodeName: `+nodeName+`
  terminationGracePeriodSeconds: 1
  containers:
  - name: nginx
    image: nginx:1.25
    ports: [{containerPort: 80, name: web}]
---
apiVersion: v1
kind: Pod
metadata: {name: sick, labels: {app: sick}}
spec:
  nodeName: `+nodeName+`
  terminationGracePeriodSeconds: 1
  containers:
  - name: sick
    image: nginx:1.25
    readinessProbe:
      exec: {command: [sh, -c, 'echo not yet; exit 1']}
      periodSeconds: 1
---
apiVersion: v1
kind: Service
metadata: {name: typo}
spec:
  selector: {app: ngnix}
  ports: [{port: 80}]
---
apiVersion: v1
kind: Service
metadata: {name: sick}
spec:
  selector: {app: sick}
  ports: [{port: 80}]
---
apiVersion: v1
kind: Service
metadata: {name: wrongport}
spec:
  selector: {app: nginx}
  ports: [{name: http, port: 80, targetPort: 8080}]
---
apiVersion: v1
kind: Service
metadata: {name: namedport}
spec:
  selector: {app: nginx}
  ports: [{name: http, port: 80, targetPort: http}]
---
apiVersion: v1
kind: Service
metadata: {name: healthy}
spec:
  selector: {app: nginx}
  ports: [{port: 80, targetPort: web}]
---
apiVersion: v1
kind: Service
metadata: {name: elsewhere}
spec:
  type: NodePort
  externalTrafficPolicy: Local
  ports: [{port: 80}]
---
apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata: {name: elsewhere-1, labels: {kubernetes.io/service-name: elsewhere}}
addressType: IPv4
ports: [{port: 80, protocol: TCP}]
endpoints:
- addresses: [10.244.9.9]
  nodeName: another-node
  conditions: {ready: true}
---
apiVersion: v1
kind: Service
metadata: {name: nopool}
spec:
  type: LoadBalancer
  selector: {app: nginx}
  ports: [{port: 80, targetPort: web}]
`, "apply", "-f", "-")
	c.waitReady("nginx", "True", 60*time.Second)

	// The kubectl plugin is the same binary under kubectl's plugin name.
	bin := t.TempDir()
	if err := os.Symlink(binary, filepath.Join(bin, "kubectl-svcnet")); err != nil {
		t.Fatal(err)
	}
	doctor := func(plugin bool, svc string) (report, string, int) {
		t.Helper()
		cmd := exec.Command(binary, "doctor", "svc/"+svc, "-o", "json")
		if plugin {
			cmd = exec.Command(kubectlPath, "svcnet", "doctor", "svc/"+svc, "-o", "json")
		}
		cmd.Env = append(os.Environ(), "KUBECONFIG="+c.kubeconfig(), "PATH="+bin+":"+os.Getenv("PATH"))
		var stderr strings.Builder
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		code := 0
		if ee, ok := err.(*exec.ExitError); ok {
			code = ee.ExitCode()
		} else if err != nil {
			t.Fatalf("doctor svc/%s: %v", svc, err)
		}
		var r report
		if err := json.Unmarshal(out, &r); err != nil {
			t.Fatalf("doctor svc/%s: %v\n%s\n%s", svc, err, out, stderr.String())
		}
		return r, stderr.String(), code
	}

	for _, plugin := range []bool{false, true} {
		r, stderr, code := doctor(plugin, "typo")
		if code != 1 || r.Healthy || len(r.Findings) == 0 || r.Findings[0].Code != "SelectorMatchesNoPods" ||
			!strings.Contains(r.Findings[0].Sentence, "Did you mean app=nginx?") || !strings.Contains(stderr, "service default/typo is not healthy") {
			t.Errorf("plugin=%v: doctor svc/typo exited %d: %+v\n%s", plugin, code, r, stderr)
		}
	}
	// Healthy once the node's proxy has the endpoint too; its proxy's
	// last sync is said, and the cluster DNS answers the Service's name.
	eventually(t, 30*time.Second, func() string {
		if r, _, code := doctor(false, "healthy"); code != 0 || !r.Healthy || !r.has("DataPlaneInSync", "matches the Service's EndpointSlices") ||
			!r.evidence("DataPlaneInSync", "node "+nodeName, "last sync ") || !r.evidence("DNSNames", "cluster DNS 10.96.0.10:53", "answers 1 record as above") {
			return fmt.Sprintf("doctor svc/healthy exited %d: %s", code, r)
		}
		return ""
	})
	// Endpoints on other nodes only, under externalTrafficPolicy Local.
	if r, _, _ := doctor(false, "elsewhere"); !r.has("NoLocalEndpointOnNodes", "node "+nodeName+" has no ready endpoint of this Service") {
		t.Errorf("doctor svc/elsewhere: %s", r)
	}
	// A load balancer without a pool to take its address from.
	eventually(t, 30*time.Second, func() string {
		if r, _, code := doctor(false, "nopool"); code != 1 || !r.has("LoadBalancerPending", "") {
			return fmt.Sprintf("doctor svc/nopool exited %d: %s", code, r)
		}
		return ""
	})
	if r, _, code := doctor(false, "wrongport"); code != 1 || !r.has("TargetPortNotExposed", "set targetPort to 80") {
		t.Errorf("doctor svc/wrongport exited %d: %+v", code, r)
	}
	if r, _, code := doctor(false, "namedport"); code != 1 || !r.has("NamedTargetPortNotFound", `targetPort "http"`) {
		t.Errorf("doctor svc/namedport exited %d: %+v", code, r)
	}
	// The probe's message comes from the node's Unhealthy event.
	eventually(t, 30*time.Second, func() string {
		if r, _, code := doctor(false, "sick"); code != 1 || !r.has("ReadinessProbeFailing", "not yet") {
			return "doctor svc/sick: " + r.String()
		}
		return ""
	})
}

// report is the doctor's JSON report, as far as the test reads it.
type report struct {
	Healthy  bool `json:"healthy"`
	Findings []struct {
		Code     string `json:"code"`
		Sentence string `json:"sentence"`
		Evidence []struct {
			Name  string `json:"name"`
			Value string `json:"value"`
		} `json:"evidence"`
	} `json:"findings"`
}

// evidence reports whether a finding of code has the evidence name with a
// value that begins with value.
func (r report) evidence(code, name, value string) bool {
	for _, f := range r.Findings {
		for _, e := range f.Evidence {
			if f.Code == code && e.Name == name && strings.HasPrefix(e.Value, value) {
				return true
			}
		}
	}
	return false
}

// has reports whether a finding of code says text.
func (r report) has(code, text string) bool {
	for _, f := range r.Findings {
		if f.Code == code && strings.Contains(f.Sentence, text) {
			return true
		}
	}
	return false
}

func (r report) String() string {
	b, _ := json.Marshal(r)
	return string(b)
}
