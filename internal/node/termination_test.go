package node

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	specs "github.com/opencontainers/runtime-spec/specs-go"
)

func TestTerminationMessage(t *testing.T) {
	dir := t.TempDir()
	log := filepath.Join(dir, "0.log")
	var lines strings.Builder
	for i := range 100 {
		fmt.Fprintf(&lines, "2026-12-03T10:00:00.000000000Z stderr F line %03d\n", i)
	}
	if err := os.WriteFile(log, []byte(lines.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	runc := containerSpec{Log: log, OCI: &specs.Spec{}, TerminationMessagePath: "/dev/termination-log"}
	failed, ok := containerExit{ExitCode: 1}, containerExit{ExitCode: 0}

	if got := terminationMessage(dir, runc, failed); got != "" {
		t.Errorf("no file, no fallback: %q", got)
	}
	// The file's end, at most 4096 bytes.
	long := strings.Repeat("a", 5000) + "the end"
	if _, err := terminationMessageMount(dir, runc); err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Stat(filepath.Join(dir, terminationMessageFile)); err != nil || fi.Mode().Perm() != 0o666 {
		t.Fatalf("termination message file: %v, %v (want mode 0666)", fi, err)
	}
	if err := os.WriteFile(filepath.Join(dir, terminationMessageFile), []byte(long), 0o666); err != nil {
		t.Fatal(err)
	}
	if got := terminationMessage(dir, runc, ok); len(got) != maxTerminationMessage || !strings.HasSuffix(got, "the end") {
		t.Errorf("message from the file: %d bytes ending %q", len(got), got[max(len(got)-10, 0):])
	}
	// FallbackToLogsOnError: the file first; without it, the log's last
	// 80 lines (at most 2048 bytes) of a failure only.
	runc.FallbackToLogs = true
	if got := terminationMessage(dir, runc, failed); !strings.HasSuffix(got, "the end") {
		t.Errorf("fallback with a file: %q", got)
	}
	if err := os.Truncate(filepath.Join(dir, terminationMessageFile), 0); err != nil {
		t.Fatal(err)
	}
	got := terminationMessage(dir, runc, failed)
	if !strings.HasPrefix(got, "line 020\n") || !strings.HasSuffix(got, "line 099\n") || strings.Contains(got, "stderr") {
		t.Errorf("fallback to the log: %d bytes %q, want lines 020 to 099", len(got), got[:min(len(got), 40)])
	}
	// Of long lines, the last 2048 bytes.
	var long2 strings.Builder
	for i := range 100 {
		fmt.Fprintf(&long2, "2026-12-03T10:00:00.000000000Z stderr F %s %03d\n", strings.Repeat("x", 60), i)
	}
	if err := os.WriteFile(log, []byte(long2.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	if got := terminationMessage(dir, runc, failed); len(got) != maxTerminationLogMessage || !strings.HasSuffix(got, " 099\n") {
		t.Errorf("fallback to long lines: %d bytes ending %q, want the last 2048", len(got), got[max(len(got)-10, 0):])
	}
	if err := os.WriteFile(log, []byte(lines.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	if got := terminationMessage(dir, runc, ok); got != "" {
		t.Errorf("fallback after a success: %q", got)
	}
	// A host process has no file of its own: the log alone.
	host := runc
	host.OCI = nil
	if err := os.WriteFile(filepath.Join(dir, terminationMessageFile), []byte("ignored"), 0o666); err != nil {
		t.Fatal(err)
	}
	if got := terminationMessage(dir, host, failed); !strings.HasPrefix(got, "line 020\n") {
		t.Errorf("host process fallback: %q", got[:min(len(got), 40)])
	}
}
