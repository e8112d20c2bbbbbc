package ingressbench

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/svcnet/svcnet/internal/ingress/controller"
	"github.com/svcnet/svcnet/internal/ingress/proxy"
)

// childEnv, when set in the environment, makes the benchmark's binary
// the proxy's own process: "BACKEND CPU,CPU..." (see Child).
const childEnv = "SVCNET_INGRESSBENCH_PROXY"

// cpuSplit divides the CPUs this process may run on: the last n for the
// proxy, the others for the load generator and the backend.
func cpuSplit(n int) (load, prox []int, err error) {
	var set unix.CPUSet
	if err := unix.SchedGetaffinity(0, &set); err != nil {
		return nil, nil, fmt.Errorf("CPUs of this process: %w", err)
	}
	cpus := members(&set)
	if n >= len(cpus) {
		return nil, nil, fmt.Errorf("-proxy-cpus %d leaves none of the %d CPUs to the load generator and the backend", n, len(cpus))
	}
	return cpus[:len(cpus)-n], cpus[len(cpus)-n:], nil
}

// pin restricts every thread of process pid (0: this one) to cpus, and
// returns the set the process had (its main thread's). Threads started
// later inherit the set from the thread that starts them; one started by
// a thread not yet pinned is found by the next pass, until a pass finds
// none.
func pin(pid int, cpus []int) (unix.CPUSet, error) {
	var set, old unix.CPUSet
	for _, c := range cpus {
		set.Set(c)
	}
	if err := unix.SchedGetaffinity(pid, &old); err != nil {
		return old, fmt.Errorf("CPUs of process %d: %w", pid, err)
	}
	dir := "/proc/self/task"
	if pid != 0 {
		dir = "/proc/" + strconv.Itoa(pid) + "/task"
	}
	pinned := map[int]bool{}
	for {
		tasks, err := os.ReadDir(dir)
		if err != nil {
			return old, fmt.Errorf("threads of process %d: %w", pid, err)
		}
		fresh := 0
		for _, t := range tasks {
			tid, err := strconv.Atoi(t.Name())
			if err != nil || pinned[tid] {
				continue
			}
			fresh++
			pinned[tid] = true
			// A thread may have exited since the directory was read.
			if err := unix.SchedSetaffinity(tid, &set); err != nil && !errors.Is(err, unix.ESRCH) {
				return old, fmt.Errorf("pin thread %d to CPUs %v: %w", tid, cpus, err)
			}
		}
		if fresh == 0 {
			return old, nil
		}
	}
}

// pinSelf restricts this process to cpus and GOMAXPROCS to their number;
// the function returned undoes both.
func pinSelf(cpus []int) (func(), error) {
	old, err := pin(0, cpus)
	if err != nil {
		return nil, err
	}
	procs := runtime.GOMAXPROCS(len(cpus))
	return func() {
		runtime.GOMAXPROCS(procs)
		_, _ = pin(0, members(&old))
	}, nil
}

// members lists the CPUs in set.
func members(set *unix.CPUSet) []int {
	var cpus []int
	for c := range len(set) * 64 {
		if set.IsSet(c) {
			cpus = append(cpus, c)
		}
	}
	return cpus
}

// Child serves the proxy in a process of its own when the benchmark
// started this binary for that (childEnv set): pinned to its CPUs, it
// prints the proxy's address, serves the table routing /bench to the
// backend until its standard input closes, and returns true. Otherwise
// it returns false at once. A bench command or test calls it first.
func Child() bool {
	spec, ok := os.LookupEnv(childEnv)
	if !ok {
		return false
	}
	if err := serveChild(spec); err != nil {
		fmt.Fprintln(os.Stderr, "ingressbench proxy:", err)
		os.Exit(1)
	}
	return true
}

func serveChild(spec string) error {
	backend, list, _ := strings.Cut(spec, " ")
	ep, err := netip.ParseAddrPort(backend)
	if err != nil {
		return fmt.Errorf("backend: %w", err)
	}
	var cpus []int
	for f := range strings.SplitSeq(list, ",") {
		c, err := strconv.Atoi(f)
		if err != nil {
			return fmt.Errorf("CPU %q: %w", f, err)
		}
		cpus = append(cpus, c)
	}
	if _, err := pinSelf(cpus); err != nil {
		return err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		// The parent closes the pipe to stop the proxy (or dies).
		_, _ = io.Copy(io.Discard, os.Stdin)
		cancel()
	}()
	p := proxy.New(nil)
	p.Swap(loopbackTable(ep))
	fmt.Println(ln.Addr().String())
	return p.Serve(ctx, time.Second, proxy.Listener{Name: controller.HTTP, Listener: ln, Port: 80})
}

// startChild runs this binary as the proxy's process on cpus in front of
// backend, and returns its URL and a function that stops it.
func startChild(ctx context.Context, backend string, cpus []int) (string, func(), error) {
	exe, err := os.Executable()
	if err != nil {
		return "", nil, err
	}
	list := make([]string, len(cpus))
	for i, c := range cpus {
		list[i] = strconv.Itoa(c)
	}
	cmd := exec.CommandContext(ctx, exe)
	cmd.Env = append(os.Environ(), childEnv+"="+backend+" "+strings.Join(list, ","))
	cmd.Stderr = os.Stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return "", nil, err
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return "", nil, err
	}
	if err := cmd.Start(); err != nil {
		return "", nil, fmt.Errorf("start the proxy's process: %w", err)
	}
	stop := func() {
		stdin.Close()
		_ = cmd.Wait()
	}
	line, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil {
		stop()
		return "", nil, fmt.Errorf("the proxy's process printed no address: %w", err)
	}
	url := "http://" + strings.TrimSpace(line)
	if err := waitStatus(ctx, url+"/bench", 200); err != nil {
		stop()
		return "", nil, err
	}
	return url, stop, nil
}
