package apibench

import (
	"context"
	"strings"
	"testing"

	"github.com/svcnet/svcnet/bench/internal/benchmain"
)

// TestRunSmall runs the benchmark at a small size to keep it working; the
// figures themselves come from `go run ./bench/apiserver`.
func TestRunSmall(t *testing.T) {
	res, out := benchmain.Small(t, func(ctx context.Context) (*Result, error) {
		return Run(ctx, Options{N: 200, Workers: 4})
	})
	if len(res.Pairs) != 4 {
		t.Fatalf("got %d measurements, want create, get, list, watch", len(res.Pairs))
	}
	for _, p := range res.Pairs {
		for _, s := range p {
			if s.Ops == 0 || s.Elapsed <= 0 || s.Rate() <= 0 {
				t.Errorf("%s: empty measurement %+v", s.Name, s)
			}
		}
	}
	if !strings.Contains(out, "ratio") {
		t.Errorf("printed result lacks the ratio column:\n%s", out)
	}
}

// TestRunServicesSmall keeps the Service benchmark working; the figures
// come from `go run ./bench/services`.
func TestRunServicesSmall(t *testing.T) {
	res, out := benchmain.Small(t, func(ctx context.Context) (*ServiceResult, error) {
		return RunServices(ctx, Options{N: 100, Workers: 4})
	})
	if len(res.Services) != 2 || res.ConfigMaps.Rate() <= 0 {
		t.Fatalf("got %+v", res)
	}
	if !strings.Contains(out, "ratio") || !strings.Contains(out, "svc-nodeport") {
		t.Errorf("printed result:\n%s", out)
	}
}

// TestRunCustomResourcesSmall keeps the custom resource benchmark working;
// the figures come from `go run ./bench/customresources`.
func TestRunCustomResourcesSmall(t *testing.T) {
	res, out := benchmain.Small(t, func(ctx context.Context) (*CustomResourceResult, error) {
		return RunCustomResources(ctx, Options{N: 100, Workers: 4})
	})
	if len(res.Pairs) != 3 {
		t.Fatalf("got %+v", res)
	}
	for _, p := range res.Pairs {
		if p[0].Rate() <= 0 || p[1].Rate() <= 0 {
			t.Errorf("%s not measured: %+v", p[0].Name, p)
		}
	}
	if !strings.Contains(out, "ratio") || !strings.Contains(out, "list") {
		t.Errorf("printed result:\n%s", out)
	}
}
