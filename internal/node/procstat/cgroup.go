package procstat

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// Cgroup is the usage of the cgroup at path (as a runtime spec's
// cgroupsPath names it) under root (/sys/fs/cgroup), as cAdvisor reads
// it for the kubelet: CPU from cpu.stat's usage_usec (cgroup v2) or
// cpuacct.usage (v1); the working set is the memory in use less the
// inactive file cache (memory.current or memory.usage_in_bytes, and
// memory.stat's inactive_file or total_inactive_file).
func Cgroup(root, path string) (Usage, error) {
	if b, err := os.ReadFile(filepath.Join(root, path, "cpu.stat")); err == nil {
		usec, err := statField(b, "usage_usec")
		if err != nil {
			return Usage{}, fmt.Errorf("cgroup %s: %w", path, err)
		}
		mem, err := workingSet(filepath.Join(root, path), "memory.current", "inactive_file")
		return Usage{CPUSeconds: float64(usec) / 1e6, MemoryBytes: mem}, err
	}
	b, err := os.ReadFile(filepath.Join(root, "cpuacct", path, "cpuacct.usage"))
	if err != nil {
		return Usage{}, fmt.Errorf("cgroup %s: %w", path, err)
	}
	ns, err := strconv.ParseUint(strings.TrimSpace(string(b)), 10, 64)
	if err != nil {
		return Usage{}, fmt.Errorf("cgroup %s: cpuacct.usage: %w", path, err)
	}
	mem, err := workingSet(filepath.Join(root, "memory", path), "memory.usage_in_bytes", "total_inactive_file")
	return Usage{CPUSeconds: float64(ns) / 1e9, MemoryBytes: mem}, err
}

// workingSet is the usage file's bytes less memory.stat's inactive
// field, not below 0.
func workingSet(dir, usageFile, inactive string) (uint64, error) {
	b, err := os.ReadFile(filepath.Join(dir, usageFile))
	if err != nil {
		return 0, err
	}
	usage, err := strconv.ParseUint(strings.TrimSpace(string(b)), 10, 64)
	if err != nil {
		return 0, fmt.Errorf("%s: %w", usageFile, err)
	}
	stat, err := os.ReadFile(filepath.Join(dir, "memory.stat"))
	if err != nil {
		return 0, err
	}
	idle, err := statField(stat, inactive)
	if err != nil {
		return 0, err
	}
	return usage - min(usage, idle), nil
}

// statField is the value of "name value" in a cgroup stat file.
func statField(b []byte, name string) (uint64, error) {
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), name+" "); ok {
			return strconv.ParseUint(strings.TrimSpace(v), 10, 64)
		}
	}
	return 0, fmt.Errorf("no %s", name)
}
