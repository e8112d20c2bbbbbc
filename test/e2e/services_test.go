package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net"
	"net/netip"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"

	"github.com/svcnet/svcnet/internal/allocator"
	"github.com/svcnet/svcnet/internal/registry/service"
	"github.com/svcnet/svcnet/internal/storage"
)

// The Service tests need only the API: they run `svcnet apiserver`.

// startAPIServer runs `svcnet apiserver` with args on a fresh data dir and
// loopback ports; it is stopped when the test ends.
func startAPIServer(t *testing.T, args ...string) *cluster {
	t.Helper()
	c := newCluster(t)
	c.runAPIServer(args...)
	t.Cleanup(c.stop)
	return c
}

// runAPIServer starts `svcnet apiserver` on the cluster's data dir and
// ports and waits until it answers.
func (c *cluster) runAPIServer(args ...string) {
	c.t.Helper()
	c.log = &logBuffer{}
	base := []string{"apiserver", "--data-dir", c.dataDir, "--bind-address", c.apiAddr}
	if c.etcdPeer != "" {
		base = append(base, "--etcd-client-url", c.etcdClient, "--etcd-peer-url", c.etcdPeer)
	}
	c.cmd = exec.Command(binary, append(base, args...)...)
	c.cmd.Stdout, c.cmd.Stderr = c.log, c.log
	if err := c.launch(); err != nil {
		c.t.Fatalf("start svcnet apiserver: %v", err)
	}
	c.waitReady(false)
}

// etcdFiles are the data dir's pki/<name>.crt and .key, with the CA
// bundle pki/etcd/ca.crt: the embedded etcd's files as docs/etcd.md lays
// them out.
func etcdFiles(dataDir, name string) storage.TLSFiles {
	pki := filepath.Join(dataDir, "pki")
	return storage.TLSFiles{CertFile: filepath.Join(pki, name+".crt"), KeyFile: filepath.Join(pki, name+".key"),
		TrustedCAFile: filepath.Join(pki, "etcd", "ca.crt")}
}

// etcd is a client of the cluster's embedded etcd, with the etcdctl
// certificate of its data dir.
func (c *cluster) etcd() *clientv3.Client {
	c.t.Helper()
	cli, err := storage.Connect([]string{c.etcdClient}, etcdFiles(c.dataDir, "etcd/healthcheck-client"))
	if err != nil {
		c.t.Fatal(err)
	}
	c.t.Cleanup(func() { cli.Close() })
	return cli
}

// held is a set of cluster IPs, with the Service holding each, and node
// ports.
type held struct {
	ips   map[string]bool
	owner map[string]string // by cluster IP: namespace/name
	ports map[int]bool
}

func (h held) String() string {
	return fmt.Sprintf("%d IPs, %d ports", len(h.ips), len(h.ports))
}

// allocations reads from etcd what is taken on a single-stack cluster:
// the IPAddress objects, with their parents, and the node port bitmap.
func allocations(t *testing.T, cli *clientv3.Client) held {
	t.Helper()
	return allocationsAt(t, cli, 0)
}

// allocationsAt is allocations as of etcd revision rev (0: the latest).
func allocationsAt(t *testing.T, cli *clientv3.Client, rev int64) held {
	t.Helper()
	h := held{ips: map[string]bool{}, owner: map[string]string{}, ports: map[int]bool{}}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	resp, err := cli.Get(ctx, allocator.IPAddressesPrefix, clientv3.WithPrefix(), clientv3.WithRev(rev))
	if err != nil {
		t.Fatal(err)
	}
	for _, kv := range resp.Kvs {
		var ipa networkingv1.IPAddress
		if err := json.Unmarshal(kv.Value, &ipa); err != nil || ipa.Spec.ParentRef == nil {
			t.Fatalf("%s is not a JSON IPAddress with a parent: %v", kv.Key, err)
		}
		h.ips[ipa.Name] = true
		h.owner[ipa.Name] = ipa.Spec.ParentRef.Namespace + "/" + ipa.Spec.ParentRef.Name
	}
	ra := rangeAllocationAt(t, cli, allocator.NodePortsKey, rev)
	pr, err := allocator.ParsePortRange(ra.Range)
	if err != nil {
		t.Fatal(err)
	}
	bm := pr.NewBitmap()
	if err := bm.SetBytes(ra.Data); err != nil {
		t.Fatal(err)
	}
	bm.ForEach(func(i int) { h.ports[pr.Base+i] = true })
	return h
}

// ipBitmap reads the addresses taken in the bitmap view at key.
func ipBitmap(t *testing.T, cli *clientv3.Client, key string) map[string]bool {
	t.Helper()
	ra := rangeAllocation(t, cli, key)
	r, err := allocator.ParseIPRange(ra.Range)
	if err != nil {
		t.Fatal(err)
	}
	bm := r.NewBitmap()
	if err := bm.SetBytes(ra.Data); err != nil {
		t.Fatal(err)
	}
	ips := map[string]bool{}
	bm.ForEach(func(i int) { ips[r.Addr(i).String()] = true })
	return ips
}

func rangeAllocation(t *testing.T, cli *clientv3.Client, key string) corev1.RangeAllocation {
	t.Helper()
	return rangeAllocationAt(t, cli, key, 0)
}

func rangeAllocationAt(t *testing.T, cli *clientv3.Client, key string, rev int64) corev1.RangeAllocation {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	resp, err := cli.Get(ctx, key, clientv3.WithRev(rev))
	if err != nil || len(resp.Kvs) != 1 {
		t.Fatalf("read %s: %v %v", key, err, resp)
	}
	var ra corev1.RangeAllocation
	if err := json.Unmarshal(resp.Kvs[0].Value, &ra); err != nil {
		t.Fatalf("%s is not a JSON RangeAllocation: %v", key, err)
	}
	return ra
}

// heldByServices lists every Service and collects what they hold; values
// held twice fail the test.
func heldByServices(t *testing.T, cs kubernetes.Interface) held {
	t.Helper()
	list, err := cs.CoreV1().Services("").List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return heldBy(t, list.Items)
}

// storedServices reads every Service from etcd at revision rev.
func storedServices(t *testing.T, cli *clientv3.Client, rev int64) []corev1.Service {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	resp, err := cli.Get(ctx, "/registry/services/", clientv3.WithPrefix(), clientv3.WithRev(rev))
	if err != nil {
		t.Fatal(err)
	}
	svcs := make([]corev1.Service, len(resp.Kvs))
	for i, kv := range resp.Kvs {
		if err := json.Unmarshal(kv.Value, &svcs[i]); err != nil {
			t.Fatalf("%s: %v", kv.Key, err)
		}
	}
	return svcs
}

// heldBy collects what Services hold; values held twice fail the test.
func heldBy(t *testing.T, svcs []corev1.Service) held {
	t.Helper()
	h := held{ips: map[string]bool{}, owner: map[string]string{}, ports: map[int]bool{}}
	for i := range svcs {
		svc := &svcs[i]
		for _, ip := range service.ClusterIPs(svc) {
			if h.ips[ip] {
				t.Errorf("cluster IP %s held twice (again by %s)", ip, svc.Name)
			}
			h.ips[ip], h.owner[ip] = true, svc.Namespace+"/"+svc.Name
		}
		seen := map[int]bool{}
		for _, p := range service.NodePorts(svc) {
			if h.ports[p] && !seen[p] {
				t.Errorf("node port %d held twice (again by %s)", p, svc.Name)
			}
			h.ports[p], seen[p] = true, true
		}
	}
	return h
}

// checkAllocations fails unless etcd holds exactly what the Services do,
// all read at one revision (a write the API server was still finishing
// may commit meanwhile): an IPAddress naming its Service per cluster IP,
// and the node ports in the bitmap; and unless the IP bitmap view soon
// shows the IPAddresses.
func checkAllocations(t *testing.T, cli *clientv3.Client) {
	t.Helper()
	resp, err := cli.Get(context.Background(), "health")
	if err != nil {
		t.Fatal(err)
	}
	rev := resp.Header.Revision
	want, got := heldBy(t, storedServices(t, cli, rev)), allocationsAt(t, cli, rev)
	checkHeld(t, "cluster IP", want.ips, got.ips)
	checkHeld(t, "node port", want.ports, got.ports)
	for ip, svc := range want.owner {
		if got.ips[ip] && got.owner[ip] != svc {
			t.Errorf("the IPAddress of %s names %s, the Service holding it is %s", ip, got.owner[ip], svc)
		}
	}
	eventually(t, 20*time.Second, func() string {
		view, ips := ipBitmap(t, cli, allocator.ServiceIPsKey), allocations(t, cli).ips
		if fmt.Sprint(view) != fmt.Sprint(ips) {
			return fmt.Sprintf("the bitmap view holds %d addresses, the IPAddresses %d", len(view), len(ips))
		}
		return ""
	})
}

// checkHeld fails unless etcd holds exactly the values (cluster IPs or
// node ports) that Services hold.
func checkHeld[K comparable](t *testing.T, what string, services, stored map[K]bool) {
	t.Helper()
	for v := range services {
		if !stored[v] {
			t.Errorf("%s %v held by a Service is free in etcd", what, v)
		}
	}
	for v := range stored {
		if !services[v] {
			t.Errorf("%s %v is taken in etcd but no Service holds it (leak)", what, v)
		}
	}
}

// snapshot is the stored bytes of the keys a failed request must not
// change.
func snapshot(t *testing.T, cli *clientv3.Client, keys ...string) string {
	t.Helper()
	var b strings.Builder
	for _, k := range append(keys, allocator.IPAddressesPrefix, allocator.NodePortsKey) {
		var opts []clientv3.OpOption
		if strings.HasSuffix(k, "/") {
			opts = append(opts, clientv3.WithPrefix())
		}
		resp, err := cli.Get(context.Background(), k, opts...)
		if err != nil {
			t.Fatal(err)
		}
		for _, kv := range resp.Kvs {
			fmt.Fprintf(&b, "%s@%d=%s\n", kv.Key, kv.ModRevision, kv.Value)
		}
	}
	return b.String()
}

const seedManifest = `apiVersion: v1
kind: Service
metadata:
  name: nginx
spec:
  ports:
  - name: http
    port: 8080
    protocol: TCP
    targetPort: 80
  selector:
    app: nginx
  type: NodePort
`

// TestServiceSeedManifest: the seed's NodePort Service gets a cluster IP
// and a node port in range, shown by kubectl and held in the bitmaps.
func TestServiceSeedManifest(t *testing.T) {
	t.Parallel()
	c := startAPIServer(t)
	cli := c.etcd()
	c.withStdin(seedManifest, "apply", "-f", "-")
	out := c.must("get", "svc", "nginx", "-o", "jsonpath={.spec.clusterIP} {.spec.clusterIPs} {.spec.ports[0].nodePort} {.spec.ipFamilies} {.spec.ipFamilyPolicy}")
	f := strings.Fields(out)
	if len(f) != 5 {
		t.Fatalf("unexpected service fields %q", out)
	}
	ip := net.ParseIP(f[0])
	_, serviceCIDR, _ := net.ParseCIDR("10.96.0.0/12")
	if ip == nil || !serviceCIDR.Contains(ip) || f[1] != `["`+f[0]+`"]` {
		t.Fatalf("clusterIP %s clusterIPs %s, want one address in 10.96.0.0/12", f[0], f[1])
	}
	np, _ := strconv.Atoi(f[2])
	if np < 30000 || np > 32767 || f[3] != `["IPv4"]` || f[4] != "SingleStack" {
		t.Fatalf("nodePort %s families %s policy %s", f[2], f[3], f[4])
	}
	table := c.must("get", "svc", "nginx")
	if !strings.Contains(table, fmt.Sprintf("8080:%d/TCP", np)) || !strings.Contains(table, f[0]) || !strings.Contains(table, "NodePort") {
		t.Fatalf("kubectl get svc:\n%s", table)
	}
	// Re-applying the manifest keeps the allocated values.
	if out := c.withStdin(seedManifest, "apply", "-f", "-"); !strings.Contains(out, "unchanged") {
		t.Fatalf("re-apply: %s", out)
	}
	b := allocations(t, cli)
	if !b.ips[f[0]] || !b.ports[np] || !b.ips["10.96.0.1"] {
		t.Fatalf("etcd (%s) lacks %s, %d or the kubernetes Service's 10.96.0.1", b, f[0], np)
	}
	checkAllocations(t, cli)
}

// TestServiceErrors produces each allocation and immutability error with
// kubectl and checks that the store and the bitmaps are unchanged after it.
func TestServiceErrors(t *testing.T) {
	t.Parallel()
	c := startAPIServer(t)
	cli := c.etcd()
	c.must("create", "service", "nodeport", "web", "--tcp=80", "--node-port=30080")
	c.must("create", "service", "clusterip", "fixed", "--tcp=80", "--clusterip=10.96.0.50")
	web, fixed := "/registry/services/default/web", "/registry/services/default/fixed"
	for _, tt := range []struct {
		args []string
		want string
	}{
		{[]string{"create", "service", "nodeport", "far", "--tcp=80", "--node-port=40000"},
			`Service "far" is invalid: spec.ports[0].nodePort: Invalid value: 40000: provided port is not in the valid range. The range of valid ports is 30000-32767`},
		{[]string{"create", "service", "nodeport", "taken", "--tcp=80", "--node-port=30080"},
			`Service "taken" is invalid: spec.ports[0].nodePort: Invalid value: 30080: provided port is already allocated`},
		{[]string{"create", "service", "clusterip", "outside", "--tcp=80", "--clusterip=10.0.0.5"},
			`Service "outside" is invalid: spec.clusterIPs: Invalid value: ["10.0.0.5"]: failed to allocate IP 10.0.0.5: the provided network does not match the current range`},
		{[]string{"create", "service", "clusterip", "network", "--tcp=80", "--clusterip=10.96.0.0"},
			`Service "network" is invalid: spec.clusterIPs: Invalid value: ["10.96.0.0"]: failed to allocate IP 10.96.0.0: the provided IP (10.96.0.0) is not in the valid range. The range of valid IPs is 10.96.0.0/12`},
		{[]string{"create", "service", "clusterip", "same", "--tcp=80", "--clusterip=10.96.0.50"},
			`Service "same" is invalid: spec.clusterIPs: Invalid value: ["10.96.0.50"]: failed to allocate IP 10.96.0.50: provided IP is already allocated`},
		{[]string{"patch", "svc", "web", "-p", `{"spec":{"clusterIP":"10.96.0.60","clusterIPs":["10.96.0.60"]}}`},
			`The Service "web" is invalid: spec.clusterIPs[0]: Invalid value: ["10.96.0.60"]: may not change once set`},
		{[]string{"patch", "svc", "fixed", "-p", `{"spec":{"clusterIP":"None"}}`},
			`The Service "fixed" is invalid: spec.clusterIPs[0]: Invalid value: ["None"]: may not change once set`},
		{[]string{"patch", "svc", "web", "-p", `{"spec":{"type":"ClusterIP","ports":[{"port":80,"nodePort":30081}]}}`},
			"The Service \"web\" is invalid: spec.ports[0].nodePort: Forbidden: may not be used when `type` is 'ClusterIP'"},
		{[]string{"create", "service", "clusterip", "dual", "--tcp=80", "--dry-run=server", "-o", "yaml"}, ""},
		// RelaxedServiceNameValidation (GA in 1.37): a Service name is an
		// RFC 1123 label, which may start with a digit.
		{[]string{"create", "service", "clusterip", "1-digit", "--tcp=80", "--dry-run=server", "-o", "yaml"}, ""},
		{[]string{"create", "service", "clusterip", "web.x", "--tcp=80"},
			`Service "web.x" is invalid: metadata.name: Invalid value: "web.x": must not contain dots`},
	} {
		before := snapshot(t, cli, web, fixed, "/registry/services/default/"+tt.args[3])
		out, err := c.kubectl("", tt.args...)
		if tt.want == "" {
			if err != nil {
				t.Errorf("kubectl %v: %v\n%s", tt.args, err, out)
			}
		} else if err == nil || !strings.Contains(out, tt.want) {
			t.Errorf("kubectl %v:\n%s\nwant %s", tt.args, out, tt.want)
		}
		if after := snapshot(t, cli, web, fixed, "/registry/services/default/"+tt.args[3]); after != before {
			t.Errorf("kubectl %v changed the store:\nbefore %s\nafter  %s", tt.args, before, after)
		}
	}
	// RequireDualStack on a single-stack cluster is refused before
	// anything is looked at.
	out, _ := c.kubectl(`{"apiVersion":"v1","kind":"Service","metadata":{"name":"dual"},"spec":{"ipFamilyPolicy":"RequireDualStack","ports":[{"port":80}]}}`,
		"create", "-f", "-")
	if want := `The Service "dual" is invalid: spec.ipFamilyPolicy: Invalid value: "RequireDualStack": this cluster is not configured for dual-stack services`; !strings.Contains(out, want) {
		t.Errorf("RequireDualStack:\n%s\nwant %s", out, want)
	}
	checkAllocations(t, cli)
}

// TestServiceTypeChanges: type changes and port edits take and free what
// upstream's do, and delete frees everything.
func TestServiceTypeChanges(t *testing.T) {
	t.Parallel()
	c := startAPIServer(t)
	cli := c.etcd()
	get := func(jsonpath string) string { return c.must("get", "svc", "web", "-o", "jsonpath="+jsonpath) }
	c.must("create", "service", "nodeport", "web", "--tcp=80,443")
	ip, ports := get("{.spec.clusterIP}"), strings.Fields(get("{.spec.ports[*].nodePort}"))
	if len(ports) != 2 || ports[0] == ports[1] {
		t.Fatalf("node ports %v", ports)
	}
	held := func(what string) bool {
		b := allocations(t, cli)
		if p, err := strconv.Atoi(what); err == nil {
			return b.ports[p]
		}
		return b.ips[what]
	}
	// Dropping a port frees its node port; the other keeps its own.
	c.must("patch", "svc", "web", "--type=json", "-p", `[{"op":"remove","path":"/spec/ports/1"}]`)
	if held(ports[1]) || !held(ports[0]) || get("{.spec.ports[0].nodePort}") != ports[0] {
		t.Fatalf("after removing a port: %s held %v, %s held %v", ports[1], held(ports[1]), ports[0], held(ports[0]))
	}
	c.must("patch", "svc", "web", "-p", `{"spec":{"type":"ClusterIP"}}`)
	if get("{.spec.ports[0].nodePort}") != "" || held(ports[0]) || !held(ip) {
		t.Fatalf("NodePort -> ClusterIP kept node port %s", ports[0])
	}
	c.must("patch", "svc", "web", "-p", `{"spec":{"type":"ExternalName","externalName":"db.example.com"}}`)
	if get("{.spec.clusterIP}") != "" || held(ip) {
		t.Fatalf("ClusterIP -> ExternalName kept cluster IP %s", ip)
	}
	c.must("patch", "svc", "web", "-p", `{"spec":{"type":"LoadBalancer","externalTrafficPolicy":"Local"}}`)
	lbIP, np, hc := get("{.spec.clusterIP}"), get("{.spec.ports[0].nodePort}"), get("{.spec.healthCheckNodePort}")
	if !held(lbIP) || !held(np) || !held(hc) || np == hc {
		t.Fatalf("ExternalName -> LoadBalancer/Local: ip %s nodePort %s healthCheckNodePort %s", lbIP, np, hc)
	}
	c.must("patch", "svc", "web", "-p", `{"spec":{"externalTrafficPolicy":"Cluster"}}`)
	if get("{.spec.healthCheckNodePort}") != "" || held(hc) {
		t.Fatalf("Local -> Cluster kept health check node port %s", hc)
	}
	c.withStdin(`{"apiVersion":"v1","kind":"Service","metadata":{"name":"lb"},"spec":{"type":"LoadBalancer","allocateLoadBalancerNodePorts":false,"ports":[{"port":80}]}}`,
		"create", "-f", "-")
	if np := c.must("get", "svc", "lb", "-o", "jsonpath={.spec.ports[0].nodePort}"); np != "" {
		t.Fatalf("allocateLoadBalancerNodePorts=false got node port %s", np)
	}
	c.must("delete", "svc", "web", "lb")
	if held(lbIP) || held(np) {
		t.Fatalf("delete kept %s or %s", lbIP, np)
	}
	checkAllocations(t, cli)
}

// TestServiceRandomOperations: after 1,000 random creates, type changes
// and deletes, the bitmaps hold exactly what the Services hold.
func TestServiceRandomOperations(t *testing.T) {
	t.Parallel()
	c := startAPIServer(t)
	cli := c.etcd()
	cs := c.clientset()
	const workers, ops = 8, 1000
	var wg sync.WaitGroup
	var mu sync.Mutex
	done := map[string]int{}
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			counts, err := randomOps(cs, rand.New(rand.NewPCG(uint64(w), 1)), fmt.Sprintf("r%d-", w), ops/workers)
			if err != nil {
				t.Error(err)
			}
			mu.Lock()
			defer mu.Unlock()
			for k, n := range counts {
				done[k] += n
			}
		}()
	}
	wg.Wait()
	t.Logf("operations: %v", done)
	if done["create"] == 0 || done["update"] == 0 || done["delete"] == 0 || done["refused"] == 0 {
		t.Fatalf("the mix lacks a kind of operation: %v", done)
	}
	checkAllocations(t, cli)
}

// serviceTypes are what random operations turn Services into.
var serviceTypes = []func(*corev1.Service){
	func(s *corev1.Service) { s.Spec.Type = corev1.ServiceTypeClusterIP },
	func(s *corev1.Service) { s.Spec.Type = corev1.ServiceTypeNodePort },
	func(s *corev1.Service) { s.Spec.Type = corev1.ServiceTypeLoadBalancer },
	func(s *corev1.Service) {
		s.Spec.Type, s.Spec.ExternalTrafficPolicy = corev1.ServiceTypeLoadBalancer, corev1.ServiceExternalTrafficPolicyLocal
	},
	func(s *corev1.Service) {
		s.Spec.Type, s.Spec.ExternalName = corev1.ServiceTypeExternalName, "db.example.com"
	},
}

// randomOps runs n random operations on Services named prefix+k and counts
// them by kind. Requests the API refuses (a static node port already taken,
// a headless Service made a NodePort) count as operations: they must leave
// nothing behind.
func randomOps(cs kubernetes.Interface, r *rand.Rand, prefix string, n int) (map[string]int, error) {
	ctx := context.Background()
	svcs := cs.CoreV1().Services("default")
	counts := map[string]int{}
	for range n {
		name := prefix + strconv.Itoa(r.IntN(20))
		cur, err := svcs.Get(ctx, name, metav1.GetOptions{})
		kind := "update"
		switch {
		case apierrors.IsNotFound(err):
			kind = "create"
			s := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: name},
				Spec: corev1.ServiceSpec{Ports: []corev1.ServicePort{{Name: "a", Port: 80}, {Name: "b", Port: 443}}}}
			serviceTypes[r.IntN(len(serviceTypes))](s)
			switch r.IntN(4) {
			case 0:
				s.Spec.ClusterIP = "None"
			case 1:
				s.Spec.Ports[0].NodePort = int32(30000 + r.IntN(86)) // the static band
			}
			_, err = svcs.Create(ctx, s, metav1.CreateOptions{})
		case err != nil:
		case r.IntN(3) == 0:
			kind = "delete"
			err = svcs.Delete(ctx, name, metav1.DeleteOptions{})
		default:
			cur.Spec.ExternalTrafficPolicy = ""
			serviceTypes[r.IntN(len(serviceTypes))](cur)
			if r.IntN(2) == 0 {
				cur.Spec.Ports = cur.Spec.Ports[:1]
			}
			_, err = svcs.Update(ctx, cur, metav1.UpdateOptions{})
		}
		if apierrors.IsInvalid(err) {
			kind, err = "refused", nil
		}
		if err != nil {
			return counts, fmt.Errorf("%s: %w", name, err)
		}
		counts[kind]++
	}
	return counts, nil
}

// TestServiceTwoAPIServers: two API servers on one etcd, sharing the
// cluster CA and service account key, take each other's clients and
// tokens; they create 2,000 Services concurrently; every cluster IP and
// node port is distinct, and both list themselves in the kubernetes
// endpoints.
func TestServiceTwoAPIServers(t *testing.T) {
	t.Parallel()
	a := startAPIServer(t)
	// The second one serves on 127.0.0.2 and the same port, as API servers
	// sharing an etcd must.
	_, port, _ := net.SplitHostPort(a.apiAddr)
	b := &cluster{t: t, dataDir: t.TempDir(), cacheDir: t.TempDir(), apiAddr: "127.0.0.2:" + port, etcdClient: a.etcdClient}
	etcdTLS := etcdFiles(a.dataDir, "apiserver-etcd-client")
	b.runAPIServer("--etcd-servers", a.etcdClient, "--ca-dir", filepath.Join(a.dataDir, "pki"),
		"--etcd-cafile", etcdTLS.TrustedCAFile, "--etcd-certfile", etcdTLS.CertFile, "--etcd-keyfile", etcdTLS.KeyFile)
	t.Cleanup(b.stop)
	// a's admin kubeconfig and a token a issued work on b.
	if out, err := a.kubectl("", "--server=https://"+b.apiAddr, "auth", "whoami", "-o", "jsonpath={.status.userInfo.username}"); err != nil || out != "svcnet-admin" {
		t.Fatalf("a's kubeconfig against b: %v %s", err, out)
	}
	a.must("create", "serviceaccount", "shared")
	token := strings.TrimSpace(a.must("create", "token", "shared"))
	if out, err := b.kubectl("", "--kubeconfig=/dev/null", "--server=https://"+b.apiAddr, "--insecure-skip-tls-verify", "--token="+token,
		"auth", "whoami", "-o", "jsonpath={.status.userInfo.username}"); err != nil || out != "system:serviceaccount:default:shared" {
		t.Fatalf("a's token against b: %v %s", err, out)
	}
	eventually(t, 30*time.Second, func() string {
		out, _ := a.kubectl("", "get", "endpoints", "kubernetes", "-o", "jsonpath={.subsets[0].addresses[*].ip}")
		if out != "127.0.0.1 127.0.0.2" {
			return "kubernetes endpoints list " + out
		}
		return ""
	})

	const perServer, workers = 1000, 16
	start := time.Now()
	var wg sync.WaitGroup
	errs := make(chan error, 2*workers)
	for s, c := range []*cluster{a, b} {
		cs := c.clientset()
		for w := range workers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := w; i < perServer; i += workers {
					svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("s%d-%04d", s, i)},
						Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeNodePort, Ports: []corev1.ServicePort{{Port: 80}}}}
					if _, err := cs.CoreV1().Services("default").Create(context.Background(), svc, metav1.CreateOptions{}); err != nil {
						errs <- err
						return
					}
				}
			}()
		}
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	t.Logf("%d Services created through two API servers in %s", 2*perServer, time.Since(start).Round(time.Millisecond))
	h := heldByServices(t, a.clientset())
	if len(h.ips) != 2*perServer+1 || len(h.ports) != 2*perServer {
		t.Fatalf("Services hold %s, want %d distinct IPs and %d distinct ports", h, 2*perServer+1, 2*perServer)
	}
	checkAllocations(t, a.etcd())

	// Both servers have bitmaps cached. A Service made through one and
	// deleted through the other frees its IP and port at once, not at the
	// next repair; the IP can be taken again through the first.
	leak := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "rp-leak"},
		Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeNodePort, Ports: []corev1.ServicePort{{Port: 80}}}}
	made, err := a.clientset().CoreV1().Services("default").Create(context.Background(), leak, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if err := b.clientset().CoreV1().Services("default").Delete(context.Background(), "rp-leak", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	checkAllocations(t, a.etcd())
	leak.Spec.ClusterIP = made.Spec.ClusterIP
	leak.Spec.Ports[0].NodePort = made.Spec.Ports[0].NodePort
	if _, err := a.clientset().CoreV1().Services("default").Create(context.Background(), leak, metav1.CreateOptions{}); err != nil {
		t.Fatalf("take %s and %d again after the delete through the other server: %v", made.Spec.ClusterIP, made.Spec.Ports[0].NodePort, err)
	}

	// 30 s of creates, type flips and deletes through both.
	// Without client-side rate limits: faster writes would otherwise meet
	// the limiter's "would exceed context deadline" as the churn ends.
	churn(t, 30*time.Second, a.clientsetQPS(-1), b.clientsetQPS(-1))
	checkAllocations(t, a.etcd())

	// A stopped API server leaves the endpoints.
	b.stop()
	if out := a.must("get", "endpointslice", "kubernetes", "-o", "jsonpath={.endpoints[*].addresses[*]}"); out != "127.0.0.1" {
		t.Fatalf("kubernetes EndpointSlice after stopping the second API server: %s", out)
	}
}

// churn creates, flips between ClusterIP and NodePort, and deletes
// Services for d, 8 workers on each client, each worker on Services of
// its own. Errors fail the test.
func churn(t *testing.T, d time.Duration, clients ...kubernetes.Interface) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	var wg sync.WaitGroup
	errs := make(chan error, 8*len(clients))
	for c, cs := range clients {
		svcs := cs.CoreV1().Services("default")
		for w := range 8 {
			wg.Go(func() {
				for i := 0; ctx.Err() == nil; i++ {
					name := fmt.Sprintf("churn-%d-%d-%d", c, w, i%4)
					var err error
					switch i % 12 / 4 {
					case 0:
						_, err = svcs.Create(ctx, &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: name},
							Spec: corev1.ServiceSpec{Ports: []corev1.ServicePort{{Port: 80}}}}, metav1.CreateOptions{})
					case 1:
						_, err = svcs.Patch(ctx, name, types.MergePatchType, []byte(`{"spec":{"type":"NodePort"}}`), metav1.PatchOptions{})
					case 2:
						// The other client deletes, half the time.
						target := svcs
						if i%2 == 1 {
							target = clients[(c+1)%len(clients)].CoreV1().Services("default")
						}
						err = target.Delete(ctx, name, metav1.DeleteOptions{})
					}
					if err != nil && ctx.Err() == nil {
						errs <- fmt.Errorf("%s step %d: %w", name, i, err)
						return
					}
				}
			})
		}
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}

// TestServiceCrashMidStorm: an API server killed with SIGKILL at three
// moments of a storm of up to 2,000 concurrent creates (and some deletes)
// of ClusterIP and NodePort Services loses no acknowledged write and leaves
// IPAddresses and a node port bitmap that equal the stored Services: after
// each restart the repair finds nothing to fix.
func TestServiceCrashMidStorm(t *testing.T) {
	t.Parallel()
	c := startAPIServer(t)
	var logs []string
	for round, moment := range []time.Duration{500 * time.Millisecond, 1500 * time.Millisecond, 3 * time.Second} {
		cs := c.clientset()
		ctx, stop := context.WithCancel(context.Background())
		var mu sync.Mutex
		// By name, what was acknowledged: stored, deleted, or a delete
		// whose answer the crash cut off (either may be true).
		const stored, deleted, either = "stored", "deleted", "either"
		acked := map[string]string{}
		var created atomic.Int64
		var wg sync.WaitGroup
		for w := range 16 {
			wg.Go(func() {
				svcs := cs.CoreV1().Services("default")
				for i := 0; ctx.Err() == nil && created.Add(1) <= 2000; i++ {
					name := fmt.Sprintf("r%d-w%d-%d", round, w, i)
					svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: name},
						Spec: corev1.ServiceSpec{Ports: []corev1.ServicePort{{Port: 80}}}}
					if i%2 == 1 {
						svc.Spec.Type = corev1.ServiceTypeNodePort
					}
					if _, err := svcs.Create(ctx, svc, metav1.CreateOptions{}); err != nil {
						continue
					}
					mu.Lock()
					acked[name] = stored
					mu.Unlock()
					if i%3 == 2 {
						outcome := either
						if svcs.Delete(ctx, name, metav1.DeleteOptions{}) == nil {
							outcome = deleted
						}
						mu.Lock()
						acked[name] = outcome
						mu.Unlock()
					}
				}
			})
		}
		time.Sleep(moment)
		logs = append(logs, c.log.String())
		c.kill()
		stop()
		wg.Wait()

		c.runAPIServer()
		h := heldByServices(t, cs)
		there := map[string]bool{}
		list, err := cs.CoreV1().Services("default").List(context.Background(), metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		for _, svc := range list.Items {
			there[svc.Name] = true
		}
		lost := 0
		for name, was := range acked {
			if was != either && there[name] != (was == stored) {
				lost++
				t.Errorf("round %d: %s was acknowledged %s, but after the crash it is stored: %v", round, name, was, there[name])
			}
		}
		t.Logf("round %d, killed after %s: %d acknowledged writes, %d lost; %s held", round, moment, len(acked), lost, h)
		if len(acked) == 0 {
			t.Fatalf("round %d: the storm created nothing", round)
		}
		checkAllocations(t, c.etcd())
	}
	// The last server's log is complete once it has stopped.
	c.stop()
	logs = append(logs, c.log.String())
	for _, log := range logs[1:] {
		if strings.Contains(log, "rebuilt the node port bitmap") || strings.Contains(log, "released a") ||
			strings.Contains(log, "service allocation repair") || strings.Contains(log, "deleted an IPAddress") {
			t.Fatalf("the repair after a crash had to fix the allocations:\n%s", log)
		}
	}
}

// TestServiceRangeExhaustion: a /28 allocates its 14 usable addresses (one
// is the kubernetes Service's), then fails with upstream's error; deleting
// a Service frees its address.
func TestServiceRangeExhaustion(t *testing.T) {
	t.Parallel()
	c := startAPIServer(t, "--service-cluster-ip-range", "10.97.0.0/28")
	for i := 1; i < 14; i++ {
		c.must("create", "service", "clusterip", fmt.Sprintf("s%d", i), "--tcp=80")
	}
	out := c.fails("create", "service", "clusterip", "s14", "--tcp=80")
	if want := "Internal error occurred: failed to allocate a serviceIP: range is full"; !strings.Contains(out, want) {
		t.Fatalf("15th address: %s\nwant %s", out, want)
	}
	ips := strings.Fields(c.must("get", "svc", "-o", "jsonpath={.items[*].spec.clusterIP}"))
	if len(ips) != 14 {
		t.Fatalf("%d Services hold addresses, want 14: %v", len(ips), ips)
	}
	freed := c.must("get", "svc", "s7", "-o", "jsonpath={.spec.clusterIP}")
	c.must("delete", "svc", "s7")
	c.must("create", "service", "clusterip", "s14", "--tcp=80")
	if got := c.must("get", "svc", "s14", "-o", "jsonpath={.spec.clusterIP}"); got != freed {
		t.Fatalf("the freed address was %s, the new Service got %s", freed, got)
	}
	checkAllocations(t, c.etcd())
}

// TestServiceRepairAtStart: restarted with another service range, the API
// server keeps allocating from the old one too, as upstream does while the
// `kubernetes` ServiceCIDR still holds it, and records an event on every
// Service whose address no ServiceCIDR covers any more; the bitmap views
// follow the flags. A Service stored without its IPAddress (written behind
// the API server, or by the bitmap allocator of an older svcnet) gets it
// back, and an IPAddress of the allocator that no Service holds is deleted.
func TestServiceRepairAtStart(t *testing.T) {
	t.Parallel()
	c := startAPIServer(t)
	c.must("create", "service", "clusterip", "old", "--tcp=80", "--clusterip=10.96.0.20")
	c.must("create", "service", "nodeport", "web", "--tcp=80", "--node-port=30080")
	c.withStdin(`{"apiVersion":"networking.k8s.io/v1","kind":"ServiceCIDR","metadata":{"name":"extra"},"spec":{"cidrs":["10.200.0.0/24"]}}`, "create", "-f", "-")
	eventually(t, 10*time.Second, func() string {
		if out, err := c.kubectl("", "create", "service", "clusterip", "far", "--tcp=80", "--clusterip=10.200.0.5"); err != nil {
			return out
		}
		return ""
	})
	c.must("delete", "servicecidr", "extra")
	c.stop()
	c.runAPIServer("--service-cluster-ip-range", "10.100.0.0/16")
	eventually(t, 10*time.Second, func() string {
		out, _ := c.kubectl("", "get", "events", "--field-selector", "involvedObject.name=far",
			"-o", "jsonpath={.items[*].reason}: {.items[*].message}")
		if !strings.Contains(out, "ClusterIPOutOfRange: Cluster IP [IPv4]: 10.200.0.5 is not within any configured Service CIDR; please recreate service") {
			return "events of far: " + out
		}
		return ""
	})
	if out := c.must("get", "events", "--field-selector", "involvedObject.name=old", "-o", "name"); out != "" {
		t.Errorf("old, inside the kubernetes ServiceCIDR, got events: %s", out)
	}
	// The kubernetes ServiceCIDR keeps 10.96.0.0/12: its addresses stay
	// taken and can still be allocated.
	if out := c.fails("create", "service", "clusterip", "same", "--tcp=80", "--clusterip=10.96.0.20"); !strings.Contains(out, "provided IP is already allocated") {
		t.Fatalf("10.96.0.20 after the range change: %s", out)
	}
	c.must("create", "service", "clusterip", "older", "--tcp=80", "--clusterip=10.96.0.21")
	// The IP bitmap view is that of the flag range: the cluster IPs in
	// 10.100.0.0/16 (new's, and web's if its dynamic address of 10.96.0.0/12
	// fell there; the kubernetes Service keeps 10.96.0.1).
	cli := c.etcd()
	c.must("create", "service", "clusterip", "new", "--tcp=80", "--clusterip=10.100.0.20")
	eventually(t, 10*time.Second, func() string {
		want := map[string]bool{}
		for _, ip := range strings.Fields(c.must("get", "svc", "-A", "-o", "jsonpath={.items[*].spec.clusterIP}")) {
			if strings.HasPrefix(ip, "10.100.") {
				want[ip] = true
			}
		}
		if view, b := ipBitmap(t, cli, allocator.ServiceIPsKey), allocations(t, cli); fmt.Sprint(view) != fmt.Sprint(want) || !want["10.100.0.20"] || !b.ports[30080] {
			return fmt.Sprintf("bitmaps hold %v and %v, want %v and 30080", view, b.ports, want)
		}
		return ""
	})

	// Behind the API server (its etcd is embedded, so while it runs): new's
	// IPAddress goes, a stray one comes; the repair at the restart fixes
	// both.
	ctx := context.Background()
	if _, err := cli.Delete(ctx, allocator.IPAddressesPrefix+"10.100.0.20"); err != nil {
		t.Fatal(err)
	}
	stray := allocator.NewIPAddress(netip.MustParseAddr("10.100.0.30"), allocator.ServiceRef("default", "gone"))
	stray.APIVersion, stray.Kind = "networking.k8s.io/v1", "IPAddress"
	data, _ := json.Marshal(stray)
	if _, err := cli.Put(ctx, allocator.IPAddressesPrefix+"10.100.0.30", string(data)); err != nil {
		t.Fatal(err)
	}
	c.stop()
	c.runAPIServer("--service-cluster-ip-range", "10.100.0.0/16")
	if out := c.must("get", "ipaddress", "10.100.0.20", "-o", "jsonpath={.spec.parentRef.name}"); out != "new" {
		t.Fatalf("the repaired IPAddress of new names %q", out)
	}
	if out, err := c.kubectl("", "get", "ipaddress", "10.100.0.30"); err == nil {
		t.Fatalf("the stray IPAddress is still there:\n%s", out)
	}
	events := c.must("get", "events", "-A", "-o", "jsonpath={range .items[*]}{.reason}: {.message}{\"\\n\"}{end}")
	for _, want := range []string{
		"ClusterIPNotAllocated: Cluster IP [IPv4]: 10.100.0.20 is not allocated; repairing",
		"IPAddressNotAllocated: IPAddress: 10.100.0.30 for Service default/gone appears to have leaked: cleaning up",
	} {
		if !strings.Contains(events, want) {
			t.Errorf("events lack %q:\n%s", want, events)
		}
	}
}

// TestServiceDualStack: with two service ranges a PreferDualStack Service
// gets an address of each family, each an IPAddress, and gives the
// secondary back when made SingleStack.
func TestServiceDualStack(t *testing.T) {
	t.Parallel()
	c := startAPIServer(t, "--service-cluster-ip-range", "10.96.0.0/16,fd00:10:96::/112")
	cli := c.etcd()
	c.withStdin(`{"apiVersion":"v1","kind":"Service","metadata":{"name":"dns"},"spec":{"type":"NodePort","ipFamilyPolicy":"PreferDualStack",
		"ports":[{"name":"dns","port":53,"protocol":"UDP"},{"name":"dns-tcp","port":53,"protocol":"TCP"}]}}`, "create", "-f", "-")
	get := func(jsonpath string) string { return c.must("get", "svc", "dns", "-o", "jsonpath="+jsonpath) }
	ips := strings.Fields(get("{.spec.clusterIPs[*]}"))
	if len(ips) != 2 || get("{.spec.ipFamilies}") != `["IPv4","IPv6"]` || !strings.Contains(ips[1], ":") {
		t.Fatalf("clusterIPs %v families %s", ips, get("{.spec.ipFamilies}"))
	}
	if ports := strings.Fields(get("{.spec.ports[*].nodePort}")); len(ports) != 2 || ports[0] != ports[1] {
		t.Fatalf("UDP and TCP 53 should share a node port: %v", ports)
	}
	owner := func(ip string) string {
		resp, err := cli.Get(context.Background(), allocator.IPAddressesPrefix+ip)
		if err != nil {
			t.Fatal(err)
		}
		if len(resp.Kvs) == 0 {
			return ""
		}
		var ipa networkingv1.IPAddress
		if err := json.Unmarshal(resp.Kvs[0].Value, &ipa); err != nil {
			t.Fatal(err)
		}
		return ipa.Spec.ParentRef.Name + " " + ipa.Labels["ipaddress.kubernetes.io/ip-family"]
	}
	if owner(ips[0]) != "dns IPv4" || owner(ips[1]) != "dns IPv6" {
		t.Fatalf("IPAddresses of %v: %q, %q", ips, owner(ips[0]), owner(ips[1]))
	}
	// The secondary range has its bitmap view too.
	eventually(t, 20*time.Second, func() string {
		if !ipBitmap(t, cli, allocator.SecondaryServiceIPsKey)[ips[1]] {
			return ips[1] + " not in the secondary bitmap view"
		}
		return ""
	})
	c.must("patch", "svc", "dns", "-p", `{"spec":{"ipFamilyPolicy":"SingleStack"}}`)
	if got := get("{.spec.clusterIPs[*]}"); got != ips[0] || owner(ips[1]) != "" {
		t.Fatalf("downgrade kept %s (clusterIPs %s)", ips[1], got)
	}
	c.must("patch", "svc", "dns", "-p", `{"spec":{"ipFamilyPolicy":"RequireDualStack"}}`)
	up := strings.Fields(get("{.spec.clusterIPs[*]}"))
	if len(up) != 2 || up[0] != ips[0] || owner(up[1]) != "dns IPv6" {
		t.Fatalf("upgrade: clusterIPs %v", up)
	}
	c.must("delete", "svc", "dns")
	if owner(ips[0]) != "" || owner(up[1]) != "" {
		t.Fatal("delete kept an IPAddress")
	}
}
