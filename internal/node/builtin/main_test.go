package builtin

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"os/exec"
	"slices"
	"sync"
	"testing"
	"time"
)

// builtinEnv names the built-in program a run of the test binary started
// by startBuiltin runs through Main, as `svcnet node image` does, instead
// of the tests: programs that end the process themselves (etcd) or set up
// its global state once (the sample-apiserver).
const builtinEnv = "SVCNET_TEST_BUILTIN"

func TestMain(m *testing.M) {
	if name := os.Getenv(builtinEnv); name != "" {
		// The program's argv follows "--".
		i := slices.Index(os.Args, "--")
		if err := Main(name, nil, os.Args[i+1:]); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// lockedBuffer is a program's output, written by the copying goroutines
// of exec.Cmd and read by the test.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}

// startBuiltin runs the built-in program name with argv as a process of
// its own in dir, as the shim does: it returns once the program has said
// on its ready descriptor that it started (or has ended), with the
// process and its output. A process still running when the test ends is
// killed; the test waits for every process it started.
func startBuiltin(t *testing.T, name, dir string, argv ...string) (*exec.Cmd, *lockedBuffer) {
	t.Helper()
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	out := &lockedBuffer{}
	cmd := exec.Command(os.Args[0], append([]string{"-test.run=^$", "--"}, argv...)...)
	cmd.Dir, cmd.Stdout, cmd.Stderr = dir, out, out
	cmd.Env = append(os.Environ(), builtinEnv+"="+name, ReadyFDEnv+"=3")
	cmd.ExtraFiles = []*os.File{w}
	err = cmd.Start()
	w.Close()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if cmd.ProcessState == nil { // not waited for
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
		}
		if t.Failed() {
			t.Logf("%s said:\n%s", name, out)
		}
	})
	_ = r.SetReadDeadline(time.Now().Add(30 * time.Second))
	said, err := io.ReadAll(r)
	if err != nil {
		t.Fatalf("%s: ready descriptor: %v; it said:\n%s", name, err, out)
	}
	if string(said) != "ok" {
		// Ended without saying it started: wait for its end.
		_ = cmd.Wait()
	}
	return cmd, out
}

// waitBuiltin waits for the process startBuiltin started to end, at most
// timeout.
func waitBuiltin(t *testing.T, cmd *exec.Cmd, timeout time.Duration) *os.ProcessState {
	t.Helper()
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case <-done:
	case <-time.After(timeout):
		_ = cmd.Process.Kill()
		<-done
		t.Fatalf("still running after %v", timeout)
	}
	return cmd.ProcessState
}
