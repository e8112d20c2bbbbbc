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
	"fmt"
	"log/slog"
	"os"
	"runtime/pprof"
	"time"

	"github.com/svcnet/svcnet/bench/internal/apibench"
)

func main() {
	n := flag.Int("n", 10000, "number of ConfigMaps")
	workers := flag.Int("workers", 16, "concurrent clients")
	cpuProfile := flag.String("cpuprofile", "", "write a CPU profile of the whole run to this file")
	flag.Parse()
	if *cpuProfile != "" {
		f, err := os.Create(*cpuProfile)
		if err != nil {
			fmt.Fprintln(os.Stderr, "bench:", err)
			os.Exit(1)
		}
		if err := pprof.StartCPUProfile(f); err != nil {
			fmt.Fprintln(os.Stderr, "bench:", err)
			os.Exit(1)
		}
		defer pprof.StopCPUProfile()
	}
	slog.SetDefault(slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn})))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Minute)
	defer cancel()
	res, err := apibench.Run(ctx, apibench.Options{N: *n, Workers: *workers})
	if err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		return
	}
	res.Print(os.Stdout)
}
