package e2e

import (
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	discoveryv1 "k8s.io/api/discovery/v1"

	"github.com/svcnet/svcnet/internal/cni"
	"github.com/svcnet/svcnet/internal/netns"
)

// readyEndpoints waits until the Service's EndpointSlices list exactly n
// ready endpoints.
func (c *nodeCluster) readyEndpoints(svc string, n int) {
	c.t.Helper()
	eventually(c.t, 20*time.Second, func() string {
		out, err := c.kubectl("", "get", "endpointslices", "-l", "kubernetes.io/service-name="+svc, "-o", "json")
		var list discoveryv1.EndpointSliceList
		if err != nil || json.Unmarshal([]byte(out), &list) != nil {
			return fmt.Sprintf("list EndpointSlices: %v: %s", err, out)
		}
		var ready []string
		for _, s := range list.Items {
			for _, e := range s.Endpoints {
				if e.Conditions.Ready != nil && *e.Conditions.Ready {
					ready = append(ready, e.Addresses...)
				}
			}
		}
		if len(ready) != n {
			return fmt.Sprintf("Service %s has ready endpoints %v, want %d", svc, ready, n)
		}
		return ""
	})
}

// wget GETs url from the network namespace at nsPath and returns the
// response headers and body; it gives up after 5s.
func wget(t *testing.T, nsPath, url string) (string, error) {
	t.Helper()
	out, err := exec.Command("nsenter", "--net="+nsPath, "timeout", "5", "busybox", "wget", "-S", "-q", "-O-", url).CombinedOutput()
	return string(out), err
}

// podName is the X-Pod-Name header of a response from the built-in nginx.
func podName(resp string) string {
	for _, l := range strings.Split(resp, "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(l), "X-Pod-Name: "); ok {
			return strings.TrimSpace(v)
		}
	}
	return ""
}

// outside is a machine on the node's network: a network namespace joined
// to the node's by a veth pair of its own.
type outside struct {
	// name and ns are the namespace's name and path; ip its address.
	name, ns, ip string
	// nodeIP is the node's address on the link.
	nodeIP string
}

// outsideClient makes the i-th outside machine (i < 64), on its own /30
// of 172.31.254.0/24; the namespace and its link go when the test ends.
func outsideClient(t *testing.T, nodeNetns string, i int) outside {
	t.Helper()
	name := fmt.Sprintf("%s-ext%d", nodeNetns, i)
	o := outside{name: name, ns: netns.Path(name), nodeIP: fmt.Sprintf("172.31.254.%d", 4*i+1), ip: fmt.Sprintf("172.31.254.%d", 4*i+2)}
	uplink := fmt.Sprintf("uplink%d", i)
	newNetns(t, name) // removing it takes the veth pair along
	run(t, "ip", "-n", name, "link", "add", "ext0", "type", "veth", "peer", "name", uplink, "netns", nodeNetns)
	run(t, "ip", "-n", name, "addr", "add", o.ip+"/30", "dev", "ext0")
	run(t, "ip", "-n", name, "link", "set", "ext0", "up")
	run(t, "ip", "-n", name, "link", "set", "lo", "up")
	run(t, "ip", "-n", nodeNetns, "addr", "add", o.nodeIP+"/30", "dev", uplink)
	run(t, "ip", "-n", nodeNetns, "link", "set", uplink, "up")
	return o
}

// TestProxyLoadBalancerSourceRanges: a load balancer IP in the Service's
// status (where a cloud's controller puts it) is captured on the node, its
// loadBalancerSourceRanges admit the clients they list and drop the rest,
// and a change to the ranges takes effect; the NodePort is not filtered.
func TestProxyLoadBalancerSourceRanges(t *testing.T) {
	t.Parallel()
	c := startNodeCluster(t, "--disable", "ingress") // its Service would take the pool's address
	c.labeledPod("web", "web", "nginx", "    ports: [{containerPort: 80}]\n")
	allowed, denied := outsideClient(t, c.netns, 0), outsideClient(t, c.netns, 1)
	const lbIP = "192.0.2.10"
	for _, o := range []outside{allowed, denied} {
		run(t, "ip", "-n", o.name, "route", "add", lbIP+"/32", "via", o.nodeIP)
	}
	// The address comes from a pool of its own (the LoadBalancer IPAM).
	c.withStdin(fmt.Sprintf(`apiVersion: metallb.io/v1beta1
kind: IPAddressPool
metadata: {name: web, namespace: metallb-system}
spec:
  addresses: [%s/32]
---
apiVersion: v1
kind: Service
metadata: {name: web}
spec:
  type: LoadBalancer
  selector: {app: web}
  ports: [{port: 8080, targetPort: 80}]
  loadBalancerSourceRanges: [%s/32]
`, lbIP, allowed.ip), "apply", "-f", "-")
	eventually(t, 10*time.Second, func() string {
		if ip := c.jsonpath("service", "web", "{.status.loadBalancer.ingress[0].ip}"); ip != lbIP {
			return "service web has load balancer IP " + ip + ", want " + lbIP
		}
		return ""
	})
	c.waitReady("web", "True", 30*time.Second)
	c.readyEndpoints("web", 1)
	lbURL := "http://" + lbIP + ":8080/"
	answers := func(o outside, url string) {
		t.Helper()
		eventually(t, 10*time.Second, func() string {
			if out, err := wget(t, o.ns, url); err != nil || podName(out) != "web" {
				return fmt.Sprintf("GET %s from %s: %v: %s", url, o.ip, err, out)
			}
			return ""
		})
	}
	answers(allowed, lbURL)
	if out, err := wget(t, denied.ns, lbURL); err == nil {
		t.Errorf("%s, outside loadBalancerSourceRanges, got an answer from %s:\n%s", denied.ip, lbURL, out)
	}
	answers(denied, fmt.Sprintf("http://%s:%s/", denied.nodeIP, c.jsonpath("service", "web", "{.spec.ports[0].nodePort}")))

	c.must("patch", "service", "web", "--type=json", "-p", `[{"op":"add","path":"/spec/loadBalancerSourceRanges/-","value":"`+denied.ip+`/32"}]`)
	answers(denied, lbURL)
}

func TestProxyServiceTraffic(t *testing.T) {
	c := startNodeCluster(t)
	c.must("create", "deployment", "nginx", "--image=nginx", "--replicas=2", "--port=80")
	c.labeledPod("client", "client", "busybox", "    command: [sleep, \"3600\"]\n")
	c.withStdin(seedManifest, "apply", "-f", "-")
	c.must("rollout", "status", "deployment/nginx", "--timeout=60s")
	c.waitReady("client", "True", 30*time.Second)
	c.readyEndpoints("nginx", 2)
	pods := strings.Fields(c.must("get", "pods", "-l", "app=nginx", "-o", "jsonpath={.items[*].metadata.name}"))
	if len(pods) != 2 {
		t.Fatalf("Deployment nginx has pods %v, want 2", pods)
	}
	podA, podB := pods[0], pods[1]
	clusterIP := c.jsonpath("service", "nginx", "{.spec.clusterIP}")
	url := "http://" + clusterIP + ":8080/"
	client := c.netnsOf("client")

	// The first answer may wait for the sync; then 100 requests all succeed
	// and both pods answer.
	eventually(t, 10*time.Second, func() string {
		if out, err := wget(t, client, url); err != nil {
			return fmt.Sprintf("GET %s: %v: %s", url, err, out)
		}
		return ""
	})
	seen := map[string]int{}
	for i := 0; i < 100; i++ {
		out, err := wget(t, client, url)
		if err != nil || !strings.Contains(out, "Welcome to nginx!") {
			t.Fatalf("request %d to %s: %v\n%s", i, url, err, out)
		}
		seen[podName(out)]++
	}
	if seen[podA] == 0 || seen[podB] == 0 || len(seen) != 2 {
		t.Errorf("100 requests were answered by %v, want both %s and %s", seen, podA, podB)
	}
	// From the node itself: its bare namespace had no route for the
	// Service range until the agent gave it one.
	nodeNS := netns.Path(c.netns)
	if out, err := wget(t, nodeNS, url); err != nil || !strings.HasPrefix(podName(out), "nginx-") {
		t.Errorf("GET %s from the node: %v\n%s", url, err, out)
	}

	// NodePort, from a machine outside the node.
	nodePort := c.jsonpath("service", "nginx", "{.spec.ports[0].nodePort}")
	ext := outsideClient(t, c.netns, 0)
	if out, err := wget(t, ext.ns, fmt.Sprintf("http://%s:%s/", ext.nodeIP, nodePort)); err != nil || !strings.Contains(out, "Welcome to nginx!") {
		t.Errorf("GET the NodePort %s:%s from outside: %v\n%s", ext.nodeIP, nodePort, err, out)
	}
	// The ClusterIP is not reachable on the NodePort's port and vice versa:
	// nothing else is captured.
	if out, err := wget(t, ext.ns, fmt.Sprintf("http://%s:8080/", ext.nodeIP)); err == nil {
		t.Errorf("the node answered on port 8080:\n%s", out)
	}

	// Hairpin: a pod reaches its own Service, and gets its own answers.
	self := 0
	for i := 0; i < 30 && self == 0; i++ {
		out, err := wget(t, c.netnsOf(podA), url)
		if err != nil {
			t.Fatalf("GET %s from %s: %v\n%s", url, podA, err, out)
		}
		if podName(out) == podA {
			self++
		}
	}
	if self == 0 {
		t.Errorf("%s never got an answer from itself through its Service", podA)
	}

	// Session affinity ClientIP: 50 requests, one pod.
	c.must("patch", "service", "nginx", "-p", `{"spec":{"sessionAffinity":"ClientIP"}}`)
	eventually(t, 10*time.Second, func() string {
		out := c.execIn(t, "nft", "list", "ruleset")
		if !strings.Contains(out, "affinity-") {
			return "no affinity sets yet"
		}
		return ""
	})
	affine := map[string]int{}
	for i := 0; i < 50; i++ {
		out, err := wget(t, client, url)
		if err != nil {
			t.Fatalf("request %d with affinity: %v\n%s", i, err, out)
		}
		affine[podName(out)]++
	}
	if len(affine) != 1 {
		t.Errorf("with sessionAffinity ClientIP, 50 requests were answered by %v", affine)
	}

	// Scale to 0: connecting is refused at once, not after a timeout.
	c.must("scale", "deployment", "nginx", "--replicas=0")
	c.readyEndpoints("nginx", 0)
	for _, from := range []string{client, nodeNS} {
		eventually(t, 5*time.Second, func() string {
			start := time.Now()
			out, err := wget(t, from, url)
			if took := time.Since(start); err == nil || !strings.Contains(out, "Connection refused") || took > time.Second {
				return fmt.Sprintf("GET from %s without endpoints after %s: %v: %s", from, took, err, out)
			}
			return ""
		})
	}

	// Scale back: answers once the endpoint is ready (how soon is the
	// proxy benchmark's to measure, not a timed test's).
	c.must("scale", "deployment", "nginx", "--replicas=1")
	c.readyEndpoints("nginx", 1)
	eventually(t, 10*time.Second, func() string {
		if out, err := wget(t, client, url); err != nil || !strings.HasPrefix(podName(out), "nginx-") {
			return fmt.Sprintf("GET after scaling back: %v: %s", err, out)
		}
		return ""
	})

	// Stopping the cluster takes the proxy's and the pod network's tables
	// and the bridge (with the routes through it) with it.
	c.stop()
	if out := c.execIn(t, "nft", "list", "ruleset"); strings.TrimSpace(out) != "" {
		t.Errorf("after svcnet up stopped, the node's ruleset still has our tables:\n%s", out)
	}
	if out := c.execIn(t, "ip", "-o", "link"); strings.Contains(out, cni.BridgeName) {
		t.Errorf("after svcnet up stopped, the node still has its bridge:\n%s", out)
	}
}

// proxyTable is how our table shows in `nft list ruleset`.
const proxyTable = "table ip svcnet {"

// execIn runs a host command in the node's network namespace.
func (c *nodeCluster) execIn(t *testing.T, args ...string) string {
	t.Helper()
	out, err := exec.Command("ip", append([]string{"netns", "exec", c.netns}, args...)...).CombinedOutput()
	if err != nil {
		t.Fatalf("%s in the node's namespace: %v: %s", strings.Join(args, " "), err, out)
	}
	return string(out)
}

// udpRequest sends msg from local port lport inside the namespace at
// nsPath to addr and returns the answer.
func udpRequest(t *testing.T, nsPath string, lport int, addr, msg string) (string, error) {
	t.Helper()
	var reply string
	err := netns.Do(nsPath, func() error {
		raddr, err := net.ResolveUDPAddr("udp", addr)
		if err != nil {
			return err
		}
		conn, err := net.DialUDP("udp", &net.UDPAddr{Port: lport}, raddr)
		if err != nil {
			return err
		}
		defer conn.Close()
		_ = conn.SetDeadline(time.Now().Add(time.Second))
		if _, err := conn.Write([]byte(msg)); err != nil {
			return err
		}
		buf := make([]byte, 512)
		n, err := conn.Read(buf)
		reply = string(buf[:n])
		return err
	})
	return reply, err
}

func TestProxyUDPEndpointReplaced(t *testing.T) {
	t.Parallel()
	c := startNodeCluster(t)
	udpServer := "    args: [netexec, --http-port=8080, --udp-port=8081]\n"
	c.labeledPod("udp-a", "udp", "registry.k8s.io/e2e-test-images/agnhost:2.47", udpServer)
	c.labeledPod("client", "client", "busybox", "    command: [sleep, \"3600\"]\n")
	c.withStdin(`apiVersion: v1
kind: Service
metadata: {name: udp}
spec:
  selector: {app: udp}
  ports: [{name: dns, port: 53, protocol: UDP, targetPort: 8081}]
`, "apply", "-f", "-")
	c.waitReady("udp-a", "True", 30*time.Second)
	c.waitReady("client", "True", 30*time.Second)
	c.readyEndpoints("udp", 1)
	addr := c.jsonpath("service", "udp", "{.spec.clusterIP}") + ":53"
	client := c.netnsOf("client")
	const lport = 40053
	eventually(t, 10*time.Second, func() string {
		if got, err := udpRequest(t, client, lport, addr, "hostname"); err != nil || got != "udp-a" {
			return fmt.Sprintf("UDP %s answered %q, %v; want udp-a", addr, got, err)
		}
		return ""
	})

	// Replace the endpoint by a pod with another address (started before
	// the old one goes, outside the Service); the client keeps its source
	// port, and reaches the new pod: its flow to the old one was cleared.
	c.labeledPod("udp-b", "standby", "registry.k8s.io/e2e-test-images/agnhost:2.47", udpServer)
	c.waitReady("udp-b", "True", 30*time.Second)
	if a, b := c.jsonpath("pod", "udp-a", "{.status.podIP}"), c.jsonpath("pod", "udp-b", "{.status.podIP}"); a == b {
		t.Fatalf("both pods have address %s", a)
	}
	c.must("delete", "pod", "udp-a")
	c.must("label", "pod", "udp-b", "app=udp", "--overwrite")
	c.readyEndpoints("udp", 1)
	eventually(t, 5*time.Second, func() string {
		if got, err := udpRequest(t, client, lport, addr, "hostname"); err != nil || got != "udp-b" {
			return fmt.Sprintf("UDP %s from port %d answered %q, %v; want udp-b", addr, lport, got, err)
		}
		return ""
	})
}

func TestProxyNodeCleanup(t *testing.T) {
	t.Parallel()
	needRoot(t)
	ns := fmt.Sprintf("svcnet-e2e-%d-%d", os.Getpid(), netnsSeq.Add(1))
	if out, err := exec.Command("ip", "netns", "add", ns).CombinedOutput(); err != nil {
		t.Fatalf("ip netns add: %v: %s", err, out)
	}
	t.Cleanup(func() { removeNetns(t, ns) })
	nft := func(args ...string) string {
		out, err := exec.Command("ip", append([]string{"netns", "exec", ns, "nft"}, args...)...).CombinedOutput()
		if err != nil {
			t.Fatalf("nft %v: %v: %s", args, err, out)
		}
		return string(out)
	}
	// What a node agent killed with -9 leaves, and someone else's table.
	nft("add", "table", "ip", "svcnet")
	nft("add", "table", "ip6", "svcnet")
	nft("add", "table", "ip", "other")
	if out, err := exec.Command(binary, "node", "--cleanup", "--netns", ns).CombinedOutput(); err != nil {
		t.Fatalf("svcnet node --cleanup: %v: %s", err, out)
	}
	out := nft("list", "ruleset")
	if strings.Contains(out, "svcnet") || !strings.Contains(out, "table ip other") {
		t.Errorf("after svcnet node --cleanup the ruleset is:\n%s", out)
	}
}

// lan is a network namespace holding a bridge that joins the namespaces
// attached to it on 172.31.253.0/24: the machines' shared network.
type lan struct {
	t     *testing.T
	ns    string
	ports int
}

func run(t *testing.T, args ...string) {
	t.Helper()
	if out, err := exec.Command(args[0], args[1:]...).CombinedOutput(); err != nil {
		t.Fatalf("%s: %v: %s", strings.Join(args, " "), err, out)
	}
}

// newLAN makes the lan namespace; removing it at the test's end takes
// every veth pair into it along.
func newLAN(t *testing.T, prefix string) *lan {
	l := &lan{t: t, ns: prefix + "-lan"}
	run(t, "ip", "netns", "add", l.ns)
	t.Cleanup(func() { removeNetns(t, l.ns) })
	run(t, "ip", "-n", l.ns, "link", "add", "br0", "type", "bridge")
	run(t, "ip", "-n", l.ns, "link", "set", "br0", "up")
	return l
}

// attach plugs namespace ns into the lan with address ip (as lan0).
func (l *lan) attach(ns, ip string) {
	l.ports++
	port := fmt.Sprintf("port%d", l.ports)
	run(l.t, "ip", "-n", l.ns, "link", "add", port, "type", "veth", "peer", "name", "lan0", "netns", ns)
	run(l.t, "ip", "-n", l.ns, "link", "set", port, "master", "br0", "up")
	run(l.t, "ip", "-n", ns, "addr", "add", ip+"/24", "dev", "lan0")
	run(l.t, "ip", "-n", ns, "link", "set", "lan0", "up")
	run(l.t, "ip", "-n", ns, "link", "set", "lo", "up")
}

// newNetns makes a network namespace removed when the test ends.
func newNetns(t *testing.T, name string) string {
	run(t, "ip", "netns", "add", name)
	t.Cleanup(func() { removeNetns(t, name) })
	return name
}

// startTwoNodes starts `svcnet up` with its node in one namespace and a
// second `svcnet node` in another, both on a lan with an outside client.
// It returns the cluster, the client's namespace path and the nodes' IPs.
func startTwoNodes(t *testing.T) (*nodeCluster, string, [2]string) {
	t.Helper()
	ips := [2]string{"172.31.253.1", "172.31.253.2"}
	c, clients, _ := startTwoNodesWith(t, twoNodes{ips: ips, clients: []string{"172.31.253.100"}, second: nodeName + "-2"})
	return c, clients[0], ips
}

// twoNodes lays out the cluster of startTwoNodesWith.
type twoNodes struct {
	ips     [2]string // the nodes' addresses on the lan (a /24)
	clients []string  // the outside clients' addresses on it
	second  string    // the second node's name
	upArgs  []string  // more flags of svcnet up
}

// secondNode is the second node's agent, a process of its own.
type secondNode struct {
	name  string // the Node's
	netns string // the name of its network namespace
	cmd   *exec.Cmd
	log   strings.Builder
	once  sync.Once
	err   error
}

// stop ends the agent with SIGTERM (once) and waits for it.
func (n *secondNode) stop() error {
	n.once.Do(func() {
		_ = n.cmd.Process.Signal(syscall.SIGTERM)
		n.err = n.cmd.Wait()
	})
	return n.err
}

// startTwoNodesWith starts `svcnet up` with its node (nodeName) in one
// namespace and a second `svcnet node` in another, both on a lan with
// outside clients, laid out as o says. It returns the cluster, the
// clients' namespace paths and the second node.
func startTwoNodesWith(t *testing.T, o twoNodes) (*nodeCluster, []string, *secondNode) {
	t.Helper()
	needRoot(t)
	prefix := fmt.Sprintf("svcnet-e2e-%d-%d", os.Getpid(), netnsSeq.Add(1))
	l := newLAN(t, prefix)
	ns1, ns2 := newNetns(t, prefix+"-n1"), newNetns(t, prefix+"-n2")
	l.attach(ns1, o.ips[0])
	l.attach(ns2, o.ips[1])
	var clients []string
	for i, ip := range o.clients {
		name := prefix + "-client"
		if i > 0 {
			name += strconv.Itoa(i + 1)
		}
		l.attach(newNetns(t, name), ip)
		clients = append(clients, netns.Path(name))
	}

	c := &nodeCluster{netns: ns1}
	c.cluster = startCluster(t, append([]string{"--nodes", "1", "--netns", ns1, "--node-name", nodeName, "--node-ip", o.ips[0], "--metrics-bind-address", "0",
		"--kubelet-address", fmt.Sprintf("127.0.0.1:%d", freePort(t))}, o.upArgs...)...)
	t.Cleanup(func() {
		c.stop()
		reapNode(t, c.dataDir)
	})
	dir2 := t.TempDir()
	n2 := &secondNode{name: o.second, netns: ns2, cmd: exec.Command(binary, "node", "--kubeconfig", c.kubeconfig(), "--data-dir", dir2, "--netns", ns2,
		"--node-name", o.second, "--node-ip", o.ips[1], "--kubelet-address", fmt.Sprintf("127.0.0.1:%d", freePort(t)),
		"--stop-pods-on-exit")}
	n2.cmd.Stdout, n2.cmd.Stderr = &n2.log, &n2.log
	n2.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := n2.cmd.Start(); err != nil {
		t.Fatalf("start the second node: %v", err)
	}
	t.Cleanup(func() {
		if err := n2.stop(); err != nil {
			t.Errorf("second node exited with %v; log:\n%s", err, n2.log.String())
		}
		reapNode(t, dir2)
	})
	for _, n := range []string{nodeName, o.second} {
		eventually(t, 30*time.Second, func() string {
			out, _ := c.kubectl("", "get", "node", n, "-o", `jsonpath={.status.conditions[?(@.type=="Ready")].status}`)
			if out != "True" {
				return "node " + n + " not Ready: " + out
			}
			return ""
		})
	}
	return c, clients, n2
}

func TestProxyExternalTrafficPolicyTwoNodes(t *testing.T) {
	t.Parallel()
	c, client, ips := startTwoNodes(t)
	c.labeledPod("web", "web", "nginx", "    ports: [{containerPort: 80}]\n")
	c.withStdin(`apiVersion: v1
kind: Service
metadata: {name: web}
spec:
  type: LoadBalancer
  externalTrafficPolicy: Local
  selector: {app: web}
  ports: [{name: http, port: 8080, targetPort: 80}]
`, "apply", "-f", "-")
	c.waitReady("web", "True", 30*time.Second)
	c.readyEndpoints("web", 1)
	nodePort := c.jsonpath("service", "web", "{.spec.ports[0].nodePort}")
	healthPort := c.jsonpath("service", "web", "{.spec.healthCheckNodePort}")

	// Local: the node with the endpoint answers and the pod sees the
	// client's own address; the other node does not answer.
	eventually(t, 10*time.Second, func() string {
		if out, err := wget(t, client, fmt.Sprintf("http://%s:%s/", ips[0], nodePort)); err != nil || podName(out) != "web" {
			return fmt.Sprintf("GET the NodePort on the endpoint's node: %v: %s", err, out)
		}
		return ""
	})
	if logs := c.must("logs", "web"); !strings.Contains(logs, "172.31.253.100 - - [") {
		t.Errorf("the pod did not see the client's address 172.31.253.100:\n%s", logs)
	}
	if out, err := wget(t, client, fmt.Sprintf("http://%s:%s/", ips[1], nodePort)); err == nil {
		t.Errorf("the node without a local endpoint answered on the NodePort:\n%s", out)
	}
	// The health check node port tells a load balancer which node to use
	// (busybox wget shows no body with a 503).
	if out, _ := wget(t, client, fmt.Sprintf("http://%s:%s/", ips[0], healthPort)); !strings.Contains(out, "HTTP/1.1 200 OK") ||
		!strings.Contains(out, `"name": "web"`) || !strings.Contains(out, `"localEndpoints": 1`) {
		t.Errorf("health check on the endpoint's node:\n%s", out)
	}
	if out, _ := wget(t, client, fmt.Sprintf("http://%s:%s/", ips[1], healthPort)); !strings.Contains(out, "HTTP/1.1 503 Service Unavailable") {
		t.Errorf("health check on the other node:\n%s", out)
	}

	// Cluster: both nodes answer.
	c.must("patch", "service", "web", "-p", `{"spec":{"externalTrafficPolicy":"Cluster"}}`)
	for _, ip := range ips {
		eventually(t, 10*time.Second, func() string {
			if out, err := wget(t, client, fmt.Sprintf("http://%s:%s/", ip, nodePort)); err != nil || podName(out) != "web" {
				return fmt.Sprintf("GET the NodePort on %s with policy Cluster: %v: %s", ip, err, out)
			}
			return ""
		})
	}
}

// TestProxyOutOfWindowSegment plays upstream's conntrack regression test
// for issue 74839 with its image: a server behind a Service sends, on
// each connection, a segment out of the TCP window from its own address
// (a raw socket, NET_RAW). Were it to pass conntrack un-NATed, the client
// would answer it with a reset that kills the connection, which the
// server reports. (On the kernel this was written on, the segment does not
// reach the client un-NATed even without a rule dropping invalid packets,
// which upstream's nftables mode does not have either; the proxy has
// none.)
func TestProxyOutOfWindowSegment(t *testing.T) {
	t.Parallel()
	c := startNodeCluster(t)
	c.labeledPod("boom-server", "boom", "registry.k8s.io/e2e-test-images/regression-issue-74839:1.5", `    ports: [{containerPort: 9000}]
    env:
    - {name: POD_IP, valueFrom: {fieldRef: {fieldPath: status.podIP}}}
    - {name: POD_IPS, valueFrom: {fieldRef: {fieldPath: status.podIPs}}}
    securityContext: {capabilities: {add: [NET_RAW]}}
`)
	c.withStdin(`apiVersion: v1
kind: Service
metadata: {name: boom-server}
spec:
  selector: {app: boom}
  ports: [{port: 9000}]
`, "apply", "-f", "-")
	c.waitReady("boom-server", "True", 30*time.Second)
	c.readyEndpoints("boom-server", 1)
	c.labeledPod("startup-script", "client", "busybox", "    command: [sh, -c, 'while true; do sleep 1; nc -w 3 boom-server 9000 & done']\n")
	// Five connections, each with its bad segment, and no reset.
	eventually(t, 60*time.Second, func() string {
		logs, _ := c.kubectl("", "logs", "boom-server")
		if strings.Contains(logs, "ERROR") {
			t.Fatalf("the client reset a connection on the out-of-window segment:\n%s", logs)
		}
		if n := strings.Count(logs, "boom packet injected"); n < 5 {
			return fmt.Sprintf("%d bad segments sent so far:\n%s", n, logs)
		}
		return ""
	})
}

// TestProxyHealthAndMetricsPorts: the node's proxy answers on kube-proxy's
// ports in the node's namespace, as upstream's "should check kube-proxy
// urls" reads them from a hostNetwork pod: /healthz on every address at
// 10256 with kube-proxy's JSON, /proxyMode and /metrics on loopback at
// 10249.
func TestProxyHealthAndMetricsPorts(t *testing.T) {
	t.Parallel()
	c := startNodeCluster(t)
	ns := netns.Path(c.netns)
	nodeIP := c.jsonpath("node", nodeName, `{.status.addresses[?(@.type=="InternalIP")].address}`)
	eventually(t, 30*time.Second, func() string {
		out, err := inNetns(t, ns, "wget", "-q", "-S", "-O-", "http://"+nodeIP+":10256/healthz")
		if err != nil || !strings.Contains(out, "200 OK") || !strings.Contains(out, `"lastUpdated":`) || !strings.Contains(out, `"healthy":true`) {
			return fmt.Sprintf("GET %s:10256/healthz: %v\n%s", nodeIP, err, out)
		}
		return ""
	})
	if out, err := inNetns(t, ns, "wget", "-q", "-O-", "http://127.0.0.1:10249/proxyMode"); err != nil || out != "nftables" {
		t.Errorf("GET 127.0.0.1:10249/proxyMode: %v %q, want nftables", err, out)
	}
	if out, err := inNetns(t, ns, "wget", "-q", "-O-", "http://127.0.0.1:10249/metrics"); err != nil || !strings.Contains(out, "kubeproxy_sync_proxy_rules_duration_seconds") {
		t.Errorf("GET 127.0.0.1:10249/metrics: %v\n%.500s", err, out)
	}
}
