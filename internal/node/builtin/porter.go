package builtin

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"strings"
	"time"
)

// porter serves, as agnhost's porter does, the value of each environment
// variable SERVE_PORT_N (or SERVE_TCP_PORT_N) over HTTP on port N,
// SERVE_TLS_PORT_N over HTTPS (CERT_FILE and KEY_FILE, by default the
// image's localhost.crt and localhost.key; a certificate for localhost
// made at start where the container has none) and SERVE_UDP_PORT_N as
// the answer to any UDP datagram. SCTP (SERVE_SCTP_PORT_N) is not served.
func porter(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("porter", flag.ContinueOnError)
	jsonResponse := fs.Bool("json-response", false, "answer with a JSON object of the request's method and the value")
	if err := fs.Parse(args); err != nil {
		return err
	}
	answer := func(value string) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if !*jsonResponse {
				fmt.Fprint(w, value)
				return
			}
			b, err := json.Marshal(struct{ Method, Body string }{r.Method, value})
			if err != nil {
				http.Error(w, fmt.Sprintf("Internal Server Error: %v", err), http.StatusInternalServerError)
				return
			}
			w.Header().Set("Content-Type", "application/json")
			_, _ = w.Write(b)
		})
	}
	var servers []*http.Server
	var packets []net.PacketConn
	defer func() {
		for _, s := range servers {
			_ = s.Close()
		}
		for _, pc := range packets {
			_ = pc.Close()
		}
	}()
	errc := make(chan error, len(os.Environ()))
	listenHTTP := func(port string, h http.Handler, tlsConfig *tls.Config) error {
		ln, err := net.Listen("tcp", ":"+port)
		if err != nil {
			return fmt.Errorf("listen on port %s: %w", port, err)
		}
		if tlsConfig != nil {
			ln = tls.NewListener(ln, tlsConfig)
		}
		s := &http.Server{Handler: h, ReadHeaderTimeout: 30 * time.Second}
		servers = append(servers, s)
		go func() { errc <- s.Serve(ln) }()
		return nil
	}
	for _, kv := range os.Environ() {
		key, value, _ := strings.Cut(kv, "=")
		var err error
		switch {
		case strings.HasPrefix(key, "SERVE_PORT_") || strings.HasPrefix(key, "SERVE_TCP_PORT_"):
			err = listenHTTP(key[strings.LastIndexByte(key, '_')+1:], answer(value), nil)
		case strings.HasPrefix(key, "SERVE_TLS_PORT_"):
			var cfg *tls.Config
			if cfg, err = porterTLS(); err == nil {
				err = listenHTTP(strings.TrimPrefix(key, "SERVE_TLS_PORT_"), answer(value), cfg)
			}
		case strings.HasPrefix(key, "SERVE_UDP_PORT_"):
			var pc net.PacketConn
			if pc, err = net.ListenPacket("udp", ":"+strings.TrimPrefix(key, "SERVE_UDP_PORT_")); err == nil {
				packets = append(packets, pc)
				go udpAnswer(pc, []byte(value))
			}
		case strings.HasPrefix(key, "SERVE_SCTP_PORT_"):
			slog.Warn("agnhost porter: SCTP is not served by svcnet's agnhost", "var", key)
		}
		if err != nil {
			return err
		}
	}
	ready()
	select {
	case <-ctx.Done():
		return nil
	case err := <-errc:
		if errors.Is(err, http.ErrServerClosed) {
			return nil
		}
		return err
	}
}

// porterTLS is porter's TLS configuration: the key pair of CERT_FILE and
// KEY_FILE (localhost.crt and localhost.key by default), or one made for
// localhost when the default files are missing.
func porterTLS() (*tls.Config, error) {
	certFile, keyFile := os.Getenv("CERT_FILE"), os.Getenv("KEY_FILE")
	given := certFile != "" || keyFile != ""
	if certFile == "" {
		certFile = "localhost.crt"
	}
	if keyFile == "" {
		keyFile = "localhost.key"
	}
	pair, err := tls.LoadX509KeyPair(certFile, keyFile)
	if err != nil && !given && errors.Is(err, os.ErrNotExist) {
		pair, err = localhostKeyPair()
	}
	if err != nil {
		return nil, fmt.Errorf("porter TLS key pair: %w", err)
	}
	return &tls.Config{Certificates: []tls.Certificate{pair}, MinVersion: tls.VersionTLS12}, nil
}

// udpAnswer sends payload back for every datagram pc receives, until pc
// is closed.
func udpAnswer(pc net.PacketConn, payload []byte) {
	buf := make([]byte, 16)
	for {
		_, from, err := pc.ReadFrom(buf)
		if err != nil {
			return
		}
		_, _ = pc.WriteTo(payload, from)
	}
}
