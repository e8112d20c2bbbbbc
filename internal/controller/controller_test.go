package controller

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/client-go/util/workqueue"
)

func TestQueueRetriesWithBackoffThenDrops(t *testing.T) {
	reg := prometheus.NewRegistry()
	m := NewMetrics(reg)
	var mu sync.Mutex
	calls := map[string]int{}
	q := NewQueue(m, QueueConfig[string]{
		Name:        "test",
		RateLimiter: workqueue.NewTypedItemExponentialFailureRateLimiter[string](time.Millisecond, 10*time.Millisecond),
		MaxRetries:  3,
		Sync: func(_ context.Context, key string) error {
			mu.Lock()
			defer mu.Unlock()
			calls[key]++
			if key == "bad" || (key == "flaky" && calls[key] < 2) {
				return errors.New("boom")
			}
			return nil
		},
	})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		q.Run(ctx, 2)
		close(done)
	}()
	q.Add("good")
	q.Add("flaky")
	q.Add("bad")
	time.Sleep(300 * time.Millisecond)
	cancel()
	<-done
	mu.Lock()
	defer mu.Unlock()
	if calls["good"] != 1 || calls["flaky"] != 2 || calls["bad"] != 4 {
		t.Errorf("calls %v, want good 1, flaky 2, bad 4 (first try and 3 retries)", calls)
	}
	var retries float64
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		if f.GetName() == "workqueue_retries_total" {
			retries = f.GetMetric()[0].GetCounter().GetValue()
		}
	}
	if n := retries; n != 4 {
		t.Errorf("workqueue_retries_total %v, want 4", n)
	}
	if n := sampleCount(t, reg, "svcnet_controller_sync_duration_seconds", "error"); n != 5 {
		t.Errorf("failed syncs observed %d, want 5", n)
	}
}

func TestChangeLatencyTracksUntilWritten(t *testing.T) {
	reg := prometheus.NewRegistry()
	c := NewChangeLatency[string](NewMetrics(reg), "test")
	const name = "svcnet_endpoints_change_to_write_seconds"
	c.Seen("svc")
	time.Sleep(20 * time.Millisecond)
	c.Seen("svc") // the older change counts
	if err := c.Track("svc", func() (bool, error) { return false, errors.New("fail") }); err == nil {
		t.Fatal("error not returned")
	}
	if err := c.Track("svc", func() (bool, error) { return true, nil }); err != nil {
		t.Fatal(err)
	}
	if n, sum := sampleCount(t, reg, name, ""), sampleSum(t, reg, name); n != 1 || sum < 0.02 {
		t.Errorf("observed %d latencies summing %.3fs, want one of at least the 20ms since the first change", n, sum)
	}
	// Nothing pending, or nothing written: nothing observed.
	_ = c.Track("svc", func() (bool, error) { return true, nil })
	c.Seen("svc")
	_ = c.Track("svc", func() (bool, error) { return false, nil })
	if n := sampleCount(t, reg, name, ""); n != 1 {
		t.Errorf("observed %d latencies, want still 1", n)
	}
}

// sampleCount sums the sample counts of a histogram's series, those with
// the given result label when one is given.
func sampleCount(t *testing.T, reg *prometheus.Registry, name, result string) uint64 {
	t.Helper()
	var n uint64
	histograms(t, reg, name, func(labels map[string]string, count uint64, _ float64) {
		if result == "" || labels["result"] == result {
			n += count
		}
	})
	return n
}

func sampleSum(t *testing.T, reg *prometheus.Registry, name string) float64 {
	t.Helper()
	var total float64
	histograms(t, reg, name, func(_ map[string]string, _ uint64, sum float64) { total += sum })
	return total
}

// histograms calls each for every series of the named histogram.
func histograms(t *testing.T, reg *prometheus.Registry, name string, each func(labels map[string]string, count uint64, sum float64)) {
	t.Helper()
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		if f.GetName() != name {
			continue
		}
		for _, m := range f.GetMetric() {
			labels := map[string]string{}
			for _, l := range m.GetLabel() {
				labels[l.GetName()] = l.GetValue()
			}
			each(labels, m.GetHistogram().GetSampleCount(), m.GetHistogram().GetSampleSum())
		}
	}
}

// A key whose cache is stale comes back within moments, however often,
// and not through the failure backoff: the failure limiter here waits an
// hour and allows one retry.
func TestQueueRetriesStaleSoon(t *testing.T) {
	reg := prometheus.NewRegistry()
	var calls atomic.Int32
	done := make(chan time.Time, 1)
	q := NewQueue(NewMetrics(reg), QueueConfig[string]{
		Name:        "test",
		RateLimiter: workqueue.NewTypedItemExponentialFailureRateLimiter[string](time.Hour, time.Hour),
		MaxRetries:  1,
		Sync: func(context.Context, string) error {
			if calls.Add(1) <= 5 {
				return fmt.Errorf("slice %w", ErrStale)
			}
			done <- time.Now()
			return nil
		},
	})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go q.Run(ctx, 1)
	start := time.Now()
	q.Add("svc")
	select {
	case at := <-done:
		// 10+20+40+80+160ms of retries.
		if d := at.Sub(start); d > 5*time.Second {
			t.Errorf("synced %s after the first stale try", d)
		}
	case <-time.After(10 * time.Second):
		t.Fatalf("a stale key was not retried to success (%d syncs)", calls.Load())
	}
	if n := sampleCount(t, reg, "svcnet_controller_sync_duration_seconds", "stale"); n != 5 {
		t.Errorf("stale syncs observed %d, want 5", n)
	}
}
