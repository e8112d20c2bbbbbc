package e2e

import (
	"bytes"
	"crypto/sha256"
	"fmt"
	"os"
	"os/exec"
	"regexp"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/svcnet/svcnet/internal/netns"
)

// speakerGrace is the node-monitor grace period of the speaker test's
// cluster: a node silent for longer is NotReady, and its IPs move.
const speakerGrace = 20 * time.Second

// loadBalancerIP waits for the address the IPAM controller gives svc
// from the pool and returns it.
func loadBalancerIP(c *nodeCluster, svc string) string {
	c.t.Helper()
	var ip string
	eventually(c.t, 30*time.Second, func() string {
		if ip = c.jsonpath("service", svc, "{.status.loadBalancer.ingress[0].ip}"); ip == "" {
			return "service " + svc + " has no load balancer address"
		}
		return ""
	})
	return ip
}

// winningName is a name for a second node that MetalLB's order (sha256
// of "node#ip", smallest first) puts before nodeName for ip.
func winningName(ip string) string {
	hash := func(n string) []byte { h := sha256.Sum256([]byte(n + "#" + ip)); return h[:] }
	for i := 2; ; i++ {
		if n := fmt.Sprintf("%s-%d", nodeName, i); bytes.Compare(hash(n), hash(nodeName)) < 0 {
			return n
		}
	}
}

// lanMAC is the MAC of lan0 in namespace ns.
func lanMAC(t *testing.T, ns string) string {
	t.Helper()
	out, err := exec.Command("ip", "-n", ns, "-br", "link", "show", "lan0").CombinedOutput()
	f := strings.Fields(string(out))
	if err != nil || len(f) < 3 {
		t.Fatalf("lan0 of %s: %v: %s", ns, err, out)
	}
	return f[2]
}

// neighbour is the MAC the client's neighbour table holds for ip.
func neighbour(t *testing.T, clientNS, ip string) string {
	out, _ := exec.Command("nsenter", "--net="+clientNS, "ip", "neigh", "show", ip).CombinedOutput()
	if f := strings.Fields(string(out)); len(f) >= 5 && f[3] == "lladdr" {
		return f[4]
	}
	return ""
}

var arpReply = regexp.MustCompile(`reply from [0-9.]+ \[([0-9a-fA-F:]+)\]`)

// arpAnswers are the MACs that answer the client's ARP requests for ip
// (three requests).
func arpAnswers(clientNS, ip string) []string {
	out, _ := exec.Command("nsenter", "--net="+clientNS, "busybox", "arping", "-c", "3", "-w", "3", "-I", "lan0", ip).CombinedOutput()
	var macs []string
	for _, m := range arpReply.FindAllStringSubmatch(string(out), -1) {
		if mac := strings.ToLower(m[1]); !slices.Contains(macs, mac) {
			macs = append(macs, mac)
		}
	}
	return macs
}

// webPod applies an nginx pod labelled app=web on node.
func (c *nodeCluster) webPod(name, node string) {
	c.t.Helper()
	c.withStdin(fmt.Sprintf(`apiVersion: v1
kind: Pod
metadata: {name: %s, labels: {app: web}}
spec:
  nodeName: %s
  terminationGracePeriodSeconds: 5
  containers:
  - name: main
    image: nginx
    ports: [{containerPort: 80}]
`, name, node), "apply", "-f", "-")
}

// announced waits until the client reaches ip by HTTP, answered by a pod
// in pods, with its neighbour entry for ip at mac and only mac answering
// its ARP requests.
func announced(t *testing.T, clientNS, ip, mac string, pods ...string) {
	t.Helper()
	eventually(t, 30*time.Second, func() string {
		out, err := wget(t, clientNS, "http://"+ip+"/")
		if err != nil || !slices.Contains(pods, podName(out)) {
			return fmt.Sprintf("GET http://%s/ from the client: %v: %s", ip, err, out)
		}
		if got := neighbour(t, clientNS, ip); got != mac {
			return fmt.Sprintf("client's neighbour entry for %s: %q, want %s", ip, got, mac)
		}
		if got := arpAnswers(clientNS, ip); !slices.Equal(got, []string{mac}) {
			return fmt.Sprintf("ARP answers for %s: %v, want only %s", ip, got, mac)
		}
		return ""
	})
}

// nodeAssigned waits for the Service's nodeAssigned event from node, as
// MetalLB's speaker writes it.
func nodeAssigned(c *nodeCluster, svc, node string) {
	c.t.Helper()
	want := fmt.Sprintf(`Service/%s Normal nodeAssigned metallb-speaker announcing from node %q with protocol "layer2"`, svc, node)
	eventually(c.t, 10*time.Second, func() string {
		out, _ := c.kubectl("", "get", "events", "-o",
			`jsonpath={range .items[*]}{.involvedObject.kind}/{.involvedObject.name} {.type} {.reason} {.source.component} {.message}{"\n"}{end}`)
		if !strings.Contains(out, want) {
			return fmt.Sprintf("events of service %s:\n%s\nwant %s", svc, out, want)
		}
		return ""
	})
}

// l2Status waits until the Service's ServiceL2Status names node.
func l2Status(c *nodeCluster, svc, node string) {
	c.t.Helper()
	eventually(c.t, 10*time.Second, func() string {
		out, _ := c.kubectl("", "get", "servicel2statuses", "-n", "metallb-system", "-l", "metallb.io/service-name="+svc,
			"-o", `jsonpath={range .items[*]}{.status.node} {.status.serviceNamespace}/{.status.serviceName}{"\n"}{end}`)
		if want := node + " default/" + svc + "\n"; out != want {
			return fmt.Sprintf("ServiceL2Statuses of %s: %q, want %q", svc, out, want)
		}
		return ""
	})
}

// TestSpeakerLayer2 is issue 17's layer 2 acceptance on a 2-node
// cluster with clients on the nodes' LAN, 10.0.0.0/24, and the pool
// 10.0.0.200-10.0.0.215 of docs/examples/layer2.yaml: the Service's IP is
// announced by ARP (no route on the client), from the node with the local
// endpoint under externalTrafficPolicy Local (moving with it), by
// MetalLB's hash order under Cluster (the second node, whose name is
// chosen so), and from the other node once the announcing one's agent
// stops.
func TestSpeakerLayer2(t *testing.T) {
	const ip = "10.0.0.200"
	c, clients, n2 := startTwoNodesWith(t, twoNodes{ips: [2]string{"10.0.0.1", "10.0.0.2"}, clients: []string{"10.0.0.100", "10.0.0.101"},
		second: winningName(ip), upArgs: []string{"--disable", "ingress", "--node-monitor-period=1s", "--node-monitor-grace-period=" + speakerGrace.String()}})
	client, other := clients[0], clients[1]
	mac1, mac2 := lanMAC(t, c.netns), lanMAC(t, n2.netns)
	// No route by hand: the client has its LAN's alone.
	if out, err := exec.Command("nsenter", "--net="+client, "ip", "route").CombinedOutput(); err != nil ||
		strings.Count(string(out), "\n") != 1 || !strings.HasPrefix(string(out), "10.0.0.0/24 dev lan0 ") {
		t.Fatalf("the client's routes: %v:\n%s\nwant only its LAN's", err, out)
	}

	c.must("apply", "-f", "../../docs/examples/layer2.yaml")
	c.webPod("web-1", nodeName)
	c.withStdin(`apiVersion: v1
kind: Service
metadata: {name: web}
spec:
  type: LoadBalancer
  externalTrafficPolicy: Local
  selector: {app: web}
  ports: [{name: http, port: 80, targetPort: 80}]
`, "apply", "-f", "-")
	c.waitReady("web-1", "True", 60*time.Second)
	c.readyEndpoints("web", 1)
	if got := loadBalancerIP(c, "web"); got != ip {
		t.Fatalf("load balancer IP %s, want %s", got, ip)
	}

	// Local: the node with the endpoint announces, although the hash
	// prefers the other; the pod sees the client's own address.
	announced(t, client, ip, mac1, "web-1")
	nodeAssigned(c, "web", nodeName)
	l2Status(c, "web", nodeName)
	if logs := c.must("logs", "web-1"); !strings.Contains(logs, "10.0.0.100 - - [") {
		t.Errorf("the pod did not see the client's address 10.0.0.100:\n%s", logs)
	}

	// loadBalancerSourceRanges: the client's /32 is admitted, another
	// client on the LAN is not.
	c.must("patch", "service", "web", "-p", `{"spec":{"loadBalancerSourceRanges":["10.0.0.100/32"]}}`)
	eventually(t, 10*time.Second, func() string {
		if out, err := wget(t, other, "http://"+ip+"/"); err == nil {
			return "the other client (10.0.0.101) got through loadBalancerSourceRanges [10.0.0.100/32]:\n" + out
		}
		return ""
	})
	if out, err := wget(t, client, "http://"+ip+"/"); err != nil || podName(out) != "web-1" {
		t.Errorf("the admitted client: %v: %s", err, out)
	}

	// Local, the endpoint moves: the first node loses its endpoint and the
	// second, which now has one, takes the IP over with gratuitous ARP.
	c.webPod("web-2", n2.name)
	c.waitReady("web-2", "True", 60*time.Second)
	c.must("delete", "pod", "web-1")
	c.readyEndpoints("web", 1)
	eventually(t, 10*time.Second, func() string {
		if got := neighbour(t, client, ip); got != mac2 {
			return fmt.Sprintf("client's neighbour entry for %s after the takeover: %q, want the second node's %s", ip, got, mac2)
		}
		return ""
	})
	nodeAssigned(c, "web", n2.name)
	announced(t, client, ip, mac2, "web-2")
	l2Status(c, "web", n2.name)

	// Cluster: every Ready node may announce, and MetalLB's order keeps
	// the second node although the first has an endpoint again.
	c.webPod("web-1", nodeName)
	c.waitReady("web-1", "True", 60*time.Second)
	c.readyEndpoints("web", 2)
	c.must("patch", "service", "web", "--type=json", "-p",
		`[{"op":"replace","path":"/spec/externalTrafficPolicy","value":"Cluster"},{"op":"remove","path":"/spec/loadBalancerSourceRanges"}]`)
	announced(t, client, ip, mac2, "web-1", "web-2")
	l2Status(c, "web", n2.name)

	// Failover: the second node's agent stops; once it is NotReady the
	// first node announces, its gratuitous ARP moves the client's entry,
	// and the client reaches the pod left.
	stopped := time.Now()
	if err := n2.stop(); err != nil {
		t.Fatalf("stop the second node: %v\n%s", err, n2.log.String())
	}
	eventually(t, speakerGrace+30*time.Second, func() string {
		if got := neighbour(t, client, ip); got != mac1 {
			return fmt.Sprintf("client's neighbour entry for %s after the failover: %q, want the first node's %s", ip, got, mac1)
		}
		return ""
	})
	// The node was last heard from at most a heartbeat (10s) before it
	// stopped; allow the monitor period and some slack beyond.
	if took := time.Since(stopped); took > speakerGrace+15*time.Second {
		t.Errorf("failover took %s, grace period %s", took, speakerGrace)
	}
	announced(t, client, ip, mac1, "web-1")
	l2Status(c, "web", nodeName)
}

// TestSpeakerAlone: `svcnet speaker` on its own announces for its node, a
// Node registered by hand with an endpoint of a selector-less Service,
// and stops answering when it stops.
func TestSpeakerAlone(t *testing.T) {
	t.Parallel()
	needRoot(t)
	const ip, node = "10.0.0.200", "speaker-node"
	prefix := fmt.Sprintf("svcnet-e2e-%d-%d", os.Getpid(), netnsSeq.Add(1))
	l := newLAN(t, prefix)
	ns, client := newNetns(t, prefix+"-node"), newNetns(t, prefix+"-client")
	l.attach(ns, "10.0.0.1")
	l.attach(client, "10.0.0.100")
	client = netns.Path(client)
	mac := lanMAC(t, ns)
	c := &nodeCluster{cluster: startCluster(t), netns: ns}

	c.must("apply", "-f", "../../docs/examples/layer2.yaml")
	c.withStdin(`apiVersion: v1
kind: Node
metadata: {name: `+node+`}
---
apiVersion: v1
kind: Service
metadata: {name: web}
spec:
  type: LoadBalancer
  ports: [{port: 80}]
---
apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata: {name: web-1, labels: {kubernetes.io/service-name: web}}
addressType: IPv4
ports: [{port: 80}]
endpoints:
- addresses: [10.244.9.9]
  nodeName: `+node+`
  conditions: {ready: true}
`, "apply", "-f", "-")
	now := time.Now().UTC().Format(time.RFC3339)
	c.must("patch", "node", node, "--subresource=status", "--type=merge", "-p",
		`{"status":{"conditions":[{"type":"Ready","status":"True","reason":"KubeletReady","lastHeartbeatTime":"`+now+`","lastTransitionTime":"`+now+`"}]}}`)
	loadBalancerIP(c, "web")

	sp := exec.Command(binary, "speaker", "--kubeconfig", c.kubeconfig(), "--node-name", node, "--netns", ns)
	var log strings.Builder
	sp.Stdout, sp.Stderr = &log, &log
	sp.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := sp.Start(); err != nil {
		t.Fatalf("start svcnet speaker: %v", err)
	}
	var once sync.Once
	stop := func() {
		once.Do(func() {
			_ = sp.Process.Signal(syscall.SIGTERM)
			if err := sp.Wait(); err != nil {
				t.Errorf("svcnet speaker exited with %v; log:\n%s", err, log.String())
			}
		})
	}
	t.Cleanup(stop)

	eventually(t, 20*time.Second, func() string {
		if got := arpAnswers(client, ip); !slices.Equal(got, []string{mac}) {
			return fmt.Sprintf("ARP answers for %s: %v, want the node's %s; speaker log:\n%s", ip, got, mac, log.String())
		}
		return ""
	})
	nodeAssigned(c, "web", node)
	stop()
	if got := arpAnswers(client, ip); len(got) != 0 {
		t.Errorf("ARP answers for %s after the speaker stopped: %v", ip, got)
	}
}

// TestLoadBalancerHomelab is the seed's homelab, issue 17's first
// acceptance item: MetalLB's pool 10.0.0.200-10.0.0.215 on the nodes' LAN
// with its L2Advertisement, four LoadBalancer Services created in order
// get .200, .201, .202, .203, and a client on the LAN with no route of its
// own reaches each of them by HTTP (its ARP requests answered).
func TestLoadBalancerHomelab(t *testing.T) {
	t.Parallel()
	c, clients, _ := startTwoNodesWith(t, twoNodes{ips: [2]string{"10.0.0.1", "10.0.0.2"}, clients: []string{"10.0.0.100"},
		second: nodeName + "-2", upArgs: []string{"--disable", "ingress"}})
	c.must("apply", "-f", "../../docs/examples/layer2.yaml")
	c.webPod("web-1", nodeName)
	c.waitReady("web-1", "True", 60*time.Second)
	apps := []string{"gitea", "argocd", "harbor", "grafana"}
	for _, app := range apps {
		c.withStdin(`apiVersion: v1
kind: Service
metadata: {name: `+app+`}
spec:
  type: LoadBalancer
  selector: {app: web}
  ports: [{name: http, port: 80, targetPort: 80}]
`, "apply", "-f", "-")
		// In order: each has its address before the next is created.
		loadBalancerIP(c, app)
	}
	for i, app := range apps {
		want := fmt.Sprintf("10.0.0.%d", 200+i)
		if got := loadBalancerIP(c, app); got != want {
			t.Errorf("%s got %s, want %s", app, got, want)
			continue
		}
		c.readyEndpoints(app, 1)
		eventually(t, 30*time.Second, func() string {
			if out, err := wget(t, clients[0], "http://"+want+"/"); err != nil || podName(out) != "web-1" {
				return fmt.Sprintf("GET http://%s/ (%s) from the LAN: %v: %s", want, app, err, out)
			}
			return ""
		})
	}
}
