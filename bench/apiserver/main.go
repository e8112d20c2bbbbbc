// Command apiserver benchmarks the API server against the etcd it stores
// into: create, get, list and watch of N ConfigMaps through client-go,
// beside etcd's own put, get, range and watch of the same bytes, measured in
// the same run. The ratio svcnet/etcd is the figure to track.
//
//	go run ./bench/apiserver -n 10000 -workers 16
package main

import (
	"context"
	"flag"

	"github.com/svcnet/svcnet/bench/internal/apibench"
	"github.com/svcnet/svcnet/bench/internal/benchmain"
)

func main() {
	n := flag.Int("n", 10000, "number of ConfigMaps")
	workers := flag.Int("workers", 16, "concurrent clients")
	cpuProfile := flag.String("cpuprofile", "", "write a CPU profile of the whole run to this file")
	flag.Parse()
	benchmain.Main(*cpuProfile, func(ctx context.Context) (*apibench.Result, error) {
		return apibench.Run(ctx, apibench.Options{N: *n, Workers: *workers})
	})
}
