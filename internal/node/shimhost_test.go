package node

import (
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// serveShimHost runs a shim host's socket for dir (without the process's
// namespaces, which belong to `svcnet node shims`) and returns the end of
// its serve.
func serveShimHost(t *testing.T, dir string) (*shimHost, chan error) {
	t.Helper()
	h, err := listenShimHost(dir)
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- h.serve() }()
	t.Cleanup(func() {
		h.mu.Lock()
		h.close()
		h.mu.Unlock()
		<-done
	})
	return h, done
}

// ask hands dir to the host under runDir and returns its answer.
func ask(t *testing.T, runDir, dir string) string {
	t.Helper()
	conn, err := dialTaken(runDir)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, err := io.WriteString(conn, dir+"\n"); err != nil {
		t.Fatal(err)
	}
	_ = conn.SetReadDeadline(time.Now().Add(10 * time.Second))
	msg, err := io.ReadAll(conn)
	if err != nil {
		t.Fatal(err)
	}
	return string(msg)
}

// The shim host takes runs of its own runtime's directory only, answers
// why a run cannot start, and leaves once its last run has ended, its
// socket gone with it, so that the agent starts another.
func TestShimHostLeavesAfterLastRun(t *testing.T) {
	runDir := t.TempDir()
	_, done := serveShimHost(t, runDir)

	if msg := ask(t, runDir, "/elsewhere"); !strings.Contains(msg, "is not a run of this host's runtime") {
		t.Errorf("a run outside the runtime: %q", msg)
	}
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("serve: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the host still serves after its last run ended")
	}
	if _, err := os.Stat(filepath.Join(runDir, shimHostSocket)); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("socket after the host left: %v", err)
	}
	if _, err := dialTaken(runDir); err == nil {
		t.Error("a host that left took a run")
	}
	done <- nil // for the cleanup's wait
}

// A run without a spec is refused with the reason, and the run's exit is
// not faked; a process container's run is not the host's.
func TestShimHostAnswersStartErrors(t *testing.T) {
	runDir := t.TempDir()
	h, done := serveShimHost(t, runDir)
	// Hold a run, so that the host stays between the questions.
	hold, err := dialTaken(runDir)
	if err != nil {
		t.Fatal(err)
	}

	run := filepath.Join(runDir, "uid", "containers", "main", "0")
	if err := os.MkdirAll(run, 0o700); err != nil {
		t.Fatal(err)
	}
	if msg := ask(t, runDir, run); !strings.HasPrefix(msg, "read spec: ") {
		t.Errorf("a run without a spec: %q", msg)
	}
	if err := writeJSON(filepath.Join(run, specFile), containerSpec{Name: "main"}); err != nil {
		t.Fatal(err)
	}
	if msg := ask(t, runDir, run); !strings.Contains(msg, "runs in the node's shim host, any other in a shim of its own") {
		t.Errorf("a process container's run: %q", msg)
	}
	if _, err := os.Stat(filepath.Join(run, exitFile)); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("exit record of a run that never started: %v", err)
	}
	// The answered runs end just after their answers.
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		h.mu.Lock()
		active := h.active
		h.mu.Unlock()
		if active == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("active runs = %d, want the held one", active)
		}
	}
	hold.Close()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("the host still serves after its last run ended")
	}
	done <- nil
}

// A host on its way out removes its own socket only: not that of the host
// that took its place.
func TestShimHostLeavesALaterHostsSocket(t *testing.T) {
	runDir := t.TempDir()
	_, done1 := serveShimHost(t, runDir)
	hold, err := dialTaken(runDir)
	if err != nil {
		t.Fatal(err)
	}
	// An agent restarted in another mount namespace leaves the first host
	// to its runs and starts its own.
	if err := os.Remove(filepath.Join(runDir, shimHostSocket)); err != nil {
		t.Fatal(err)
	}
	serveShimHost(t, runDir)
	hold.Close()
	select {
	case <-done1:
	case <-time.After(10 * time.Second):
		t.Fatal("the first host still serves after its last run ended")
	}
	done1 <- nil
	if msg := ask(t, runDir, "/elsewhere"); !strings.Contains(msg, "is not a run of this host's runtime") {
		t.Errorf("the second host's answer: %q", msg)
	}
}
