package dnsbench

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"time"
)

// BuildCoreDNS builds the CoreDNS command of the Go module in dir
// (bench/dns/coredns) into outDir and returns the binary's path.
func BuildCoreDNS(ctx context.Context, dir, outDir string) (string, error) {
	bin := filepath.Join(outDir, "coredns")
	cmd := exec.CommandContext(ctx, "go", "build", "-o", bin, ".")
	cmd.Dir = dir
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("build CoreDNS in %s: %w\n%s", dir, err, out)
	}
	return bin, nil
}

// corefile serves the cluster zone and the reverse zones from the API
// server on a port of 127.0.0.1, as kubeadm's Corefile does but without
// the forward, cache and health plugins: reverse names it does not know
// fall through to no plugin, which answers SERVFAIL, as svcnet does
// without upstream resolvers.
const corefile = `.:%d {
    bind 127.0.0.1
    kubernetes %s in-addr.arpa ip6.arpa {
        kubeconfig %s
        pods insecure
        fallthrough in-addr.arpa ip6.arpa
    }
}
`

// startCoreDNS runs bin with the Corefile above until ctx ends, logging
// to dir/coredns.log; it returns once CoreDNS answers for the last Service
// loaded, how long that took, and a function that stops CoreDNS.
func startCoreDNS(ctx context.Context, bin, dir, kubeconfig string, f *fixture) (server, time.Duration, func(), error) {
	port, err := freeDNSPort()
	if err != nil {
		return server{}, 0, nil, err
	}
	conf := filepath.Join(dir, "Corefile")
	if err := os.WriteFile(conf, fmt.Appendf(nil, corefile, port, zone, kubeconfig), 0o644); err != nil {
		return server{}, 0, nil, err
	}
	logPath := filepath.Join(dir, "coredns.log")
	logFile, err := os.Create(logPath)
	if err != nil {
		return server{}, 0, nil, err
	}
	defer logFile.Close()
	cmd := exec.CommandContext(ctx, bin, "-conf", conf)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	cmd.Cancel = func() error { return cmd.Process.Signal(syscall.SIGTERM) }
	cmd.WaitDelay = 5 * time.Second
	start := time.Now()
	if err := cmd.Start(); err != nil {
		return server{}, 0, nil, fmt.Errorf("start CoreDNS: %w", err)
	}
	exited := newExit()
	go func() { exited.set(cmd.Wait()) }()
	stop := func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		<-exited.done
	}
	s := server{name: "CoreDNS", addr: net.JoinHostPort("127.0.0.1", strconv.Itoa(port))}
	if err := f.waitReady(ctx, s.addr, exited); err != nil {
		stop()
		out, _ := os.ReadFile(logPath)
		return server{}, 0, nil, fmt.Errorf("CoreDNS: %w\n%s", err, out)
	}
	return s, time.Since(start), stop, nil
}
