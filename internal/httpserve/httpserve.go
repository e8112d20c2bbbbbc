// Package httpserve runs the HTTPS servers of svcnet's components with the
// same timeouts, logging and graceful shutdown.
package httpserve

import (
	"context"
	"crypto/tls"
	"log/slog"
	"net"
	"net/http"
	"time"
)

// ServeTLS answers HTTPS on ln with h until ctx ends, then shuts down,
// giving open requests up to grace to finish before their connections are
// closed (long-running watches end only that way). It returns nil after a
// shutdown and the server's error if serving fails first. Requests carry
// ctx as their base context.
func ServeTLS(ctx context.Context, ln net.Listener, h http.Handler, tlsConfig *tls.Config, grace time.Duration) error {
	srv := &http.Server{
		Handler:           h,
		TLSConfig:         tlsConfig,
		ReadHeaderTimeout: 30 * time.Second,
		ErrorLog:          slog.NewLogLogger(slog.Default().Handler(), slog.LevelDebug),
		BaseContext:       func(net.Listener) context.Context { return ctx },
	}
	errc := make(chan error, 1)
	go func() { errc <- srv.ServeTLS(ln, "", "") }()
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.Background(), grace)
	defer cancel()
	if err := srv.Shutdown(sctx); err != nil {
		_ = srv.Close()
	}
	<-errc
	return nil
}
