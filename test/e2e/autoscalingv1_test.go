package e2e

import (
	"regexp"
	"strings"
	"testing"
	"time"
)

// TestAutoscalingV1 checks that the HorizontalPodAutoscalers stored at
// autoscaling/v2 are served at autoscaling/v1 too: `kubectl autoscale`
// (kubectl 1.32 posts v1) creates one, both versions show the same
// object in their shapes, and what only v2 can say reaches v1 in
// upstream's annotations. The versions are named in full: kubectl drops
// the version of a short name (hpa.v1.autoscaling is the preferred v2).
func TestAutoscalingV1(t *testing.T) {
	t.Parallel()
	c := startCluster(t)
	const ns = "hpav1-e2e"
	c.createNamespace(ns)
	c.must("create", "deployment", "web", "-n", ns, "--image=nginx")
	if out := c.must("autoscale", "deployment", "web", "-n", ns, "--cpu-percent=50", "--min=1", "--max=3"); !strings.Contains(out, "horizontalpodautoscaler.autoscaling/web autoscaled") {
		t.Fatalf("kubectl autoscale: %s", out)
	}
	table := c.must("get", "hpa", "web", "-n", ns)
	header := regexp.MustCompile(`(?m)^NAME\s+REFERENCE\s+TARGETS\s+MINPODS\s+MAXPODS\s+REPLICAS\s+AGE\s*$`)
	row := regexp.MustCompile(`(?m)^web\s+Deployment/web\s+cpu: <unknown>/50%\s+1\s+3\s+\d+\s+\S+\s*$`)
	if !header.MatchString(table) || !row.MatchString(table) {
		t.Errorf("kubectl get hpa web:\n%s", table)
	}
	if v1 := c.must("get", "horizontalpodautoscalers.v1.autoscaling", "web", "-n", ns); !row.MatchString(v1) {
		t.Errorf("kubectl get horizontalpodautoscalers.v1.autoscaling web:\n%s", v1)
	}

	v1 := c.must("get", "horizontalpodautoscalers.v1.autoscaling", "web", "-n", ns, "-o", "yaml")
	for _, want := range []string{"apiVersion: autoscaling/v1", "targetCPUUtilizationPercentage: 50", "minReplicas: 1", "maxReplicas: 3",
		"kind: Deployment", "name: web"} {
		if !strings.Contains(v1, want) {
			t.Errorf("v1 object lacks %q:\n%s", want, v1)
		}
	}
	v2 := c.must("get", "horizontalpodautoscalers.v2.autoscaling", "web", "-n", ns, "-o", "yaml")
	for _, want := range []string{"apiVersion: autoscaling/v2", "averageUtilization: 50", "type: Utilization", "name: cpu", "minReplicas: 1"} {
		if !strings.Contains(v2, want) {
			t.Errorf("v2 object lacks %q:\n%s", want, v2)
		}
	}
	if strings.Contains(v2, "targetCPUUtilizationPercentage") || strings.Contains(v2, "autoscaling.alpha.kubernetes.io/metrics") {
		t.Errorf("v2 object has v1's fields:\n%s", v2)
	}
	uid := func(res string) string {
		return c.must("get", res, "web", "-n", ns, "-o", "jsonpath={.metadata.uid} {.metadata.resourceVersion}")
	}
	if a, b := uid("horizontalpodautoscalers.v1.autoscaling"), uid("horizontalpodautoscalers.v2.autoscaling"); a != b {
		t.Errorf("v1 and v2 are different objects: %q, %q", a, b)
	}

	// A v2 edit: a memory target beside the CPU one, and a behavior. v1
	// keeps its CPU field and carries the rest in annotations.
	c.must("patch", "horizontalpodautoscalers.v2.autoscaling", "web", "-n", ns, "--type=merge", "-p",
		`{"spec":{"metrics":[{"type":"Resource","resource":{"name":"cpu","target":{"type":"Utilization","averageUtilization":60}}},`+
			`{"type":"Resource","resource":{"name":"memory","target":{"type":"AverageValue","averageValue":"100Mi"}}}],`+
			`"behavior":{"scaleDown":{"stabilizationWindowSeconds":60}}}}`)
	got := c.must("get", "horizontalpodautoscalers.v1.autoscaling", "web", "-n", ns, "-o",
		`jsonpath={.spec.targetCPUUtilizationPercentage} {.metadata.annotations.autoscaling\.alpha\.kubernetes\.io/metrics} {.metadata.annotations.autoscaling\.alpha\.kubernetes\.io/behavior}`)
	for _, want := range []string{"60 ", `"name":"memory"`, `"targetAverageValue":"100Mi"`, `"stabilizationWindowSeconds":60`} {
		if !strings.Contains(got, want) {
			t.Errorf("v1 after the v2 edit lacks %q: %s", want, got)
		}
	}
	// A v1 edit keeps what only v2 says.
	c.must("patch", "horizontalpodautoscalers.v1.autoscaling", "web", "-n", ns, "--type=merge", "-p", `{"spec":{"maxReplicas":5}}`)
	got = c.must("get", "horizontalpodautoscalers.v2.autoscaling", "web", "-n", ns, "-o",
		`jsonpath={.spec.maxReplicas} {.spec.metrics[*].resource.name} {.spec.behavior.scaleDown.stabilizationWindowSeconds} {.metadata.annotations}`)
	if !strings.HasPrefix(got, "5 memory cpu 60") || strings.Contains(got, "autoscaling.alpha") {
		t.Errorf("v2 after the v1 edit: %q, want maxReplicas 5, both metrics, the behavior and no round-trip annotations", got)
	}
	// v1's validation, with upstream's message for the converted field.
	if out := c.fails("patch", "horizontalpodautoscalers.v1.autoscaling", "web", "-n", ns, "--type=merge", "-p", `{"spec":{"minReplicas":7}}`); !strings.Contains(out, "spec.maxReplicas: Invalid value: 5: must be greater than or equal to `minReplicas`") {
		t.Errorf("minReplicas above maxReplicas: %s", out)
	}
	// Server-side apply at v1 keeps the v2 writer's fields (the
	// controller's status) and the managers of both versions.
	c.withStdin(`apiVersion: autoscaling/v1
kind: HorizontalPodAutoscaler
metadata:
  name: web
spec:
  scaleTargetRef: {apiVersion: apps/v1, kind: Deployment, name: web}
  maxReplicas: 4
`, "apply", "--server-side", "--force-conflicts", "-n", ns, "-f", "-")
	eventually(t, time.Minute, func() string {
		out := c.must("get", "horizontalpodautoscalers.v2.autoscaling", "web", "-n", ns, "-o",
			`jsonpath={.spec.maxReplicas} {range .metadata.managedFields[*]}{.manager}@{.apiVersion} {end}`)
		if strings.HasPrefix(out, "4 ") && strings.Contains(out, "@autoscaling/v1") {
			return ""
		}
		time.Sleep(time.Second)
		return "v2 after the v1 apply: " + out
	})
	// Watches at v1 see the objects in v1's shape.
	if out := c.must("get", "horizontalpodautoscalers.v1.autoscaling", "-n", ns, "--watch-only=false", "-w", "--request-timeout=2s", "-o",
		"jsonpath={.apiVersion} {.spec.maxReplicas}{\"\\n\"}"); !strings.Contains(out, "autoscaling/v1 4") {
		t.Errorf("watch at v1: %s", out)
	}
	c.must("delete", "horizontalpodautoscalers.v1.autoscaling", "web", "-n", ns)
	c.fails("get", "horizontalpodautoscalers.v2.autoscaling", "web", "-n", ns)
}
