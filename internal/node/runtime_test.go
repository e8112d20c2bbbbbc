package node

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
)

// A run whose shim this agent is still starting has a spec and no state;
// reading it meanwhile (kubectl logs, the metrics scrape) must not record
// it as killed, or the pod worker would start it again and the first run
// would go on unseen by every stop.
func TestLoadLeavesStartingRunAlone(t *testing.T) {
	r := &containerRuntime{dir: t.TempDir()}
	dir := r.containerDir("uid", "main", 0)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := writeJSON(filepath.Join(dir, specFile), containerSpec{Name: "main"}); err != nil {
		t.Fatal(err)
	}
	r.starting.Store(dir, struct{}{})
	c, err := r.load(dir)
	if err != nil {
		t.Fatal(err)
	}
	if c == nil || c.Exit != nil || c.Running() {
		t.Fatalf("starting run read as %+v, want neither running nor ended", c)
	}
	if _, err := os.Stat(filepath.Join(dir, exitFile)); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("exit record of a starting run: %v", err)
	}

	// Once no start is under way, a run without a live shim is dead.
	r.starting.Delete(dir)
	c, err = r.load(dir)
	if err != nil {
		t.Fatal(err)
	}
	if c.Exit == nil || c.Exit.ExitCode != 137 {
		t.Fatalf("run with no shim read as %+v, want killed (137)", c.Exit)
	}
}
