package e2e

import (
	"strings"
	"testing"
	"time"
)

// TestRuntimeClass: node.k8s.io/v1 RuntimeClasses are served, and a pod
// that names one gets its overhead and scheduling (nodeSelector merged,
// tolerations added) when created, as upstream's RuntimeClass admission
// plugin does; a pod naming a missing RuntimeClass, or one whose
// nodeSelector or overhead conflicts with it, is refused with upstream's
// message.
func TestRuntimeClass(t *testing.T) {
	t.Parallel()
	c := startCluster(t)
	c.withStdin(`apiVersion: node.k8s.io/v1
kind: RuntimeClass
metadata: {name: sandboxed}
handler: runc
overhead:
  podFixed: {cpu: 10m, memory: 1Mi}
scheduling:
  nodeSelector: {sandbox: "true"}
  tolerations:
  - {key: sandbox, operator: Exists, effect: NoSchedule}
`, "apply", "-f", "-")
	if out := c.must("get", "runtimeclasses"); !strings.Contains(normalize(strings.Split(out, "\n")), "NAME HANDLER AGE\nsandboxed runc AGE") {
		t.Errorf("kubectl get runtimeclasses:\n%s", out)
	}
	pod := func(name, class, extra string) string {
		return `apiVersion: v1
kind: Pod
metadata: {name: ` + name + `}
spec:
  runtimeClassName: ` + class + `
  containers: [{name: c, image: registry.k8s.io/pause:3.10}]
` + extra
	}
	c.withStdin(pod("admitted", "sandboxed", "  nodeSelector: {disk: ssd}\n  tolerations: [{key: sandbox, operator: Exists, effect: NoSchedule}]\n"), "create", "-f", "-")
	got := c.must("get", "pod", "admitted", "-o", `jsonpath={.spec.overhead.cpu} {.spec.overhead.memory} {.spec.nodeSelector} {.spec.tolerations[*].key}`)
	if want := `10m 1Mi {"disk":"ssd","sandbox":"true"} sandbox`; !strings.HasPrefix(got, want) {
		t.Errorf("admitted pod: %q, want overhead, the merged nodeSelector and one sandbox toleration (%q first)", got, want)
	}
	for _, tc := range []struct{ name, class, extra, want string }{
		{"missing", "no-such-class", "", `pods "missing" is forbidden: pod rejected: RuntimeClass "no-such-class" not found`},
		{"conflict", "sandboxed", "  nodeSelector: {sandbox: \"false\"}\n",
			`pods "conflict" is forbidden: conflict: runtimeClass.scheduling.nodeSelector[sandbox] = true; pod.spec.nodeSelector[sandbox] = false`},
		{"overhead", "sandboxed", "  overhead: {cpu: 1}\n", `pods "overhead" is forbidden: pod rejected: Pod's Overhead doesn't match RuntimeClass's defined Overhead`},
	} {
		out, err := c.kubectl(pod(tc.name, tc.class, tc.extra), "create", "-f", "-")
		if err == nil || !strings.Contains(out, tc.want) {
			t.Errorf("create pod %s: %v %q, want %q", tc.name, err, out, tc.want)
		}
	}
	// Once the API server's cache has seen a RuntimeClass deleted, new
	// pods naming it are refused.
	c.must("delete", "runtimeclass", "sandboxed")
	eventually(t, 10*time.Second, func() string {
		out, err := c.kubectl(pod("late", "sandboxed", ""), "create", "-f", "-")
		if err == nil {
			c.kubectl("", "delete", "pod", "late", "--wait=false")
			return "a pod of the deleted RuntimeClass was admitted"
		}
		if !strings.Contains(out, `RuntimeClass "sandboxed" not found`) {
			return "refusal: " + out
		}
		return ""
	})
}
