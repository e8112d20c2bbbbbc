// Command services benchmarks Service allocation: creates per second of
// ClusterIP and NodePort Services, whose cluster IP and node port commit
// with them in one etcd transaction, against ConfigMap creates measured in
// the same run. The ratio Service/ConfigMap is the figure to track.
//
//	go run ./bench/services -n 2000 -workers 16
package main

import (
	"context"
	"flag"

	"github.com/svcnet/svcnet/bench/internal/apibench"
	"github.com/svcnet/svcnet/bench/internal/benchmain"
)

func main() {
	n := flag.Int("n", 2000, "creates of each kind")
	workers := flag.Int("workers", 16, "concurrent clients")
	cpuProfile := flag.String("cpuprofile", "", "write a CPU profile of the whole run to this file")
	flag.Parse()
	benchmain.Main(*cpuProfile, func(ctx context.Context) (*apibench.ServiceResult, error) {
		return apibench.RunServices(ctx, apibench.Options{N: *n, Workers: *workers})
	})
}
