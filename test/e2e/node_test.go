package e2e

import (
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/svcnet/svcnet/internal/netns"
)

// nodeName is the Node of every node test's cluster.
const nodeName = "e2e-node"

// nodeCluster is `svcnet up` with a node whose network lives in a network
// namespace made for the test alone.
type nodeCluster struct {
	*cluster
	netns string
}

var netnsSeq atomic.Int32

// nodeLANIP is the node's address on its LAN in a node test.
const nodeLANIP = "172.31.252.2"

// startNodeCluster creates a network namespace for the node, on a LAN of
// its own (another namespace, where the node has the address nodeLANIP),
// starts `svcnet up` (with extraArgs) with its node inside it and waits
// until up says the cluster is up (the node Ready, its proxy in step with
// the API, cluster DNS answering). When the test ends, the cluster stops (stopping its
// pods), then every process, mount and namespace the test made is removed,
// also after a failure.
func startNodeCluster(t *testing.T, extraArgs ...string) *nodeCluster {
	t.Helper()
	needRoot(t)
	ns := fmt.Sprintf("svcnet-e2e-%d-%d", os.Getpid(), netnsSeq.Add(1))
	if out, err := exec.Command("ip", "netns", "add", ns).CombinedOutput(); err != nil {
		t.Fatalf("ip netns add %s: %v: %s", ns, err, out)
	}
	c := &nodeCluster{netns: ns}
	defer func() {
		if c.cluster == nil { // startCluster failed: its cleanups run, then ours
			t.Cleanup(func() { removeNetns(t, ns) })
		}
	}()
	newLAN(t, ns).attach(ns, nodeLANIP)
	c.cluster = startCluster(t, append([]string{"--nodes", "1", "--netns", ns, "--node-name", nodeName, "--metrics-bind-address", "0",
		"--kubelet-address", fmt.Sprintf("127.0.0.1:%d", freePort(t))}, extraArgs...)...)
	// Runs before the harness's own stop: stop gracefully, then reap.
	t.Cleanup(func() {
		c.stop()
		reapNode(t, c.dataDir)
		removeNetns(t, ns)
	})
	return c
}

// needRoot skips a test that needs root for network namespaces, except in
// CI, which runs as root: there it fails.
func needRoot(t *testing.T) {
	t.Helper()
	if os.Geteuid() == 0 {
		return
	}
	if os.Getenv("CI") == "true" {
		t.Fatal("this test needs root for network namespaces, and CI runs as root")
	}
	t.Skip("this test needs root for network namespaces; CI runs it as root")
}

// needRunc skips a test that needs root and runc (why says what for),
// except in CI, which installs runc: there it fails.
func needRunc(t *testing.T, why string) {
	t.Helper()
	needRoot(t)
	if _, err := exec.LookPath("runc"); err != nil {
		if os.Getenv("CI") != "" {
			t.Fatal("CI installs runc (.ci/run)")
		}
		t.Skip("needs runc: " + why)
	}
}

func removeNetns(t *testing.T, ns string) {
	if out, err := exec.Command("ip", "netns", "del", ns).CombinedOutput(); err != nil {
		t.Errorf("ip netns del %s: %v: %s", ns, err, out)
	}
}

// reapNode kills what a node left running (after a failed stop) from the
// PIDs its state files record, and unmounts its pod namespaces.
func reapNode(t *testing.T, dataDir string) {
	// One node's dir, or each node's of up --nodes N.
	nodeDirs := []string{filepath.Join(dataDir, "node")}
	more, _ := filepath.Glob(filepath.Join(dataDir, "nodes", "*", "node"))
	nodeDirs = append(nodeDirs, more...)
	var states, mounts []string
	for _, d := range nodeDirs {
		s, _ := filepath.Glob(filepath.Join(d, "pods", "*", "containers", "*", "*", "state.json"))
		m, _ := filepath.Glob(filepath.Join(d, "cni", "netns", "*"))
		states, mounts = append(states, s...), append(mounts, m...)
	}
	for _, f := range states {
		var st struct {
			ShimPID int `json:"shimPID"`
			PID     int `json:"pid"`
		}
		b, err := os.ReadFile(f)
		if err != nil || json.Unmarshal(b, &st) != nil {
			continue
		}
		if _, err := os.Stat(filepath.Join(filepath.Dir(f), "exit.json")); err == nil {
			continue // ended: the PIDs may belong to others by now
		}
		t.Errorf("container %s still running after the cluster stopped", f)
		_ = syscall.Kill(-st.PID, syscall.SIGKILL)
		_ = syscall.Kill(st.ShimPID, syscall.SIGKILL)
	}
	for _, m := range mounts {
		t.Errorf("pod namespace %s left after the cluster stopped", m)
		_ = syscall.Unmount(m, syscall.MNT_DETACH)
	}
	// The binding that shares a runc node's mounts with its shim host.
	mountinfo, _ := os.ReadFile("/proc/self/mountinfo")
	for _, d := range nodeDirs {
		if strings.Contains(string(mountinfo), " "+d+" ") {
			t.Errorf("node data dir %s still mounted after the cluster stopped", d)
			_ = syscall.Unmount(d, syscall.MNT_DETACH)
		}
	}
	// A container whose state is gone with its pod's directory is found
	// by its shim's command line, which names the directory (not for up
	// on a machine: its shims name the directory as its own mount
	// namespace shows it, /var/lib/svcnet, as every machine's do). The
	// shim host leaves just after its last container's exit record.
	left := shimsUnder(dataDir)
	for deadline := time.Now().Add(5 * time.Second); len(left) > 0 && time.Now().Before(deadline); left = shimsUnder(dataDir) {
		time.Sleep(50 * time.Millisecond)
	}
	for pid, dir := range left {
		t.Errorf("container shim %d (%s) still running after the cluster stopped", pid, dir)
		children, _ := os.ReadFile(fmt.Sprintf("/proc/%d/task/%d/children", pid, pid))
		for _, c := range strings.Fields(string(children)) {
			if child, err := strconv.Atoi(c); err == nil {
				_ = syscall.Kill(-child, syscall.SIGKILL)
			}
		}
		_ = syscall.Kill(pid, syscall.SIGKILL)
	}
}

// shimsUnder finds the running shims and shim hosts of runs under
// dataDir: their PIDs and the directories they serve.
func shimsUnder(dataDir string) map[int]string {
	out := map[int]string{}
	procs, _ := filepath.Glob("/proc/[0-9]*/cmdline")
	for _, f := range procs {
		b, err := os.ReadFile(f)
		if err != nil {
			continue
		}
		args := strings.Split(string(b), "\x00")
		if len(args) < 4 || args[1] != "node" || (args[2] != "shim" && args[2] != "shims") || !strings.HasPrefix(args[3], dataDir+"/") {
			continue
		}
		pid, _ := strconv.Atoi(filepath.Base(filepath.Dir(f)))
		out[pid] = args[3]
	}
	return out
}

// pod applies a one-container pod bound to the test's node, labelled
// app=<name>.
func (c *nodeCluster) pod(name, image, extra string) {
	c.t.Helper()
	c.labeledPod(name, name, image, extra)
}

// labeledPod applies a one-container pod bound to the test's node, with the
// label app=<app>.
func (c *nodeCluster) labeledPod(name, app, image, extra string) {
	c.t.Helper()
	c.withStdin(fmt.Sprintf(`apiVersion: v1
kind: Pod
metadata: {name: %s, labels: {app: %s}}
spec:
  nodeName: %s
  terminationGracePeriodSeconds: 5
  containers:
  - name: main
    image: %s
%s`, name, app, nodeName, image, extra), "apply", "-f", "-")
}

// jsonpath reads a field of an object.
func (c *nodeCluster) jsonpath(kind, name, path string) string {
	c.t.Helper()
	out, _ := c.kubectl("", "get", kind, name, "-o", "jsonpath="+path)
	return out
}

func (c *nodeCluster) waitReady(name string, want string, timeout time.Duration) {
	c.t.Helper()
	eventually(c.t, timeout, func() string {
		if got := c.jsonpath("pod", name, `{.status.conditions[?(@.type=="Ready")].status}`); got != want {
			return fmt.Sprintf("pod %s Ready=%q, want %q; status: %s", name, got, want, c.jsonpath("pod", name, "{.status}"))
		}
		return ""
	})
}

// netnsOf is the path that pins a pod's network namespace.
func (c *nodeCluster) netnsOf(pod string) string {
	return filepath.Join(c.dataDir, "node", "cni", "netns", c.jsonpath("pod", pod, "{.metadata.uid}"))
}

// inNetns runs the host's busybox applet inside a network namespace.
func inNetns(t *testing.T, nsPath string, args ...string) (string, error) {
	t.Helper()
	cmd := exec.Command("nsenter", append([]string{"--net=" + nsPath, "busybox"}, args...)...)
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// TestNodeNginxPodsReachEachOther is the seed labs' first step: a
// Deployment of two nginx pods, scheduled onto the node, each with an IP of
// its own in the node's podCIDR, reaching the other without NAT.
func TestNodeNginxPodsReachEachOther(t *testing.T) {
	t.Parallel()
	c := startNodeCluster(t)
	c.must("create", "deployment", "nginx", "--image=nginx", "--replicas=2", "--port=80")
	if out := c.must("rollout", "status", "deployment/nginx", "--timeout=60s"); !strings.Contains(out, `deployment "nginx" successfully rolled out`) {
		t.Fatalf("rollout status: %s", out)
	}
	names := strings.Fields(c.must("get", "pods", "-l", "app=nginx", "-o", "jsonpath={.items[*].metadata.name}"))
	if len(names) != 2 {
		t.Fatalf("Deployment nginx has pods %v, want 2", names)
	}
	if nodes := c.must("get", "pods", "-l", "app=nginx", "-o", "jsonpath={.items[*].spec.nodeName}"); nodes != nodeName+" "+nodeName {
		t.Errorf("pods bound to %q, want both on %s", nodes, nodeName)
	}
	podA, podB := names[0], names[1]
	_, cidr, err := net.ParseCIDR(c.jsonpath("node", nodeName, "{.spec.podCIDR}"))
	if err != nil {
		t.Fatal(err)
	}
	ipA, ipB := c.jsonpath("pod", podA, "{.status.podIP}"), c.jsonpath("pod", podB, "{.status.podIP}")
	if ipA == ipB || !cidr.Contains(net.ParseIP(ipA)) || !cidr.Contains(net.ParseIP(ipB)) {
		t.Fatalf("pod IPs %s and %s: want distinct addresses in %s", ipA, ipB, cidr)
	}
	if got := c.jsonpath("pod", podA, "{.status.phase} {.status.containerStatuses[0].ready} {.status.hostIP}"); !strings.HasPrefix(got, "Running true ") {
		t.Errorf("pod status: %s", got)
	}
	// From pod a's network, GET pod b: the default page, naming pod b.
	out, err := inNetns(t, c.netnsOf(podA), "wget", "-S", "-q", "-O-", "http://"+ipB+"/")
	if err != nil || !strings.Contains(out, "Welcome to nginx!") || !strings.Contains(out, "X-Pod-Name: "+podB) {
		t.Fatalf("GET pod b from pod a: %v\n%s", err, out)
	}
	// Pod b saw pod a's own address: no NAT between pods.
	if logs := c.must("logs", podB); !strings.Contains(logs, ipA+` - - [`) {
		t.Errorf("pod b's access log does not show pod a's address %s:\n%s", ipA, logs)
	}
}

// TestNodePodEgressMasqueraded: a pod reaches a server outside the
// cluster, which has no route to the pods, directly and through a Service
// whose EndpointSlice is written by hand, and the server sees the node's
// address; a pod reached through its Service still sees the client pod's
// own address.
func TestNodePodEgressMasqueraded(t *testing.T) {
	t.Parallel()
	c := startNodeCluster(t)
	lan := outsideClient(t, c.netns, 0)
	ln, err := netns.ListenAt(lan.ns)("tcp", net.JoinHostPort(lan.ip, "8080"))
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		host, _, _ := net.SplitHostPort(r.RemoteAddr)
		fmt.Fprintf(w, "peer=%s\n", host)
	})}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { srv.Close() })

	c.pod("client", "nginx", "")
	c.labeledPod("web", "web", "nginx", "    ports: [{containerPort: 80}]\n")
	c.withStdin(fmt.Sprintf(`apiVersion: v1
kind: Service
metadata: {name: web}
spec:
  selector: {app: web}
  ports: [{port: 80}]
---
apiVersion: v1
kind: Service
metadata: {name: lan}
spec:
  ports: [{port: 80, targetPort: 8080}]
---
apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata: {name: lan-1, labels: {kubernetes.io/service-name: lan}}
addressType: IPv4
ports: [{name: "", port: 8080, protocol: TCP}]
endpoints: [{addresses: [%s]}]
`, lan.ip), "apply", "-f", "-")
	c.waitReady("client", "True", 30*time.Second)
	c.waitReady("web", "True", 30*time.Second)
	c.readyEndpoints("web", 1)
	from := c.netnsOf("client")
	clientIP := c.jsonpath("pod", "client", "{.status.podIP}")

	want := "peer=" + lan.nodeIP
	if out, err := wget(t, from, "http://"+net.JoinHostPort(lan.ip, "8080")+"/"); err != nil || !strings.Contains(out, want) {
		t.Errorf("GET the LAN server from pod client: %v: %s; want %s", err, out, want)
	}
	lanIP := c.jsonpath("service", "lan", "{.spec.clusterIP}")
	eventually(t, 10*time.Second, func() string {
		if out, err := wget(t, from, "http://"+lanIP+"/"); err != nil || !strings.Contains(out, want) {
			return fmt.Sprintf("GET Service lan (%s) from pod client: %v: %s; want %s", lanIP, err, out, want)
		}
		return ""
	})
	webIP := c.jsonpath("service", "web", "{.spec.clusterIP}")
	eventually(t, 10*time.Second, func() string {
		if out, err := wget(t, from, "http://"+webIP+"/"); err != nil || podName(out) != "web" {
			return fmt.Sprintf("GET Service web (%s) from pod client: %v: %s", webIP, err, out)
		}
		return ""
	})
	if logs := c.must("logs", "web"); !strings.Contains(logs, clientIP+" - - [") {
		t.Errorf("pod web did not see pod client's address %s through its Service:\n%s", clientIP, logs)
	}
}

func TestNodeProbes(t *testing.T) {
	c := startNodeCluster(t)
	dir := t.TempDir()
	ready, live := filepath.Join(dir, "ready"), filepath.Join(dir, "live")
	for _, f := range []string{ready, live} {
		if err := os.WriteFile(f, nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	// The probes look for the files in a hostPath volume of the test's
	// directory.
	c.pod("probed", "busybox", fmt.Sprintf(`    command: [sleep, "3600"]
    readinessProbe: {exec: {command: [test, -e, /probe/ready]}, periodSeconds: 1, failureThreshold: 2}
    livenessProbe: {exec: {command: [test, -e, /probe/live]}, periodSeconds: 1, failureThreshold: 2}
    volumeMounts: [{name: probe, mountPath: /probe}]
  volumes: [{name: probe, hostPath: {path: %q}}]
`, dir))
	c.must("create", "service", "clusterip", "probed", "--tcp=80:80")
	c.waitReady("probed", "True", 30*time.Second)
	podIP := c.jsonpath("pod", "probed", "{.status.podIP}")
	sliceReady := func(want string) {
		t.Helper()
		eventually(t, 10*time.Second, func() string {
			got, _ := c.kubectl("", "get", "endpointslices", "-l", "kubernetes.io/service-name=probed",
				"-o", `jsonpath={range .items[*].endpoints[*]}{.addresses[0]}={.conditions.ready}{"\n"}{end}`)
			if strings.TrimSpace(got) != podIP+"="+want {
				return fmt.Sprintf("Service probed's EndpointSlice has %q, want %s=%s", got, podIP, want)
			}
			return ""
		})
	}
	sliceReady("true")

	// Readiness: NotReady within periodSeconds × failureThreshold (+ slack),
	// and the pod's endpoint in the Service's slice turns not ready.
	if err := os.Remove(ready); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	c.waitReady("probed", "False", 10*time.Second)
	if d := time.Since(start); d > 2*time.Second+1500*time.Millisecond {
		t.Errorf("NotReady after %s, want within 2s of the probe failing", d)
	}
	sliceReady("false")
	if got := c.jsonpath("pod", "probed", "{.status.restartCount}{.status.containerStatuses[0].restartCount}"); got != "0" {
		t.Errorf("a readiness failure restarted the container: restartCount %s", got)
	}
	if err := os.WriteFile(ready, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	c.waitReady("probed", "True", 10*time.Second)

	// Liveness: the container is restarted and restartCount goes up.
	if err := os.Remove(live); err != nil {
		t.Fatal(err)
	}
	eventually(t, 15*time.Second, func() string {
		if n := c.jsonpath("pod", "probed", "{.status.containerStatuses[0].restartCount}"); n == "0" || n == "" {
			return "restartCount " + n
		}
		return ""
	})
	if err := os.WriteFile(live, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	c.waitReady("probed", "True", 20*time.Second)
	if ev := c.must("get", "events", "--field-selector", "involvedObject.name=probed"); !strings.Contains(ev, "failed liveness probe, will be restarted") {
		t.Errorf("no Killing event for the liveness failure:\n%s", ev)
	}
}

func TestNodeLogs(t *testing.T) {
	t.Parallel()
	c := startNodeCluster(t)
	c.pod("talker", "busybox", `    command: [sh, -c, 'i=0; while true; do echo line $i; i=$((i+1)); sleep 0.2; done']
`)
	c.pod("crasher", "busybox", `    command: [sh, -c, 'echo run started; sleep 1; echo run failed >&2; exit 1']
`)
	c.waitReady("talker", "True", 30*time.Second)

	lines := make(chan string, 100)
	stop := c.kubectlStream(lines, "logs", "-f", "talker")
	deadline := time.After(10 * time.Second)
	var got []string
	for len(got) < 5 {
		select {
		case l := <-lines:
			got = append(got, l)
		case <-deadline:
			stop()
			t.Fatalf("kubectl logs -f streamed %q in 10s", got)
		}
	}
	stop()
	first, err1 := strconv.Atoi(strings.TrimPrefix(got[0], "line "))
	last, err2 := strconv.Atoi(strings.TrimPrefix(got[4], "line "))
	if err1 != nil || err2 != nil || last != first+4 {
		t.Errorf("followed lines %q", got)
	}
	if out := c.must("logs", "talker", "--tail=1", "--timestamps"); strings.Count(out, "\n") != 1 || !strings.Contains(out, "Z line ") {
		t.Errorf("logs --tail=1 --timestamps: %q", out)
	}

	eventually(t, 30*time.Second, func() string {
		if n := c.jsonpath("pod", "crasher", "{.status.containerStatuses[0].restartCount}"); n == "0" || n == "" {
			return "restartCount " + n
		}
		return ""
	})
	if out := c.must("logs", "crasher", "--previous"); out != "run started\nrun failed\n" {
		t.Errorf("logs --previous: %q", out)
	}
	eventually(t, 30*time.Second, func() string {
		if r := c.jsonpath("pod", "crasher", "{.status.containerStatuses[0].state.waiting.reason}"); r != "CrashLoopBackOff" {
			return "waiting reason " + r
		}
		return ""
	})
	if out := c.fails("logs", "talker", "-c", "nope"); !strings.Contains(out, "container nope is not valid for pod talker") {
		t.Errorf("logs of an unknown container: %s", out)
	}
}

func TestNodeEnvironment(t *testing.T) {
	t.Parallel()
	c := startNodeCluster(t)
	c.withStdin(`apiVersion: v1
kind: Service
metadata: {name: backend-svc}
spec:
  selector: {app: backend}
  ports: [{name: http, port: 8080, targetPort: 80}]
`, "apply", "-f", "-")
	c.must("create", "secret", "generic", "creds", "--from-literal=password=s3cret")
	c.pod("envy", "busybox", `    command: [sh, -c, 'env; sleep 3600']
    env:
    - {name: FROM_CM, valueFrom: {configMapKeyRef: {name: settings, key: color}}}
    - {name: FROM_SECRET, valueFrom: {secretKeyRef: {name: creds, key: password}}}
    - {name: MAYBE, valueFrom: {configMapKeyRef: {name: absent, key: x, optional: true}}}
    - {name: MY_POD_IP, valueFrom: {fieldRef: {fieldPath: status.podIP}}}
    - {name: MY_NODE, valueFrom: {fieldRef: {fieldPath: spec.nodeName}}}
    - {name: MY_NAME, valueFrom: {fieldRef: {fieldPath: metadata.name}}}
    - {name: COMPOSED, value: "$(FROM_SECRET)-$(MY_NAME)-$$(LITERAL)"}
    envFrom:
    - {configMapRef: {name: settings}, prefix: CFG_}
    - {configMapRef: {name: settings}}
`)
	eventually(t, 20*time.Second, func() string {
		st := c.jsonpath("pod", "envy", "{.status.containerStatuses[0].state.waiting.reason}: {.status.containerStatuses[0].state.waiting.message}")
		if st != `CreateContainerConfigError: configmap "settings" not found` {
			return "waiting: " + st
		}
		return ""
	})
	if out := c.must("get", "pod", "envy"); !strings.Contains(out, "CreateContainerConfigError") {
		t.Errorf("kubectl get pod:\n%s", out)
	}
	// A key that is no shell name reaches the container's children
	// through its shell, as through the images' busybox ash.
	c.must("create", "configmap", "settings", "--from-literal=color=blue", "--from-literal=data-1=value-1")
	c.waitReady("envy", "True", 30*time.Second)
	clusterIP := c.jsonpath("service", "backend-svc", "{.spec.clusterIP}")
	podIP := c.jsonpath("pod", "envy", "{.status.podIP}")
	var logs string
	eventually(t, 10*time.Second, func() string {
		logs = c.must("logs", "envy")
		if !strings.Contains(logs, "HOSTNAME=envy") {
			return "no env yet: " + logs
		}
		return ""
	})
	for _, want := range []string{
		"FROM_CM=blue", "FROM_SECRET=s3cret", "CFG_color=blue", "CFG_data-1=value-1", "data-1=value-1", "color=blue", "MY_NODE=" + nodeName, "MY_POD_IP=" + podIP,
		"COMPOSED=s3cret-envy-$(LITERAL)",
		"BACKEND_SVC_SERVICE_HOST=" + clusterIP, "BACKEND_SVC_SERVICE_PORT=8080", "BACKEND_SVC_SERVICE_PORT_HTTP=8080",
		"BACKEND_SVC_PORT=tcp://" + clusterIP + ":8080", "BACKEND_SVC_PORT_8080_TCP_ADDR=" + clusterIP,
		"BACKEND_SVC_PORT_8080_TCP_PROTO=tcp",
	} {
		if !strings.Contains(logs, want+"\n") {
			t.Errorf("env lacks %s:\n%s", want, logs)
		}
	}
	if strings.Contains(logs, "MAYBE=") {
		t.Errorf("an optional missing ConfigMap key was set:\n%s", logs)
	}
}

func TestNodeAgentRestartKeepsPods(t *testing.T) {
	t.Parallel()
	c := startNodeCluster(t)
	c.pod("survivor", "nginx", "")
	c.waitReady("survivor", "True", 30*time.Second)
	before := c.jsonpath("pod", "survivor", "{.status.podIP} {.status.containerStatuses[0].containerID} {.status.containerStatuses[0].restartCount}")

	// kill -9 the whole of `svcnet up`, node agent included, and start it
	// again on the same data dir.
	c.kill()
	c.start()
	eventually(t, 30*time.Second, func() string {
		out, _ := c.kubectl("", "get", "node", nodeName, "-o", `jsonpath={.status.conditions[?(@.type=="Ready")].status}`)
		if out != "True" {
			return "node not Ready"
		}
		return ""
	})
	time.Sleep(2 * time.Second) // a relist and a sync of the adopted pod
	after := c.jsonpath("pod", "survivor", "{.status.podIP} {.status.containerStatuses[0].containerID} {.status.containerStatuses[0].restartCount}")
	if after != before {
		t.Fatalf("after the agent's restart the pod is %q, was %q (IP, container, restarts)", after, before)
	}
	c.waitReady("survivor", "True", 10*time.Second)
	ip := strings.Fields(after)[0]
	out, err := inNetns(t, netns.Path(c.netns), "wget", "-q", "-O-", "http://"+ip+"/")
	if err != nil || !strings.Contains(out, "Welcome to nginx!") {
		t.Fatalf("GET the adopted pod from the node: %v\n%s", err, out)
	}
}

func TestNodeGracefulDelete(t *testing.T) {
	c := startNodeCluster(t)
	dir := t.TempDir()
	marker := filepath.Join(dir, "got-term")
	c.pod("stubborn", "busybox", fmt.Sprintf(`    command: [sh, -c, 'trap "echo TERM > /mark/got-term; sleep 60" TERM; while true; do sleep 0.1; done']
    volumeMounts: [{name: mark, mountPath: /mark}]
  volumes: [{name: mark, hostPath: {path: %q}}]
`, dir))
	c.waitReady("stubborn", "True", 30*time.Second)
	states, _ := filepath.Glob(filepath.Join(c.dataDir, "node", "pods", "*", "containers", "main", "0", "state.json"))
	if len(states) != 1 {
		t.Fatalf("state files: %v", states)
	}
	var st struct {
		PID int `json:"pid"`
	}
	b, _ := os.ReadFile(states[0])
	if err := json.Unmarshal(b, &st); err != nil {
		t.Fatal(err)
	}

	start := time.Now()
	c.must("delete", "pod", "stubborn", "--grace-period=5")
	took := time.Since(start)
	if _, err := os.Stat(marker); err != nil {
		t.Errorf("the container got no SIGTERM: %v", err)
	}
	if took < 4*time.Second || took > 10*time.Second {
		t.Errorf("delete with grace 5s took %s", took)
	}
	if err := syscall.Kill(st.PID, 0); err == nil {
		t.Errorf("container process %d still alive after the delete", st.PID)
	}
}

// TestNodeUnreadyWhileTerminating: a pod being deleted goes on being
// probed; its container, unready from SIGTERM on (agnhost netexec
// --delay-shutdown), turns the pod unready and its endpoint serving but
// not ready while it still runs out its grace period.
func TestNodeUnreadyWhileTerminating(t *testing.T) {
	t.Parallel()
	c := startNodeCluster(t)
	c.withStdin(`apiVersion: v1
kind: Pod
metadata: {name: draining, labels: {app: draining}}
spec:
  nodeName: `+nodeName+`
  terminationGracePeriodSeconds: 60
  containers:
  - name: web
    image: registry.k8s.io/e2e-test-images/agnhost:2.53
    args: [netexec, --http-port=8080, --delay-shutdown=60]
    readinessProbe: {httpGet: {path: /readyz, port: 8080}, periodSeconds: 1}
---
apiVersion: v1
kind: Service
metadata: {name: draining}
spec:
  selector: {app: draining}
  ports: [{port: 80, targetPort: 8080}]
`, "apply", "-f", "-")
	c.waitReady("draining", "True", 60*time.Second)
	c.must("delete", "pod", "draining", "--wait=false")
	eventually(t, 30*time.Second, func() string {
		ready := c.jsonpath("pod", "draining", `{.status.conditions[?(@.type=="Ready")].status}`)
		out, _ := c.kubectl("", "get", "endpointslices", "-l", "kubernetes.io/service-name=draining", "-o",
			"jsonpath={.items[0].endpoints[0].conditions}")
		if ready != "False" || !strings.Contains(out, `"ready":false`) || !strings.Contains(out, `"terminating":true`) {
			return fmt.Sprintf("terminating pod: Ready %q, endpoint conditions %s", ready, out)
		}
		return ""
	})
	c.must("delete", "pod", "draining", "--grace-period=1")
}

// TestNodeDiskPressure: a node whose disk has less than 15% available (the
// kubelet's imagefs.available threshold) reports DiskPressure, records
// NodeHasDiskPressure, gets the disk-pressure taint and takes no new
// pods; once space is back and the pressure transition period has passed,
// the pod is scheduled and runs.
func TestNodeDiskPressure(t *testing.T) {
	t.Parallel()
	m := newMachine(t)
	run(t, "mount", "-t", "tmpfs", "-o", "size=512m", "tmpfs", m.varLib)
	t.Cleanup(func() { run(t, "umount", "-l", m.varLib) })
	c := startOnMachine(t, m, "--eviction-pressure-transition-period", "2s", "--disable", "coredns")
	node := c.must("get", "nodes", "-o", "jsonpath={.items[0].metadata.name}")
	var fs unix.Statfs_t
	if err := unix.Statfs(m.varLib, &fs); err != nil {
		t.Fatal(err)
	}
	// Leave 10% of the disk available.
	fill := filepath.Join(m.varLib, "fill")
	size := int64(fs.Bavail)*fs.Bsize - int64(fs.Blocks)*fs.Bsize/10
	f, err := os.Create(fill)
	if err != nil {
		t.Fatal(err)
	}
	if err := unix.Fallocate(int(f.Fd()), 0, 0, size); err != nil {
		t.Fatalf("fill the disk: %v", err)
	}
	f.Close()
	eventually(t, 60*time.Second, func() string {
		out, _ := c.kubectl("", "get", "node", node, "-o", `jsonpath={.status.conditions[?(@.type=="DiskPressure")].status}/{.status.conditions[?(@.type=="DiskPressure")].reason} {.spec.taints[*].key}`)
		if out != "True/KubeletHasDiskPressure node.kubernetes.io/disk-pressure" {
			return "node DiskPressure and taints: " + out
		}
		return ""
	})
	if out := c.must("get", "events", "--field-selector", "involvedObject.kind=Node,reason=NodeHasDiskPressure", "-o", "jsonpath={.items[*].message}"); out != "Node "+node+" status is now: NodeHasDiskPressure" {
		t.Errorf("NodeHasDiskPressure events: %q", out)
	}
	c.must("run", "late", "--image=nginx")
	eventually(t, 30*time.Second, func() string {
		out := c.must("get", "events", "--field-selector", "involvedObject.name=late,reason=FailedScheduling", "-o", "jsonpath={.items[*].message}")
		if !strings.Contains(out, "1 node(s) had untolerated taint(s)") {
			return "FailedScheduling of a pod under disk pressure: " + out
		}
		return ""
	})
	if err := os.Remove(fill); err != nil {
		t.Fatal(err)
	}
	c.must("wait", "--for=condition=Ready", "pod/late", "--timeout=60s")
	if out := c.jsonpath("node", node, `{.status.conditions[?(@.type=="DiskPressure")].status}`); out != "False" {
		t.Errorf("DiskPressure once space is back: %s", out)
	}
}

// TestPodSpecUpdates: the node reports the generation of the spec its
// status was made from, in the status and the conditions it owns, as
// upstream's pod generation conformance tests wait for; and ends the pod
// once its (updated) activeDeadlineSeconds has passed.
func TestPodSpecUpdates(t *testing.T) {
	t.Parallel()
	needRoot(t)
	c := startNodeCluster(t)
	c.pod("gen", "registry.k8s.io/pause:3.10", "")
	c.waitReady("gen", "True", 60*time.Second)
	if g := c.jsonpath("pod", "gen", "{.metadata.generation}"); g != "1" {
		t.Fatalf("a running pod's generation %s, want 1", g)
	}
	c.must("patch", "pod", "gen", "-p", `{"spec":{"activeDeadlineSeconds":5000}}`)
	eventually(t, 30*time.Second, func() string {
		got := c.jsonpath("pod", "gen", `{.metadata.generation} {.status.observedGeneration} {.status.conditions[?(@.type=="Ready")].observedGeneration}`)
		if got != "2 2 2" {
			return "generation, observed and Ready's observed: " + got
		}
		return ""
	})
	c.must("patch", "pod", "gen", "-p", `{"spec":{"activeDeadlineSeconds":1}}`)
	eventually(t, 30*time.Second, func() string {
		got := c.jsonpath("pod", "gen", `{.status.phase} {.status.reason}: {.status.message}`)
		if got != "Failed DeadlineExceeded: Pod was active on the node longer than the specified deadline" {
			return "after the deadline: " + got
		}
		return ""
	})
}
