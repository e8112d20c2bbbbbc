package builtin

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"sync/atomic"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"
)

// grpcHealthChecking is agnhost's grpc-health-checking, which upstream's
// gRPC probe tests run: gRPC's health service on --port for --service
// (NOT_FOUND for another name), SERVING until --delay-unhealthy-sec have
// passed (never, when negative) or /make-not-serving is called on
// --http-port, and again after /make-serving.
func grpcHealthChecking(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("grpc-health-checking", flag.ContinueOnError)
	port := fs.Int("port", 5000, "gRPC port")
	httpPort := fs.Int("http-port", 8080, "port of /make-serving and /make-not-serving")
	delay := fs.Int("delay-unhealthy-sec", -1, "seconds before NOT_SERVING; negative: never")
	service := fs.String("service", "", "the service name to answer for")
	certFile := fs.String("tls-cert-file", "", "the gRPC server's certificate")
	keyFile := fs.String("tls-private-key-file", "", "the key of --tls-cert-file")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if (*certFile == "") != (*keyFile == "") {
		return errors.New("both --tls-cert-file and --tls-private-key-file must be set")
	}
	h := &healthChecker{started: time.Now(), service: *service, delay: *delay}
	mux := http.NewServeMux()
	for path, unhealthy := range map[string]bool{"/make-not-serving": true, "/make-serving": false} {
		mux.HandleFunc(path, func(w http.ResponseWriter, _ *http.Request) {
			h.forced.Store(&unhealthy)
			fmt.Fprint(w, time.Since(h.started).String())
		})
	}
	hln, err := net.Listen("tcp", ":"+strconv.Itoa(*httpPort))
	if err != nil {
		return fmt.Errorf("listen on port %d: %w", *httpPort, err)
	}
	hs := &http.Server{Handler: mux, ReadHeaderTimeout: 30 * time.Second}
	ln, err := net.Listen("tcp", ":"+strconv.Itoa(*port))
	if err != nil {
		hln.Close()
		return fmt.Errorf("listen on port %d: %w", *port, err)
	}
	var opts []grpc.ServerOption
	if *certFile != "" {
		creds, err := credentials.NewServerTLSFromFile(*certFile, *keyFile)
		if err != nil {
			hln.Close()
			ln.Close()
			return fmt.Errorf("gRPC TLS credentials: %w", err)
		}
		opts = append(opts, grpc.Creds(creds))
	}
	gs := grpc.NewServer(opts...)
	healthpb.RegisterHealthServer(gs, h)
	errc := make(chan error, 2)
	go func() { errc <- hs.Serve(hln) }()
	go func() { errc <- gs.Serve(ln) }()
	ready()
	select {
	case <-ctx.Done():
		err = nil
	case err = <-errc:
	}
	gs.Stop()
	_ = hs.Close()
	if errors.Is(err, http.ErrServerClosed) {
		err = nil
	}
	return err
}

// healthChecker is the health service of grpcHealthChecking.
type healthChecker struct {
	healthpb.UnimplementedHealthServer
	started time.Time
	service string
	delay   int
	// forced, once set, says NOT_SERVING (true) or SERVING (false).
	forced atomic.Pointer[bool]
}

func (h *healthChecker) Check(_ context.Context, req *healthpb.HealthCheckRequest) (*healthpb.HealthCheckResponse, error) {
	if req.Service != h.service {
		return nil, status.Errorf(codes.NotFound, "unknown service")
	}
	unhealthy := h.delay >= 0 && time.Since(h.started) >= time.Duration(h.delay)*time.Second
	if f := h.forced.Load(); f != nil {
		unhealthy = *f
	}
	if unhealthy {
		return &healthpb.HealthCheckResponse{Status: healthpb.HealthCheckResponse_NOT_SERVING}, nil
	}
	return &healthpb.HealthCheckResponse{Status: healthpb.HealthCheckResponse_SERVING}, nil
}
