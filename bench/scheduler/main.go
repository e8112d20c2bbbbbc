// Command scheduler benchmarks the scheduler: a backlog of pods placed on
// simulated nodes (Node objects, Ready, no agent behind them), in pods
// scheduled per second, against creating the same number of pods and
// binding them directly through pods/binding, measured in the same run.
//
//	go run ./bench/scheduler -nodes 100 -pods 5000
package main

import (
	"context"
	"flag"

	"github.com/svcnet/svcnet/bench/internal/benchmain"
	"github.com/svcnet/svcnet/bench/internal/schedbench"
	"github.com/svcnet/svcnet/internal/controller/scheduler"
)

func main() {
	o := schedbench.Options{Scheduler: scheduler.DefaultOptions()}
	flag.IntVar(&o.Nodes, "nodes", 100, "number of nodes")
	flag.IntVar(&o.Pods, "pods", 5000, "number of pods")
	flag.IntVar(&o.Owners, "owners", 50, "controllers the pods belong to")
	flag.IntVar(&o.Workers, "workers", 16, "clients creating pods at once")
	flag.IntVar(&o.Scheduler.Parallelism, "parallelism", o.Scheduler.Parallelism, "the scheduler's --scheduler-parallelism")
	// The client limit is lifted by default, so that the scheduler, not
	// its rate limiter (50 qps by default), is measured.
	qps := flag.Float64("qps", 5000, "the scheduler's --scheduler-kube-api-qps")
	flag.IntVar(&o.Scheduler.Burst, "burst", 5000, "the scheduler's --scheduler-kube-api-burst")
	cpuProfile := flag.String("cpuprofile", "", "write a CPU profile of the whole run to this file")
	flag.Parse()
	o.Scheduler.QPS = float32(*qps)
	benchmain.Main(*cpuProfile, func(ctx context.Context) (*schedbench.Result, error) { return schedbench.Run(ctx, o) })
}
