package logs

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"time"
)

// MaxFileSize is where a File rotates, the kubelet's containerLogMaxSize
// (10Mi), as the node rotates container logs.
const MaxFileSize = 10 << 20

// lineMax splits longer lines into partial (P) records, as CRI does.
const lineMax = 16 * 1024

// File is a component's log in the CRI format that the node agent serves
// container logs from: a record "<RFC3339Nano time> stderr F <line>" per
// line written. Past max bytes it moves to path.1 (replacing an older one)
// and starts anew, so that it keeps at most twice max, and the node's log
// reader follows it across the move.
type File struct {
	mu      sync.Mutex
	path    string
	max     int64
	f       *os.File
	size    int64
	pending []byte
}

// Create starts a component's log at path, a new container's: what an
// earlier run left there (and in path.1) is removed.
func Create(path string, max int64) (*File, error) {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return nil, fmt.Errorf("create log dir: %w", err)
	}
	if err := os.Remove(path + ".1"); err != nil && !errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("remove old log: %w", err)
	}
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_TRUNC|os.O_APPEND, 0o640)
	if err != nil {
		return nil, fmt.Errorf("open log: %w", err)
	}
	return &File{path: path, max: max, f: f}, nil
}

// Path is the file's name.
func (f *File) Path() string { return f.path }

// Write logs each complete line of p as one record (longer lines as
// partial ones); an unterminated end waits for the rest of its line.
func (f *File) Write(p []byte) (int, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.f == nil {
		return 0, os.ErrClosed
	}
	data := p
	if len(f.pending) > 0 {
		data = append(f.pending, p...)
		f.pending = nil
	}
	now := time.Now()
	for len(data) > 0 {
		i := bytes.IndexByte(data, '\n')
		if i < 0 {
			if len(data) < lineMax {
				f.pending = append([]byte(nil), data...)
				break
			}
			i = lineMax
			f.record(now, "P", data[:i])
			data = data[i:]
			continue
		}
		line := data[:i]
		for len(line) > lineMax {
			f.record(now, "P", line[:lineMax])
			line = line[lineMax:]
		}
		f.record(now, "F", line)
		data = data[i+1:]
	}
	return len(p), nil
}

func (f *File) record(now time.Time, tag string, line []byte) {
	rec := make([]byte, 0, len(line)+48)
	rec = now.UTC().AppendFormat(rec, time.RFC3339Nano)
	rec = append(rec, " stderr "...)
	rec = append(rec, tag...)
	rec = append(rec, ' ')
	rec = append(rec, line...)
	rec = append(rec, '\n')
	if f.max > 0 && f.size > 0 && f.size+int64(len(rec)) > f.max {
		f.rotate()
	}
	n, _ := f.f.Write(rec)
	f.size += int64(n)
}

// rotate keeps one older file, path.1.
func (f *File) rotate() {
	if err := os.Rename(f.path, f.path+".1"); err != nil {
		return
	}
	nf, err := os.OpenFile(f.path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o640)
	if err != nil {
		return
	}
	f.f.Close()
	f.f, f.size = nf, 0
}

// Close writes an unterminated last line and closes the file; later
// writes fail.
func (f *File) Close() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.f == nil {
		return nil
	}
	if len(f.pending) > 0 {
		f.record(time.Now(), "F", f.pending)
		f.pending = nil
	}
	err := f.f.Close()
	f.f = nil
	return err
}
