package slicebench

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"
)

// TestRunSmall runs the benchmark at a small size to keep it working; the
// figures themselves come from `go run ./bench/endpointslice`.
func TestRunSmall(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	res, err := Run(ctx, Options{Services: 20, PodsPerService: 5, Workers: 4, QPS: 1000, Burst: 1000})
	if err != nil {
		t.Fatal(err)
	}
	if res.Converge <= 0 || res.Ideal <= 0 || res.Writes < res.Minimum || res.Minimum != 20 {
		t.Errorf("implausible result %+v", res)
	}
	var buf bytes.Buffer
	res.Print(&buf)
	if !strings.Contains(buf.String(), "ratio") {
		t.Errorf("printed result lacks ratios:\n%s", buf.String())
	}
}
