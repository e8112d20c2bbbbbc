package e2e

import (
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/miekg/dns"

	"github.com/svcnet/svcnet/internal/netns"
)

// machine is a fresh machine as a new user has one: a network namespace
// with loopback down and one interface, eth0, with an address and a
// default route to a second namespace, the machine's LAN. `svcnet up` runs
// there with no flags: its /var/lib is a directory of the test's own
// (bind-mounted in the private mount namespace `ip netns exec` gives it),
// so that up keeps its data in /var/lib/svcnet as on a real machine.
type machine struct {
	name, lan string
	varLib    string
}

// The machine's address and its LAN's.
const (
	machineIP = "198.18.0.2"
	lanIP     = "198.18.0.1"
)

func newMachine(t *testing.T) *machine {
	t.Helper()
	needRoot(t)
	name := fmt.Sprintf("svcnet-e2e-%d-%d", os.Getpid(), netnsSeq.Add(1))
	m := &machine{name: newNetns(t, name), lan: newNetns(t, name+"-lan"), varLib: t.TempDir()}
	run(t, "ip", "-n", m.name, "link", "add", "eth0", "type", "veth", "peer", "name", "lan0", "netns", m.lan)
	run(t, "ip", "-n", m.name, "addr", "add", machineIP+"/24", "dev", "eth0")
	run(t, "ip", "-n", m.name, "link", "set", "eth0", "up")
	run(t, "ip", "-n", m.name, "route", "add", "default", "via", lanIP)
	run(t, "ip", "-n", m.lan, "addr", "add", lanIP+"/24", "dev", "lan0")
	run(t, "ip", "-n", m.lan, "link", "set", "lan0", "up")
	run(t, "ip", "-n", m.lan, "link", "set", "lo", "up")
	return m
}

// startOnMachine runs `svcnet up` on m with args (none, as the README
// says, for the out-of-the-box tests) and waits until it is up; the
// cluster stops when the test ends, before the machine goes.
func startOnMachine(t *testing.T, m *machine, args ...string) *nodeCluster {
	t.Helper()
	c := newCluster(t)
	c.dataDir = filepath.Join(m.varLib, "svcnet")
	c.apiAddr, c.etcdClient = "127.0.0.1:6443", "https://127.0.0.1:2379"
	c.inNetns = m.name
	c.upCommand = append([]string{"sh", "-c", `mount --bind "$1" /var/lib && b=$2 && shift 2 && exec "$b" up "$@"`, "sh", m.varLib, binary}, args...)
	nc := &nodeCluster{cluster: c, netns: m.name}
	t.Cleanup(func() {
		c.stop()
		reapNode(t, c.dataDir)
	})
	c.start()
	return nc
}

// seen is path as the cluster's processes see it: namespaces and volumes
// are mounted in up's own mount namespace. (An absolute symbolic link on
// the way, /var/run's, would lead back to ours: the directory is resolved
// here first.)
func (c *cluster) seen(path string) string {
	if c.inNetns == "" || c.cmd == nil {
		return path
	}
	if dir, err := filepath.EvalSymlinks(filepath.Dir(path)); err == nil {
		path = filepath.Join(dir, filepath.Base(path))
	}
	return fmt.Sprintf("/proc/%d/root%s", c.cmd.Process.Pid, path)
}

// waitPodDone waits for a pod to end and returns its phase and log.
func (c *nodeCluster) waitPodDone(name string, timeout time.Duration) (string, string) {
	c.t.Helper()
	var phase string
	eventually(c.t, timeout, func() string {
		phase = c.jsonpath("pod", name, "{.status.phase}")
		if phase != "Succeeded" && phase != "Failed" {
			return name + " is " + phase
		}
		return ""
	})
	return phase, c.must("logs", name)
}

// TestOutOfTheBox follows the README on a fresh machine: `svcnet up` with
// no flags runs a node on the machine's own address; a Deployment exposed
// as a NodePort answers on its cluster IP from the machine, on the
// NodePort from the machine and from its LAN; a pod reaches the API
// through the kubernetes Service and a server on the LAN from the node's
// address; cluster DNS is the coredns pods, and survives losing one.
func TestOutOfTheBox(t *testing.T) {
	m := newMachine(t)
	c := startOnMachine(t, m)
	if got := c.must("get", "nodes", "-o", `jsonpath={.items[*].status.addresses[?(@.type=="InternalIP")].address} {.items[*].metadata.labels}`); !strings.HasPrefix(got, machineIP+" ") ||
		!strings.Contains(got, `"node-role.kubernetes.io/control-plane":""`) {
		t.Errorf("nodes: %s, want one control-plane node on %s", got, machineIP)
	}
	if got := c.must("get", "endpoints", "kubernetes", "-o", "jsonpath={.subsets[0].addresses[0].ip}:{.subsets[0].ports[0].port}"); got != machineIP+":6443" {
		t.Errorf("the kubernetes Service's endpoint is %s, want the node's address %s:6443", got, machineIP)
	}

	c.must("create", "deployment", "nginx", "--image=nginx", "--replicas=2")
	c.must("expose", "deployment", "nginx", "--port", "80", "--type", "NodePort")
	c.must("rollout", "status", "deployment/nginx", "--timeout=60s")
	if got := c.must("get", "pods", "-l", "app=nginx", "-o", "jsonpath={.items[*].status.phase}"); got != "Running Running" {
		t.Errorf("nginx pods: %s, want two Running", got)
	}
	clusterIP := c.jsonpath("service", "nginx", "{.spec.clusterIP}")
	nodePort := c.jsonpath("service", "nginx", "{.spec.ports[0].nodePort}")
	for _, f := range []struct{ from, url string }{
		{m.name, "http://" + clusterIP + "/"},
		{m.name, "http://" + net.JoinHostPort(machineIP, nodePort) + "/"},
		{m.lan, "http://" + net.JoinHostPort(machineIP, nodePort) + "/"},
	} {
		eventually(t, 10*time.Second, func() string {
			if out, err := wget(t, netns.Path(f.from), f.url); err != nil || !strings.Contains(out, "Welcome to nginx!") {
				return fmt.Sprintf("GET %s from %s: %v: %s", f.url, f.from, err, out)
			}
			return ""
		})
	}

	// The Service range, as kube-proxy's cluster-ips-check: a port the
	// Service lacks is refused at once; an address no Service holds is
	// dropped on the node, and nothing of the range reaches the LAN.
	run(t, "ip", "netns", "exec", m.lan, "nft", "add table ip count; add chain ip count in { type filter hook prerouting priority 0; }; add rule ip count in ip daddr 10.96.0.0/12 counter")
	start := time.Now()
	if out, err := exec.Command("ip", "netns", "exec", m.name, "curl", "-s", "-m", "3", "http://"+clusterIP+":81/").CombinedOutput(); err == nil || time.Since(start) > 2*time.Second {
		t.Errorf("a port the Service lacks: %v after %s, want refused at once: %s", err, time.Since(start), out)
	}
	if out, err := exec.Command("ip", "netns", "exec", m.name, "curl", "-s", "-m", "1", "http://10.111.222.33/").CombinedOutput(); err == nil {
		t.Errorf("an address no Service holds answered: %s", out)
	}
	if out := c.execOn(m.lan, "nft", "list", "table", "ip", "count"); !strings.Contains(out, "counter packets 0 bytes 0") {
		t.Errorf("traffic to the Service range reached the LAN:\n%s", out)
	}

	// A server on the LAN, which has no route to the pods, says whom it
	// sees.
	var ln net.Listener
	if err := netns.Do(netns.Path(m.lan), func() (err error) {
		ln, err = net.Listen("tcp", net.JoinHostPort(lanIP, "8080"))
		return err
	}); err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		host, _, _ := net.SplitHostPort(r.RemoteAddr)
		fmt.Fprintf(w, "seen from %s\n", host)
	}), ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { srv.Close() })
	// curl, as busybox 1.35's own TLS sends no signature_algorithms,
	// which Go's TLS servers (the API server's) refuse.
	c.must("run", "probe", "--image=curlimages/curl", "--restart=Never", "--command", "--", "sh", "-c",
		"curl -sk https://kubernetes.default.svc/version && curl -s http://"+lanIP+":8080/")
	phase, logs := c.waitPodDone("probe", 60*time.Second)
	if phase != "Succeeded" || !strings.Contains(logs, `"gitVersion": "v1.37.2",`) || !strings.Contains(logs, "seen from "+machineIP+"\n") {
		t.Errorf("a pod fetching the API's /version and a LAN server: %s\n%s", phase, logs)
	}

	// kube-system as kubeadm's shows it: the components' mirror pods, on
	// the node named after the host, and the coredns pods, Running.
	node := c.must("get", "nodes", "-o", "jsonpath={.items[0].metadata.name}")
	pods := c.must("get", "pods", "-n", "kube-system", "-o", "jsonpath={range .items[*]}{.metadata.name}={.status.phase} {end}")
	for _, want := range []string{"etcd-", "kube-apiserver-", "kube-controller-manager-", "kube-scheduler-", "kube-proxy-"} {
		if !strings.Contains(pods, want+node+"=Running ") {
			t.Errorf("kube-system lacks %s%s Running: %s", want, node, pods)
		}
	}
	if strings.Count(pods, "coredns-") != 2 || strings.Count(pods, "=Running ") != 7 {
		t.Errorf("kube-system pods: %s, want five components and two coredns, Running", pods)
	}

	// Cluster DNS: kubeadm's two coredns pods behind kube-dns; one goes,
	// another comes, and the cluster IP keeps answering meanwhile.
	names := strings.Fields(c.must("get", "pods", "-n", "kube-system", "-l", "k8s-app=kube-dns", "-o", "jsonpath={.items[*].metadata.name}"))
	if len(names) != 2 || !strings.HasPrefix(names[0], "coredns-") {
		t.Fatalf("coredns pods: %v", names)
	}
	r := resolver{nsPath: netns.Path(m.name), server: "10.96.0.10:53"}
	stopAsking := make(chan struct{})
	failures := make(chan string, 1000)
	asked := make(chan int)
	go func() {
		n := 0
		defer func() { asked <- n }()
		for {
			select {
			case <-stopAsking:
				return
			case <-time.After(50 * time.Millisecond):
			}
			n++
			resp, err := r.exchange(t, "udp", "kubernetes.default.svc.cluster.local.", dns.TypeA)
			if err != nil || resp.Rcode != dns.RcodeSuccess || len(resp.Answer) != 1 {
				failures <- fmt.Sprintf("%v %v", err, resp)
			}
		}
	}()
	c.must("delete", "pod", "-n", "kube-system", names[0], "--wait=true")
	eventually(t, 30*time.Second, func() string {
		now := strings.Fields(c.must("get", "pods", "-n", "kube-system", "-l", "k8s-app=kube-dns",
			"-o", `jsonpath={range .items[*]}{.metadata.name}={.status.conditions[?(@.type=="Ready")].status} {end}`))
		if len(now) != 2 || slices.ContainsFunc(now, func(p string) bool { return strings.HasPrefix(p, names[0]+"=") || !strings.HasSuffix(p, "=True") }) {
			return fmt.Sprintf("coredns pods after deleting %s: %v", names[0], now)
		}
		return ""
	})
	close(stopAsking)
	n := <-asked
	close(failures)
	for f := range failures {
		t.Errorf("a query to kube-dns failed while a coredns pod was replaced (of %d): %s", n, f)
	}
}

// TestFirstMinute: 20 times, a fresh `svcnet up`, a Deployment and its
// Service, and at once a pod that resolves the Service and fetches from
// it: no query is refused, no fetch fails.
func TestFirstMinute(t *testing.T) {
	for i := range 20 {
		t.Run(fmt.Sprint(i), func(t *testing.T) {
			t.Parallel() // each on a machine of its own
			c := startOnMachine(t, newMachine(t))
			c.must("create", "deployment", "web", "--image=nginx")
			c.must("expose", "deployment", "web", "--port", "80")
			c.must("rollout", "status", "deployment/web", "--timeout=60s")
			c.must("run", "fetch", "--image=busybox", "--restart=Never", "--", "sh", "-c",
				"nslookup web.default.svc.cluster.local && wget -qO- http://web/")
			if phase, logs := c.waitPodDone("fetch", 60*time.Second); phase != "Succeeded" || !strings.Contains(logs, "Welcome to nginx!") {
				t.Errorf("resolve and fetch the Service at once: %s\n%s", phase, logs)
				// The timeline: when web's pod turned Ready, when its
				// slice said so, when fetch started.
				t.Log(c.must("get", "pods", "-o", `jsonpath={range .items[*]}{.metadata.name} ready at {.status.conditions[?(@.type=="Ready")].lastTransitionTime}, started at {.status.startTime}{"\n"}{end}`))
				t.Log(c.must("get", "endpointslices", "-l", "kubernetes.io/service-name=web", "-o", "yaml"))
			}
		})
	}
}

// TestUpThreeNodes: `svcnet up --nodes 3` makes three Ready nodes on a
// bridge of its own; a Deployment of six spreads over them; every node and
// one pod on each reach every pod and the Service; stopping up leaves
// nothing behind.
func TestUpThreeNodes(t *testing.T) {
	t.Parallel()
	m := newMachine(t)
	prefix := fmt.Sprintf("e2e%d", os.Getpid())
	c := startOnMachine(t, m, "--nodes", "3", "--node-name", prefix)
	nodes := []string{prefix + "-1", prefix + "-2", prefix + "-3"}
	if got := c.must("get", "nodes", "-o", `jsonpath={range .items[*]}{.metadata.name}={.status.conditions[?(@.type=="Ready")].status}/{.status.addresses[?(@.type=="InternalIP")].address} {end}`); got != fmt.Sprintf("%s=True/10.250.0.2 %s=True/10.250.0.3 %s=True/10.250.0.4 ", nodes[0], nodes[1], nodes[2]) {
		t.Fatalf("nodes: %s", got)
	}
	c.must("create", "deployment", "web", "--image=nginx", "--replicas=6")
	c.must("expose", "deployment", "web", "--port", "80")
	c.must("rollout", "status", "deployment/web", "--timeout=60s")
	type pod struct{ name, ip, node string }
	var pods []pod
	for _, l := range strings.Fields(c.must("get", "pods", "-l", "app=web", "-o", "jsonpath={range .items[*]}{.metadata.name}/{.status.podIP}/{.spec.nodeName} {end}")) {
		f := strings.Split(l, "/")
		pods = append(pods, pod{f[0], f[1], f[2]})
	}
	onNode := map[string]string{} // a pod of each node
	for _, p := range pods {
		onNode[p.node] = p.name
	}
	if len(pods) != 6 || len(onNode) != 3 {
		t.Fatalf("web pods %v, want six spread over the three nodes", pods)
	}
	service := "http://" + c.jsonpath("service", "web", "{.spec.clusterIP}") + "/"
	for _, node := range nodes {
		for _, url := range append(mapSlice(pods, func(p pod) string { return "http://" + p.ip + "/" }), service) {
			eventually(t, 10*time.Second, func() string {
				if out, err := wget(t, c.seen(netns.Path(node)), url); err != nil || !strings.Contains(out, "Welcome to nginx!") {
					return fmt.Sprintf("GET %s from node %s: %v: %s", url, node, err, out)
				}
				return ""
			})
			name := onNode[node]
			if out, err := c.kubectl("", "exec", name, "--", "busybox", "wget", "-qO-", url); err != nil || !strings.Contains(out, "Welcome to nginx!") {
				t.Errorf("GET %s from pod %s on %s: %v: %s", url, name, node, err, out)
			}
		}
	}

	c.stop()
	for _, node := range nodes {
		if _, err := os.Stat(netns.Path(node)); !os.IsNotExist(err) {
			t.Errorf("the namespace of node %s is still there after up stopped (%v)", node, err)
		}
	}
	if out := strings.TrimSpace(c.execOn(m.name, "ip", "-o", "link")); strings.Count(out, "\n") != 1 || !strings.Contains(out, "lo:") || !strings.Contains(out, "eth0@") {
		t.Errorf("links left on the machine after up stopped:\n%s", out)
	}
	if out := c.execOn(m.name, "ip", "route"); out != fmt.Sprintf("default via %s dev eth0 \n198.18.0.0/24 dev eth0 proto kernel scope link src %s \n", lanIP, machineIP) {
		t.Errorf("routes left on the machine after up stopped:\n%s", out)
	}
	if out := c.execOn(m.name, "nft", "list", "tables"); out != "" {
		t.Errorf("nftables tables left on the machine after up stopped:\n%s", out)
	}
}

// execOn runs a command in the namespace ns and returns its standard
// output. What it says on standard error only goes into the failure: ip
// warns there about namespaces of other tests it cannot name ("Peer netns
// reference is invalid").
func (c *cluster) execOn(ns string, args ...string) string {
	c.t.Helper()
	cmd := exec.Command("ip", append([]string{"netns", "exec", ns}, args...)...)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		c.t.Fatalf("%s in %s: %v: %s%s", strings.Join(args, " "), ns, err, out, stderr.String())
	}
	return string(out)
}

func mapSlice[T, U any](in []T, f func(T) U) []U {
	out := make([]U, len(in))
	for i, v := range in {
		out[i] = f(v)
	}
	return out
}

// TestUpWithoutRoot: run by a user without root, up runs the control
// plane, says in one line why no node runs, and pending pods say it too.
func TestUpWithoutRoot(t *testing.T) {
	t.Parallel()
	needRoot(t) // to run up as another user
	dir, err := os.MkdirTemp("", "svcnet-e2e-nonroot")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chown(dir, nobody, nobody); err != nil {
		t.Fatal(err)
	}
	c := newCluster(t)
	c.dataDir = dir
	c.upCommand = []string{binary, "up", "--data-dir", c.dataDir, "--bind-address", c.apiAddr,
		"--etcd-client-url", c.etcdClient, "--etcd-peer-url", c.etcdPeer, "--metrics-bind-address", "0"}
	c.credential = &syscall.Credential{Uid: nobody, Gid: nobody}
	t.Cleanup(c.stop)
	c.start()
	const why = "svcnet up runs no node: running pods needs root (it lacks CAP_NET_ADMIN and CAP_SYS_ADMIN); run it as root, or with --nodes 0 for the control plane alone"
	if n := strings.Count(c.log.String(), why); n != 1 {
		t.Errorf("up said %d times why it runs no node, want once:\n%s", n, c.log)
	}
	c.must("run", "web", "--image=nginx")
	eventually(t, 20*time.Second, func() string {
		out := c.must("get", "events", "-o", `jsonpath={range .items[?(@.reason=="FailedScheduling")]}{.involvedObject.name}: {.message}{"\n"}{end}`)
		if !strings.Contains(out, "web: no nodes available to schedule pods: "+why+"\n") {
			return "FailedScheduling of the pending pod: " + out
		}
		return ""
	})
}

// nobody is the unprivileged user.
const nobody = 65534

// TestDNSOutlivesControlPlane: while `svcnet up` is down (killed), the
// coredns pods and the node's rules stay, so names keep resolving, from
// the node and from pods, until up is back and adopts them.
func TestDNSOutlivesControlPlane(t *testing.T) {
	t.Parallel()
	m := newMachine(t)
	c := startOnMachine(t, m)
	c.must("run", "asker", "--image=busybox", "--", "sh", "-c",
		"while true; do if nslookup kubernetes.default.svc.cluster.local >/dev/null 2>&1; then echo ok; else echo FAIL; fi; sleep 0.2; done")
	c.must("wait", "--for=condition=Ready", "pod/asker", "--timeout=60s")
	r := resolver{nsPath: netns.Path(m.name), server: "10.96.0.10:53"}
	ask := func() string {
		resp, err := r.exchange(t, "udp", "kubernetes.default.svc.cluster.local.", dns.TypeA)
		if err != nil || resp.Rcode != dns.RcodeSuccess || len(resp.Answer) != 1 {
			return fmt.Sprintf("%v %v", err, resp)
		}
		return ""
	}
	if f := ask(); f != "" {
		t.Fatalf("kube-dns before the kill: %s", f)
	}
	c.kill()
	// Ten seconds without a control plane, asked every 100ms.
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		if f := ask(); f != "" {
			t.Fatalf("kube-dns while up is down: %s", f)
		}
	}
	c.start()
	if f := ask(); f != "" {
		t.Errorf("kube-dns after up is back: %s", f)
	}
	logs := c.must("logs", "asker")
	if strings.Contains(logs, "FAIL") || strings.Count(logs, "ok") < 20 {
		t.Errorf("the pod's lookups across the outage:\n%s", logs)
	}
}
