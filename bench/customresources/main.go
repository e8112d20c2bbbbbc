// Command customresources benchmarks custom resources against built-in
// objects of the same size: create, get and list of N objects of a
// CustomResourceDefinition's kind beside as many ConfigMaps, in the same
// run against the same API server. The ratio custom/ConfigMap is the
// figure to track.
//
//	go run ./bench/customresources -n 5000 -workers 8
package main

import (
	"context"
	"flag"

	"github.com/svcnet/svcnet/bench/internal/apibench"
	"github.com/svcnet/svcnet/bench/internal/benchmain"
)

func main() {
	n := flag.Int("n", 5000, "objects of each kind")
	workers := flag.Int("workers", 8, "concurrent clients")
	cpuProfile := flag.String("cpuprofile", "", "write a CPU profile of the whole run to this file")
	flag.Parse()
	benchmain.Main(*cpuProfile, func(ctx context.Context) (*apibench.CustomResourceResult, error) {
		return apibench.RunCustomResources(ctx, apibench.Options{N: *n, Workers: *workers})
	})
}
