package apibench

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"
)

// TestRunSmall runs the benchmark at a small size to keep it working; the
// figures themselves come from `go run ./bench/apiserver`.
func TestRunSmall(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	res, err := Run(ctx, Options{N: 200, Workers: 4})
	if err != nil {
		t.Fatal(err)
	}
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
	var buf bytes.Buffer
	res.Print(&buf)
	if !strings.Contains(buf.String(), "ratio") {
		t.Errorf("printed result lacks the ratio column:\n%s", buf.String())
	}
}

// TestRunServicesSmall keeps the Service benchmark working; the figures
// come from `go run ./bench/services`.
func TestRunServicesSmall(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	res, err := RunServices(ctx, Options{N: 100, Workers: 4})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Services) != 2 || res.ConfigMaps.Rate() <= 0 {
		t.Fatalf("got %+v", res)
	}
	var buf bytes.Buffer
	res.Print(&buf)
	if !strings.Contains(buf.String(), "ratio") || !strings.Contains(buf.String(), "svc-nodeport") {
		t.Errorf("printed result:\n%s", buf.String())
	}
}
