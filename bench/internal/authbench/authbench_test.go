package authbench

import (
	"context"
	"strings"
	"testing"

	"github.com/svcnet/svcnet/bench/internal/benchmain"
)

func TestRunSmall(t *testing.T) {
	res, out := benchmain.Small(t, func(ctx context.Context) (*Result, error) {
		return Run(ctx, Options{N: 100, Workers: 4, Rounds: 2})
	})
	for _, s := range []Stat{res.RBAC, res.AlwaysAllow, res.Token} {
		if s.Ops != 200 || s.Elapsed <= 0 || s.P50 <= 0 {
			t.Errorf("%s: empty measurement %+v", s.Name, s)
		}
	}
	if !strings.Contains(out, "RBAC / AlwaysAllow rate") {
		t.Errorf("output lacks the ratio:\n%s", out)
	}
}
