package logs

import (
	"bytes"
	"os"
	"sync"
	"time"
)

// File is a component's log in the CRI format that the node agent serves
// container logs from: a record "<RFC3339Nano time> stderr F <line>" per
// line written. Past max bytes it moves to path.1 (replacing an older one)
// and starts anew, so that it keeps at most twice max, and the node's log
// reader follows it across the move.
type File struct {
	mu      sync.Mutex
	w       *CRIWriter
	pending []byte
	closed  bool
}

// Create starts a component's log at path, a new container's: what an
// earlier run left there (and in path.1) is removed.
func Create(path string, max int64) (*File, error) {
	w, err := OpenCRI(path, max, true)
	if err != nil {
		return nil, err
	}
	return &File{w: w}, nil
}

// Path is the file's name.
func (f *File) Path() string { return f.w.Path() }

// Write logs each complete line of p as one record (longer lines as
// partial ones); an unterminated end waits for the rest of its line.
func (f *File) Write(p []byte) (int, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.closed {
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
			if len(data) < LineMax {
				f.pending = append([]byte(nil), data...)
				break
			}
			i = LineMax
			f.record(now, "P", data[:i])
			data = data[i:]
			continue
		}
		line := data[:i]
		for len(line) > LineMax {
			f.record(now, "P", line[:LineMax])
			line = line[LineMax:]
		}
		f.record(now, "F", line)
		data = data[i+1:]
	}
	return len(p), nil
}

func (f *File) record(now time.Time, tag string, line []byte) {
	f.w.Record(now, "stderr", tag, line)
}

// Close writes an unterminated last line and closes the file; later
// writes fail.
func (f *File) Close() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.closed {
		return nil
	}
	if len(f.pending) > 0 {
		f.record(time.Now(), "F", f.pending)
		f.pending = nil
	}
	f.closed = true
	return f.w.Close()
}
