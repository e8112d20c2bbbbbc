package logs

import (
	"context"
	"io"
	"log/slog"
	"sync"
	"time"
)

// consoleTime is the log package's LstdFlags prefix.
const consoleTime = "2006/01/02 15:04:05"

// NewConsoleHandler writes records to w as slog's default logger writes
// them through the log package, "2006/01/02 15:04:05 INFO message k=v",
// so that stderr reads as it did before the Router: slog's own default
// handler cannot be wrapped, for once the Router is the default, the log
// package writes into the Router.
func NewConsoleHandler(w io.Writer, level slog.Leveler) slog.Handler {
	out := &lineWriter{w: w}
	return &consoleHandler{out: out, attrs: slog.NewTextHandler(out, &slog.HandlerOptions{
		Level: level,
		ReplaceAttr: func(groups []string, a slog.Attr) slog.Attr {
			if len(groups) == 0 && (a.Key == slog.TimeKey || a.Key == slog.LevelKey || a.Key == slog.MessageKey) {
				return slog.Attr{}
			}
			return a
		},
	})}
}

// consoleHandler formats the time, level and message itself and leaves
// the attributes (with their groups and quoting) to a TextHandler, whose
// one write per record lineWriter completes.
type consoleHandler struct {
	out   *lineWriter
	attrs slog.Handler
}

// lineWriter puts a record's head before the attributes the TextHandler
// writes; its lock spans the record, which serializes the handlers that
// share it.
type lineWriter struct {
	mu   sync.Mutex
	w    io.Writer
	head []byte
}

func (l *lineWriter) Write(p []byte) (int, error) {
	line := l.head
	if len(p) > 1 { // attributes, not only the newline
		line = append(line, ' ')
	}
	line = append(line, p...)
	if _, err := l.w.Write(line); err != nil {
		return 0, err
	}
	return len(p), nil
}

func (h *consoleHandler) Enabled(ctx context.Context, l slog.Level) bool {
	return h.attrs.Enabled(ctx, l)
}

func (h *consoleHandler) Handle(ctx context.Context, r slog.Record) error {
	h.out.mu.Lock()
	defer h.out.mu.Unlock()
	t := r.Time
	if t.IsZero() {
		t = time.Now()
	}
	head := h.out.head[:0]
	head = t.AppendFormat(head, consoleTime)
	head = append(head, ' ')
	head = append(head, r.Level.String()...)
	head = append(head, ' ')
	head = append(head, r.Message...)
	h.out.head = head
	return h.attrs.Handle(ctx, r)
}

func (h *consoleHandler) WithAttrs(as []slog.Attr) slog.Handler {
	return &consoleHandler{out: h.out, attrs: h.attrs.WithAttrs(as)}
}

func (h *consoleHandler) WithGroup(name string) slog.Handler {
	return &consoleHandler{out: h.out, attrs: h.attrs.WithGroup(name)}
}
