package node

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// runtime runs containers as processes under shims and reads their state
// back from the data dir. It keeps nothing in memory: what is on disk is
// the truth, which is what lets a restarted agent carry on.
//
// Layout under dir:
//
//	<pod uid>/pod.json                          the pod as last seen, its sandbox
//	<pod uid>/etc/{hosts,resolv.conf,hostname}  the pod's own files
//	<pod uid>/containers/<name>/<attempt>/      one run: spec, state, exit
//
// and under logDir, as upstream's /var/log/pods:
//
//	<namespace>_<pod>_<uid>/<container>/<attempt>.log
type containerRuntime struct {
	dir    string
	logDir string
	// self is the svcnet executable, which runs shims and built-in images.
	self string
	// starting holds the directories of the runs whose shims this agent
	// is starting: they have a spec but no state yet, and are not dead.
	starting sync.Map
	// hostMu serializes reaching, and starting, the shim host.
	hostMu sync.Mutex
}

// container is one run of a container, as found on disk.
type container struct {
	dir   string
	Spec  containerSpec
	State *containerState
	Exit  *containerExit
}

// Running reports whether the process has started and not ended.
func (c *container) Running() bool { return c.State != nil && c.Exit == nil }

func (r *containerRuntime) podDir(uid string) string { return filepath.Join(r.dir, uid) }

func (r *containerRuntime) containerDir(uid, name string, attempt int) string {
	return filepath.Join(r.podDir(uid), "containers", name, strconv.Itoa(attempt))
}

// sandboxDir holds the runs of the pod's pause container, whose PID
// namespace its containers share (shareProcessNamespace).
func (r *containerRuntime) sandboxDir(uid string) string {
	return filepath.Join(r.podDir(uid), "sandbox")
}

// sandbox is the latest run of the pod's pause container, nil if none.
func (r *containerRuntime) sandbox(uid string) (*container, error) {
	entries, err := os.ReadDir(r.sandboxDir(uid))
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read the pod's sandbox runs: %w", err)
	}
	latest := -1
	for _, e := range entries {
		if a, err := strconv.Atoi(e.Name()); err == nil && a > latest {
			latest = a
		}
	}
	if latest < 0 {
		return nil, nil
	}
	return r.load(filepath.Join(r.sandboxDir(uid), strconv.Itoa(latest)))
}

func (r *containerRuntime) logPath(namespace, pod, uid, name string, attempt int) string {
	return filepath.Join(r.logDir, namespace+"_"+pod+"_"+uid, name, strconv.Itoa(attempt)+".log")
}

// shimStartTimeout bounds the wait for a shim to report the start.
const shimStartTimeout = 30 * time.Second

// start runs spec under a shim (a new one of its own for a process, the
// node's shim host for a container of an image) and returns once the
// process has started, or with the reason it could not.
func (r *containerRuntime) start(uid string, spec containerSpec) error {
	return r.startIn(r.containerDir(uid, spec.Name, spec.Attempt), spec)
}

// startIn is start for the run in dir.
func (r *containerRuntime) startIn(dir string, spec containerSpec) error {
	r.starting.Store(dir, struct{}{})
	defer r.starting.Delete(dir)
	if err := os.RemoveAll(dir); err != nil {
		return fmt.Errorf("clear %s: %w", dir, err)
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("create %s: %w", dir, err)
	}
	if spec.ID == "" {
		spec.ID = newContainerID()
	}
	if err := writeJSON(filepath.Join(dir, specFile), spec); err != nil {
		return err
	}
	var msg string
	var err error
	if spec.OCI != nil {
		msg, err = r.takeRun(dir)
	} else {
		msg, err = r.startShim(dir)
	}
	if err != nil {
		// A shim that never said how the start went may still start the
		// container later, which nobody would then stop.
		deleteOrphan(spec)
		return err
	}
	if msg != "ok" {
		if msg == "" {
			return errors.New("the shim exited before starting the container")
		}
		return errors.New(msg)
	}
	return nil
}

// startShim starts the shim of a process container's run in dir and
// returns what it said of the start.
func (r *containerRuntime) startShim(dir string) (string, error) {
	out, err := os.OpenFile(filepath.Join(dir, shimLog), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return "", fmt.Errorf("open shim log: %w", err)
	}
	defer out.Close()
	cmd := exec.Command(r.self, "node", "shim", dir)
	cmd.Stdout, cmd.Stderr = out, out
	cmd.Dir = "/"
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true, Cloneflags: syscall.CLONE_NEWNS | syscall.CLONE_NEWUTS}
	return startShimProcess(cmd)
}

// startShimProcess starts a shim's process (one container's, or the shim
// host) and returns what it says on its ready pipe, descriptor 3: "ok",
// or why it could not start. The process outlives the agent; it is reaped
// here when it ends first. A process that says nothing in time is killed.
func startShimProcess(cmd *exec.Cmd) (string, error) {
	readyR, readyW, err := os.Pipe()
	if err != nil {
		return "", fmt.Errorf("shim pipe: %w", err)
	}
	defer readyR.Close()
	cmd.ExtraFiles = []*os.File{readyW}
	err = cmd.Start()
	readyW.Close()
	if err != nil {
		return "", fmt.Errorf("start shim: %w", err)
	}
	go func() { _ = cmd.Wait() }()
	_ = readyR.SetReadDeadline(time.Now().Add(shimStartTimeout))
	msg, err := io.ReadAll(readyR)
	if err != nil {
		_ = cmd.Process.Kill()
		return "", fmt.Errorf("read shim start: %w", err)
	}
	return string(msg), nil
}

func newContainerID() string {
	b := make([]byte, 32)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// containers returns every run of uid's containers, oldest attempt first
// per name.
func (r *containerRuntime) containers(uid string) ([]*container, error) {
	base := filepath.Join(r.podDir(uid), "containers")
	names, err := os.ReadDir(base)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", base, err)
	}
	var out []*container
	for _, n := range names {
		runs, err := os.ReadDir(filepath.Join(base, n.Name()))
		if err != nil {
			return nil, fmt.Errorf("read runs of %s: %w", n.Name(), err)
		}
		attempts := []int{}
		for _, run := range runs {
			if a, err := strconv.Atoi(run.Name()); err == nil {
				attempts = append(attempts, a)
			}
		}
		slices.Sort(attempts)
		for _, a := range attempts {
			c, err := r.load(filepath.Join(base, n.Name(), strconv.Itoa(a)))
			if err != nil {
				return nil, err
			}
			if c != nil {
				out = append(out, c)
			}
		}
	}
	return out, nil
}

// load reads one run; a run whose spec is missing was never started. A run
// whose shim is gone without an exit record is recorded as killed, unless
// this agent is still starting it.
func (r *containerRuntime) load(dir string) (*container, error) {
	spec, err := readJSON[containerSpec](filepath.Join(dir, specFile))
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	c := &container{dir: dir, Spec: spec}
	if st, err := readJSON[containerState](filepath.Join(dir, stateFile)); err == nil {
		c.State = &st
	} else if !errors.Is(err, os.ErrNotExist) {
		return nil, err
	}
	if ex, err := readJSON[containerExit](filepath.Join(dir, exitFile)); err == nil {
		c.Exit = &ex
	} else if !errors.Is(err, os.ErrNotExist) {
		return nil, err
	}
	if _, ok := r.starting.Load(dir); ok && c.State == nil {
		return c, nil
	}
	if c.Exit == nil && !shimAlive(c.State) {
		// The shim died without recording the end (killed, or the machine
		// rebooted): the container is gone too, or made to go.
		deleteOrphan(spec)
		ex := containerExit{ExitCode: 137, Signal: int32(unix.SIGKILL), Reason: "Error",
			Message: "the container's shim exited unexpectedly", FinishedAt: time.Now().UTC()}
		if err := writeJSON(filepath.Join(dir, exitFile), ex); err != nil {
			return nil, err
		}
		c.Exit = &ex
	}
	return c, nil
}

// deleteOrphan deletes the container runc runs for spec, whose shim is
// gone: runc's container outlives it, and nobody else would stop it.
func deleteOrphan(spec containerSpec) {
	if spec.Runc == nil {
		return
	}
	rt := spec.Runc
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := rt.Delete(ctx, spec.ID); err != nil {
		slog.Debug("delete an orphaned container", "id", spec.ID, "err", err)
	}
}

// shimAlive reports whether the shim recorded in st still runs.
func shimAlive(st *containerState) bool {
	if st == nil {
		return false
	}
	start, err := processStart(st.ShimPID)
	return err == nil && start == st.ShimStart
}

// signal sends sig to c's process, or with SIGKILL to its whole process
// group, if the process is still the shim's child.
func (r *containerRuntime) signal(c *container, sig unix.Signal) error {
	if !c.Running() || !shimAlive(c.State) {
		return nil
	}
	pid := c.State.PID
	if sig == unix.SIGKILL {
		pid = -pid
	}
	if err := unix.Kill(pid, sig); err != nil && !errors.Is(err, unix.ESRCH) {
		return fmt.Errorf("signal %v to container %s: %w", sig, c.Spec.Name, err)
	}
	return nil
}

// stop ends c: SIGTERM, then SIGKILL once grace has passed, waiting for the
// exit record. It returns early when ctx ends.
func (r *containerRuntime) stop(ctx context.Context, c *container, grace time.Duration) error {
	if !c.Running() {
		return nil
	}
	if err := r.signal(c, unix.SIGTERM); err != nil {
		return err
	}
	if r.waitExit(ctx, c, grace) {
		return nil
	}
	if err := r.signal(c, unix.SIGKILL); err != nil {
		return err
	}
	if !r.waitExit(ctx, c, 10*time.Second) && ctx.Err() == nil {
		return fmt.Errorf("container %s did not exit after SIGKILL", c.Spec.Name)
	}
	return nil
}

// waitExit polls for c's exit record for up to d.
func (r *containerRuntime) waitExit(ctx context.Context, c *container, d time.Duration) bool {
	deadline := time.Now().Add(d)
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		fresh, err := r.load(c.dir)
		if err == nil && fresh != nil && !fresh.Running() {
			*c = *fresh
			return true
		}
		if time.Now().After(deadline) {
			return false
		}
		select {
		case <-ctx.Done():
			return false
		case <-tick.C:
		}
	}
}

// prune keeps the two newest runs of each container, the current and the
// previous one (for `kubectl logs --previous`), with their logs.
func (r *containerRuntime) prune(runs []*container) error {
	byName := map[string][]*container{}
	for _, c := range runs {
		byName[c.Spec.Name] = append(byName[c.Spec.Name], c)
	}
	var errs []error
	for _, cs := range byName {
		for i := 0; i < len(cs)-2; i++ {
			if cs[i].Running() {
				continue
			}
			errs = append(errs, os.RemoveAll(cs[i].dir))
			for _, p := range []string{cs[i].Spec.Log, cs[i].Spec.Log + ".1"} {
				if err := os.Remove(p); err != nil && !errors.Is(err, os.ErrNotExist) {
					errs = append(errs, err)
				}
			}
		}
	}
	return errors.Join(errs...)
}

// pods lists the pod UIDs that have a directory.
func (r *containerRuntime) pods() ([]string, error) {
	entries, err := os.ReadDir(r.dir)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", r.dir, err)
	}
	var uids []string
	for _, e := range entries {
		if e.IsDir() {
			uids = append(uids, e.Name())
		}
	}
	return uids, nil
}

// remove deletes everything of a pod whose containers have all ended.
func (r *containerRuntime) remove(uid, logDir string) error {
	return errors.Join(os.RemoveAll(r.podDir(uid)), os.RemoveAll(logDir))
}
