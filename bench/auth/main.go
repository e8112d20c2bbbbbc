// Command auth benchmarks what authentication and authorization cost a
// request: RBAC against AlwaysAllow for a user bound to a Role, and a
// service account token against a client certificate, in one run.
//
//	go run ./bench/auth -n 2000 -workers 2 -rounds 10
package main

import (
	"context"
	"flag"

	"github.com/svcnet/svcnet/bench/internal/authbench"
	"github.com/svcnet/svcnet/bench/internal/benchmain"
)

func main() {
	n := flag.Int("n", 2000, "GETs per measurement and round")
	workers := flag.Int("workers", 2, "concurrent clients (more than the cores makes the figures noisy)")
	rounds := flag.Int("rounds", 10, "alternating rounds")
	cpuProfile := flag.String("cpuprofile", "", "write a CPU profile of the whole run to this file")
	flag.Parse()
	benchmain.Main(*cpuProfile, func(ctx context.Context) (*authbench.Result, error) {
		return authbench.Run(ctx, authbench.Options{N: *n, Workers: *workers, Rounds: *rounds})
	})
}
