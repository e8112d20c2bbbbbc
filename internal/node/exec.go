package node

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/creack/pty"
	"golang.org/x/sys/unix"
	corev1 "k8s.io/api/core/v1"
)

// exec serves /exec/{namespace}/{pod}/{container}?command=...: the command
// runs in the container's network, UTS and mount namespaces (nsenter into
// its process) with the container's environment, as a runtime's exec does.
func (s *server) exec(w http.ResponseWriter, r *http.Request) {
	argv := r.URL.Query()["command"]
	if len(argv) == 0 {
		http.Error(w, "you must specify at least one command for the container", http.StatusBadRequest)
		return
	}
	_, c, ok := s.agent.streamTarget(w, r)
	if !ok {
		return
	}
	serveSession(w, r, func(ctx context.Context, sess *session) error {
		cmd, done, err := s.agent.enterCommand(ctx, c, argv, sess.tty)
		if err != nil {
			return err
		}
		defer done()
		return runSession(ctx, cmd, sess, argv)
	})
}

// streamTarget finds the running container a stream is for, answering the
// kubelet's errors when there is none.
func (a *Agent) streamTarget(w http.ResponseWriter, r *http.Request) (*corev1.Pod, *container, bool) {
	ns, name, cname := r.PathValue("namespace"), r.PathValue("pod"), r.PathValue("container")
	pod, err := a.podLister.Pods(ns).Get(name)
	if err != nil {
		http.Error(w, "pod does not exist", http.StatusNotFound)
		return nil, nil, false
	}
	runs, err := a.rt.containers(string(pod.UID))
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return nil, nil, false
	}
	if c := latestRuns(runs)[cname]; c != nil && c.Running() {
		return pod, c, true
	}
	http.Error(w, fmt.Sprintf("container not found (%q)", cname), http.StatusNotFound)
	return nil, nil, false
}

// enterCommand is argv run inside container c as a runtime's exec runs
// it, killed when ctx ends, and what to call once it has ended. In an
// image run by runc: `runc exec`, as the container's user and groups, in
// its working directory, with its environment (its capabilities, cgroup
// and namespaces are the container's). In a host process: nsenter into
// its network, UTS and mount namespaces, in its working directory, with
// its environment, a busybox-like image's applets first on its PATH as
// they fill the image's /bin.
func (a *Agent) enterCommand(ctx context.Context, c *container, argv []string, tty bool) (*exec.Cmd, func(), error) {
	if c.Spec.OCI != nil {
		return runcExec(ctx, c, argv, tty)
	}
	nsenter, err := exec.LookPath("nsenter")
	if err != nil {
		return nil, nil, fmt.Errorf("exec needs nsenter on the node: %w", err)
	}
	dir := c.Spec.Dir
	if dir == "" {
		dir = "/"
	}
	args := append([]string{"--target", strconv.Itoa(c.State.PID), "--net", "--uts", "--mount", "--wdns=" + dir, "--"}, argv...)
	env, err := withApplets(a.cfg.DataDir, a.cfg.Images, c.Spec.Image, c.Spec.Env)
	if err != nil {
		return nil, nil, err
	}
	cmd := exec.CommandContext(ctx, nsenter, args...)
	cmd.Env, cmd.Dir = env, "/"
	return cmd, func() {}, nil
}

// runcExec is `runc exec` of argv in c with its process's user, groups,
// working directory and environment. runc cannot pass SIGKILL on, so
// the end of ctx kills the command by the PID runc records.
func runcExec(ctx context.Context, c *container, argv []string, tty bool) (*exec.Cmd, func(), error) {
	rt := c.Spec.Runc
	pidFile := filepath.Join(c.dir, "exec-"+newContainerID()+".pid")
	p := c.Spec.OCI.Process
	args := []string{"--root", rt.Root, "exec", "--pid-file", pidFile, "--user", fmt.Sprintf("%d:%d", p.User.UID, p.User.GID), "--cwd", p.Cwd}
	for _, g := range p.User.AdditionalGids {
		args = append(args, "--additional-gids", strconv.FormatUint(uint64(g), 10))
	}
	for _, kv := range p.Env {
		args = append(args, "--env", kv)
	}
	if tty {
		args = append(args, "--tty")
	}
	args = append(append(args, c.Spec.ID), argv...)
	cmd := exec.CommandContext(ctx, rt.Binary, args...)
	cmd.Dir = "/"
	cmd.Cancel = func() error {
		if b, err := os.ReadFile(pidFile); err == nil {
			if pid, err := strconv.Atoi(strings.TrimSpace(string(b))); err == nil && pid > 0 {
				_ = unix.Kill(pid, unix.SIGKILL)
			}
		}
		return cmd.Process.Kill()
	}
	return cmd, func() { _ = os.Remove(pidFile) }, nil
}

// outputGrace is how long a session's output may trail the command's exit
// (a background child holding the terminal or a pipe) before it is cut.
const outputGrace = 2 * time.Second

// runSession runs cmd on the session's streams, on a new terminal when the
// session has one, and returns once its output is written: nil, an
// exitCodeError, or why it could not run. The command and what it started
// are killed when ctx ends first.
func runSession(ctx context.Context, cmd *exec.Cmd, s *session, argv []string) error {
	stdout, stderr := orDiscard(s.stdout), orDiscard(s.stderr)
	var (
		term   *os.File
		output = make(chan struct{})
	)
	if s.tty {
		ptmx, tty, err := pty.Open()
		if err != nil {
			return fmt.Errorf("open a terminal: %w", err)
		}
		defer ptmx.Close()
		defer tty.Close()
		term = ptmx
		cmd.Stdin, cmd.Stdout, cmd.Stderr = tty, tty, tty
		cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true, Setctty: true}
	} else {
		cmd.Stdout, cmd.Stderr = stdout, stderr
		cmd.WaitDelay = outputGrace
		cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
		close(output)
	}
	var stdin io.WriteCloser
	if s.stdin != nil && !s.tty {
		p, err := cmd.StdinPipe()
		if err != nil {
			return fmt.Errorf("stdin pipe: %w", err)
		}
		stdin = p
	}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("start %v: %w", argv, err)
	}
	stop := context.AfterFunc(ctx, func() { _ = unix.Kill(-cmd.Process.Pid, unix.SIGKILL) })
	defer stop()
	if term != nil {
		// The child holds the terminal now; reads end once it and its
		// children have closed it.
		_ = cmd.Stdin.(*os.File).Close()
		go func() {
			defer close(output)
			_, _ = io.Copy(stdout, term)
		}()
		if s.resize != nil {
			go followResizes(term, s.resize)
		}
		if s.stdin != nil {
			// Ends with the session's stdin, or when the terminal closes.
			go func() { _, _ = io.Copy(term, s.stdin) }()
		}
	}
	if stdin != nil {
		// Ends with the session's stdin, or when the command no longer
		// reads it; Wait does not wait for it.
		go func() {
			_, _ = io.Copy(stdin, s.stdin)
			_ = stdin.Close()
		}()
	}
	err := cmd.Wait()
	select {
	case <-output:
	case <-time.After(outputGrace):
		_ = term.Close()
		<-output
	}
	return exitResult(cmd.ProcessState, err, argv)
}

// exitResult turns a finished command into a session's result.
func exitResult(ps *os.ProcessState, err error, argv []string) error {
	if ps == nil {
		return err
	}
	if ws, ok := ps.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return exitCodeError{argv: argv, code: 128 + int(ws.Signal())}
	}
	if code := ps.ExitCode(); code != 0 {
		return exitCodeError{argv: argv, code: code}
	}
	var ee *exec.ExitError
	if err != nil && !errors.As(err, &ee) && !errors.Is(err, exec.ErrWaitDelay) {
		return err
	}
	return nil
}

// followResizes applies the client's terminal sizes until the channel
// closes.
func followResizes(term *os.File, sizes <-chan termSize) {
	for size := range sizes {
		if size.Width == 0 || size.Height == 0 {
			continue
		}
		_ = pty.Setsize(term, &pty.Winsize{Rows: size.Height, Cols: size.Width})
	}
}

func orDiscard(w io.Writer) io.Writer {
	if w == nil {
		return io.Discard
	}
	return w
}
