// Package builtin is the programs that stand in for the demo images svcnet
// does not pull: nginx and httpd (a web server answering like the image's
// default page), agnhost's netexec, serve-hostname and pause as upstream's
// e2e tests use them, hashicorp/http-echo, and coredns (svcnet's cluster
// DNS, configured by a Corefile). Each runs as a container's
// process (`svcnet node image NAME --ports=P,... -- ARGS`), so it sees the
// pod's network, hostname and signals as the real image would.
package builtin

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// Names of the built-in programs.
const (
	Nginx    = "nginx"
	Httpd    = "httpd"
	Agnhost  = "agnhost"
	HTTPEcho = "http-echo"
	Pause    = "pause"
	CoreDNS  = "coredns"
)

// PodHeader names the pod in every answer of the built-in web servers.
const PodHeader = "X-Pod-Name"

// Main runs the built-in program name with the container's ports and
// arguments; it returns when the program ends (SIGTERM ends servers).
func Main(name string, ports []int, args []string) error {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	switch name {
	case Nginx, Httpd:
		return webServer(ctx, name, ports)
	case Agnhost:
		return agnhost(ctx, args)
	case HTTPEcho:
		return httpEcho(ctx, args)
	case CoreDNS:
		return coredns(ctx, args)
	case Pause:
		<-ctx.Done()
		return nil
	}
	return fmt.Errorf("no built-in program %q", name)
}

// ParseArgs splits `--ports=P,Q -- ARGS` as the agent passes them.
func ParseArgs(argv []string) (ports []int, args []string, err error) {
	for i, a := range argv {
		switch {
		case a == "--":
			return ports, argv[i+1:], nil
		case strings.HasPrefix(a, "--ports="):
			for p := range strings.SplitSeq(strings.TrimPrefix(a, "--ports="), ",") {
				if p == "" {
					continue
				}
				n, err := strconv.Atoi(p)
				if err != nil {
					return nil, nil, fmt.Errorf("port %q: %w", p, err)
				}
				ports = append(ports, n)
			}
		default:
			return nil, nil, fmt.Errorf("unexpected argument %q", a)
		}
	}
	return ports, nil, nil
}

// serve answers HTTP with h on every port until ctx ends.
func serve(ctx context.Context, ports []int, h http.Handler) error {
	errc := make(chan error, len(ports))
	var servers []*http.Server
	for _, p := range ports {
		ln, err := net.Listen("tcp", ":"+strconv.Itoa(p))
		if err != nil {
			for _, s := range servers {
				s.Close()
			}
			return fmt.Errorf("listen on port %d: %w", p, err)
		}
		s := &http.Server{Handler: h, ReadHeaderTimeout: 30 * time.Second}
		servers = append(servers, s)
		go func() { errc <- s.Serve(ln) }()
	}
	var err error
	select {
	case <-ctx.Done():
	case err = <-errc:
	}
	sctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	for _, s := range servers {
		_ = s.Shutdown(sctx)
	}
	if errors.Is(err, http.ErrServerClosed) {
		err = nil
	}
	return err
}

// hostname is the pod's name, as the pod's UTS namespace holds it.
func hostname() string {
	h, err := os.Hostname()
	if err != nil {
		slog.Warn("hostname", "err", err)
	}
	return h
}
