package topobench

import (
	"context"
	"os"
	"strings"
	"testing"

	"github.com/svcnet/svcnet/bench/internal/benchmain"
	"github.com/svcnet/svcnet/internal/topology/headless"
)

// TestRunSmall runs the benchmark at a small size to keep it working; the
// figures themselves come from `go run ./bench/topology`.
func TestRunSmall(t *testing.T) {
	if _, err := headless.Available(); err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("CI installs chromium (.ci/run): %v", err)
		}
		t.Skipf("needs Debian's chromium: %v", err)
	}
	res, printed := benchmain.Small(t, func(ctx context.Context) (*Result, error) {
		return Run(ctx, Options{Services: 50, Namespaces: 2, SliceEvery: 5, Workers: 4, Rounds: 2})
	})
	if len(res.FirstRender) != 2 || res.FirstRender[0] <= 0 || res.FetchOnly[0] <= 0 || res.ClientGo[0] <= 0 || res.Pods != 30 {
		t.Errorf("implausible result %+v", res)
	}
	if !strings.Contains(printed, "ratio") {
		t.Errorf("printed result lacks its ratio:\n%s", printed)
	}
}
