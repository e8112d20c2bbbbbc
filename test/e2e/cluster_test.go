// Package e2e drives svcnet as a user does: it builds the binary, starts
// `svcnet up` on a fresh data dir and loopback ports, and runs the real
// kubectl against it.
//
// Each test has clusters, namespaces and ports of its own, so the tests
// run in parallel (t.Parallel), as many at once as go test's -parallel
// says. Those that bound how long something takes (a probe's period, a
// refusal "at once") do not: go test runs them first, one at a time.
package e2e

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/svcnet/svcnet/internal/storage/storagetest"
)

// binary is the svcnet binary built once for the package's tests.
var binary string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "svcnet-e2e-bin")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	binary = filepath.Join(dir, "svcnet")
	// Tests run it as an unprivileged user too.
	if err := os.Chmod(dir, 0o755); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	build := exec.Command("go", "build", "-o", binary, "../../cmd/svcnet")
	build.Stdout, build.Stderr = os.Stdout, os.Stderr
	if err := build.Run(); err != nil {
		fmt.Fprintln(os.Stderr, "build svcnet:", err)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// kubectlPath is the real kubectl the tests run.
const kubectlPath = "/usr/bin/kubectl"

// cluster is one running `svcnet up`.
type cluster struct {
	t          *testing.T
	dataDir    string
	apiAddr    string
	etcdClient string
	etcdPeer   string
	cacheDir   string
	cmd        *exec.Cmd
	log        *logBuffer
	// extraArgs are more flags for `svcnet up` (a node's, for example).
	extraArgs []string
	// inNetns, when set, is the network namespace the cluster runs in
	// (`svcnet up` is started with `ip netns exec`, kubectl too, as on
	// the machine the namespace plays), and upCommand what runs there.
	inNetns   string
	upCommand []string
	// credential, when set, is the user up runs as.
	credential *syscall.Credential
	// exited is closed once cmd has exited, with exitErr its Wait's.
	exited  chan struct{}
	exitErr error
}

// launch starts cmd and waits for its end in the background (exited).
func (c *cluster) launch() error {
	if err := c.cmd.Start(); err != nil {
		return err
	}
	c.exited = make(chan struct{})
	cmd, exited := c.cmd, c.exited
	go func() {
		c.exitErr = cmd.Wait()
		close(exited)
	}()
	return nil
}

// kill ends the process with SIGKILL and waits for its end.
func (c *cluster) kill() {
	_ = c.cmd.Process.Kill()
	<-c.exited
	c.cmd = nil
}

// freePort returns a loopback port nobody listens on now.
var freePort = storagetest.FreePort

// newCluster is a cluster, not yet started, on fresh data and cache dirs
// and free loopback ports.
func newCluster(t *testing.T) *cluster {
	return &cluster{
		t:          t,
		dataDir:    t.TempDir(),
		cacheDir:   t.TempDir(),
		apiAddr:    fmt.Sprintf("127.0.0.1:%d", freePort(t)),
		etcdClient: fmt.Sprintf("https://127.0.0.1:%d", freePort(t)),
		etcdPeer:   fmt.Sprintf("https://127.0.0.1:%d", freePort(t)),
	}
}

// startCluster starts `svcnet up` (with extraArgs) on a new data dir and
// waits until it answers; it is stopped when the test ends. It runs the
// control plane alone (--nodes 0), for up runs a node in its own network
// namespace, here the host's, unless told otherwise, and without cluster
// DNS, whose pods would wait for a node (or land on the tests' made-up
// ones): a node test's extraArgs say otherwise (they give --nodes) and
// place the node in a namespace of the test's own.
func startCluster(t *testing.T, extraArgs ...string) *cluster {
	t.Helper()
	if _, err := os.Stat(kubectlPath); err != nil {
		t.Fatalf("kubectl not found at %s: %v", kubectlPath, err)
	}
	c := newCluster(t)
	// The controller manager's metrics get a free port too.
	c.extraArgs = []string{"--metrics-bind-address", fmt.Sprintf("127.0.0.1:%d", freePort(t))}
	if !slices.Contains(extraArgs, "--nodes") {
		c.extraArgs = append(c.extraArgs, "--nodes", "0", "--disable", "coredns,ingress")
	}
	c.extraArgs = append(c.extraArgs, extraArgs...)
	c.start()
	t.Cleanup(c.stop)
	return c
}

func (c *cluster) start() {
	c.t.Helper()
	c.log = &logBuffer{}
	args := append([]string{binary, "up", "--data-dir", c.dataDir, "--bind-address", c.apiAddr,
		"--etcd-client-url", c.etcdClient, "--etcd-peer-url", c.etcdPeer}, c.extraArgs...)
	if c.upCommand != nil {
		args = c.upCommand
	}
	if c.inNetns != "" {
		args = append([]string{"ip", "netns", "exec", c.inNetns}, args...)
	}
	c.cmd = exec.Command(args[0], args[1:]...)
	c.cmd.Stdout, c.cmd.Stderr = c.log, c.log
	// Should the test binary die (a timeout panic skips cleanups), the
	// cluster dies with it.
	c.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL, Credential: c.credential}
	if err := c.launch(); err != nil {
		c.t.Fatalf("start svcnet up: %v", err)
	}
	c.waitReady(true)
}

// stop sends SIGTERM and waits for a clean exit.
func (c *cluster) stop() {
	if c.cmd == nil || c.cmd.Process == nil {
		return
	}
	_ = c.cmd.Process.Signal(syscall.SIGTERM)
	failure := ""
	select {
	case <-c.exited:
		if c.exitErr != nil {
			failure = fmt.Sprintf("svcnet up exited with %v", c.exitErr)
		}
	case <-time.After(20 * time.Second):
		_ = c.cmd.Process.Kill()
		<-c.exited
		failure = "svcnet up did not stop within 20s of SIGTERM"
	}
	c.cmd = nil
	switch {
	case failure != "":
		c.t.Errorf("%s; log:\n%s", failure, c.log)
	case c.t.Failed():
		// What the cluster said, for a failure seen only in CI's output.
		lines := strings.Split(strings.TrimSpace(c.log.String()), "\n")
		c.t.Logf("the last %d lines of svcnet up's log:\n%s", min(len(lines), logTail), strings.Join(lines[max(0, len(lines)-logTail):], "\n"))
	}
}

// logTail is how many lines of the cluster's log a failed test shows.
const logTail = 300

// restart stops and starts the cluster on the same data dir and ports.
func (c *cluster) restart() {
	c.t.Helper()
	c.stop()
	c.start()
}

// createNamespace creates a namespace and waits for its default
// ServiceAccount, as upstream's e2e framework does: pods are refused
// until the serviceaccount controller has made it.
func (c *cluster) createNamespace(name string) {
	c.t.Helper()
	c.must("create", "namespace", name)
	eventually(c.t, 10*time.Second, func() string {
		if _, err := c.kubectl("", "get", "serviceaccount", "default", "-n", name); err != nil {
			return "no default ServiceAccount in " + name
		}
		return ""
	})
}

func (c *cluster) kubeconfig() string { return filepath.Join(c.dataDir, "kubeconfig") }

// upLine is what `svcnet up` prints once the cluster is up: nodes
// Ready, their proxies in step with the API, cluster DNS answering.
const upLine = "svcnet is up: "

// waitReady waits until `svcnet up` says the cluster is up, or (for
// `svcnet apiserver`, !up) the API server is ready and has written the
// kubeconfig.
func (c *cluster) waitReady(up bool) {
	c.t.Helper()
	client := &http.Client{Timeout: time.Second, Transport: &http.Transport{TLSClientConfig: insecureTLS()}}
	deadline := time.Now().Add(60 * time.Second)
	for time.Now().Before(deadline) {
		select {
		case <-c.exited:
			c.t.Fatalf("%s exited (%v): %s", strings.Join(c.cmd.Args, " "), c.exitErr, c.log)
		default:
		}
		if up {
			if strings.Contains(c.log.String(), upLine) {
				return
			}
			time.Sleep(50 * time.Millisecond)
			continue
		}
		resp, err := client.Get("https://" + c.apiAddr + "/readyz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				if _, err := os.Stat(c.kubeconfig()); err == nil {
					return
				}
			}
		}
		time.Sleep(50 * time.Millisecond)
	}
	c.t.Fatalf("%s not ready after 60s; log:\n%s", strings.Join(c.cmd.Args, " "), c.log)
}

// logBuffer collects a process's output while tests read it.
type logBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *logBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *logBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// kubectl runs the real kubectl with args and returns its combined output
// and exit error.
func (c *cluster) kubectl(stdin string, args ...string) (string, error) {
	c.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := c.kubectlCommand(ctx, args)
	if stdin != "" {
		cmd.Stdin = strings.NewReader(stdin)
	}
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// kubectlCommand is the real kubectl with args for this cluster, in its
// network namespace when it runs in one.
func (c *cluster) kubectlCommand(ctx context.Context, args []string) *exec.Cmd {
	argv := append([]string{kubectlPath, "--cache-dir", c.cacheDir}, args...)
	if c.inNetns != "" {
		argv = append([]string{"ip", "netns", "exec", c.inNetns}, argv...)
	}
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	cmd.Env = append(os.Environ(), "KUBECONFIG="+c.kubeconfig(), "HOME="+c.cacheDir)
	return cmd
}

// must runs kubectl and fails the test on a non-zero exit.
func (c *cluster) must(args ...string) string {
	c.t.Helper()
	out, err := c.kubectl("", args...)
	if err != nil {
		c.t.Fatalf("kubectl %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return out
}

// apply pipes a manifest to `kubectl apply -f -` (or other args given).
func (c *cluster) withStdin(stdin string, args ...string) string {
	c.t.Helper()
	out, err := c.kubectl(stdin, args...)
	if err != nil {
		c.t.Fatalf("kubectl %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return out
}

// fails runs kubectl expecting a non-zero exit and returns the output.
func (c *cluster) fails(args ...string) string {
	c.t.Helper()
	out, err := c.kubectl("", args...)
	if err == nil {
		c.t.Fatalf("kubectl %s succeeded, want failure:\n%s", strings.Join(args, " "), out)
	}
	return out
}

// eventually polls cond until it returns "" (success) or the timeout
// passes, then fails with cond's last message.
func eventually(t *testing.T, timeout time.Duration, cond func() string) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	msg := ""
	for time.Now().Before(deadline) {
		if msg = cond(); msg == "" {
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatalf("condition not met within %s: %s", timeout, msg)
}

// kubectlEnv runs kubectl with extra environment variables.
func (c *cluster) kubectlEnv(env []string, args ...string) (string, error) {
	c.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := c.kubectlCommand(ctx, args)
	cmd.Env = append(cmd.Env, env...)
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// kubectlStream runs a long kubectl (get -w) and sends each output line to
// lines; stop ends it.
func (c *cluster) kubectlStream(lines chan<- string, args ...string) func() {
	c.t.Helper()
	cmd := c.kubectlCommand(context.Background(), args)
	out, err := cmd.StdoutPipe()
	if err != nil {
		c.t.Fatal(err)
	}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		c.t.Fatal(err)
	}
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			lines <- sc.Text()
		}
	}()
	return func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		if stderr.Len() > 0 {
			c.t.Logf("kubectl %v stderr: %s", args, stderr.String())
		}
	}
}

// insecureTLS is for probing /readyz and anonymous access only.
func insecureTLS() *tls.Config { return &tls.Config{InsecureSkipVerify: true} }
