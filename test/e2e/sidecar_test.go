package e2e

import (
	"strings"
	"testing"
	"time"
)

// TestSidecarContainers: a restartable init container (restartPolicy:
// Always) starts before the next init container and runs beside the pod's
// containers, its ports serving; in a pod whose containers have ended
// (restartPolicy Never) it is stopped and the pod Succeeds.
func TestSidecarContainers(t *testing.T) {
	t.Parallel()
	needRoot(t)
	c := startNodeCluster(t)
	c.withStdin(`apiVersion: v1
kind: Pod
metadata: {name: with-sidecar, labels: {app: with-sidecar}}
spec:
  nodeName: `+nodeName+`
  restartPolicy: Never
  terminationGracePeriodSeconds: 2
  initContainers:
  - name: web
    image: nginx:1.25
    restartPolicy: Always
    ports: [{name: http, containerPort: 80}]
  - name: check
    image: busybox:1.36
    command: [sh, -c, 'wget -qO- http://127.0.0.1:80/ | grep -q "Welcome to nginx"']
  containers:
  - {name: main, image: busybox:1.36, command: [sleep, "3600"]}
---
apiVersion: v1
kind: Service
metadata: {name: sidecar-web}
spec:
  selector: {app: with-sidecar}
  ports: [{port: 80, targetPort: http}]
---
apiVersion: v1
kind: Pod
metadata: {name: sidecar-done}
spec:
  nodeName: `+nodeName+`
  restartPolicy: Never
  terminationGracePeriodSeconds: 2
  initContainers:
  - {name: helper, image: busybox:1.36, restartPolicy: Always, command: [sleep, "3600"]}
  containers:
  - {name: main, image: busybox:1.36, command: [sh, -c, 'echo done']}
`, "apply", "-f", "-")

	// The check ran after the sidecar had started (else it fails, and the
	// pod with it): Ready, with the sidecar running and started.
	eventually(t, 90*time.Second, func() string {
		got := c.jsonpath("pod", "with-sidecar", `{.status.phase} {.status.conditions[?(@.type=="Ready")].status} `+
			`{.status.initContainerStatuses[0].started} {.status.initContainerStatuses[0].ready} `+
			`{.status.initContainerStatuses[1].state.terminated.reason} {.status.initContainerStatuses[1].ready}`)
		// An init container that succeeded is ready, as the kubelet says.
		if got != "Running True true true Completed true" {
			return "with-sidecar (phase, Ready, the sidecar's started and ready, the check's end and readiness): " + got
		}
		return ""
	})
	// The sidecar's named port is the Service's endpoint.
	eventually(t, 60*time.Second, func() string {
		out, _ := c.kubectl("", "get", "endpointslices", "-l", "kubernetes.io/service-name=sidecar-web", "-o", "jsonpath={.items[0].ports[0].port} {.items[0].endpoints[0].conditions.ready}")
		if got := strings.TrimSpace(out); got != "80 true" {
			return "sidecar-web's EndpointSlice: " + got
		}
		return ""
	})
	eventually(t, 90*time.Second, func() string {
		got := c.jsonpath("pod", "sidecar-done", "{.status.phase} {.status.containerStatuses[0].state.terminated.reason} {.status.initContainerStatuses[0].state.terminated.exitCode}")
		if !strings.HasPrefix(got, "Succeeded Completed ") || strings.HasSuffix(got, " ") {
			return "sidecar-done (phase, main's end, the sidecar's exit code): " + got
		}
		return ""
	})
}
