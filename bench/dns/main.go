// Command dns benchmarks svcnet's cluster DNS with many Services loaded:
// queries per second and p50/p99 latency for a mix of cluster names over
// UDP, and with -coredns, the same beside CoreDNS's kubernetes plugin
// reading the same API server in the same run (built from the Go module
// in that folder), with the ratio and the answers that differ.
//
//	go run ./bench/dns -services 10000 -coredns bench/dns/coredns
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"time"

	"github.com/svcnet/svcnet/bench/internal/benchmain"
	"github.com/svcnet/svcnet/bench/internal/dnsbench"
)

func main() {
	var o dnsbench.Options
	flag.IntVar(&o.Services, "services", 10000, "number of Services")
	flag.IntVar(&o.Namespaces, "namespaces", 10, "namespaces the Services are spread over")
	flag.IntVar(&o.Workers, "workers", 16, "UDP clients querying at once")
	flag.DurationVar(&o.Duration, "duration", 10*time.Second, "length of one server's turn in a round")
	flag.IntVar(&o.Rounds, "rounds", 3, "rounds, in each of which every server takes a turn")
	flag.IntVar(&o.Sample, "sample", 200, "Services whose names are asked of both servers and compared")
	coreDNS := flag.String("coredns", "", "build CoreDNS from the Go module in this folder (bench/dns/coredns) and measure it beside svcnet")
	cpuProfile := flag.String("cpuprofile", "", "write a CPU profile of this process (API server, etcd, svcnet's DNS, clients) to this file")
	flag.Parse()
	benchmain.Main(*cpuProfile, func(ctx context.Context) (*dnsbench.Result, error) {
		if *coreDNS != "" {
			dir, err := os.MkdirTemp("", "svcnet-coredns")
			if err != nil {
				return nil, err
			}
			defer os.RemoveAll(dir)
			fmt.Fprintf(os.Stderr, "building CoreDNS in %s\n", *coreDNS)
			if o.CoreDNS, err = dnsbench.BuildCoreDNS(ctx, *coreDNS, dir); err != nil {
				return nil, err
			}
		}
		return dnsbench.Run(ctx, o)
	})
}
