// Package controller holds what svcnet's controllers share, the pattern of
// upstream's kube-controller-manager: informer events put keys on a
// rate-limited workqueue, workers take each key to an idempotent sync that
// reads the world from listers and writes the difference, and a failed key
// comes back with exponential backoff. It also provides the Prometheus
// metrics of those queues and the latency from an observed change to the
// write that publishes it. What components other than controllers share
// with them lives in internal/informer (handlers) and internal/events
// (event recording).
package controller

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"time"

	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"
)

// Deps are what the controllers of one leadership term share: the API
// client, the informers (started once every controller has registered its
// handlers) and the process's metrics.
type Deps struct {
	Client    kubernetes.Interface
	Informers informers.SharedInformerFactory
	Metrics   *Metrics
}

// DefaultMaxRetries is how often upstream's controllers retry a key before
// dropping it until its next change.
const DefaultMaxRetries = 15

// ErrStale marks a sync that found its informer cache older than its own
// last write; the key is retried without alarm, and soon: the cache
// catches up within moments, and a change waiting behind it (a pod turned
// Ready) should not wait for a failure's backoff. Upstream retries such a
// key after its failure backoff, a second at first.
var ErrStale = errors.New("informer cache is out of date")

// staleRetry spaces out the retries of a key whose cache is stale: 10ms,
// doubling to a second.
func staleRetry[T comparable]() workqueue.TypedRateLimiter[T] {
	return workqueue.NewTypedItemExponentialFailureRateLimiter[T](10*time.Millisecond, time.Second)
}

// QueueConfig describes one controller's queue.
type QueueConfig[T comparable] struct {
	// Name labels the queue's metrics and log lines.
	Name string
	// RateLimiter spaces out retries of a failing key; the default is
	// upstream's (5ms doubling to 1000s, 10 retries/s overall).
	RateLimiter workqueue.TypedRateLimiter[T]
	// MaxRetries bounds the retries of one failing key (default 15).
	MaxRetries int
	// Sync brings the world in line for one key. An error retries the key.
	Sync func(ctx context.Context, key T) error
}

// Queue is a rate-limited workqueue of keys drained by workers running the
// configured sync.
type Queue[T comparable] struct {
	cfg     QueueConfig[T]
	queue   workqueue.TypedRateLimitingInterface[T]
	stale   workqueue.TypedRateLimiter[T]
	metrics *Metrics
}

// NewQueue creates a queue whose depth, latency and retries are exported
// through m.
func NewQueue[T comparable](m *Metrics, cfg QueueConfig[T]) *Queue[T] {
	if cfg.RateLimiter == nil {
		cfg.RateLimiter = workqueue.DefaultTypedControllerRateLimiter[T]()
	}
	if cfg.MaxRetries == 0 {
		cfg.MaxRetries = DefaultMaxRetries
	}
	q := workqueue.NewTypedRateLimitingQueueWithConfig(cfg.RateLimiter, workqueue.TypedRateLimitingQueueConfig[T]{
		Name:            cfg.Name,
		MetricsProvider: m.queues,
	})
	return &Queue[T]{cfg: cfg, queue: q, stale: staleRetry[T](), metrics: m}
}

// Add queues key for an immediate sync.
func (q *Queue[T]) Add(key T) { q.queue.Add(key) }

// AddAfter queues key once d has passed; several adds within d give one
// sync, which is how controllers batch bursts of changes.
func (q *Queue[T]) AddAfter(key T, d time.Duration) { q.queue.AddAfter(key, d) }

// Run waits until the handlers behind synced have seen their informers'
// initial lists, then starts workers and blocks until ctx ends; it then
// shuts the queue down and waits for the workers to finish their current
// keys.
func (q *Queue[T]) Run(ctx context.Context, workers int, synced ...cache.InformerSynced) {
	slog.Info("starting controller", "controller", q.cfg.Name, "workers", workers)
	defer slog.Info("stopped controller", "controller", q.cfg.Name)
	if !cache.WaitForCacheSync(ctx.Done(), synced...) {
		q.queue.ShutDown()
		return
	}
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for q.next(ctx) {
			}
		})
	}
	<-ctx.Done()
	q.queue.ShutDown()
	wg.Wait()
}

// next processes one key; it returns false once the queue is shut down.
func (q *Queue[T]) next(ctx context.Context) bool {
	key, quit := q.queue.Get()
	if quit {
		return false
	}
	defer q.queue.Done(key)
	start := time.Now()
	err := q.cfg.Sync(ctx, key)
	q.metrics.observeSync(q.cfg.Name, time.Since(start), err)
	switch {
	case err == nil:
		q.queue.Forget(key)
		q.stale.Forget(key)
	case ctx.Err() != nil:
		// Shutting down: the next leader syncs everything anew.
	case errors.Is(err, ErrStale):
		slog.Debug("informer cache is behind, retrying", "controller", q.cfg.Name, "key", key, "err", err)
		q.queue.AddAfter(key, q.stale.When(key))
	case q.queue.NumRequeues(key) < q.cfg.MaxRetries:
		slog.Info("sync failed, retrying", "controller", q.cfg.Name, "key", key, "err", err)
		q.queue.AddRateLimited(key)
	default:
		slog.Warn("sync failed too often, dropping the key until its next change", "controller", q.cfg.Name, "key", key, "err", err)
		q.queue.Forget(key)
	}
	return true
}
