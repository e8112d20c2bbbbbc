// Package procstat measures what a node's containers use. A host process
// container (the process runtime) has no cgroup of its own, so its usage
// is its process tree's, from /proc; a container runc runs is measured
// from its cgroup (Cgroup). A tree's CPU is cumulative (user and system
// time of the live processes, and of the children they have reaped); its
// memory is the resident set, the stand-in for a cgroup's working set. The node's own usage is the machine's
// (/proc/stat and /proc/meminfo), as the kubelet reports its root cgroup.
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

// clockTicks is USER_HZ, the unit of /proc's CPU times: 100 on every
// Linux architecture Go supports.
const clockTicks = 100

// Usage is what a process tree or the node has used.
type Usage struct {
	// CPUSeconds is the cumulative CPU time in core-seconds.
	CPUSeconds float64
	// MemoryBytes is the resident (working set) memory.
	MemoryBytes uint64
}

// process is one /proc/<pid>/stat, in the fields the trees need.
type process struct {
	ppid  int
	ticks uint64 // utime + stime + cutime + cstime
	rss   uint64 // pages
}

// Snapshot is every process of the machine at one moment.
type Snapshot struct {
	procs    map[int]process
	children map[int][]int
	pageSize uint64
}

// Take reads every process under root (normally "/proc").
func Take(root string) (*Snapshot, error) {
	entries, err := os.ReadDir(root)
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", root, err)
	}
	s := &Snapshot{procs: map[int]process{}, children: map[int][]int{}, pageSize: uint64(os.Getpagesize())}
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile(filepath.Join(root, e.Name(), "stat"))
		if err != nil {
			continue // gone since the directory was read
		}
		p, err := parseStat(b)
		if err != nil {
			return nil, fmt.Errorf("process %d: %w", pid, err)
		}
		s.procs[pid] = p
		s.children[p.ppid] = append(s.children[p.ppid], pid)
	}
	return s, nil
}

// parseStat reads ppid (field 4), utime, stime, cutime, cstime (14-17)
// and rss (24) of a /proc/<pid>/stat line. The command (field 2) may hold
// spaces and parentheses, so fields count from its last ')'.
func parseStat(b []byte) (process, error) {
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return process{}, fmt.Errorf("malformed stat %q", b)
	}
	f := strings.Fields(string(b[i+1:])) // f[0] is field 3, the state
	if len(f) < 22 {
		return process{}, fmt.Errorf("malformed stat %q", b)
	}
	num := func(field int) (uint64, error) {
		v, err := strconv.ParseInt(f[field-3], 10, 64)
		return uint64(max(v, 0)), err
	}
	var p process
	ppid, err := num(4)
	if err != nil {
		return p, fmt.Errorf("ppid: %w", err)
	}
	p.ppid = int(ppid)
	for field := 14; field <= 17; field++ {
		t, err := num(field)
		if err != nil {
			return p, fmt.Errorf("field %d: %w", field, err)
		}
		p.ticks += t
	}
	if p.rss, err = num(24); err != nil {
		return p, fmt.Errorf("rss: %w", err)
	}
	return p, nil
}

// Tree is the usage of pid and all its descendants; ok is false when pid
// is not running.
func (s *Snapshot) Tree(pid int) (u Usage, ok bool) {
	if _, ok := s.procs[pid]; !ok {
		return Usage{}, false
	}
	var ticks, pages uint64
	stack := []int{pid}
	seen := map[int]bool{}
	for len(stack) > 0 {
		p := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		if seen[p] {
			continue
		}
		seen[p] = true
		ticks += s.procs[p].ticks
		pages += s.procs[p].rss
		stack = append(stack, s.children[p]...)
	}
	return Usage{CPUSeconds: float64(ticks) / clockTicks, MemoryBytes: pages * s.pageSize}, true
}

// Node is the machine's usage: the busy time of all CPUs in /proc/stat,
// and the memory in use (MemTotal less MemAvailable) of /proc/meminfo.
func Node(root string) (Usage, error) {
	var u Usage
	stat, err := os.ReadFile(filepath.Join(root, "stat"))
	if err != nil {
		return u, fmt.Errorf("read CPU times: %w", err)
	}
	if u.CPUSeconds, err = busySeconds(stat); err != nil {
		return u, err
	}
	mem, err := os.ReadFile(filepath.Join(root, "meminfo"))
	if err != nil {
		return u, fmt.Errorf("read memory: %w", err)
	}
	u.MemoryBytes, err = memoryInUse(mem)
	return u, err
}

// busySeconds sums the first "cpu" line of /proc/stat but for idle and
// iowait (and guest times, which user and nice already count).
func busySeconds(stat []byte) (float64, error) {
	line, _, _ := bytes.Cut(stat, []byte("\n"))
	f := strings.Fields(string(line))
	if len(f) < 8 || f[0] != "cpu" {
		return 0, fmt.Errorf("malformed /proc/stat line %q", line)
	}
	var busy uint64
	for i, v := range f[1:min(len(f), 9)] { // user nice system idle iowait irq softirq steal
		if i == 3 || i == 4 {
			continue
		}
		n, err := strconv.ParseUint(v, 10, 64)
		if err != nil {
			return 0, fmt.Errorf("malformed /proc/stat line %q: %w", line, err)
		}
		busy += n
	}
	return float64(busy) / clockTicks, nil
}

func memoryInUse(meminfo []byte) (uint64, error) {
	values := map[string]uint64{}
	sc := bufio.NewScanner(bytes.NewReader(meminfo))
	for sc.Scan() {
		name, rest, ok := strings.Cut(sc.Text(), ":")
		if !ok {
			continue
		}
		f := strings.Fields(rest)
		if len(f) == 0 {
			continue
		}
		if n, err := strconv.ParseUint(f[0], 10, 64); err == nil {
			values[name] = n * 1024 // kB
		}
	}
	total, ok1 := values["MemTotal"]
	avail, ok2 := values["MemAvailable"]
	if !ok1 || !ok2 {
		return 0, fmt.Errorf("no MemTotal or MemAvailable in meminfo")
	}
	return total - min(avail, total), nil
}
