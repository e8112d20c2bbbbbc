package slowstart

import (
	"errors"
	"slices"
	"sync"
	"testing"
)

func TestRunDoublesBatchesUntilAFailure(t *testing.T) {
	var mu sync.Mutex
	var called []int
	ok, err := Run(20, func(i int) error {
		mu.Lock()
		called = append(called, i)
		mu.Unlock()
		if i == 5 {
			return errors.New("quota exceeded")
		}
		return nil
	})
	// Batches 0, 1-2, 3-6: the third fails, so 7..19 are never tried.
	slices.Sort(called)
	if want := []int{0, 1, 2, 3, 4, 5, 6}; !slices.Equal(called, want) {
		t.Errorf("called %v, want %v", called, want)
	}
	if ok != 6 || err == nil || err.Error() != "quota exceeded" {
		t.Errorf("Run = %d, %v; want 6, quota exceeded", ok, err)
	}
}

func TestRunAll(t *testing.T) {
	var mu sync.Mutex
	seen := map[int]bool{}
	ok, err := Run(1200, func(i int) error {
		mu.Lock()
		seen[i] = true
		mu.Unlock()
		return nil
	})
	if ok != 1200 || err != nil || len(seen) != 1200 {
		t.Errorf("Run = %d, %v with %d distinct calls; want 1200, nil, 1200", ok, err, len(seen))
	}
	if n, err := Run(0, func(int) error { t.Error("called for n=0"); return nil }); n != 0 || err != nil {
		t.Errorf("Run(0) = %d, %v", n, err)
	}
}
