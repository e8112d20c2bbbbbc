package node

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	specs "github.com/opencontainers/runtime-spec/specs-go"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"

	"github.com/svcnet/svcnet/internal/logs"
	"github.com/svcnet/svcnet/internal/node/runc"
)

// The shim is the container's parent, what containerd's shim is to a
// container: the agent starts one per container run (`svcnet node shim
// DIR`), in a new UTS and mount namespace, and the shim
//
//   - bind-mounts the pod's own /etc/hosts, /etc/resolv.conf and
//     /etc/hostname and the container's volumes privately, making missing
//     mount points in its own namespace (the host's files stay as they
//     are, see volume_mount.go),
//   - sets the pod's hostname,
//   - joins the pod's network namespace on one thread and starts the
//     container's process from it, so the process lives there,
//   - writes the process's output to the container's log in the CRI format,
//   - records the start and the exit in DIR.
//
// It runs in its own session, so it and the container outlive a crash or a
// restart of the agent; a restarted agent finds both through DIR.

// Files in a container run's directory.
const (
	specFile  = "spec.json"
	stateFile = "state.json"
	exitFile  = "exit.json"
	shimLog   = "shim.log"
)

// containerSpec is what the shim runs: written by the agent before the
// shim starts.
type containerSpec struct {
	ID string `json:"id"`
	// Name is the container's name; Attempt counts its runs from 0.
	Name    string `json:"name"`
	Attempt int    `json:"attempt"`
	// Image is the image as the pod names it; ImageRef what it maps to.
	Image    string   `json:"image"`
	ImageRef string   `json:"imageRef"`
	Path     string   `json:"path"`
	Args     []string `json:"args"`
	Env      []string `json:"env"`
	Dir      string   `json:"dir,omitempty"`
	Hostname string   `json:"hostname"`
	// NetNS is the network namespace to join; empty keeps the shim's.
	NetNS  string     `json:"netns,omitempty"`
	Mounts []bindFile `json:"mounts,omitempty"`
	Log    string     `json:"log"`
	// MaxLogSize rotates the log once it is reached.
	MaxLogSize int64 `json:"maxLogSize"`
	// Stdin, StdinOnce and TTY are the container's fields of those names.
	Stdin     bool `json:"stdin,omitempty"`
	StdinOnce bool `json:"stdinOnce,omitempty"`
	TTY       bool `json:"tty,omitempty"`
	// TerminationMessagePath is where, in a container run by runc, the
	// container may write why it ended (the container's field of that
	// name); FallbackToLogs takes the log's tail for a failure that wrote
	// none (terminationMessagePolicy FallbackToLogsOnError).
	TerminationMessagePath string `json:"terminationMessagePath,omitempty"`
	FallbackToLogs         bool   `json:"fallbackToLogs,omitempty"`
	// WaitReady is set for a built-in program: the container counts as
	// started once the program says it listens (builtin.ReadyFDEnv).
	WaitReady bool `json:"waitReady,omitempty"`
	// Groups are the process's supplementary groups (the pod's fsGroup
	// and supplementalGroups); it runs as root.
	Groups []uint32 `json:"groups,omitempty"`
	// OCI, when set, runs the container from an image with Runc by this
	// runtime spec instead of Path and Args: its root file system is an
	// overlay of Layers (topmost first) with a writable layer in the
	// run's directory, its mounts, hostname and network namespace are the
	// spec's.
	// Resources are the requests and limits the run has, its spec's when
	// it started and after each in-place resize.
	Resources *corev1.ResourceRequirements `json:"resources,omitempty"`
	OCI       *specs.Spec                  `json:"oci,omitempty"`
	Layers    []string                     `json:"layers,omitempty"`
	Runc      *runc.Runtime                `json:"runc,omitempty"`
	// release lets the image garbage collector have the run's image once
	// the run is on disk; nil for a host process.
	release func()
}

// builtinStartTimeout bounds the wait for a built-in program to say it
// listens; a program that says nothing by then counts as started anyway.
const builtinStartTimeout = 10 * time.Second

// bindFile is a file or directory mounted at Target in the container.
type bindFile struct {
	Source   string `json:"source"`
	Target   string `json:"target"`
	ReadOnly bool   `json:"readOnly,omitempty"`
}

// containerState is written once the process has started.
type containerState struct {
	ShimPID int `json:"shimPID"`
	// ShimStart is the shim's start time in clock ticks since boot, which
	// tells the shim from a later process that reuses its PID.
	ShimStart uint64    `json:"shimStart"`
	PID       int       `json:"pid"`
	StartedAt time.Time `json:"startedAt"`
}

// containerExit is written when the process has ended or failed to start.
type containerExit struct {
	ExitCode   int32     `json:"exitCode"`
	Signal     int32     `json:"signal,omitempty"`
	Reason     string    `json:"reason"`
	Message    string    `json:"message,omitempty"`
	FinishedAt time.Time `json:"finishedAt"`
}

// shimReadyFD is the pipe on which the shim reports the start: "ok" or an
// error message, then EOF.
const shimReadyFD = 3

// RunShim is the main of a process container's shim: it runs the
// container described in dir and returns when the container has exited.
// (Containers of images run in the node's shim host, shimhost.go.)
func RunShim(dir string) error {
	// The container must not inherit the pipe, or the agent would wait
	// for its end as long as the container runs.
	unix.CloseOnExec(shimReadyFD)
	ready := os.NewFile(shimReadyFD, "ready")
	// The agent signals the container; the shim itself only needs to live
	// until the container is gone.
	signal.Ignore(syscall.SIGTERM, syscall.SIGINT, syscall.SIGHUP, syscall.SIGPIPE)
	return runShim(dir, ready, false)
}

// runShim runs the container described in dir, says how its start went
// on ready ("ok" or why not) and closes it, and records the exit once the
// container has ended. A container of an image runs only in the shim
// host (inHost), the subreaper of its init.
func runShim(dir string, ready io.WriteCloser, inHost bool) error {
	spec, err := readJSON[containerSpec](filepath.Join(dir, specFile))
	if err == nil && (spec.OCI != nil) != inHost {
		err = errors.New("a container of an image runs in the node's shim host, any other in a shim of its own")
	}
	if err != nil {
		fmt.Fprintf(ready, "read spec: %v", err)
		ready.Close()
		return err
	}
	start := startContainer
	if spec.OCI != nil {
		start = startRunc
	}
	wait, lw, err := start(dir, spec)
	if err != nil {
		fmt.Fprint(ready, err.Error())
		ready.Close()
		return writeJSON(filepath.Join(dir, exitFile), containerExit{
			ExitCode: 128, Reason: "StartError", Message: err.Error(), FinishedAt: time.Now().UTC(),
		})
	}
	_, _ = io.WriteString(ready, "ok")
	ready.Close()

	exit := wait()
	lw.close(2 * time.Second)
	if msg := terminationMessage(dir, spec, exit); msg != "" {
		if exit.Message != "" {
			exit.Message += ": "
		}
		exit.Message += msg
	}
	return writeJSON(filepath.Join(dir, exitFile), exit)
}

// The kubelet's bounds of a termination message: what the file holds, or
// the log's last lines.
const (
	maxTerminationMessage    = 4096
	maxTerminationLogLines   = 80
	maxTerminationLogMessage = 2048
	terminationMessageFile   = "termination-log"
)

// terminationMessage is what the container left for its status, as the
// kubelet reads it: the end of the file at its terminationMessagePath;
// for a failure that wrote none there, with FallbackToLogs, the end of
// the last lines of its log. What cannot be read says why instead.
func terminationMessage(dir string, spec containerSpec, exit containerExit) string {
	if spec.OCI != nil && spec.TerminationMessagePath != "" {
		b, err := readTail(filepath.Join(dir, terminationMessageFile), maxTerminationMessage)
		if err != nil && !errors.Is(err, os.ErrNotExist) {
			return fmt.Sprintf("Error on reading termination log %s: %v", spec.TerminationMessagePath, err)
		}
		if len(b) > 0 {
			return string(b)
		}
	}
	if !spec.FallbackToLogs || exit.ExitCode == 0 {
		return ""
	}
	var buf bytes.Buffer
	if err := readLogFile(context.Background(), spec.Log, logOptions{tailLines: ptr.To[int64](maxTerminationLogLines)}, &buf, nil); err != nil {
		return fmt.Sprintf("Error on reading termination message from logs: %v", err)
	}
	b := buf.Bytes()
	return string(b[max(len(b)-maxTerminationLogMessage, 0):])
}

// readTail reads at most the last n bytes of file.
func readTail(file string, n int64) ([]byte, error) {
	f, err := os.Open(file)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, err
	}
	off := max(fi.Size()-n, 0)
	return io.ReadAll(io.NewSectionReader(f, off, fi.Size()-off))
}

// terminationMessageMount is the bind mount of the run's termination
// message file at the container's terminationMessagePath, the file made
// writable by any user, as the kubelet makes it.
func terminationMessageMount(dir string, spec containerSpec) (specs.Mount, error) {
	file := filepath.Join(dir, terminationMessageFile)
	f, err := os.OpenFile(file, os.O_CREATE|os.O_WRONLY, 0o666)
	if err != nil {
		return specs.Mount{}, fmt.Errorf("create the termination message file: %w", err)
	}
	f.Close()
	if err := os.Chmod(file, 0o666); err != nil {
		return specs.Mount{}, fmt.Errorf("create the termination message file: %w", err)
	}
	return specs.Mount{Destination: spec.TerminationMessagePath, Type: "bind", Source: file, Options: []string{"rbind", "rw"}}, nil
}

// startContainer prepares the namespaces and starts the process; wait
// returns its exit.
func startContainer(dir string, spec containerSpec) (wait func() containerExit, lw *logWriter, err error) {
	if err := unix.Mount("", "/", "", unix.MS_REC|unix.MS_PRIVATE, ""); err != nil {
		return nil, nil, fmt.Errorf("make the mount namespace private: %w", err)
	}
	if err := mountAll(spec.Mounts, filepath.Join(dir, "mnt")); err != nil {
		return nil, nil, err
	}
	if err := unix.Sethostname([]byte(spec.Hostname)); err != nil {
		return nil, nil, fmt.Errorf("set hostname: %w", err)
	}
	cmd := &exec.Cmd{
		Path:        spec.Path,
		Args:        spec.Args,
		Env:         spec.Env,
		Dir:         spec.Dir,
		SysProcAttr: &syscall.SysProcAttr{Setpgid: true},
	}
	if len(spec.Groups) > 0 {
		cmd.SysProcAttr.Credential = &syscall.Credential{Groups: spec.Groups}
	}
	if lw, err = openOutput(dir, spec, cmd); err != nil {
		return nil, nil, err
	}
	started, err := passReadyPipe(spec, cmd)
	if err != nil {
		lw.close(0)
		return nil, nil, err
	}
	if started != nil {
		defer started.Close()
		cmd.Env = append(cmd.Env, builtinReadyEnv)
	}
	err = startInNamespace(cmd, spec.NetNS)
	if started != nil {
		cmd.ExtraFiles[0].Close() // the program alone holds it now
	}
	if err != nil {
		lw.close(0)
		return nil, nil, err
	}
	if started != nil {
		waitStarted(started, builtinStartTimeout)
	}
	lw.attach.started()
	if err := recordStart(dir, cmd.Process.Pid); err != nil {
		_ = cmd.Process.Kill()
		return nil, nil, err
	}
	return func() containerExit {
		waitErr := cmd.Wait()
		// Like the end of a container's PID namespace: what the process
		// left behind goes with it.
		_ = unix.Kill(-cmd.Process.Pid, unix.SIGKILL)
		return exitOf(cmd.ProcessState, waitErr)
	}, lw, nil
}

// passReadyPipe gives a built-in program (spec.WaitReady) the write end
// of a pipe as cmd's first extra descriptor, on which it says it has
// started, and returns the read end; nil for any other program.
func passReadyPipe(spec containerSpec, cmd *exec.Cmd) (*os.File, error) {
	if !spec.WaitReady {
		return nil, nil
	}
	r, w, err := os.Pipe()
	if err != nil {
		return nil, fmt.Errorf("pipe for the program's start: %w", err)
	}
	cmd.ExtraFiles = []*os.File{w}
	return r, nil
}

// startRunc starts the container of an image with runc: the shim host,
// the subreaper, becomes the parent of the container's init once `runc
// create` has made it; wait returns its exit, deletes it and unmounts its
// root file system. The overlay is mounted in the host's own mount
// namespace, which runc's init starts from.
func startRunc(dir string, spec containerSpec) (wait func() containerExit, lw *logWriter, err error) {
	rt := spec.Runc
	if spec.TerminationMessagePath != "" {
		m, err := terminationMessageMount(dir, spec)
		if err != nil {
			return nil, nil, err
		}
		spec.OCI.Mounts = append(spec.OCI.Mounts, m)
	}
	bundle := runc.Bundle(dir)
	if err := bundle.Write(spec.OCI, spec.Layers); err != nil {
		_ = bundle.Unmount()
		return nil, nil, err
	}
	ctx := context.Background()
	// remove deletes what is made of the container: runc kills what the
	// init left in its cgroup and removes it.
	remove := func() {
		if err := rt.Delete(ctx, spec.ID); err != nil {
			slog.Warn("shim: delete container", "id", spec.ID, "err", err)
		}
		if err := bundle.Unmount(); err != nil {
			slog.Warn("shim: unmount the container's root file system", "id", spec.ID, "err", err)
		}
	}
	cmd := &exec.Cmd{SysProcAttr: &syscall.SysProcAttr{}}
	if lw, err = openOutput(dir, spec, cmd); err != nil {
		remove()
		return nil, nil, err
	}
	started, err := passReadyPipe(spec, cmd)
	if err != nil {
		lw.close(0)
		remove()
		return nil, nil, err
	}
	if started != nil {
		defer started.Close()
	}
	pid, err := rt.Create(cmd, bundle, spec.ID)
	if started != nil {
		cmd.ExtraFiles[0].Close() // the container alone holds it now
	}
	if err != nil {
		lw.close(0)
		remove()
		runc.ReapStrays()
		return nil, nil, err
	}
	lw.attach.started()
	// abandon removes a created container that cannot go on, and reaps
	// its init.
	abandon := func(err error) (func() containerExit, *logWriter, error) {
		lw.close(0)
		remove()
		_, _ = runc.Wait(pid)
		return nil, nil, err
	}
	if err := rt.Start(ctx, spec.ID); err != nil {
		return abandon(err)
	}
	if started != nil {
		waitStarted(started, builtinStartTimeout)
	}
	if err := recordStart(dir, pid); err != nil {
		return abandon(err)
	}
	return func() containerExit {
		ws, err := runc.Wait(pid)
		oom := runc.OOMKilled(spec.OCI.Linux.CgroupsPath)
		remove()
		if err != nil {
			return containerExit{ExitCode: 128, Reason: "Error", Message: err.Error(), FinishedAt: time.Now().UTC()}
		}
		exit := exitStatus(syscall.WaitStatus(ws))
		if oom && exit.ExitCode != 0 {
			exit.Reason = "OOMKilled"
		}
		return exit
	}, lw, nil
}

// openOutput opens the container's log and its attach hub, which sets
// cmd's standard streams.
func openOutput(dir string, spec containerSpec, cmd *exec.Cmd) (*logWriter, error) {
	lw, err := openLogWriter(spec.Log, spec.MaxLogSize)
	if err != nil {
		return nil, err
	}
	stdout, err := lw.stream("stdout")
	if err != nil {
		return nil, err
	}
	stderr, err := lw.stream("stderr")
	if err != nil {
		return nil, err
	}
	if lw.attach, err = newAttachHub(dir, spec, cmd, stdout, stderr); err != nil {
		lw.close(0)
		return nil, err
	}
	return lw, nil
}

// recordStart writes the run's state: this shim and the container's
// process pid.
func recordStart(dir string, pid int) error {
	st := containerState{ShimPID: os.Getpid(), PID: pid, StartedAt: time.Now().UTC()}
	st.ShimStart, _ = processStart(st.ShimPID)
	return writeJSON(filepath.Join(dir, stateFile), st)
}

// waitStarted waits until the program writes to r or closes it (it
// started, or ended), or timeout passes.
func waitStarted(r *os.File, timeout time.Duration) {
	_ = r.SetReadDeadline(time.Now().Add(timeout))
	_, _ = r.Read(make([]byte, 2))
}

// startInNamespace starts cmd from a thread inside the network namespace
// at path; the child inherits the thread's namespace.
func startInNamespace(cmd *exec.Cmd, path string) error {
	if path == "" {
		return cmd.Start()
	}
	ns, err := netns.GetFromPath(path)
	if err != nil {
		return fmt.Errorf("open network namespace %s: %w", path, err)
	}
	defer ns.Close()
	// This thread stays in the pod's namespace; it exits with the
	// goroutine, which never unlocks it.
	done := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		if err := netns.Set(ns); err != nil {
			done <- fmt.Errorf("join network namespace %s: %w", path, err)
			return
		}
		done <- cmd.Start()
	}()
	return <-done
}

// exitOf turns a process's end into the container's exit record.
func exitOf(ps *os.ProcessState, waitErr error) containerExit {
	if ps == nil {
		return containerExit{ExitCode: 128, Reason: "Error", Message: fmt.Sprint(waitErr), FinishedAt: time.Now().UTC()}
	}
	ws, _ := ps.Sys().(syscall.WaitStatus)
	return exitStatus(ws)
}

// exitStatus is the container's exit record for its process's status.
func exitStatus(ws syscall.WaitStatus) containerExit {
	e := containerExit{FinishedAt: time.Now().UTC(), Reason: "Completed"}
	switch {
	case ws.Signaled():
		e.Signal = int32(ws.Signal())
		e.ExitCode = 128 + e.Signal
	default:
		e.ExitCode = int32(ws.ExitStatus())
	}
	if e.ExitCode != 0 {
		e.Reason = "Error"
	}
	return e
}

// processStart is a process's start time in clock ticks since boot, field
// 22 of /proc/PID/stat.
func processStart(pid int) (uint64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	// The command name may hold spaces; fields count from its closing ')'.
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return 0, fmt.Errorf("malformed /proc/%d/stat", pid)
	}
	f := strings.Fields(s[i+1:])
	if len(f) < 20 {
		return 0, fmt.Errorf("malformed /proc/%d/stat", pid)
	}
	return strconv.ParseUint(f[19], 10, 64)
}

// logWriter writes a container's streams to its log in the CRI format,
// "<RFC3339Nano time> <stream> <F|P> <line>", rotating it at a size.
type logWriter struct {
	cri     *logs.CRIWriter
	readers sync.WaitGroup
	pipes   []*os.File
	// attach tees the container's output to attached clients.
	attach *attachHub
}

func openLogWriter(path string, max int64) (*logWriter, error) {
	w, err := logs.OpenCRI(path, max, false)
	if err != nil {
		return nil, err
	}
	return &logWriter{cri: w}, nil
}

// stream returns the write end of a pipe whose lines are logged as name.
func (w *logWriter) stream(name string) (*os.File, error) {
	r, wr, err := os.Pipe()
	if err != nil {
		return nil, fmt.Errorf("pipe for %s: %w", name, err)
	}
	w.pipes = append(w.pipes, r)
	w.readers.Go(func() {
		br := bufio.NewReaderSize(r, logs.LineMax)
		for {
			line, err := br.ReadSlice('\n')
			if len(line) > 0 {
				tag := "P"
				if line[len(line)-1] == '\n' {
					tag, line = "F", line[:len(line)-1]
				}
				w.cri.Record(time.Now(), name, tag, line)
			}
			if err != nil && !errors.Is(err, bufio.ErrBufferFull) {
				return
			}
		}
	})
	return wr, nil
}

// close waits up to grace for the streams to end, then closes the log.
func (w *logWriter) close(grace time.Duration) {
	if w.attach != nil {
		w.attach.close(grace)
	}
	for _, p := range w.pipes {
		_ = p.SetReadDeadline(time.Now().Add(grace))
	}
	w.readers.Wait()
	for _, p := range w.pipes {
		p.Close()
	}
	_ = w.cri.Close()
}

func readJSON[T any](path string) (T, error) {
	var v T
	b, err := os.ReadFile(path)
	if err != nil {
		return v, err
	}
	if err := json.Unmarshal(b, &v); err != nil {
		return v, fmt.Errorf("decode %s: %w", path, err)
	}
	return v, nil
}

// writeJSON replaces path atomically.
func writeJSON(path string, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Errorf("encode %s: %w", path, err)
	}
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, b, 0o600); err != nil {
		return fmt.Errorf("write %s: %w", tmp, err)
	}
	if err := os.Rename(tmp, path); err != nil {
		return fmt.Errorf("rename %s: %w", tmp, err)
	}
	return nil
}
