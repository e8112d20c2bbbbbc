package slicebench

import (
	"context"
	"strings"
	"testing"

	"github.com/svcnet/svcnet/bench/internal/benchmain"
)

// TestRunSmall runs the benchmark at a small size to keep it working; the
// figures themselves come from `go run ./bench/endpointslice`.
func TestRunSmall(t *testing.T) {
	res, printed := benchmain.Small(t, func(ctx context.Context) (*Result, error) {
		return Run(ctx, Options{Services: 20, PodsPerService: 5, Workers: 4, QPS: 1000, Burst: 1000})
	})
	if res.Converge <= 0 || res.Ideal <= 0 || res.Writes < res.Minimum || res.Minimum != 20 {
		t.Errorf("implausible result %+v", res)
	}
	if !strings.Contains(printed, "ratio") {
		t.Errorf("printed result lacks ratios:\n%s", printed)
	}
}
