package proxy

import (
	"context"
	"errors"
	"testing"
	"time"

	"golang.org/x/time/rate"
)

func TestRunnerFullOnStartAndAfterFailure(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	kick := make(chan struct{}, 1)
	r := &runner{kick: kick, limiter: rate.NewLimiter(rate.Every(10*time.Millisecond), 2), period: time.Hour}
	calls := make(chan bool)
	results := make(chan error)
	done := make(chan struct{})
	go func() {
		defer close(done)
		r.loop(ctx, func(full bool) error {
			calls <- full
			return <-results
		})
	}()
	next := func(want bool, result error) {
		t.Helper()
		select {
		case full := <-calls:
			if full != want {
				t.Fatalf("sync full=%v, want %v", full, want)
			}
			results <- result
		case <-time.After(5 * time.Second):
			t.Fatal("no sync")
		}
	}
	next(true, nil) // at start, without a kick
	kick <- struct{}{}
	next(false, errors.New("netlink said no"))
	next(true, nil) // the retry, in full, without a kick
	kick <- struct{}{}
	next(false, nil)
	cancel()
	<-done
}

func TestRunnerRespectsMinSyncPeriod(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	kick := make(chan struct{}, 1)
	const minPeriod = 100 * time.Millisecond
	r := &runner{kick: kick, limiter: rate.NewLimiter(rate.Every(minPeriod), 1), period: time.Hour}
	synced := make(chan time.Time)
	done := make(chan struct{})
	start := time.Now()
	go func() {
		defer close(done)
		r.loop(ctx, func(bool) error {
			select {
			case synced <- time.Now():
			case <-ctx.Done():
			}
			return nil
		})
	}()
	defer func() { cancel(); <-done }()
	// The limiter grants the k-th sync no sooner than k periods after the
	// first grant, which came after start. Comparing each sync with start,
	// not with the previous sync, keeps the check exact however late the
	// scheduler runs a goroutine. The millisecond covers the limiter's
	// floating-point token arithmetic.
	<-synced // the start
	for k := 1; k <= 3; k++ {
		kick <- struct{}{}
		select {
		case at := <-synced:
			if d, want := at.Sub(start), time.Duration(k)*minPeriod-time.Millisecond; d < want {
				t.Errorf("sync %d came %s after the start, want at least %s", k, d, want)
			}
		case <-time.After(5 * time.Second):
			t.Fatal("a kick gave no sync")
		}
	}
}

func TestHealth(t *testing.T) {
	var h Health
	t0 := time.Now()
	if h.Check(t0) == nil || !h.Started().IsZero() {
		t.Error("a proxy not started is healthy")
	}
	h.start(t0, time.Minute)
	if err := h.Check(t0); err == nil {
		t.Error("healthy before the first sync")
	}
	h.synced(t0.Add(time.Second))
	if err := h.Check(t0.Add(time.Minute)); err != nil || !h.Started().Equal(t0) {
		t.Errorf("after a sync: %v, started %v", err, h.Started())
	}
	if err := h.Check(t0.Add(2 * time.Minute)); err == nil {
		t.Error("healthy with the last sync two minutes ago")
	}
	h.synced(t0.Add(2 * time.Minute))
	h.stop()
	if err := h.Check(t0.Add(2 * time.Minute)); err == nil {
		t.Error("healthy after it stopped")
	}
}
