package e2e

import (
	"strings"
	"testing"
	"time"
)

// TestPodResize: `kubectl patch --subresource resize` changes a running
// pod's cpu and memory in place, as the kubelet does: the container's
// cgroup (read inside it, at /sys/fs/cgroup) and its status' resources
// follow without a restart, except for a resource whose resize policy is
// RestartContainer; a resize that would change the QoS class is refused
// with upstream's message, one larger than the node stays
// PodResizePending (Infeasible), and anything but resources sent through
// the subresource is ignored.
func TestPodResize(t *testing.T) {
	t.Parallel()
	needRunc(t, "the resize is the container's cgroup, which only runc's containers have")
	c := startNodeCluster(t, "--runtime", "runc")
	c.withStdin(`apiVersion: v1
kind: Pod
metadata: {name: resize}
spec:
  nodeName: `+nodeName+`
  terminationGracePeriodSeconds: 2
  containers:
  - name: inplace
    image: busybox:1.36
    command: [sleep, "3600"]
    resources: {requests: {cpu: 20m, memory: 35Mi}, limits: {cpu: 30m, memory: 45Mi}}
  - name: restarts
    image: busybox:1.36
    command: [sleep, "3600"]
    resizePolicy: [{resourceName: memory, restartPolicy: RestartContainer}]
    resources: {requests: {cpu: 20m, memory: 35Mi}, limits: {cpu: 30m, memory: 45Mi}}
`, "apply", "-f", "-")
	c.waitReady("resize", "True", 60*time.Second)
	// The container's own cgroup is the root of its /sys/fs/cgroup: one
	// hierarchy on cgroup v2, one per controller on v1.
	v2 := strings.Contains(c.must("exec", "resize", "-c", "inplace", "--", "sh", "-c", "mount -t cgroup2"), "/sys/fs/cgroup")
	cpuMax, memoryMax := "cpu/cpu.cfs_quota_us", "memory/memory.limit_in_bytes"
	quota := func(q string) string { return q }
	if v2 {
		cpuMax, memoryMax = "cpu.max", "memory.max"
		quota = func(q string) string { return q + " 100000" }
	}
	cgroup := func(container, file string) string {
		return strings.TrimSpace(c.must("exec", "resize", "-c", container, "--", "cat", "/sys/fs/cgroup/"+file))
	}
	if got := cgroup("inplace", cpuMax); got != quota("3000") {
		t.Fatalf("%s before the resize = %q, want %q (30m)", cpuMax, got, quota("3000"))
	}

	c.must("patch", "pod", "resize", "--subresource", "resize", "-p", `{"spec":{"containers":[
		{"name":"inplace","image":"ignored:1","resources":{"requests":{"cpu":"25m"},"limits":{"cpu":"35m","memory":"50Mi"}}},
		{"name":"restarts","resources":{"limits":{"memory":"50Mi"}}}]}}`)
	eventually(t, 60*time.Second, func() string {
		got := c.jsonpath("pod", "resize", `{.metadata.generation}/{.status.observedGeneration} `+
			`{.status.containerStatuses[?(@.name=="inplace")].resources.limits.cpu} `+
			`{.status.containerStatuses[?(@.name=="inplace")].allocatedResources.cpu} `+
			`{.status.containerStatuses[?(@.name=="inplace")].restartCount} `+
			`{.status.containerStatuses[?(@.name=="restarts")].restartCount} `+
			`{.status.containerStatuses[?(@.name=="restarts")].resources.limits.memory} `+
			`{.status.conditions[?(@.type=="Ready")].status}`)
		if got != "2/2 35m 25m 0 1 50Mi True" {
			return "generation/observed, inplace's cpu limit, cpu request, restarts, restarts' restarts, memory limit, ready: " + got
		}
		return ""
	})
	for _, tc := range []struct{ container, file, want string }{
		{"inplace", cpuMax, quota("3500")},
		{"inplace", memoryMax, "52428800"},
		{"restarts", memoryMax, "52428800"},
	} {
		if got := cgroup(tc.container, tc.file); got != tc.want {
			t.Errorf("%s's %s after the resize = %q, want %q", tc.container, tc.file, got, tc.want)
		}
	}
	if image := c.jsonpath("pod", "resize", `{.spec.containers[?(@.name=="inplace")].image}`); image != "busybox:1.36" {
		t.Errorf("the resize subresource changed the image to %q", image)
	}

	out := c.fails("patch", "pod", "resize", "--subresource", "resize", "-p", `{"spec":{"containers":[
		{"name":"inplace","resources":{"requests":{"cpu":"35m","memory":"50Mi"}}},
		{"name":"restarts","resources":{"requests":{"cpu":"30m","memory":"50Mi"}}}]}}`)
	if !strings.Contains(out, "Pod QOS Class may not change as a result of resizing") {
		t.Errorf("a resize to Guaranteed: %s", out)
	}

	c.must("patch", "pod", "resize", "--subresource", "resize", "-p",
		`{"spec":{"containers":[{"name":"inplace","resources":{"requests":{"cpu":"1000"},"limits":{"cpu":"1000"}}}]}}`)
	eventually(t, 60*time.Second, func() string {
		got := c.jsonpath("pod", "resize", `{.status.conditions[?(@.type=="PodResizePending")].reason}: {.status.conditions[?(@.type=="PodResizePending")].message}`)
		if !strings.HasPrefix(got, "Infeasible: Node didn't have enough capacity: cpu, requested: 1000020") {
			return "PodResizePending: " + got
		}
		return ""
	})
	if got := cgroup("inplace", cpuMax); got != quota("3500") {
		t.Errorf("%s after an infeasible resize = %q, want it unchanged (%s)", cpuMax, got, quota("3500"))
	}
}
