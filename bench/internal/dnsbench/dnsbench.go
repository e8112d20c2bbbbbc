// Package dnsbench measures cluster DNS with many Services loaded: queries
// per second and p50/p99 latency of svcnet's DNS server (internal/dns, in
// this process, fed by informers) under a fixed mix of cluster names sent
// over UDP on loopback. The baseline, measured in the same run against the
// same API server with the same queries, is CoreDNS's kubernetes plugin
// (a separate process, built from bench/dns/coredns); the two servers take
// turns, round after round, so that both see the same machine. Both are
// also asked a sample of names and their answers compared.
package dnsbench

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/netip"
	"os"
	"strconv"
	"time"

	"k8s.io/client-go/kubernetes"

	"github.com/svcnet/svcnet/bench/internal/benchenv"
	clusterdns "github.com/svcnet/svcnet/internal/dns"
)

// Options size a run.
type Options struct {
	// Services are spread over Namespaces; every tenth is headless and
	// every hundredth an ExternalName (see kindOf).
	Services, Namespaces int
	// Workers is how many UDP clients query at once, each waiting for its
	// answer before the next question.
	Workers int
	// Duration is the length of one server's turn in one round.
	Duration time.Duration
	Rounds   int
	// Sample is how many Services' names are asked of both servers and
	// their answers compared.
	Sample int
	// CoreDNS is the CoreDNS binary to measure against; empty measures
	// svcnet alone.
	CoreDNS string
}

// Result is one run's figures.
type Result struct {
	Options
	// Load is how long creating the Services and EndpointSlices took.
	Load time.Duration
	// Servers are svcnet's figures, then CoreDNS's when it was measured.
	Servers []*Stats
	// Compared is how many questions both servers were asked; Mismatches
	// are those they answered differently.
	Compared   int
	Mismatches []Mismatch
}

// Print writes each server's figures, the ratios of svcnet's to
// CoreDNS's, and the answers that differ.
func (r *Result) Print(w io.Writer) {
	var kinds [3]int
	for i := range r.Services {
		kinds[kindOf(i)]++
	}
	fmt.Fprintf(w, "%d Services (%d headless, %d ExternalName) in %d namespaces, loaded in %s; %d UDP clients, %d rounds of %s per server\n",
		r.Services, kinds[headless], kinds[externalName], r.Namespaces, r.Load.Round(time.Millisecond), r.Workers, r.Rounds, r.Duration)
	fmt.Fprintf(w, "query mix: %s\n", mixDescription)
	fmt.Fprintf(w, "%-8s %10s %10s %10s %10s %10s %8s %8s\n", "server", "ready in", "queries", "qps", "p50", "p99", "lost", "wrong")
	for _, s := range r.Servers {
		fmt.Fprintf(w, "%-8s %10s %10d %10.0f %10s %10s %8d %8d\n", s.Server, s.Ready.Round(time.Millisecond), s.Queries, s.QPS(),
			s.P50.Round(time.Microsecond), s.P99.Round(time.Microsecond), s.Lost, s.Wrong)
	}
	if len(r.Servers) < 2 {
		fmt.Fprintln(w, "CoreDNS not measured: `go run ./bench/dns -coredns bench/dns/coredns` builds it and runs it beside svcnet")
		return
	}
	ours, theirs := r.Servers[0], r.Servers[1]
	fmt.Fprintf(w, "ratio svcnet/CoreDNS: qps %.2f, p50 %.2f, p99 %.2f\n", ours.QPS()/theirs.QPS(),
		ours.P50.Seconds()/theirs.P50.Seconds(), ours.P99.Seconds()/theirs.P99.Seconds())
	fmt.Fprintf(w, "answers compared: %d questions, %d answered differently\n", r.Compared, len(r.Mismatches))
	for _, m := range r.Mismatches {
		fmt.Fprintf(w, "  %s\n    svcnet:  %s\n    CoreDNS: %s\n", m.Question, m.Svcnet, m.CoreDNS)
	}
}

// server is one DNS server under test.
type server struct {
	name string
	addr string // host:port, UDP and TCP
}

// Run starts an API server in this process on a temporary dir and
// loopback ports, loads the Services, starts the DNS servers and measures.
func Run(ctx context.Context, o Options) (*Result, error) {
	dir, err := os.MkdirTemp("", "svcnet-dnsbench")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	srv, err := benchenv.StartServer(ctx)
	if err != nil {
		return nil, err
	}
	defer srv.Stop()
	ctx, stop := context.WithCancel(ctx)
	defer stop()
	cs := srv.Client

	res := &Result{Options: o}
	start := time.Now()
	f, err := load(ctx, cs, o)
	if err != nil {
		return nil, err
	}
	res.Load = time.Since(start)

	svcnet, ready, stopSvcnet, err := startSvcnet(ctx, cs, f)
	if err != nil {
		return nil, err
	}
	defer stopSvcnet()
	servers := []server{svcnet}
	res.Servers = []*Stats{{Server: svcnet.name, Ready: ready}}
	if o.CoreDNS != "" {
		core, ready, stopCoreDNS, err := startCoreDNS(ctx, o.CoreDNS, dir, srv.Kubeconfig, f)
		if err != nil {
			return nil, err
		}
		defer stopCoreDNS()
		servers = append(servers, core)
		res.Servers = append(res.Servers, &Stats{Server: core.name, Ready: ready})
	}

	queries, err := f.mix(4096)
	if err != nil {
		return nil, err
	}
	// A warm-up turn each, not counted, then the rounds.
	for _, s := range servers {
		if _, err := measure(ctx, s.addr, queries, o.Workers, min(o.Duration, time.Second)); err != nil {
			return nil, fmt.Errorf("warm up %s: %w", s.name, err)
		}
	}
	for range o.Rounds {
		for i, s := range servers {
			t, err := measure(ctx, s.addr, queries, o.Workers, o.Duration)
			if err != nil {
				return nil, fmt.Errorf("measure %s: %w", s.name, err)
			}
			res.Servers[i].add(t)
		}
	}
	for _, s := range res.Servers {
		s.summarize()
	}
	if len(servers) == 2 {
		res.Compared, res.Mismatches, err = compare(ctx, f.sample(o.Sample), servers[0].addr, servers[1].addr)
		if err != nil {
			return nil, err
		}
	}
	return res, nil
}

// exit tells that a server stopped, and why.
type exit struct {
	done chan struct{} // closed once err is set
	err  error
}

func newExit() *exit { return &exit{done: make(chan struct{})} }

func (e *exit) set(err error) {
	e.err = err
	close(e.done)
}

// startSvcnet runs svcnet's cluster DNS in this process, as a node agent
// does but on a loopback port and without publishing itself behind
// kube-dns; it returns once the server answers for the last Service
// loaded, how long that took, and a function that stops the server.
func startSvcnet(ctx context.Context, cs kubernetes.Interface, f *fixture) (server, time.Duration, func(), error) {
	port, err := freeDNSPort()
	if err != nil {
		return server{}, 0, nil, err
	}
	metricsPort, err := freePort()
	if err != nil {
		return server{}, 0, nil, err
	}
	s := server{name: "svcnet", addr: net.JoinHostPort("127.0.0.1", strconv.Itoa(port))}
	ctx, cancel := context.WithCancel(ctx)
	exited := newExit()
	start := time.Now()
	go func() {
		exited.set(clusterdns.Run(ctx, clusterdns.Config{
			Client: cs, Zone: zone, NameServers: []netip.Addr{netip.MustParseAddr("10.96.0.10")},
			Address: s.addr, Metrics: net.JoinHostPort("127.0.0.1", strconv.Itoa(metricsPort)),
		}))
	}()
	stop := func() {
		cancel()
		<-exited.done
	}
	if err := f.waitReady(ctx, s.addr, exited); err != nil {
		stop()
		return server{}, 0, nil, fmt.Errorf("svcnet DNS: %w", err)
	}
	return s, time.Since(start), stop, nil
}

// freePort is a free TCP port of 127.0.0.1.
func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// freeDNSPort finds a port of 127.0.0.1 free for both UDP and TCP.
func freeDNSPort() (int, error) {
	for range 20 {
		pc, err := net.ListenPacket("udp", "127.0.0.1:0")
		if err != nil {
			return 0, err
		}
		port := pc.LocalAddr().(*net.UDPAddr).Port
		ln, err := net.Listen("tcp", pc.LocalAddr().String())
		pc.Close()
		if err == nil {
			ln.Close()
			return port, nil
		}
	}
	return 0, fmt.Errorf("no port of 127.0.0.1 free for both UDP and TCP")
}
