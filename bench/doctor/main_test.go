package main

import (
	"strings"
	"testing"

	"github.com/svcnet/svcnet/bench/internal/benchmain"
)

func TestSmall(t *testing.T) {
	c := config{services: 50, rounds: 5, workers: 8}
	res, out := benchmain.Small(t, c.run)
	for _, s := range []stat{res.healthy, res.typo, res.describe} {
		if s.p50 <= 0 || s.p99 < s.p50 {
			t.Errorf("missing measurements of %s: %+v", s.name, s)
		}
	}
	if !strings.Contains(out, "ratio") {
		t.Errorf("output:\n%s", out)
	}
}
