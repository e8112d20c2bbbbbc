package proxy

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/time/rate"
)

func never() bool { return false }

func TestRunnerFullOnStartAndAfterFailure(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	kick := make(chan struct{}, 1)
	r := &runner{kick: kick, limiter: rate.NewLimiter(rate.Every(10*time.Millisecond), 2), period: time.Hour, urgent: never}
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

// runLoop runs r's loop with a sync that reports when it ran, until the
// test ends (cancel stops it).
func runLoop(t *testing.T, ctx context.Context, cancel context.CancelFunc, r *runner) <-chan time.Time {
	synced := make(chan time.Time)
	done := make(chan struct{})
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
	t.Cleanup(func() { cancel(); <-done })
	return synced
}

func TestRunnerRespectsMinSyncPeriod(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	kick := make(chan struct{}, 1)
	const minPeriod = 100 * time.Millisecond
	r := &runner{kick: kick, limiter: rate.NewLimiter(rate.Every(minPeriod), 1), period: time.Hour, urgent: never, floor: time.Millisecond}
	start := time.Now()
	synced := runLoop(t, ctx, cancel, r)
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

// Once the burst is spent, a change that makes a rejected Service
// reachable is synced floor after the previous sync instead of on the
// limiter's next token, even while an ordinary change waits for it; a
// Service that keeps flapping is synced no more often than every floor.
func TestRunnerSyncsAtOnceWhenAServiceBecomesReachable(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	kick := make(chan struct{}, 1)
	const minPeriod, floor = time.Second, 100 * time.Millisecond
	var urgent atomic.Bool
	r := &runner{kick: kick, limiter: rate.NewLimiter(rate.Every(minPeriod), 2), period: time.Hour, urgent: urgent.Load, floor: floor}
	synced := runLoop(t, ctx, cancel, r)
	next := func() time.Time {
		t.Helper()
		select {
		case at := <-synced:
			return at
		case <-time.After(5 * time.Second):
			t.Fatal("no sync")
			return time.Time{}
		}
	}
	// The start and a change take the burst's two tokens.
	first := next()
	kick <- struct{}{}
	prev := next()
	// An ordinary change waits for the next token, a second after the
	// first sync; a Service becoming reachable does not.
	kick <- struct{}{}
	urgent.Store(true)
	kick <- struct{}{}
	for i := range 4 {
		at := next()
		if d := at.Sub(prev); d < floor-time.Millisecond {
			t.Errorf("urgent sync %d came %s after the previous one, want at least %s", i, d, floor)
		}
		if i == 0 && at.Sub(first) > minPeriod/2 {
			t.Errorf("urgent sync came %s after the first sync: it waited for the limiter", at.Sub(first))
		}
		prev = at
		kick <- struct{}{}
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
