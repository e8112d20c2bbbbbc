package procstat

import (
	"os"
	"path/filepath"
	"strconv"
	"testing"
)

// fakeProc writes a /proc of processes given as pid -> stat line.
func fakeProc(t *testing.T, stats map[int]string) string {
	t.Helper()
	root := t.TempDir()
	for pid, line := range stats {
		dir := filepath.Join(root, strconv.Itoa(pid))
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, "stat"), []byte(line), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return root
}

// stat is a stat line: ppid, utime, stime, cutime, cstime and rss pages.
func stat(pid int, comm string, ppid, utime, stime, cutime, cstime, rss int) string {
	s := strconv.Itoa(pid) + " (" + comm + ") S " + strconv.Itoa(ppid) + " 1 1 0 -1 4194304 100 0 0 0 " +
		strconv.Itoa(utime) + " " + strconv.Itoa(stime) + " " + strconv.Itoa(cutime) + " " + strconv.Itoa(cstime) +
		" 20 0 1 0 100 1000000 " + strconv.Itoa(rss) + " 18446744073709551615 1 1 0 0 0 0 0 0 0 0 0 0 17 0 0 0 0 0 0\n"
	return s
}

func TestTree(t *testing.T) {
	root := fakeProc(t, map[int]string{
		1:  stat(1, "init", 0, 1000, 1000, 0, 0, 10),
		10: stat(10, "shim", 1, 5, 5, 0, 0, 100),
		11: stat(11, "sh) -c (x", 10, 300, 100, 50, 50, 200), // the container: 5s
		12: stat(12, "busy", 11, 150, 50, 0, 0, 300),         // its child: 2s
		13: stat(13, "other", 1, 999, 0, 0, 0, 1),
	})
	s, err := Take(root)
	if err != nil {
		t.Fatal(err)
	}
	u, ok := s.Tree(11)
	page := uint64(os.Getpagesize())
	if !ok || u.CPUSeconds != 7 || u.MemoryBytes != 500*page {
		t.Errorf("tree of 11 = %+v, %v; want 7s and %d bytes", u, ok, 500*page)
	}
	if _, ok := s.Tree(99); ok {
		t.Error("a missing process has usage")
	}
}

func TestNode(t *testing.T) {
	root := t.TempDir()
	must := func(name, data string) {
		if err := os.WriteFile(filepath.Join(root, name), []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	must("stat", "cpu  1000 100 500 90000 400 50 50 0 0 0\ncpu0 1 2 3 4 5 6 7 8 9 10\n")
	must("meminfo", "MemTotal:        8000000 kB\nMemFree:  1000 kB\nMemAvailable:    6000000 kB\n")
	u, err := Node(root)
	if err != nil {
		t.Fatal(err)
	}
	if u.CPUSeconds != 17 || u.MemoryBytes != 2000000*1024 {
		t.Errorf("node usage = %+v, want 17s and 2000000 KiB", u)
	}
	must("stat", "intr 1 2 3\n")
	if _, err := Node(root); err == nil {
		t.Error("a /proc/stat without a cpu line was accepted")
	}
}

func TestTakeReal(t *testing.T) {
	s, err := Take("/proc")
	if err != nil {
		t.Fatal(err)
	}
	if u, ok := s.Tree(os.Getpid()); !ok || u.MemoryBytes == 0 {
		t.Errorf("this test's own process: %+v, %v", u, ok)
	}
}
