package procstat

import (
	"os"
	"path/filepath"
	"testing"
)

func writeFiles(t *testing.T, root string, files map[string]string) {
	t.Helper()
	for name, body := range files {
		p := filepath.Join(root, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

func TestCgroup(t *testing.T) {
	v2 := t.TempDir()
	writeFiles(t, v2, map[string]string{
		"svcnet/c1/cpu.stat":       "usage_usec 2500000\nuser_usec 2000000\nsystem_usec 500000\n",
		"svcnet/c1/memory.current": "10485760\n",
		"svcnet/c1/memory.stat":    "anon 6291456\nfile 4194304\ninactive_file 2097152\nactive_file 2097152\n",
	})
	u, err := Cgroup(v2, "/svcnet/c1")
	if err != nil || u.CPUSeconds != 2.5 || u.MemoryBytes != 8<<20 {
		t.Errorf("cgroup v2: %+v %v, want 2.5 s and 8 MiB", u, err)
	}
	v1 := t.TempDir()
	writeFiles(t, v1, map[string]string{
		"cpuacct/svcnet/c1/cpuacct.usage":        "1500000000\n",
		"memory/svcnet/c1/memory.usage_in_bytes": "10485760\n",
		"memory/svcnet/c1/memory.stat":           "cache 4194304\ninactive_file 99\ntotal_inactive_file 1048576\n",
	})
	u, err = Cgroup(v1, "/svcnet/c1")
	if err != nil || u.CPUSeconds != 1.5 || u.MemoryBytes != 9<<20 {
		t.Errorf("cgroup v1: %+v %v, want 1.5 s and 9 MiB", u, err)
	}
	if _, err := Cgroup(v1, "/svcnet/gone"); err == nil {
		t.Error("a missing cgroup measured")
	}
}
