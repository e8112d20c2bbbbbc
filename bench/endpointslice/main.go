// Command endpointslice benchmarks the EndpointSlice controller: N Services
// of M pods each, all made Ready at once; it reports the time until every
// slice is correct and the slice writes used, against an ideal writer's
// time and the minimum number of writes, measured in the same run.
//
//	go run ./bench/endpointslice -services 1000 -pods 10
package main

import (
	"context"
	"flag"

	"github.com/svcnet/svcnet/bench/internal/benchmain"
	"github.com/svcnet/svcnet/bench/internal/slicebench"
	"github.com/svcnet/svcnet/internal/cluster"
)

func main() {
	def := cluster.DefaultControllerManagerOptions()
	o := slicebench.Options{}
	flag.IntVar(&o.Services, "services", 1000, "number of Services")
	flag.IntVar(&o.PodsPerService, "pods", 10, "pods per Service")
	flag.IntVar(&o.Workers, "workers", 32, "clients making pods Ready at once")
	flag.DurationVar(&o.BatchPeriod, "batch-period", 0, "the controller's --endpointslice-updates-batch-period")
	qps := flag.Float64("qps", float64(def.KubeAPIQPS), "the controller manager's --kube-api-qps")
	flag.IntVar(&o.Burst, "burst", def.KubeAPIBurst, "the controller manager's --kube-api-burst")
	cpuProfile := flag.String("cpuprofile", "", "write a CPU profile of the whole run to this file")
	flag.Parse()
	o.QPS = float32(*qps)
	benchmain.Main(*cpuProfile, func(ctx context.Context) (*slicebench.Result, error) { return slicebench.Run(ctx, o) })
}
