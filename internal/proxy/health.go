package proxy

import (
	"errors"
	"fmt"
	"sync"
	"time"
)

// Health is the proxy's own health, as kube-proxy's /healthz reports it:
// healthy once a sync of the rules has succeeded, and while the last
// successful one is recent, within twice the sync period (kube-proxy's
// healthz timeout); a full sync comes at least every period while syncs
// succeed. The zero Health is a proxy not started.
type Health struct {
	mu       sync.Mutex
	started  time.Time
	stopped  bool
	lastSync time.Time
	timeout  time.Duration
}

func (h *Health) start(now time.Time, timeout time.Duration) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.started, h.stopped, h.lastSync, h.timeout = now, false, time.Time{}, timeout
}

func (h *Health) synced(now time.Time) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.lastSync = now
}

func (h *Health) stop() {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.stopped = true
}

// Started is when the proxy started; zero until it has.
func (h *Health) Started() time.Time {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.started
}

// LastSync is when the proxy's rules last synced; zero until they have.
func (h *Health) LastSync() time.Time {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.lastSync
}

// Check says why the proxy is not healthy at now; nil when it is.
func (h *Health) Check(now time.Time) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	switch {
	case h.started.IsZero():
		return errors.New("the service proxy has not started")
	case h.stopped:
		return errors.New("the service proxy stopped")
	case h.lastSync.IsZero():
		return errors.New("the service proxy has not synced its rules yet")
	case now.Sub(h.lastSync) > h.timeout:
		return fmt.Errorf("the service proxy's last successful sync was %s ago, more than %s", now.Sub(h.lastSync).Round(time.Second), h.timeout)
	}
	return nil
}
