// Command ingress benchmarks the Ingress controller's L7 proxy on
// loopback: requests per second and p99 latency through the proxy against
// straight to the backend over the same number of keep-alive connections
// (the ratio is the figure to track), nginx set up as ingress-nginx sets
// it up in the same rounds as upstream's baseline, and the time from an
// Ingress update through the API server until the proxy serves it.
//
//	go run ./bench/ingress -conns 64 -round 5s -rounds 3 -changes 50 -nginx /usr/sbin/nginx
package main

import (
	"context"
	"flag"

	"github.com/svcnet/svcnet/bench/internal/benchmain"
	"github.com/svcnet/svcnet/bench/internal/ingressbench"
)

func main() {
	if ingressbench.Child() {
		return
	}
	conns := flag.Int("conns", 64, "concurrent keep-alive connections")
	round := flag.Duration("round", 5e9, "how long each target is loaded per round")
	rounds := flag.Int("rounds", 3, "rounds; the proxy and the backend take turns in each")
	changes := flag.Int("changes", 50, "Ingress updates timed until served")
	nginx := flag.String("nginx", "", "path of an nginx binary to measure as the baseline (ingress-nginx's settings); empty: not measured")
	proxyCPUs := flag.Int("proxy-cpus", 0, "CPUs of their own for the proxy and nginx's workers (the proxy then runs in a process of its own); 0: all share all CPUs")
	cpuProfile := flag.String("cpuprofile", "", "write a CPU profile of the whole run to this file")
	flag.Parse()
	benchmain.Main(*cpuProfile, func(ctx context.Context) (*ingressbench.Result, error) {
		return ingressbench.Run(ctx, ingressbench.Options{Conns: *conns, Round: *round, Rounds: *rounds, Changes: *changes, Nginx: *nginx, ProxyCPUs: *proxyCPUs})
	})
}
