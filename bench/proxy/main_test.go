package main

import (
	"os"
	"strings"
	"testing"
	"time"

	"github.com/svcnet/svcnet/bench/internal/benchmain"
)

func TestSmall(t *testing.T) {
	if os.Geteuid() != 0 {
		if os.Getenv("CI") == "true" {
			t.Fatal("the proxy benchmark needs root, and CI runs as root")
		}
		t.Skip("the proxy benchmark needs root; CI runs it as root")
	}
	c := config{services: 50, endpoints: 3, changes: 10, transfer: 200 * time.Millisecond}
	res, out := benchmain.Small(t, c.run)
	if res.fullSync <= 0 || res.p50 <= 0 || res.p99 < res.p50 || res.direct <= 0 || res.viaClusterIP <= 0 {
		t.Errorf("missing measurements: %+v", res)
	}
	if !strings.Contains(out, "ratio") {
		t.Errorf("output:\n%s", out)
	}
}
