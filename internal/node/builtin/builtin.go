// Package builtin is the programs that stand in for the demo images svcnet
// does not pull: nginx and httpd (a web server answering like the image's
// default page), agnhost's subcommands as upstream's e2e tests use them
// (netexec, nettest, serve-hostname, test-webserver, pause,
// entrypoint-tester, liveness, connect, porter, guestbook, dns-suffix,
// dns-server-list, etc-hosts, mounttest,
// grpc-health-checking, logs-generator, webhook, crd-conversion-webhook,
// test-service-account-issuer-discovery, mtlsserver, mtlsclient),
// hashicorp/http-echo, coredns
// (svcnet's cluster DNS, configured by a Corefile), the server of
// upstream's regression-issue-74839 image, upstream's sample-apiserver
// (k8s.io/sample-apiserver's own command), etcd (etcd's own main),
// upstream's nonewprivs (its effective uid) and svcnet's ingress
// controller. Each runs as a container's process
// (`svcnet node image NAME --ports=P,... -- ARGV`, ARGV starting with the
// path in the image that started it, as agnhost's /agnhost or
// /agnhost-2), so it sees the pod's network, hostname and signals as the
// real image would.
package builtin

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"sync/atomic"
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
	// IngressController is svcnet's own Ingress controller, the program
	// of `svcnet ingress`.
	IngressController = "ingress-controller"
	// BoomServer plays upstream's e2e image regression-issue-74839, the
	// server of its conntrack test for invalid out-of-window segments.
	BoomServer = "regression-issue-74839"
	// SampleAPIServer plays upstream's e2e image sample-apiserver, the
	// wardle.example.com API server of its Aggregator conformance test.
	SampleAPIServer = "sample-apiserver"
	// Etcd plays the etcd images: the etcd server itself.
	Etcd = "etcd"
	// Nonewprivs plays upstream's e2e image nonewprivs: it prints its
	// effective uid, which its setuid bit makes root's where privilege
	// escalation is allowed.
	Nonewprivs = "nonewprivs"
)

// PodHeader names the pod in every answer of the built-in web servers.
const PodHeader = "X-Pod-Name"

// ReadyFDEnv names the descriptor on which a built-in program says it has
// started, as the shim that runs it asks: a real image's server listens
// within milliseconds of its start, where svcnet's binary takes tens of
// them (a hundred and more on a busy machine) to initialize, and a client
// that waited for the pod to be Ready would otherwise be refused. The shim
// reports the container started once the program has written to it (or
// ended).
const ReadyFDEnv = "SVCNET_READY_FD"

// readyFile is the descriptor named by ReadyFDEnv, nil when the program
// was started without one or has used it.
var readyFile atomic.Pointer[os.File]

// Main runs the built-in program name with the container's ports and
// the program's argv (its name as the container started it, then its
// arguments); it returns when the program ends (SIGTERM ends servers).
func Main(name string, ports []int, argv []string) error {
	if len(argv) == 0 {
		return fmt.Errorf("built-in program %s: no argv", name)
	}
	args := argv[1:]
	if fd, err := strconv.Atoi(os.Getenv(ReadyFDEnv)); err == nil {
		// Not for the program's own children (agnhost's /shell).
		syscall.CloseOnExec(fd)
		readyFile.Store(os.NewFile(uintptr(fd), "ready"))
		os.Unsetenv(ReadyFDEnv)
	}
	defer ready() // a program that ends has started, too
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	switch name {
	case Nginx, Httpd:
		return webServer(ctx, name, ports)
	case Agnhost:
		return agnhost(withArgv0(ctx, argv[0]), args)
	case HTTPEcho:
		return httpEcho(ctx, args)
	case CoreDNS:
		// It says when it is ready through its probes, as CoreDNS does.
		ready()
		return coredns(ctx, args)
	case IngressController:
		// Ready by its /healthz probe once it serves.
		ready()
		return ingressController(ctx, args)
	case Pause:
		ready()
		<-ctx.Done()
		return nil
	case BoomServer:
		// Port 9000 and the pod's IPs (POD_IPS, POD_IP), as the image's.
		return boomServer(ctx)
	case SampleAPIServer:
		// Ready by its readiness probe (/readyz) once it serves, as the
		// image's: it serves only once it has read the cluster's
		// authentication configuration.
		ready()
		return sampleAPIServer(ctx, args)
	case Nonewprivs:
		_, err := fmt.Printf("Effective uid: %d\n", os.Geteuid())
		return err
	case Etcd:
		// Ready once it serves clients; SIGTERM ends it as etcd's own
		// handler does, the process with it.
		return etcd(argv)
	}
	return fmt.Errorf("no built-in program %q", name)
}

// ready tells the shim the program has started: its servers listen.
func ready() {
	f := readyFile.Swap(nil)
	if f == nil {
		return
	}
	_, _ = f.WriteString("ok")
	_ = f.Close()
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
	ready()
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

// serveTLS answers HTTPS (and HTTP/2) with h on port, with the key pair
// of certFile and keyFile, until ctx ends.
func serveTLS(ctx context.Context, port int, certFile, keyFile string, h http.Handler) error {
	pair, err := tls.LoadX509KeyPair(certFile, keyFile)
	if err != nil {
		return fmt.Errorf("load TLS key pair: %w", err)
	}
	return runTLS(ctx, ":"+strconv.Itoa(port), &http.Server{
		Handler:           h,
		ReadHeaderTimeout: 30 * time.Second,
		TLSConfig:         &tls.Config{Certificates: []tls.Certificate{pair}, MinVersion: tls.VersionTLS12},
	})
}

// runTLS serves s over TLS (its TLSConfig holds the certificate) on addr
// until ctx ends, ready once it listens; requests still held then get two
// seconds.
func runTLS(ctx context.Context, addr string, s *http.Server) error {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("listen on %s: %w", addr, err)
	}
	errc := make(chan error, 1)
	go func() { errc <- s.ServeTLS(ln, "", "") }()
	ready()
	select {
	case <-ctx.Done():
	case err = <-errc:
	}
	sctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	if s.Shutdown(sctx) != nil {
		// Requests still held (a webhook that never answers) end here.
		_ = s.Close()
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
