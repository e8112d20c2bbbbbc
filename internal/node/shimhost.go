package node

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/moby/sys/mountinfo"
	"golang.org/x/sys/unix"

	"github.com/svcnet/svcnet/internal/node/runc"
)

// The shim host is the shim of all the node's containers of images: one
// process (`svcnet node shims DIR`, DIR the runtime's directory) whose
// goroutines do for each container what a process container's shim does
// for its one (shim.go). A Go process of svcnet costs some 9 MB before it
// does anything (the package initialisation of the API machinery), which
// a shim per container would add to every pod; the host adds it once per
// node. Like a shim, it runs in its own session and mount namespace and
// outlives a crash or restart of the agent, which finds it again by its
// socket; it is the subreaper of the containers' init processes and
// leaves when its last container has ended.
//
// On its socket the agent writes a run's directory and a newline; the
// host answers '+' once it has taken the run, then, as a shim on its
// ready pipe, "ok" or why the container did not start, and closes. A
// host on its way out closes a connection without the '+', and the agent
// starts another.

// Files of the shim host in the runtime's directory.
const (
	shimHostSocket = "shims.sock"
	shimHostLog    = "shims.log"
)

// shimHostAck is the host's first byte on a connection it serves.
const shimHostAck = '+'

// shimHostIdle is how long a new host waits for its first container.
const shimHostIdle = 30 * time.Second

// RunShimHost is the shim host's main: it serves the runs under dir and
// returns when the last of its containers has ended.
func RunShimHost(dir string) error {
	unix.CloseOnExec(shimReadyFD)
	ready := os.NewFile(shimReadyFD, "ready")
	defer ready.Close()
	err := becomeShimHost()
	var h *shimHost
	if err == nil {
		h, err = listenShimHost(dir)
	}
	if err != nil {
		fmt.Fprint(ready, err.Error())
		return err
	}
	_, _ = io.WriteString(ready, "ok")
	ready.Close()
	return h.serve()
}

// shimHost serves the runs of containers of images.
type shimHost struct {
	dir string
	ln  net.Listener
	// sock is the socket file as the host made it: a later host's, at the
	// same path, is not this host's to remove.
	sock os.FileInfo
	mu   sync.Mutex
	// active counts the runs taken and not yet ended; closing is set once
	// the host takes no more.
	active  int
	closing bool
	runs    sync.WaitGroup
}

// becomeShimHost readies this process, in its own mount namespace, to be
// the shim host.
func becomeShimHost() error {
	// The agent signals the containers; the host only needs to live until
	// they are gone.
	signal.Ignore(syscall.SIGTERM, syscall.SIGINT, syscall.SIGHUP, syscall.SIGPIPE)
	if err := runc.BecomeSubreaper(); err != nil {
		return err
	}
	// The containers' root file systems stay in this namespace; what the
	// agent mounts later under its shared data dir (pods' network
	// namespaces and volumes) reaches it.
	if err := unix.Mount("", "/", "", unix.MS_REC|unix.MS_SLAVE, ""); err != nil {
		return fmt.Errorf("make the mount namespace a slave: %w", err)
	}
	return nil
}

// listenShimHost listens on the socket of the shim host of the runs under
// dir.
func listenShimHost(dir string) (*shimHost, error) {
	// A socket left by a host that was killed.
	if err := os.Remove(filepath.Join(dir, shimHostSocket)); err != nil && !errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("remove a stale shim host socket: %w", err)
	}
	h := &shimHost{dir: filepath.Clean(dir)}
	err := socketPath(dir, shimHostSocket, func(path string) error {
		ln, err := net.Listen("unix", path)
		if err != nil {
			return fmt.Errorf("listen for the agent: %w", err)
		}
		// Closing removes the socket by its directory's path instead.
		ln.(*net.UnixListener).SetUnlinkOnClose(false)
		h.ln = ln
		if err := os.Chmod(path, 0o600); err != nil {
			return err
		}
		h.sock, err = os.Stat(path)
		return err
	})
	if err != nil {
		return nil, err
	}
	// A host that the agent started but never reached does not stay.
	time.AfterFunc(shimHostIdle, func() {
		h.mu.Lock()
		defer h.mu.Unlock()
		if h.active == 0 {
			h.close()
		}
	})
	return h, nil
}

// serve takes runs until the host closes, then waits for the last to end.
func (h *shimHost) serve() error {
	for {
		conn, err := h.ln.Accept()
		if err != nil {
			h.mu.Lock()
			closing := h.closing
			h.mu.Unlock()
			h.runs.Wait()
			if closing {
				return nil
			}
			return fmt.Errorf("shim host: accept: %w", err)
		}
		h.mu.Lock()
		if h.closing {
			h.mu.Unlock()
			conn.Close()
			continue
		}
		h.active++
		h.runs.Add(1)
		h.mu.Unlock()
		go func() {
			defer h.runs.Done()
			defer h.ended()
			h.run(conn)
		}()
	}
}

// run serves one connection: the run in the directory it names.
func (h *shimHost) run(conn net.Conn) {
	defer conn.Close()
	if _, err := conn.Write([]byte{shimHostAck}); err != nil {
		slog.Warn("shim host: acknowledge a run", "err", err)
		return
	}
	_ = conn.SetReadDeadline(time.Now().Add(shimStartTimeout))
	line, err := bufio.NewReader(conn).ReadString('\n')
	if err != nil {
		slog.Warn("shim host: read a run's directory", "err", err)
		return
	}
	dir := filepath.Clean(strings.TrimSuffix(line, "\n"))
	if !strings.HasPrefix(dir, h.dir+string(filepath.Separator)) {
		fmt.Fprintf(conn, "%s is not a run of this host's runtime (%s)", dir, h.dir)
		return
	}
	if err := runShim(dir, conn, true); err != nil {
		slog.Warn("shim host: container run", "dir", dir, "err", err)
	}
}

// ended counts a run's end; the host closes after the last.
func (h *shimHost) ended() {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.active--
	if h.active == 0 {
		h.close()
	}
}

// close stops taking runs: the socket goes first, so that an agent that
// finds none starts another host. Called with h.mu held.
func (h *shimHost) close() {
	if h.closing {
		return
	}
	h.closing = true
	sock := filepath.Join(h.dir, shimHostSocket)
	if fi, err := os.Stat(sock); err == nil && os.SameFile(fi, h.sock) {
		if err := os.Remove(sock); err != nil {
			slog.Warn("shim host: remove socket", "err", err)
		}
	}
	h.ln.Close()
}

// shareDataDir readies the node's data dir for shim hosts, before the
// first: a host's mount namespace is a copy of the agent's taken at its
// start, which sees what the agent mounts later under the dir (pods'
// network namespaces, volumes) only if the dir is a shared mount, as the
// kubelet makes its root directory. The dir is bound onto itself for that
// unless it is a mount already; bound reports a binding to undo when the
// node stops (one left by an agent that did not stop is taken over). A
// host of an earlier agent, whose namespace is another's copy, runs on
// until its containers end; this agent starts its own.
func shareDataDir(dataDir, runDir string) (bound bool, err error) {
	dir, err := filepath.EvalSymlinks(dataDir)
	if err != nil {
		return false, fmt.Errorf("share the data dir's mounts: %w", err)
	}
	mounts, err := mountinfo.GetMounts(mountinfo.SingleEntryFilter(dir))
	if err != nil {
		return false, fmt.Errorf("share the data dir's mounts: %w", err)
	}
	switch {
	case len(mounts) == 0:
		if err := unix.Mount(dir, dir, "", unix.MS_BIND|unix.MS_REC, ""); err != nil {
			return false, fmt.Errorf("bind the data dir onto itself: %w", err)
		}
		bound = true
	default:
		// A binding onto itself names the directory as its root.
		bound = mounts[len(mounts)-1].Root == dir
	}
	if err := unix.Mount("", dir, "", unix.MS_REC|unix.MS_SHARED, ""); err != nil {
		return bound, fmt.Errorf("make the data dir a shared mount: %w", err)
	}
	if err := os.Remove(filepath.Join(runDir, shimHostSocket)); err != nil && !errors.Is(err, os.ErrNotExist) {
		return bound, fmt.Errorf("leave the earlier shim host: %w", err)
	}
	return bound, nil
}

// unbindDataDir undoes shareDataDir's binding, once the node has stopped
// its pods.
func unbindDataDir(dataDir string) {
	dir, err := filepath.EvalSymlinks(dataDir)
	if err == nil {
		err = unix.Unmount(dir, unix.MNT_DETACH)
	}
	if err != nil {
		slog.Warn("node: unbind the data dir", "err", err)
	}
}

// takeRun hands the run in dir to the node's shim host, starting one when
// none takes it, and returns the host's answer on the start.
func (r *containerRuntime) takeRun(dir string) (string, error) {
	conn, err := r.dialShimHost()
	if err != nil {
		return "", err
	}
	defer conn.Close()
	if _, err := io.WriteString(conn, dir+"\n"); err != nil {
		return "", fmt.Errorf("hand the run to the shim host: %w", err)
	}
	_ = conn.SetReadDeadline(time.Now().Add(shimStartTimeout))
	msg, err := io.ReadAll(conn)
	if err != nil {
		return "", fmt.Errorf("read the shim host's answer: %w", err)
	}
	return string(msg), nil
}

// dialShimHost connects to the shim host that has taken the connection
// (its '+'), starting a host when there is none or it is on its way out.
func (r *containerRuntime) dialShimHost() (net.Conn, error) {
	r.hostMu.Lock()
	defer r.hostMu.Unlock()
	var errs []error
	for range 3 {
		conn, err := dialTaken(r.dir)
		if err == nil {
			return conn, nil
		}
		errs = append(errs, err)
		if err := r.startShimHost(); err != nil {
			return nil, err
		}
	}
	return nil, fmt.Errorf("no shim host took the container: %w", errors.Join(errs...))
}

// dialTaken connects to the shim host's socket under dir and waits for
// its '+'.
func dialTaken(dir string) (net.Conn, error) {
	var conn net.Conn
	err := socketPath(dir, shimHostSocket, func(path string) error {
		c, err := net.Dial("unix", path)
		conn = c
		return err
	})
	if err != nil {
		return nil, err
	}
	_ = conn.SetReadDeadline(time.Now().Add(shimStartTimeout))
	b := make([]byte, 1)
	if _, err := io.ReadFull(conn, b); err != nil || b[0] != shimHostAck {
		conn.Close()
		return nil, fmt.Errorf("the shim host did not take the run: %v", err)
	}
	_ = conn.SetReadDeadline(time.Time{})
	return conn, nil
}

// startShimHost starts a shim host for the runtime and waits until it
// listens.
func (r *containerRuntime) startShimHost() error {
	out, err := os.OpenFile(filepath.Join(r.dir, shimHostLog), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return fmt.Errorf("open the shim host's log: %w", err)
	}
	defer out.Close()
	cmd := exec.Command(r.self, "node", "shims", r.dir)
	cmd.Stdout, cmd.Stderr = out, out
	cmd.Dir = "/"
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true, Cloneflags: syscall.CLONE_NEWNS}
	msg, err := startShimProcess(cmd)
	if err != nil {
		return fmt.Errorf("start the shim host: %w", err)
	}
	if msg != "ok" {
		return fmt.Errorf("start the shim host: %s", msg)
	}
	return nil
}
