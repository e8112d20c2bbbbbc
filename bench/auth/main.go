// Command auth benchmarks what authentication and authorization cost a
// request: RBAC against AlwaysAllow for a user bound to a Role, and a
// service account token against a client certificate, in one run.
//
//	go run ./bench/auth -n 5000 -workers 8 -rounds 3
package main

import (
	"context"
	"flag"

	"github.com/svcnet/svcnet/bench/internal/authbench"
	"github.com/svcnet/svcnet/bench/internal/benchmain"
)

func main() {
	n := flag.Int("n", 5000, "GETs per measurement and round")
	workers := flag.Int("workers", 8, "concurrent clients")
	rounds := flag.Int("rounds", 3, "alternating rounds")
	cpuProfile := flag.String("cpuprofile", "", "write a CPU profile of the whole run to this file")
	flag.Parse()
	benchmain.Main(*cpuProfile, func(ctx context.Context) (*authbench.Result, error) {
		return authbench.Run(ctx, authbench.Options{N: *n, Workers: *workers, Rounds: *rounds})
	})
}
