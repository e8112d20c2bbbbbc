package logs

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"time"
)

// MaxFileSize is where a log rotates, the kubelet's containerLogMaxSize
// (10Mi): container logs and the components' alike.
const MaxFileSize = 10 << 20

// LineMax splits longer lines into partial (P) records, as CRI does.
const LineMax = 16 * 1024

// CRIWriter writes a log in the CRI format that the node agent serves
// container logs from, a record "<RFC3339Nano time> <stream> <F|P> <line>"
// per line. Past max bytes it moves to path.1 (replacing an older one) and
// starts anew, so that it keeps at most twice max, and the node's log
// reader follows it across the move. It is safe for concurrent use.
type CRIWriter struct {
	mu   sync.Mutex
	path string
	max  int64
	f    *os.File
	size int64
}

// OpenCRI opens the log at path, appending to what is there, or (fresh)
// starting it anew: what an earlier run left there and in path.1 goes.
func OpenCRI(path string, max int64, fresh bool) (*CRIWriter, error) {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return nil, fmt.Errorf("create log dir: %w", err)
	}
	flags := os.O_CREATE | os.O_WRONLY | os.O_APPEND
	if fresh {
		if err := os.Remove(path + ".1"); err != nil && !errors.Is(err, os.ErrNotExist) {
			return nil, fmt.Errorf("remove old log: %w", err)
		}
		flags |= os.O_TRUNC
	}
	f, err := os.OpenFile(path, flags, 0o640)
	if err != nil {
		return nil, fmt.Errorf("open log: %w", err)
	}
	fi, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("stat log: %w", err)
	}
	return &CRIWriter{path: path, max: max, f: f, size: fi.Size()}, nil
}

// Path is the log's file name.
func (w *CRIWriter) Path() string { return w.path }

// Record writes one record; tag is "F" for a full line, "P" for a part.
func (w *CRIWriter) Record(now time.Time, stream, tag string, line []byte) {
	rec := make([]byte, 0, len(line)+48)
	rec = now.UTC().AppendFormat(rec, time.RFC3339Nano)
	rec = append(rec, ' ')
	rec = append(rec, stream...)
	rec = append(rec, ' ')
	rec = append(rec, tag...)
	rec = append(rec, ' ')
	rec = append(rec, line...)
	rec = append(rec, '\n')
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.f == nil {
		return
	}
	if w.max > 0 && w.size > 0 && w.size+int64(len(rec)) > w.max {
		w.rotate()
	}
	n, _ := w.f.Write(rec)
	w.size += int64(n)
}

// rotate keeps one older file, path.1. When the move or the new file
// fails, writing goes on where it was, and the next try comes after
// another max bytes.
func (w *CRIWriter) rotate() {
	w.size = 0
	if err := os.Rename(w.path, w.path+".1"); err != nil {
		return
	}
	f, err := os.OpenFile(w.path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o640)
	if err != nil {
		return
	}
	w.f.Close()
	w.f = f
}

// Close closes the log; later records are dropped.
func (w *CRIWriter) Close() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.f == nil {
		return nil
	}
	err := w.f.Close()
	w.f = nil
	return err
}
