package schedbench

import (
	"context"
	"strings"
	"testing"

	"github.com/svcnet/svcnet/bench/internal/benchmain"
	"github.com/svcnet/svcnet/internal/controller/scheduler"
)

// TestRunSmall runs the benchmark at a small size to keep it working; the
// figures themselves come from `go run ./bench/scheduler`.
func TestRunSmall(t *testing.T) {
	s := scheduler.DefaultOptions()
	s.QPS, s.Burst = 1000, 1000
	res, printed := benchmain.Small(t, func(ctx context.Context) (*Result, error) {
		return Run(ctx, Options{Nodes: 5, Pods: 100, Owners: 4, Workers: 4, Scheduler: s})
	})
	if res.Create <= 0 || res.Schedule <= 0 || res.Direct <= 0 {
		t.Errorf("a measurement is missing: %+v", res)
	}
	if res.MinPerNode < 1 || res.MaxPerNode > 100 {
		t.Errorf("pods per node %d to %d", res.MinPerNode, res.MaxPerNode)
	}
	if !strings.Contains(printed, "ratio") {
		t.Errorf("printed result lacks ratios:\n%s", printed)
	}
}
