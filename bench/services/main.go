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
	"fmt"
	"log/slog"
	"os"
	"time"

	"github.com/svcnet/svcnet/bench/internal/apibench"
)

func main() {
	n := flag.Int("n", 2000, "creates of each kind")
	workers := flag.Int("workers", 16, "concurrent clients")
	flag.Parse()
	slog.SetDefault(slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn})))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Minute)
	defer cancel()
	res, err := apibench.RunServices(ctx, apibench.Options{N: *n, Workers: *workers})
	if err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(1)
	}
	res.Print(os.Stdout)
}
