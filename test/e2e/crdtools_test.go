package e2e

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/svcnet/svcnet/internal/controller/garbagecollector"
)

// buildTool builds a program of the nested module testdata/tools (a
// controller-runtime operator, Helm) into the test's temporary dir.
func buildTool(t *testing.T, pkg, name string) string {
	t.Helper()
	out := filepath.Join(t.TempDir(), name)
	cmd := exec.Command("go", "build", "-o", out, pkg)
	cmd.Dir = filepath.Join("testdata", "tools")
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build %s: %v\n%s", pkg, err, b)
	}
	return out
}

// TestControllerRuntimeOperator: an operator built with controller-runtime
// (a manager with one reconciler on the Widget kind) reconciles against
// svcnet: it marks widgets ready through the status subresource and keeps
// a ConfigMap each widget owns, which the garbage collector removes with
// its widget (a kind defined after the collector started).
func TestControllerRuntimeOperator(t *testing.T) {
	t.Parallel()
	operator := buildTool(t, "./widget-operator", "widget-operator")
	c := startCluster(t)
	c.withStdin(widgetCRD, "apply", "-f", "-")
	c.must("wait", "--for=condition=Established", "--timeout=30s", "crd/widgets.example.com")

	log := &logBuffer{}
	cmd := exec.Command(operator)
	cmd.Env = append(os.Environ(), "KUBECONFIG="+c.kubeconfig())
	cmd.Stdout, cmd.Stderr = log, log
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		_ = cmd.Wait()
		if t.Failed() {
			t.Logf("operator log:\n%s", log)
		}
	}()

	c.withStdin(widget("w1", "{size: 4}"), "apply", "-f", "-")
	eventually(t, 60*time.Second, func() string {
		ready, _ := c.kubectl("", "get", "widget", "w1", "-o", "jsonpath={.status.ready}")
		size, _ := c.kubectl("", "get", "configmap", "widget-w1", "-o", "jsonpath={.data.size} {.metadata.ownerReferences[0].kind}")
		if ready != "true" || size != "4 Widget" {
			return "ready " + ready + ", configmap " + size
		}
		return ""
	})
	// A change of the widget reaches its ConfigMap.
	c.must("patch", "widget", "w1", "--type=merge", "-p", `{"spec":{"size":5}}`)
	eventually(t, 30*time.Second, func() string {
		if size, _ := c.kubectl("", "get", "configmap", "widget-w1", "-o", "jsonpath={.data.size}"); size != "5" {
			return "configmap size " + size
		}
		return ""
	})
	// The collector finds the new kind at its next look at discovery.
	c.must("delete", "widget", "w1")
	eventually(t, 2*garbagecollector.DiscoveryResync+30*time.Second, func() string {
		if out, err := c.kubectl("", "get", "configmap", "widget-w1"); err == nil || !strings.Contains(out, "not found") {
			return "the widget's ConfigMap is still there: " + out
		}
		return ""
	})
}

// TestHelmChart: Helm 3 installs a chart holding a CustomResourceDefinition
// (crds/), a Deployment, a Service, a ConfigMap and an object of the new
// kind, lists the release, and uninstalls it, leaving the definition as
// Helm does.
func TestHelmChart(t *testing.T) {
	t.Parallel()
	helm := buildTool(t, "helm.sh/helm/v3/cmd/helm", "helm")
	c := startCluster(t)
	run := func(args ...string) string {
		t.Helper()
		cmd := exec.Command(helm, args...)
		home := t.TempDir()
		cmd.Env = append(os.Environ(), "KUBECONFIG="+c.kubeconfig(), "HELM_CACHE_HOME="+home, "HELM_CONFIG_HOME="+home, "HELM_DATA_HOME="+home)
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("helm %s: %v\n%s", strings.Join(args, " "), err, out)
		}
		return string(out)
	}
	if out := run("install", "shop", filepath.Join("testdata", "widget-chart")); !strings.Contains(out, "STATUS: deployed") {
		t.Errorf("helm install:\n%s", out)
	}
	if out := run("list"); !strings.Contains(out, "shop") || !strings.Contains(out, "deployed") {
		t.Errorf("helm list:\n%s", out)
	}
	got := c.must("get", "deployment/shop-web", "service/shop-web", "configmap/shop-config", "gadget/shop-gadget", "-o", "name")
	for _, want := range []string{"deployment.apps/shop-web", "service/shop-web", "configmap/shop-config", "gadget.example.com/shop-gadget"} {
		if !strings.Contains(got, want) {
			t.Errorf("after install, %s is missing:\n%s", want, got)
		}
	}
	if out := run("uninstall", "shop"); !strings.Contains(out, `release "shop" uninstalled`) {
		t.Errorf("helm uninstall:\n%s", out)
	}
	eventually(t, 30*time.Second, func() string {
		out, _ := c.kubectl("", "get", "deployments,services,configmaps,gadgets", "-o", "name")
		for _, gone := range []string{"shop-web", "shop-config", "shop-gadget"} {
			if strings.Contains(out, gone) {
				return "still there after uninstall:\n" + out
			}
		}
		return ""
	})
	c.must("get", "crd", "gadgets.example.com")
}
