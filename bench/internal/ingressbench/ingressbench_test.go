package ingressbench

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/svcnet/svcnet/bench/internal/benchmain"
)

// TestRunSmall runs the benchmark at a small size to keep it working; the
// figures themselves come from `go run ./bench/ingress`.
func TestRunSmall(t *testing.T) {
	res, printed := benchmain.Small(t, func(ctx context.Context) (*Result, error) {
		return Run(ctx, Options{Conns: 4, Round: 200 * time.Millisecond, Rounds: 1, Changes: 3})
	})
	if res.DirectRPS <= 0 || res.ProxyRPS <= 0 || res.ProxyP99 <= 0 || res.DirectP99 <= 0 || res.ChangeP50 <= 0 {
		t.Errorf("a measurement is missing: %+v", res)
	}
	if !strings.Contains(printed, "ratio") {
		t.Errorf("printed result lacks the ratio:\n%s", printed)
	}
}
