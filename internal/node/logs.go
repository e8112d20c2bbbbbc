package node

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"time"
)

// logOptions are pods/log's parameters, as the kubelet takes them.
type logOptions struct {
	follow     bool
	tailLines  *int64
	since      time.Time
	timestamps bool
	limitBytes *int64
}

// logRecord is one line of a CRI log.
type logRecord struct {
	ts      time.Time
	rawTime []byte
	partial bool
	content []byte
}

// parseLogLine splits "<time> <stream> <P|F> <content>".
func parseLogLine(line []byte) (logRecord, bool) {
	f := bytes.SplitN(line, []byte{' '}, 4)
	if len(f) < 4 {
		return logRecord{}, false
	}
	ts, err := time.Parse(time.RFC3339Nano, string(f[0]))
	if err != nil {
		return logRecord{}, false
	}
	return logRecord{ts: ts, rawTime: f[0], partial: string(f[2]) == "P", content: f[3]}, true
}

// logWriterTo writes records as pods/log shows them, honouring since,
// timestamps and limitBytes; done reports the limit reached.
type logWriterTo struct {
	w         io.Writer
	opts      logOptions
	remaining int64
	// inPartial is set while a long line continues over partial records.
	inPartial bool
}

func (l *logWriterTo) write(r logRecord) (done bool, err error) {
	if !l.opts.since.IsZero() && r.ts.Before(l.opts.since) {
		return false, nil
	}
	var b []byte
	if l.opts.timestamps && !l.inPartial {
		b = append(append(b, r.rawTime...), ' ')
	}
	b = append(b, r.content...)
	if !r.partial {
		b = append(b, '\n')
	}
	l.inPartial = r.partial
	if l.opts.limitBytes != nil {
		if int64(len(b)) >= l.remaining {
			b = b[:l.remaining]
			done = true
		}
		l.remaining -= int64(len(b))
	}
	if _, err := l.w.Write(b); err != nil {
		return true, err
	}
	if f, ok := l.w.(interface{ Flush() }); ok {
		f.Flush()
	}
	return done, nil
}

// readLog writes c's log to w: the rotated file, then the current one; with
// follow it waits for more until the container has exited or ctx ends.
func (r *containerRuntime) readLog(ctx context.Context, c *container, opts logOptions, w io.Writer) error {
	return readLogFile(ctx, c.Spec.Log, opts, w, func() bool {
		fresh, err := r.load(c.dir)
		return err == nil && fresh != nil && !fresh.Running()
	})
}

// readLogFile writes the CRI log at path to w as readLog does; exited
// says whether its writer has ended, which ends a follow once all it wrote
// is out.
func readLogFile(ctx context.Context, path string, opts logOptions, w io.Writer, exited func() bool) error {
	out := &logWriterTo{w: w, opts: opts}
	if opts.limitBytes != nil {
		out.remaining = *opts.limitBytes
	}
	var recs []logRecord
	emit := func(rec logRecord) (bool, error) {
		if opts.tailLines != nil {
			recs = append(recs, logRecord{ts: rec.ts, rawTime: bytes.Clone(rec.rawTime), partial: rec.partial, content: bytes.Clone(rec.content)})
			return false, nil
		}
		return out.write(rec)
	}
	if old, err := os.Open(path + ".1"); err == nil {
		_, done, err := readRecords(bufio.NewReader(old), nil, emit)
		old.Close()
		if done || err != nil {
			return err
		}
	}
	f, err := os.Open(path)
	if err != nil {
		return fmt.Errorf("open log: %w", err)
	}
	defer func() { f.Close() }()
	br := bufio.NewReader(f)
	pending, done, err := readRecords(br, nil, emit)
	if done || err != nil {
		return err
	}
	if opts.tailLines != nil {
		for _, rec := range lastLines(recs, *opts.tailLines) {
			if done, err := out.write(rec); done || err != nil {
				return err
			}
		}
	}
	if !opts.follow {
		return nil
	}
	// Follow: wait for more lines until the container has ended and all
	// it wrote is out; the log may be rotated meanwhile.
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for {
		if pending, done, err = readRecords(br, pending, out.write); done || err != nil {
			return err
		}
		if rotated(f, path) {
			if nf, err := os.Open(path); err == nil {
				f.Close()
				f, br, pending = nf, bufio.NewReader(nf), nil
				continue
			}
		}
		if exited() {
			// The writer closes the log before its exit is known (the shim
			// records it after): one more read has everything.
			_, _, err := readRecords(br, pending, out.write)
			return err
		}
		select {
		case <-ctx.Done():
			return nil
		case <-tick.C:
		}
	}
}

// readRecords feeds fn every complete line up to EOF and returns the
// incomplete rest; done is fn's.
func readRecords(br *bufio.Reader, pending []byte, fn func(logRecord) (bool, error)) ([]byte, bool, error) {
	for {
		line, err := br.ReadBytes('\n')
		pending = append(pending, line...)
		if errors.Is(err, io.EOF) {
			return pending, false, nil
		}
		if err != nil {
			return pending, true, fmt.Errorf("read log: %w", err)
		}
		rec, ok := parseLogLine(bytes.TrimSuffix(pending, []byte{'\n'}))
		pending = pending[:0]
		if !ok {
			continue
		}
		if done, err := fn(rec); done || err != nil {
			return nil, true, err
		}
	}
}

// lastLines keeps the records of the last n lines: a line is its partial
// records and the full one that ends it.
func lastLines(recs []logRecord, n int64) []logRecord {
	lines, i := int64(0), len(recs)
	for i > 0 {
		if !recs[i-1].partial {
			if lines == n {
				break
			}
			lines++
		}
		i--
	}
	return recs[i:]
}

// rotated reports whether path no longer names the open file.
func rotated(f *os.File, path string) bool {
	a, err1 := f.Stat()
	b, err2 := os.Stat(path)
	return err1 == nil && err2 == nil && !os.SameFile(a, b)
}
