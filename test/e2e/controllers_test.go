package e2e

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"os/exec"
	"sort"
	"strings"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
)

// clientset is a client-go client of the cluster, for what kubectl would
// do too slowly (hundreds of pods).
func (c *cluster) clientset() kubernetes.Interface {
	c.t.Helper()
	return c.clientsetQPS(500)
}

// clientsetQPS is a clientset limited to qps requests a second (and as
// many at once); -1 lifts the limit, so that a request's time is the
// server's.
func (c *cluster) clientsetQPS(qps float32) kubernetes.Interface {
	c.t.Helper()
	cfg, err := clientcmd.BuildConfigFromFlags("", c.kubeconfig())
	if err != nil {
		c.t.Fatal(err)
	}
	cfg.QPS, cfg.Burst = qps, max(int(qps), 0)
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		c.t.Fatal(err)
	}
	return cs
}

const controllerNode = `apiVersion: v1
kind: Node
metadata:
  name: node-1
  labels:
    topology.kubernetes.io/zone: zone-a
`

// testPod is a pod bound to node-1 (no node agent runs it; the test sets
// its status) with the labels and named container ports given.
func testPod(ns, name string, labels map[string]string, ports ...corev1.ContainerPort) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Labels: labels},
		Spec: corev1.PodSpec{NodeName: "node-1", Containers: []corev1.Container{
			{Name: "app", Image: "nginx", Ports: ports},
		}},
	}
}

// setPodStatus makes a pod Running with ip, Ready or not, through the
// status subresource.
func setPodStatus(t *testing.T, cs kubernetes.Interface, ns, name, ip string, ready bool) {
	t.Helper()
	ctx := context.Background()
	pod, err := cs.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	status := corev1.ConditionFalse
	if ready {
		status = corev1.ConditionTrue
	}
	pod.Status.Phase = corev1.PodRunning
	pod.Status.PodIP, pod.Status.PodIPs = ip, []corev1.PodIP{{IP: ip}}
	pod.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: status, LastTransitionTime: metav1.Now()}}
	if _, err := cs.CoreV1().Pods(ns).UpdateStatus(ctx, pod, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// ipv4Slices are a Service's IPv4 slices, by name.
func ipv4Slices(t *testing.T, cs kubernetes.Interface, ns, svc string) []discoveryv1.EndpointSlice {
	t.Helper()
	list, err := cs.DiscoveryV1().EndpointSlices(ns).List(context.Background(), metav1.ListOptions{LabelSelector: discoveryv1.LabelServiceName + "=" + svc})
	if err != nil {
		t.Fatal(err)
	}
	var out []discoveryv1.EndpointSlice
	for _, s := range list.Items {
		if s.AddressType == discoveryv1.AddressTypeIPv4 {
			out = append(out, s)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// readyIPs lists the ready addresses of a Service's IPv4 slices, sorted.
func readyIPs(t *testing.T, cs kubernetes.Interface, ns, svc string) string {
	t.Helper()
	var ips []string
	for _, s := range ipv4Slices(t, cs, ns, svc) {
		for _, ep := range s.Endpoints {
			if ep.Conditions.Ready == nil || *ep.Conditions.Ready {
				ips = append(ips, ep.Addresses...)
			}
		}
	}
	sort.Strings(ips)
	return strings.Join(ips, ",")
}

// TestEndpointSlicesFollowReadyPods covers the Service's life with its
// pods: two Ready pods on port 80 in the slice and the Endpoints, a pod
// turning NotReady within one batch period, publishNotReadyAddresses, a
// selector typo, named target ports, and a deleted slice coming back.
func TestEndpointSlicesFollowReadyPods(t *testing.T) {
	const batch = time.Second
	c := startCluster(t, "--endpointslice-updates-batch-period", batch.String(), "--endpoint-updates-batch-period", batch.String())
	cs := c.clientset()
	ctx := context.Background()
	c.withStdin(controllerNode, "apply", "-f", "-")
	c.withStdin(`apiVersion: v1
kind: Service
metadata:
  name: nginx
spec:
  selector:
    app: nginx
  ports:
  - port: 8080
    targetPort: 80
`, "apply", "-f", "-")
	for i, ip := range []string{"10.244.1.11", "10.244.1.12"} {
		name := fmt.Sprintf("nginx-%d", i+1)
		if _, err := cs.CoreV1().Pods("default").Create(ctx, testPod("default", name, map[string]string{"app": "nginx"}), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		c.must("patch", "pod", name, "--subresource=status", "--type=merge", "-p",
			fmt.Sprintf(`{"status":{"phase":"Running","podIP":%q,"podIPs":[{"ip":%q}],"conditions":[{"type":"Ready","status":"True"}]}}`, ip, ip))
	}
	eventually(t, 10*time.Second, func() string {
		out := c.must("get", "endpointslice", "-l", "kubernetes.io/service-name=nginx")
		if !strings.Contains(out, "10.244.1.11,10.244.1.12") || !strings.Contains(out, " 80 ") {
			return "kubectl get endpointslice:\n" + out
		}
		return ""
	})
	eventually(t, 5*time.Second, func() string {
		out := c.must("get", "endpoints", "nginx")
		if !strings.Contains(out, "10.244.1.11:80,10.244.1.12:80") {
			return "kubectl get endpoints nginx:\n" + out
		}
		return ""
	})
	slice := ipv4Slices(t, cs, "default", "nginx")[0]
	if slice.Ports[0].Name == nil || *slice.Ports[0].Name != "" || slice.Endpoints[0].Zone == nil || *slice.Endpoints[0].Zone != "zone-a" ||
		slice.OwnerReferences[0].Kind != "Service" || slice.Labels[discoveryv1.LabelManagedBy] != "endpointslice-controller.k8s.io" {
		t.Errorf("slice %s: ports %v, zone %v, owners %v, labels %v", slice.Name, slice.Ports, slice.Endpoints[0].Zone, slice.OwnerReferences, slice.Labels)
	}
	if out := c.must("describe", "service", "nginx"); !strings.Contains(out, "Endpoints:") || !strings.Contains(out, "10.244.1.11:80,10.244.1.12:80") {
		t.Errorf("kubectl describe service nginx:\n%s", out)
	}

	// NotReady: out of the ready set within one batch period.
	time.Sleep(batch)
	start := time.Now()
	setPodStatus(t, cs, "default", "nginx-2", "10.244.1.12", false)
	for readyIPs(t, cs, "default", "nginx") != "10.244.1.11" {
		if time.Since(start) > batch+time.Second {
			t.Fatalf("nginx-2 still ready after %s (batch period %s)", time.Since(start), batch)
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Logf("NotReady pod left the ready set after %s (batch period %s)", time.Since(start).Round(time.Millisecond), batch)
	eventually(t, 5*time.Second, func() string {
		out := c.must("get", "endpoints", "nginx", "-o", "jsonpath={.subsets[0].addresses[*].ip} / {.subsets[0].notReadyAddresses[*].ip}")
		if !strings.Contains(out, "10.244.1.11 / 10.244.1.12") {
			return "endpoints addresses / notReadyAddresses: " + out
		}
		return ""
	})
	// With publishNotReadyAddresses it is published anyway.
	c.must("patch", "service", "nginx", "--type=merge", "-p", `{"spec":{"publishNotReadyAddresses":true}}`)
	eventually(t, 5*time.Second, func() string {
		if got := readyIPs(t, cs, "default", "nginx"); got != "10.244.1.11,10.244.1.12" {
			return "ready addresses with publishNotReadyAddresses: " + got
		}
		return ""
	})

	// A selector typo gives one empty slice and no error.
	c.withStdin(`apiVersion: v1
kind: Service
metadata:
  name: typo
spec:
  selector:
    app: ngnix
  ports:
  - port: 80
`, "apply", "-f", "-")
	eventually(t, 5*time.Second, func() string {
		s := ipv4Slices(t, cs, "default", "typo")
		if len(s) != 1 || len(s[0].Endpoints) != 0 {
			return fmt.Sprintf("slices of typo: %+v", s)
		}
		return ""
	})
	if out := c.must("get", "events", "--field-selector", "involvedObject.name=typo"); strings.Contains(out, "Warning") {
		t.Errorf("a selector matching nothing is not an error:\n%s", out)
	}

	// A named targetPort resolves to each pod's own number.
	c.must("create", "service", "clusterip", "named", "--tcp=80:http")
	for i, port := range []int32{8080, 9090} {
		name := fmt.Sprintf("named-%d", i)
		p := testPod("default", name, map[string]string{"app": "named"}, corev1.ContainerPort{Name: "http", ContainerPort: port, Protocol: corev1.ProtocolTCP})
		if _, err := cs.CoreV1().Pods("default").Create(ctx, p, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		setPodStatus(t, cs, "default", name, fmt.Sprintf("10.244.2.%d", i+1), true)
	}
	eventually(t, 5*time.Second, func() string {
		var groups []string
		for _, s := range ipv4Slices(t, cs, "default", "named") {
			for _, ep := range s.Endpoints {
				groups = append(groups, fmt.Sprintf("%s:%d", ep.Addresses[0], *s.Ports[0].Port))
			}
		}
		sort.Strings(groups)
		if fmt.Sprint(groups) != "[10.244.2.1:8080 10.244.2.2:9090]" {
			return fmt.Sprintf("named port groups %v", groups)
		}
		return ""
	})

	// A slice deleted by hand comes back.
	old := ipv4Slices(t, cs, "default", "nginx")[0].Name
	c.must("delete", "endpointslice", old)
	eventually(t, 5*time.Second, func() string {
		s := ipv4Slices(t, cs, "default", "nginx")
		if len(s) != 1 || s[0].Name == old || len(s[0].Endpoints) != 2 {
			return fmt.Sprintf("slices after deleting %s: %d", old, len(s))
		}
		return ""
	})
}

// TestManyPodsAndMinimalChurn: 250 Ready pods give three slices of
// 100/100/50, and one pod turning NotReady rewrites one slice only. (Pods
// that become Ready one by one fill slices as they come, never moving an
// endpoint between slices, so the Service is created after its pods.)
func TestManyPodsAndMinimalChurn(t *testing.T) {
	t.Parallel()
	c := startCluster(t)
	cs := c.clientset()
	ctx := context.Background()
	c.withStdin(controllerNode, "apply", "-f", "-")
	for i := range 250 {
		name := fmt.Sprintf("big-%03d", i)
		if _, err := cs.CoreV1().Pods("default").Create(ctx, testPod("default", name, map[string]string{"app": "big"}), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		setPodStatus(t, cs, "default", name, fmt.Sprintf("10.245.%d.%d", i/200, i%200+1), true)
	}
	c.must("create", "service", "clusterip", "big", "--tcp=80:80")
	var before []discoveryv1.EndpointSlice
	eventually(t, 20*time.Second, func() string {
		before = ipv4Slices(t, cs, "default", "big")
		var sizes []int
		for _, s := range before {
			sizes = append(sizes, len(s.Endpoints))
		}
		sort.Sort(sort.Reverse(sort.IntSlice(sizes)))
		if fmt.Sprint(sizes) != "[100 100 50]" {
			return fmt.Sprintf("slice sizes %v", sizes)
		}
		return ""
	})
	if out := c.must("get", "endpointslice", "-l", "kubernetes.io/service-name=big"); strings.Count(out, "+ 97 more...")+strings.Count(out, "+ 47 more...") != 3 {
		t.Errorf("kubectl get endpointslice:\n%s", out)
	}
	time.Sleep(500 * time.Millisecond) // let the last writes settle
	before = ipv4Slices(t, cs, "default", "big")
	setPodStatus(t, cs, "default", "big-123", "10.245.0.124", false)
	eventually(t, 5*time.Second, func() string {
		if strings.Contains(readyIPs(t, cs, "default", "big"), "10.245.0.124,") {
			return "big-123 still ready"
		}
		return ""
	})
	time.Sleep(500 * time.Millisecond)
	after := ipv4Slices(t, cs, "default", "big")
	changed := 0
	for i := range after {
		if i >= len(before) || after[i].Name != before[i].Name {
			t.Fatalf("slices replaced: %d before, %d after", len(before), len(after))
		}
		if after[i].ResourceVersion != before[i].ResourceVersion {
			changed++
		}
	}
	if changed != 1 {
		t.Errorf("one pod turning NotReady rewrote %d slices, want 1", changed)
	}
}

// TestGarbageCollectionAndNamespaces: a Service's slices and Endpoints go
// with it (background, foreground), are kept without owner with orphan,
// mirrored slices follow hand-written Endpoints, and deleting a namespace
// removes everything in it.
func TestGarbageCollectionAndNamespaces(t *testing.T) {
	t.Parallel()
	c := startCluster(t)
	cs := c.clientset()
	ctx := context.Background()
	c.withStdin(controllerNode, "apply", "-f", "-")
	for _, name := range []string{"bg", "fg", "orphan"} {
		c.must("create", "service", "clusterip", name, "--tcp=80:80")
		if _, err := cs.CoreV1().Pods("default").Create(ctx, testPod("default", name+"-pod", map[string]string{"app": name}), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		setPodStatus(t, cs, "default", name+"-pod", "10.246.0.1", true)
	}
	for _, name := range []string{"bg", "fg", "orphan"} {
		eventually(t, 5*time.Second, func() string {
			_, err := cs.CoreV1().Endpoints("default").Get(ctx, name, metav1.GetOptions{})
			if len(ipv4Slices(t, cs, "default", name)) != 1 || err != nil {
				return "no slice or Endpoints for " + name
			}
			return ""
		})
	}
	c.must("delete", "service", "bg")
	c.must("delete", "service", "fg", "--cascade=foreground")
	c.must("delete", "service", "orphan", "--cascade=orphan")
	for _, name := range []string{"bg", "fg"} {
		eventually(t, 5*time.Second, func() string {
			_, err := cs.CoreV1().Endpoints("default").Get(ctx, name, metav1.GetOptions{})
			if s := ipv4Slices(t, cs, "default", name); len(s) != 0 || !apierrors.IsNotFound(err) {
				return fmt.Sprintf("%s deleted, still %d slices, endpoints %v", name, len(s), err)
			}
			return ""
		})
	}
	eventually(t, 5*time.Second, func() string {
		if _, err := cs.CoreV1().Services("default").Get(ctx, "orphan", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
			return fmt.Sprintf("service orphan: %v", err)
		}
		if s := ipv4Slices(t, cs, "default", "orphan"); len(s) != 1 || len(s[0].OwnerReferences) != 0 {
			return fmt.Sprintf("orphaned slices %+v", s)
		}
		return ""
	})

	// Owners in a circle, each blocking its owner's deletion: a
	// foreground deletion of one still takes all three, as upstream's
	// collector breaks the cycle.
	uids := map[string]string{}
	for _, name := range []string{"ring1", "ring2", "ring3"} {
		c.must("create", "configmap", name)
		uids[name] = c.must("get", "configmap", name, "-o", "jsonpath={.metadata.uid}")
	}
	for dependent, owner := range map[string]string{"ring1": "ring3", "ring2": "ring1", "ring3": "ring2"} {
		c.must("patch", "configmap", dependent, "--type=merge", "-p", fmt.Sprintf(
			`{"metadata":{"ownerReferences":[{"apiVersion":"v1","kind":"ConfigMap","name":%q,"uid":%q,"controller":true,"blockOwnerDeletion":true}]}}`,
			owner, uids[owner]))
	}
	c.must("delete", "configmap", "ring1", "--cascade=foreground", "--wait=false")
	eventually(t, 30*time.Second, func() string {
		if out := c.must("get", "configmaps", "-o", "name"); strings.Contains(out, "ring") {
			return "configmaps of the cycle left: " + out
		}
		return ""
	})

	// A selector-less Service with hand-written Endpoints is mirrored.
	c.withStdin(`apiVersion: v1
kind: Service
metadata:
  name: external-db
spec:
  ports:
  - port: 5432
---
apiVersion: v1
kind: Endpoints
metadata:
  name: external-db
subsets:
- addresses:
  - ip: 192.0.2.10
  ports:
  - port: 5432
`, "apply", "-f", "-")
	eventually(t, 5*time.Second, func() string {
		out := c.must("get", "endpointslice", "-l", "kubernetes.io/service-name=external-db",
			"-o", "jsonpath={.items[*].metadata.labels.endpointslice\\.kubernetes\\.io/managed-by} {.items[*].endpoints[*].addresses[*]}")
		if out != "endpointslicemirroring-controller.k8s.io 192.0.2.10" {
			return "mirrored slice: " + out
		}
		return ""
	})

	// Deleting a namespace deletes what is in it, then the namespace.
	c.createNamespace("doomed")
	c.must("create", "configmap", "settings", "-n", "doomed", "--from-literal=a=b")
	c.must("create", "service", "clusterip", "web", "-n", "doomed", "--tcp=80:80")
	c.must("run", "web", "-n", "doomed", "--image=nginx", "--labels=app=web")
	eventually(t, 5*time.Second, func() string {
		if len(ipv4Slices(t, cs, "doomed", "web")) != 1 {
			return "no slice for doomed/web"
		}
		return ""
	})
	c.must("delete", "namespace", "doomed", "--wait=false")
	if phase := c.must("get", "namespace", "doomed", "-o", "jsonpath={.status.phase}"); phase != "Terminating" {
		t.Errorf("namespace phase %q right after delete, want Terminating", phase)
	}
	eventually(t, 20*time.Second, func() string {
		if out, err := c.kubectl("", "get", "namespace", "doomed"); err == nil {
			return "namespace doomed still exists:\n" + out
		}
		return ""
	})
	for _, kind := range []string{"configmaps", "services", "pods", "endpointslices", "endpoints"} {
		if out := c.must("get", kind, "-n", "doomed", "-o", "name"); strings.TrimSpace(out) != "" {
			t.Errorf("%s left in deleted namespace: %s", kind, out)
		}
	}
}

// controllerManager is one `svcnet controller-manager` process.
type controllerManager struct {
	cmd     *exec.Cmd
	log     *bytes.Buffer
	metrics string
}

func (c *cluster) startControllerManager(t *testing.T) *controllerManager {
	t.Helper()
	cm := &controllerManager{log: &bytes.Buffer{}, metrics: fmt.Sprintf("127.0.0.1:%d", freePort(t))}
	cm.cmd = exec.Command(binary, "controller-manager", "--kubeconfig", c.kubeconfig(), "--metrics-bind-address", cm.metrics,
		"--leader-elect-lease-duration", "2s", "--leader-elect-renew-deadline", "1500ms", "--leader-elect-retry-period", "250ms")
	cm.cmd.Stdout, cm.cmd.Stderr = cm.log, cm.log
	cm.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cm.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if cm.cmd.ProcessState == nil {
			_ = cm.cmd.Process.Signal(syscall.SIGTERM)
			_ = cm.cmd.Wait()
		}
	})
	return cm
}

// scrape returns the controller manager's /metrics text.
func (cm *controllerManager) scrape(t *testing.T) string {
	t.Helper()
	resp, err := http.Get("http://" + cm.metrics + "/metrics")
	if err != nil {
		t.Fatalf("scrape %s: %v", cm.metrics, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return string(body)
}

// syncs counts the successful EndpointSlice syncs a controller manager
// made, from its metrics.
func (cm *controllerManager) syncs(t *testing.T) string {
	for _, line := range strings.Split(cm.scrape(t), "\n") {
		if strings.HasPrefix(line, `svcnet_controller_sync_duration_seconds_count{controller="endpoint_slice",result="success"}`) {
			return strings.Fields(line)[1]
		}
	}
	return "0"
}

// TestTwoControllerManagers: with two controller managers only the lease
// holder syncs; when it is killed the other takes over.
func TestTwoControllerManagers(t *testing.T) {
	t.Parallel()
	c := startCluster(t, "--controllers=")
	cs := c.clientset()
	ctx := context.Background()
	managers := []*controllerManager{c.startControllerManager(t), c.startControllerManager(t)}

	var holder string
	eventually(t, 10*time.Second, func() string {
		holder = c.must("get", "lease", "-n", "kube-system", "kube-controller-manager", "-o", "jsonpath={.spec.holderIdentity}")
		if holder == "" {
			return "no leader yet"
		}
		return ""
	})
	c.withStdin(controllerNode, "apply", "-f", "-")
	c.must("create", "service", "clusterip", "ha", "--tcp=80:80")
	if _, err := cs.CoreV1().Pods("default").Create(ctx, testPod("default", "ha-1", map[string]string{"app": "ha"}), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	setPodStatus(t, cs, "default", "ha-1", "10.247.0.1", true)
	eventually(t, 10*time.Second, func() string {
		if got := readyIPs(t, cs, "default", "ha"); got != "10.247.0.1" {
			return "ha ready addresses: " + got
		}
		return ""
	})
	leader, standby := -1, -1
	for i, m := range managers {
		if n := m.syncs(t); n != "0" {
			if leader >= 0 {
				t.Fatalf("both controller managers synced Services")
			}
			leader = i
		} else {
			standby = i
		}
	}
	if leader < 0 || standby < 0 {
		t.Fatalf("expected one syncing controller manager, leader %d standby %d", leader, standby)
	}
	for _, series := range []string{"workqueue_depth{name=\"endpoint_slice\"}", "svcnet_controller_sync_duration_seconds_bucket", "svcnet_endpoints_change_to_write_seconds_count{controller=\"endpointslice\"}"} {
		if !strings.Contains(managers[leader].scrape(t), series) {
			t.Errorf("leader's metrics lack %s", series)
		}
	}

	// Kill the leader; the standby takes the lease and the work.
	if err := managers[leader].cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	_ = managers[leader].cmd.Wait()
	eventually(t, 15*time.Second, func() string {
		now := c.must("get", "lease", "-n", "kube-system", "kube-controller-manager", "-o", "jsonpath={.spec.holderIdentity}")
		if now == holder || now == "" {
			return "lease still held by " + now
		}
		return ""
	})
	setPodStatus(t, cs, "default", "ha-1", "10.247.0.1", false)
	eventually(t, 10*time.Second, func() string {
		if got := readyIPs(t, cs, "default", "ha"); got != "" {
			return "after takeover, ready addresses: " + got + "\nstandby log:\n" + managers[standby].log.String()
		}
		return ""
	})
	if out := c.must("get", "events", "-n", "kube-system", "--field-selector", "reason=LeaderElection"); strings.Count(out, "became leader") < 2 {
		t.Errorf("leader election events:\n%s", out)
	}
}
