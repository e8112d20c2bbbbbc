package dnstest

import (
	"context"
	"log/slog"
	"sync"
	"testing"
	"time"
)

// Logs is a slog.Handler that keeps the records logged to it, for tests
// that wait for a log line or count them. It drops attributes added with
// WithAttrs and groups.
type Logs struct {
	mu      sync.Mutex
	records []slog.Record
	// logged is closed (and replaced) when a record arrives.
	logged chan struct{}
}

// NewLogs returns an empty Logs and a logger writing to it.
func NewLogs() (*Logs, *slog.Logger) {
	l := &Logs{logged: make(chan struct{})}
	return l, slog.New(l)
}

// Enabled is true for every level.
func (l *Logs) Enabled(context.Context, slog.Level) bool { return true }

// Handle keeps r.
func (l *Logs) Handle(_ context.Context, r slog.Record) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.records = append(l.records, r.Clone())
	close(l.logged)
	l.logged = make(chan struct{})
	return nil
}

// WithAttrs returns l.
func (l *Logs) WithAttrs([]slog.Attr) slog.Handler { return l }

// WithGroup returns l.
func (l *Logs) WithGroup(string) slog.Handler { return l }

// With returns the records with message msg logged so far.
func (l *Logs) With(msg string) []slog.Record {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []slog.Record
	for _, r := range l.records {
		if r.Message == msg {
			out = append(out, r)
		}
	}
	return out
}

// Wait returns once n records with message msg have been logged; it fails
// the test after timeout.
func (l *Logs) Wait(t testing.TB, msg string, n int, timeout time.Duration) {
	t.Helper()
	deadline := time.After(timeout)
	for {
		l.mu.Lock()
		logged := l.logged
		l.mu.Unlock()
		if len(l.With(msg)) >= n {
			return
		}
		select {
		case <-logged:
		case <-deadline:
			t.Fatalf("%q not logged %d times within %s", msg, n, timeout)
		}
	}
}
