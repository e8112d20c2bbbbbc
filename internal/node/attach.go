package node

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"time"

	"github.com/creack/pty"
	"golang.org/x/sys/unix"
)

// Attach: the shim owns the container's stdin, stdout and stderr (a pipe
// each, or one terminal when the container asks for a TTY). It copies the
// output to the container's log and to every attached client, and feeds
// the clients' input to the container's stdin when the container has one.
// Clients reach it on a unix socket in the run's directory, so that attach
// works after an agent restart as the shim outlives the agent.
//
// On the socket, both ways, frames are a type byte, a big-endian uint32
// length and the payload:
//
//	client: 'a' flags (first frame; attachStdin), 'i' input, 'c' end of
//	        input, 'r' width and height as two uint16
//	shim:   'o' stdout, 'e' stderr; the shim closes the connection when the
//	        container's output has ended.

const (
	attachSocket = "attach.sock"
	attachStdin  = 1 << 0
	maxFrame     = 1 << 20
	// clientBacklog is how many output frames an attached client may lag
	// behind before it is dropped, so that no client slows the container.
	clientBacklog = 1024
)

func writeFrame(w io.Writer, typ byte, p []byte) error {
	buf := make([]byte, 5+len(p))
	buf[0] = typ
	binary.BigEndian.PutUint32(buf[1:5], uint32(len(p)))
	copy(buf[5:], p)
	_, err := w.Write(buf)
	return err
}

func readFrame(r io.Reader) (byte, []byte, error) {
	var hdr [5]byte
	if _, err := io.ReadFull(r, hdr[:]); err != nil {
		return 0, nil, err
	}
	n := binary.BigEndian.Uint32(hdr[1:])
	if n > maxFrame {
		return 0, nil, fmt.Errorf("attach frame of %d bytes is too large", n)
	}
	p := make([]byte, n)
	if _, err := io.ReadFull(r, p); err != nil {
		return 0, nil, err
	}
	return hdr[0], p, nil
}

// socketPath runs fn with a short path to the socket name in dir: unix
// socket paths are limited to 108 bytes, less than a data dir may take.
func socketPath(dir, name string, fn func(path string) error) error {
	fd, err := unix.Open(dir, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("open %s: %w", dir, err)
	}
	defer unix.Close(fd)
	return fn(fmt.Sprintf("/proc/self/fd/%d/%s", fd, name))
}

// attachHub is the shim's side of attach.
type attachHub struct {
	dir       string
	ln        net.Listener
	stdinOnce bool
	// childEnds are the files the container holds, closed in the shim
	// once it has started.
	childEnds []*os.File
	// sources are read to their end and copied to the log's writer of
	// the same stream and to the clients.
	sources []hubSource
	pumps   sync.WaitGroup

	mu sync.Mutex
	// stdin is the container's stdin (a pipe or the terminal), nil when
	// the container has none or it was closed (stdinOnce).
	stdin   io.WriteCloser
	term    *os.File
	clients map[*hubClient]struct{}
	serving sync.WaitGroup
}

type hubSource struct {
	from *os.File
	log  *os.File
	typ  byte
}

// hubClient is one attached connection with its output queue.
type hubClient struct {
	conn net.Conn
	out  chan []byte
	once sync.Once
}

func (c *hubClient) close() { c.once.Do(func() { close(c.out) }) }

// newAttachHub wires cmd's standard streams through the hub: stdout and
// stderr are the log's writers of those streams.
func newAttachHub(dir string, spec containerSpec, cmd *exec.Cmd, stdout, stderr *os.File) (*attachHub, error) {
	h := &attachHub{dir: dir, stdinOnce: spec.StdinOnce, clients: map[*hubClient]struct{}{}}
	if spec.TTY {
		ptmx, tty, err := pty.Open()
		if err != nil {
			return nil, fmt.Errorf("open the container's terminal: %w", err)
		}
		cmd.Stdin, cmd.Stdout, cmd.Stderr = tty, tty, tty
		cmd.SysProcAttr.Setpgid = false
		cmd.SysProcAttr.Setsid, cmd.SysProcAttr.Setctty = true, true
		h.term = ptmx
		h.childEnds = []*os.File{tty}
		h.sources = []hubSource{{from: ptmx, log: stdout, typ: 'o'}}
		_ = stderr.Close()
		if spec.Stdin {
			h.stdin = ptmx
		}
	} else {
		for _, s := range []struct {
			log  *os.File
			typ  byte
			into *io.Writer
		}{{stdout, 'o', &cmd.Stdout}, {stderr, 'e', &cmd.Stderr}} {
			r, w, err := os.Pipe()
			if err != nil {
				h.closeFiles()
				return nil, fmt.Errorf("output pipe: %w", err)
			}
			*s.into = w
			h.childEnds = append(h.childEnds, w)
			h.sources = append(h.sources, hubSource{from: r, log: s.log, typ: s.typ})
		}
		if spec.Stdin {
			r, w, err := os.Pipe()
			if err != nil {
				h.closeFiles()
				return nil, fmt.Errorf("stdin pipe: %w", err)
			}
			cmd.Stdin, h.stdin = r, w
			h.childEnds = append(h.childEnds, r)
		}
	}
	err := socketPath(dir, attachSocket, func(path string) error {
		ln, err := net.Listen("unix", path)
		if err != nil {
			return fmt.Errorf("listen for attach: %w", err)
		}
		ln.(*net.UnixListener).SetUnlinkOnClose(false)
		h.ln = ln
		return nil
	})
	if err != nil {
		h.closeFiles()
		return nil, err
	}
	return h, nil
}

func (h *attachHub) closeFiles() {
	for _, f := range h.childEnds {
		_ = f.Close()
	}
	for _, s := range h.sources {
		_ = s.from.Close()
		_ = s.log.Close()
	}
	if h.stdin != nil {
		_ = h.stdin.Close()
	}
}

// started drops the shim's copies of the container's ends and starts
// copying output and serving clients.
func (h *attachHub) started() {
	for _, f := range h.childEnds {
		_ = f.Close()
	}
	for _, s := range h.sources {
		h.pumps.Go(func() { h.pump(s) })
	}
	h.serving.Go(h.accept)
}

// pump copies one output to the log and the clients until it ends.
func (h *attachHub) pump(s hubSource) {
	defer s.log.Close()
	buf := make([]byte, 32<<10)
	for {
		n, err := s.from.Read(buf)
		if n > 0 {
			_, _ = s.log.Write(buf[:n])
			h.broadcast(s.typ, buf[:n])
		}
		if err != nil {
			return
		}
	}
}

func (h *attachHub) broadcast(typ byte, p []byte) {
	frame := make([]byte, 5+len(p))
	frame[0] = typ
	binary.BigEndian.PutUint32(frame[1:5], uint32(len(p)))
	copy(frame[5:], p)
	h.mu.Lock()
	defer h.mu.Unlock()
	for c := range h.clients {
		select {
		case c.out <- frame:
		default:
			delete(h.clients, c)
			c.close()
		}
	}
}

func (h *attachHub) accept() {
	for {
		conn, err := h.ln.Accept()
		if err != nil {
			return
		}
		c := &hubClient{conn: conn, out: make(chan []byte, clientBacklog)}
		h.mu.Lock()
		h.clients[c] = struct{}{}
		h.mu.Unlock()
		h.serving.Go(func() {
			for frame := range c.out {
				if _, err := conn.Write(frame); err != nil {
					break
				}
			}
			_ = conn.Close()
		})
		h.serving.Go(func() { h.serveInput(c) })
	}
}

// serveInput applies one client's input frames until it disconnects.
func (h *attachHub) serveInput(c *hubClient) {
	defer func() {
		h.mu.Lock()
		if _, ok := h.clients[c]; ok {
			delete(h.clients, c)
			c.close()
		}
		h.mu.Unlock()
	}()
	typ, p, err := readFrame(c.conn)
	if err != nil || typ != 'a' || len(p) != 1 {
		return
	}
	withStdin := p[0]&attachStdin != 0
	if withStdin {
		// A stdinOnce container's stdin ends with its first client's.
		defer h.endInput()
	}
	for {
		typ, p, err := readFrame(c.conn)
		if err != nil {
			return
		}
		switch typ {
		case 'i':
			if withStdin {
				h.input(p)
			}
		case 'c':
			if withStdin {
				h.endInput()
				withStdin = false
			}
		case 'r':
			if h.term != nil && len(p) == 4 {
				_ = pty.Setsize(h.term, &pty.Winsize{Cols: binary.BigEndian.Uint16(p), Rows: binary.BigEndian.Uint16(p[2:])})
			}
		}
	}
}

func (h *attachHub) input(p []byte) {
	h.mu.Lock()
	in := h.stdin
	h.mu.Unlock()
	if in != nil {
		_, _ = in.Write(p)
	}
}

// endInput closes a stdinOnce container's stdin. A terminal stays open:
// it also carries the output.
func (h *attachHub) endInput() {
	if !h.stdinOnce {
		return
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.stdin != nil && h.term == nil {
		_ = h.stdin.Close()
	}
	h.stdin = nil
}

// close ends attach once the container has exited: output still buffered
// is copied for up to grace, then the clients are disconnected.
func (h *attachHub) close(grace time.Duration) {
	for _, f := range h.childEnds {
		// Still open when the container failed to start.
		_ = f.Close()
	}
	_ = h.ln.Close()
	_ = os.Remove(filepath.Join(h.dir, attachSocket))
	for _, s := range h.sources {
		_ = s.from.SetReadDeadline(time.Now().Add(grace))
	}
	h.pumps.Wait()
	h.mu.Lock()
	for c := range h.clients {
		delete(h.clients, c)
		c.close()
	}
	if h.stdin != nil {
		_ = h.stdin.Close()
		h.stdin = nil
	}
	h.mu.Unlock()
	for _, s := range h.sources {
		_ = s.from.Close()
	}
	// Writers drain their queues; readers end as their connections close.
	done := make(chan struct{})
	go func() { h.serving.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(grace):
	}
}

// attach serves /attach/{namespace}/{pod}/{container}: the session joins
// the container's streams through its shim.
func (s *server) attach(w http.ResponseWriter, r *http.Request) {
	_, c, ok := s.agent.streamTarget(w, r)
	if !ok {
		return
	}
	serveSession(w, r, func(ctx context.Context, sess *session) error {
		return attachSession(ctx, c.dir, sess)
	})
}

// attachSession relays a session to the shim of the run in dir until the
// container's output ends or the session does.
func attachSession(ctx context.Context, dir string, sess *session) error {
	var conn net.Conn
	err := socketPath(dir, attachSocket, func(path string) error {
		var err error
		conn, err = (&net.Dialer{}).DialContext(ctx, "unix", path)
		return err
	})
	if err != nil {
		return fmt.Errorf("attach to the container: %w", err)
	}
	defer conn.Close()
	stop := context.AfterFunc(ctx, func() { _ = conn.Close() })
	defer stop()
	var flags byte
	if sess.stdin != nil {
		flags |= attachStdin
	}
	var wmu sync.Mutex
	send := func(typ byte, p []byte) error {
		wmu.Lock()
		defer wmu.Unlock()
		return writeFrame(conn, typ, p)
	}
	if err := send('a', []byte{flags}); err != nil {
		return fmt.Errorf("attach to the container: %w", err)
	}
	// The input goroutines end when the session's streams or the
	// connection close, which the deferred Close makes sure of.
	if sess.stdin != nil {
		go func() {
			buf := make([]byte, 32<<10)
			for {
				n, err := sess.stdin.Read(buf)
				if n > 0 && send('i', buf[:n]) != nil {
					return
				}
				if err != nil {
					_ = send('c', nil)
					return
				}
			}
		}()
	}
	if sess.resize != nil {
		go func() {
			for size := range sess.resize {
				var p [4]byte
				binary.BigEndian.PutUint16(p[:2], size.Width)
				binary.BigEndian.PutUint16(p[2:], size.Height)
				if send('r', p[:]) != nil {
					return
				}
			}
		}()
	}
	stdout, stderr := orDiscard(sess.stdout), orDiscard(sess.stderr)
	for {
		typ, p, err := readFrame(conn)
		if err != nil {
			// The shim closes the connection when the container's
			// output has ended.
			if !errors.Is(err, io.EOF) && ctx.Err() == nil {
				slog.Debug("attach: read from the shim", "dir", dir, "err", err)
			}
			return nil
		}
		out := stdout
		if typ == 'e' {
			out = stderr
		}
		if _, err := out.Write(p); err != nil {
			return nil
		}
	}
}
