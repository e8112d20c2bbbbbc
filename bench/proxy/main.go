// Command proxy measures the nftables Service proxy on a node network made
// for the run (a namespace with the pod bridge and two pods from
// internal/cni): the full sync of S Services × E endpoints, the time from
// an EndpointSlice change (as the proxy's tracker receives it) to a
// connection through the Service's cluster IP succeeding, p50/p99 over C
// changes, and TCP throughput through a cluster IP against the same
// transfer straight to the pod IP (the ratio is the figure). It needs
// root; everything it creates is removed when it ends.
//
//	sudo go run ./bench/proxy -services 10000 -endpoints 5
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/svcnet/svcnet/bench/internal/benchmain"
	"github.com/svcnet/svcnet/internal/cni"
	"github.com/svcnet/svcnet/internal/netns"
	"github.com/svcnet/svcnet/internal/proxy"
	"github.com/svcnet/svcnet/internal/proxy/nftables"
)

func main() {
	var c config
	flag.IntVar(&c.services, "services", 10000, "number of Services")
	flag.IntVar(&c.endpoints, "endpoints", 5, "endpoints per Service")
	flag.IntVar(&c.changes, "changes", 100, "EndpointSlice changes timed")
	flag.DurationVar(&c.transfer, "transfer", 2*time.Second, "length of each throughput run")
	cpu := flag.String("cpuprofile", "", "write a CPU profile to this file")
	flag.Parse()
	benchmain.Main(*cpu, c.run)
}

type config struct {
	services, endpoints, changes int
	transfer                     time.Duration
}

type result struct {
	cfg                  config
	fullSync             time.Duration
	p50, p99, max        time.Duration
	syncP50              time.Duration // the partial sync alone
	direct, viaClusterIP float64       // bytes per second
}

func (r result) Print(w io.Writer) {
	fmt.Fprintf(w, "%d Services × %d endpoints\n", r.cfg.services, r.cfg.endpoints)
	fmt.Fprintf(w, "full sync                       %v\n", r.fullSync.Round(time.Millisecond))
	fmt.Fprintf(w, "slice change to traffic (n=%d)  p50 %v  p99 %v  max %v  (partial sync p50 %v)\n", r.cfg.changes,
		r.p50.Round(10*time.Microsecond), r.p99.Round(10*time.Microsecond), r.max.Round(10*time.Microsecond),
		r.syncP50.Round(10*time.Microsecond))
	fmt.Fprintf(w, "TCP throughput: pod IP %.0f MB/s, cluster IP %.0f MB/s, ratio %.2f\n",
		r.direct/1e6, r.viaClusterIP/1e6, r.viaClusterIP/r.direct)
}

const node = "bench-node"

func clusterIP(i int) netip.Addr {
	base := netip.MustParseAddr("10.96.0.0").As4()
	n := uint32(base[0])<<24 | uint32(base[1])<<16 | uint32(i+1)
	return netip.AddrFrom4([4]byte{byte(n >> 24), byte(n >> 16), byte(n >> 8), byte(n)})
}

func service(i int) *corev1.Service {
	ip := clusterIP(i).String()
	return &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: "bench", Name: "svc-" + strconv.Itoa(i)},
		Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeClusterIP, ClusterIP: ip, ClusterIPs: []string{ip},
			Ports: []corev1.ServicePort{{Name: "http", Port: 8080, Protocol: corev1.ProtocolTCP}}},
	}
}

// slice lists addrs (port 80) as ready endpoints of Service i.
func slice(i int, addrs []string) *discoveryv1.EndpointSlice {
	s := &discoveryv1.EndpointSlice{
		ObjectMeta: metav1.ObjectMeta{Namespace: "bench", Name: "svc-" + strconv.Itoa(i) + "-1",
			Labels: map[string]string{discoveryv1.LabelServiceName: "svc-" + strconv.Itoa(i)}},
		AddressType: discoveryv1.AddressTypeIPv4,
		Ports:       []discoveryv1.EndpointPort{{Name: ptr.To("http"), Port: ptr.To[int32](80), Protocol: ptr.To(corev1.ProtocolTCP)}},
	}
	for _, a := range addrs {
		s.Endpoints = append(s.Endpoints, discoveryv1.Endpoint{Addresses: []string{a}, NodeName: ptr.To(node),
			Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(true)}})
	}
	return s
}

// fakeEndpoints are addresses of pods on other nodes that nothing answers.
func fakeEndpoints(i, n int) []string {
	out := make([]string, n)
	for j := range out {
		k := i*n + j
		out[j] = fmt.Sprintf("10.245.%d.%d", k/250%250, k%250+1)
	}
	return out
}

func (c config) run(ctx context.Context) (res result, err error) {
	res.cfg = c
	if os.Geteuid() != 0 {
		return res, errors.New("needs root for the node's network namespace")
	}
	dir, err := os.MkdirTemp("", "svcnet-proxybench")
	if err != nil {
		return res, err
	}
	defer os.RemoveAll(dir)
	nsName := fmt.Sprintf("svcnet-proxybench-%d", os.Getpid())
	if out, err := exec.Command("ip", "netns", "add", nsName).CombinedOutput(); err != nil {
		return res, fmt.Errorf("ip netns add: %v: %s", err, out)
	}
	defer func() {
		if out, derr := exec.Command("ip", "netns", "del", nsName).CombinedOutput(); derr != nil {
			err = errors.Join(err, fmt.Errorf("ip netns del: %v: %s", derr, out))
		}
	}()
	nsPath := filepath.Join("/var/run/netns", nsName)
	network, err := cni.Open(cni.Config{NodeNetNS: nsPath, Dir: filepath.Join(dir, "cni")})
	if err != nil {
		return res, err
	}
	defer network.Close()
	if err := network.Ensure("10.244.0.0/24"); err != nil {
		return res, err
	}
	var pods [2]*cni.Sandbox
	for i, id := range []string{"server", "client"} {
		if pods[i], err = network.Setup(id); err != nil {
			return res, err
		}
		defer func() { err = errors.Join(err, network.Teardown(id)) }()
	}
	server, client := pods[0], pods[1]
	ln, err := listenIn(server.NetNS)
	if err != nil {
		return res, err
	}
	defer ln.Close()
	go serve(ln)

	backend, err := nftables.New(nftables.Config{NetNS: nsPath, PodCIDRs: []netip.Prefix{netip.MustParsePrefix("10.244.0.0/24")}})
	if err != nil {
		return res, err
	}
	defer func() { err = errors.Join(err, backend.Cleanup()) }()
	tracker := proxy.NewTracker(node)
	for i := 0; i < c.services; i++ {
		tracker.ServiceUpdated(nil, service(i))
		tracker.SliceUpdated(slice(i, fakeEndpoints(i, c.endpoints)), false)
	}
	start := time.Now()
	u, _ := tracker.Take(true)
	if _, err := backend.Sync(ctx, u); err != nil {
		return res, fmt.Errorf("full sync: %w", err)
	}
	res.fullSync = time.Since(start)

	// Each change points one Service at the server pod (beside its other
	// endpoints' replacements), then waits for a connection to work.
	var lat, syncs []time.Duration
	for k := 0; k < c.changes; k++ {
		i := k * (c.services / c.changes) % c.services
		start := time.Now()
		tracker.SliceUpdated(slice(i, []string{server.IP.String()}), false)
		u, _ := tracker.Take(false)
		if _, err := backend.Sync(ctx, u); err != nil {
			return res, fmt.Errorf("partial sync: %w", err)
		}
		syncs = append(syncs, time.Since(start))
		if err := connect(ctx, client.NetNS, netip.AddrPortFrom(clusterIP(i), 8080).String()); err != nil {
			return res, err
		}
		lat = append(lat, time.Since(start))
	}
	slices.Sort(lat)
	slices.Sort(syncs)
	res.p50, res.p99, res.max = lat[len(lat)/2], lat[len(lat)*99/100], lat[len(lat)-1]
	res.syncP50 = syncs[len(syncs)/2]

	// Alternate the two transfers and take each one's median, so that
	// other load on the machine hits both alike.
	direct := net.JoinHostPort(server.IP.String(), "80")
	via := netip.AddrPortFrom(clusterIP(0), 8080).String()
	var directRuns, viaRuns []float64
	for range 3 {
		d, err := throughput(client.NetNS, direct, c.transfer)
		if err != nil {
			return res, err
		}
		v, err := throughput(client.NetNS, via, c.transfer)
		if err != nil {
			return res, err
		}
		directRuns, viaRuns = append(directRuns, d), append(viaRuns, v)
	}
	slices.Sort(directRuns)
	slices.Sort(viaRuns)
	res.direct, res.viaClusterIP = directRuns[1], viaRuns[1]
	return res, nil
}

func listenIn(ns string) (net.Listener, error) { return netns.ListenAt(ns)("tcp", ":80") }

// serve reads and discards what each connection sends.
func serve(ln net.Listener) {
	for {
		conn, err := ln.Accept()
		if err != nil {
			return
		}
		go func() {
			defer conn.Close()
			_, _ = io.Copy(io.Discard, conn)
		}()
	}
}

func dialIn(ns, addr string, timeout time.Duration) (net.Conn, error) {
	var conn net.Conn
	err := netns.Do(ns, func() error {
		var err error
		conn, err = net.DialTimeout("tcp", addr, timeout)
		return err
	})
	return conn, err
}

// connect dials addr from the namespace until a connection succeeds.
func connect(ctx context.Context, ns, addr string) error {
	for {
		conn, err := dialIn(ns, addr, 100*time.Millisecond)
		if err == nil {
			return conn.Close()
		}
		if ctx.Err() != nil {
			return fmt.Errorf("connect to %s: %w", addr, err)
		}
	}
}

// throughput sends to addr for d and returns bytes per second.
func throughput(ns, addr string, d time.Duration) (float64, error) {
	conn, err := dialIn(ns, addr, time.Second)
	if err != nil {
		return 0, fmt.Errorf("dial %s: %w", addr, err)
	}
	defer conn.Close()
	buf := make([]byte, 128<<10)
	var sent int64
	start := time.Now()
	for time.Since(start) < d {
		n, err := conn.Write(buf)
		sent += int64(n)
		if err != nil {
			return 0, fmt.Errorf("send to %s: %w", addr, err)
		}
	}
	return float64(sent) / time.Since(start).Seconds(), nil
}
