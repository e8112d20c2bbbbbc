package e2e

import (
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestAutoscaling runs docs/examples/autoscaling.yaml: `kubectl top`
// shows the busy pod's and the node's usage, measured by the node and
// served by metrics.k8s.io, and the autoscaler scales the Deployment up
// once the pod's CPU is above half its request.
func TestAutoscaling(t *testing.T) {
	t.Parallel()
	c := startNodeCluster(t)
	const ns = "autoscaling-e2e"
	c.createNamespace(ns)
	manifest, err := os.ReadFile("../../docs/examples/autoscaling.yaml")
	if err != nil {
		t.Fatal(err)
	}
	c.withStdin(string(manifest), "apply", "-n", ns, "-f", "-")

	// NAME CPU(cores) MEMORY(bytes): the busy loop uses well over its 100m.
	podLine := regexp.MustCompile(`(?m)^busy-\S+\s+(\d+)m\s+(\d+)Mi\s*$`)
	eventually(t, 2*time.Minute, func() string {
		out, err := c.kubectl("", "top", "pods", "-n", ns)
		if err != nil {
			time.Sleep(time.Second)
			return out
		}
		m := podLine.FindStringSubmatch(out)
		if m == nil {
			time.Sleep(time.Second)
			return "no busy pod in:\n" + out
		}
		if cpu, _ := strconv.Atoi(m[1]); cpu < 50 {
			time.Sleep(time.Second)
			return "busy pod below 50m:\n" + out
		}
		return ""
	})
	// NAME CPU(cores) CPU(%) MEMORY(bytes) MEMORY(%), the node's own,
	// once it has two samples.
	nodeLine := regexp.MustCompile(`(?m)^` + nodeName + `\s+\d+m\s+\d+%\s+\d+Mi\s+\d+%\s*$`)
	eventually(t, time.Minute, func() string {
		if out, _ := c.kubectl("", "top", "nodes"); !nodeLine.MatchString(out) {
			time.Sleep(time.Second)
			return "kubectl top nodes:\n" + out
		}
		return ""
	})
	// A pod's metrics by name, and the label selector of a list.
	if out := c.must("top", "pod", "-n", ns, "-l", "app=busy", "--containers"); !strings.Contains(out, "loop") {
		t.Errorf("kubectl top pod --containers:\n%s", out)
	}
	if out := c.fails("get", "--raw", "/apis/metrics.k8s.io/v1beta1/namespaces/"+ns+"/pods/nothing"); !strings.Contains(out, `podmetrics.metrics.k8s.io "`+ns+`/nothing" not found`) {
		t.Errorf("metrics of a missing pod: %s", out)
	}

	// The autoscaler wants more pods, and the Deployment gets them.
	eventually(t, 2*time.Minute, func() string {
		out, _ := c.kubectl("", "get", "hpa", "busy", "-n", ns, "-o", "jsonpath={.status.desiredReplicas} {.spec.replicas}")
		replicas, _ := c.kubectl("", "get", "deployment", "busy", "-n", ns, "-o", "jsonpath={.spec.replicas}")
		if n, _ := strconv.Atoi(strings.Fields(out + " 0")[0]); n > 1 && strings.TrimSpace(replicas) != "1" {
			return ""
		}
		time.Sleep(time.Second)
		return "desired replicas " + out + ", deployment replicas " + replicas
	})
	conditions := c.must("get", "hpa", "busy", "-n", ns, "-o",
		`jsonpath={range .status.conditions[*]}{.type}={.status}/{.reason} {end}`)
	for _, want := range []string{"AbleToScale=True/", "ScalingActive=True/ValidMetricFound"} {
		if !strings.Contains(conditions, want) {
			t.Errorf("conditions %q lack %q", conditions, want)
		}
	}
	events := c.must("get", "events", "-n", ns, "--field-selector", "involvedObject.kind=HorizontalPodAutoscaler", "-o",
		"jsonpath={range .items[*]}{.reason}: {.message}{\"\\n\"}{end}")
	if !regexp.MustCompile(`SuccessfulRescale: New size: [23]; reason: cpu resource utilization \(percentage of request\) above target`).MatchString(events) {
		t.Errorf("no SuccessfulRescale event:\n%s", events)
	}
	table := c.must("get", "hpa", "-n", ns)
	if !regexp.MustCompile(`NAME\s+REFERENCE\s+TARGETS\s+MINPODS\s+MAXPODS\s+REPLICAS\s+AGE\n` +
		`busy\s+Deployment/busy\s+cpu: (\d+%|<unknown>)/50%\s+1\s+3\s+\d\s+\S+`).MatchString(table) {
		t.Errorf("kubectl get hpa:\n%s", table)
	}
	if out := c.must("get", "all", "-n", ns); !strings.Contains(out, "horizontalpodautoscaler.autoscaling/busy") {
		t.Errorf("kubectl get all has no autoscaler:\n%s", out)
	}
}
