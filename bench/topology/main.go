// Command topology benchmarks the topology page's first render with N
// Services loaded: the page served by an API server through a loopback
// proxy (as kubectl proxy serves it), opened in headless Chromium, from
// navigation to its lists drawn, against the time the same browser takes
// only to fetch and parse the Services list, measured in the same run.
//
//	go run ./bench/topology -services 10000
package main

import (
	"context"
	"flag"

	"github.com/svcnet/svcnet/bench/internal/benchmain"
	"github.com/svcnet/svcnet/bench/internal/topobench"
)

func main() {
	var o topobench.Options
	flag.IntVar(&o.Services, "services", 10000, "number of Services")
	flag.IntVar(&o.Namespaces, "namespaces", 10, "namespaces the Services are spread over")
	flag.IntVar(&o.SliceEvery, "slice-every", 10, "every Nth Service gets an EndpointSlice of 3 pods (one endpoint not ready)")
	flag.IntVar(&o.Workers, "workers", 16, "clients creating the objects")
	flag.IntVar(&o.Rounds, "rounds", 5, "times the page is opened afresh")
	cpuProfile := flag.String("cpuprofile", "", "write a CPU profile of this process (API server, etcd, proxy) to this file")
	flag.Parse()
	benchmain.Main(*cpuProfile, func(ctx context.Context) (*topobench.Result, error) { return topobench.Run(ctx, o) })
}
