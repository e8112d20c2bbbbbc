// Package proxy is the L7 proxy: it serves the routes.Table it was last
// given on HTTP and HTTPS listeners, sending each request straight to an
// endpoint of the chosen backend (no Service cluster IP in between).
//
// Tables are swapped atomically: a request is routed by the table that was
// current when it arrived and keeps its backend to the end, so open
// connections, long downloads and upgraded (WebSocket) connections are not
// disturbed by a configuration change; the next request on a kept-alive
// connection sees the new table. TLS certificates are chosen per handshake
// by SNI from the current table. HTTPS speaks HTTP/2 (ALPN h2) and
// HTTP/1.1; requests reach backends as HTTP/1.1 with the headers
// ingress-nginx adds (X-Forwarded-For/-Host/-Port/-Proto, X-Real-IP).
package proxy

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/httputil"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/svcnet/svcnet/internal/ingress/routes"
)

// Proxy serves the current table.
type Proxy struct {
	table   atomic.Pointer[routes.Table]
	rp      *httputil.ReverseProxy
	metrics *metrics
}

// New returns a proxy serving an empty table, its metrics registered
// with reg (nil: not registered).
func New(reg prometheus.Registerer) *Proxy {
	p := &Proxy{metrics: newMetrics(reg)}
	p.table.Store(&routes.Table{})
	p.rp = &httputil.ReverseProxy{
		Rewrite:   rewrite,
		Transport: newBackendTransport(),
		// No FlushInterval: answers of a known length go out as the
		// server's buffer fills (and whole at the end), streamed ones
		// (chunked, event streams) are flushed at every write.
		BufferPool:     bufferPool{},
		ModifyResponse: modifyResponse,
		ErrorHandler:   errorHandler,
	}
	return p
}

// Swap makes t the table that new requests are routed by.
func (p *Proxy) Swap(t *routes.Table) { p.table.Store(t) }

// Handler serves the listener named name of the current table; port is
// the port clients reach it on (for redirects), https whether it is
// behind TLS.
func (p *Proxy) Handler(name string, port int, https bool) http.Handler {
	proto := "http"
	if https {
		proto = "https"
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		p.metrics.inFlight.Inc()
		defer p.metrics.inFlight.Dec()
		sw := &statusWriter{ResponseWriter: w}
		rt := p.serve(sw, r, name, port, proto)
		p.metrics.observe(rt, sw.backend, sw.status(), time.Since(start))
	})
}

// target is what rewrite and modifyResponse learn about a request.
type target struct {
	addr     string
	proto    string
	port     string
	response []*routes.HeaderModifier
}

type targetKey struct{}

func (p *Proxy) serve(w *statusWriter, r *http.Request, name string, port int, proto string) *routes.Route {
	l := p.table.Load().Listeners[name]
	if l == nil {
		notFound(w)
		return nil
	}
	rt, m := l.Route(r)
	if rt == nil {
		notFound(w)
		return nil
	}
	t := &target{proto: proto, port: strconv.Itoa(port)}
	out := r
	for _, f := range rt.Filters {
		switch {
		case f.Redirect != nil:
			http.Redirect(w, r, f.Redirect.Location(r, m, port, proto == "https"), f.Redirect.Status())
			return rt
		case f.RequestHeaders != nil || f.Rewrite != nil:
			if out == r {
				out = r.Clone(r.Context())
			}
			if f.RequestHeaders != nil {
				f.RequestHeaders.Apply(out.Header)
			} else {
				f.Rewrite.Apply(out, m)
			}
		case f.ResponseHeaders != nil:
			t.response = append(t.response, f.ResponseHeaders)
		}
	}
	b := rt.Pick()
	if b == nil || b.Invalid {
		http.Error(w, "no backend", http.StatusInternalServerError)
		return rt
	}
	w.backend = b
	ep, ok := b.Endpoint()
	if !ok {
		http.Error(w, "503 Service Temporarily Unavailable", http.StatusServiceUnavailable)
		return rt
	}
	t.addr = ep.String()
	p.rp.ServeHTTP(w, out.WithContext(context.WithValue(out.Context(), targetKey{}, t)))
	return rt
}

// notFound is the default backend's answer, as ingress-nginx's.
func notFound(w http.ResponseWriter) {
	http.Error(w, "default backend - 404", http.StatusNotFound)
}

func rewrite(pr *httputil.ProxyRequest) {
	t := pr.In.Context().Value(targetKey{}).(*target)
	pr.Out.URL.Scheme = "http"
	pr.Out.URL.Host = t.addr
	pr.Out.Host = pr.In.Host
	pr.SetXForwarded()
	pr.Out.Header.Set("X-Forwarded-Proto", t.proto)
	pr.Out.Header.Set("X-Forwarded-Port", t.port)
	pr.Out.Header.Set("X-Forwarded-Host", pr.In.Host)
	if ip, _, err := net.SplitHostPort(pr.In.RemoteAddr); err == nil {
		pr.Out.Header.Set("X-Real-IP", ip)
	}
}

func modifyResponse(res *http.Response) error {
	t := res.Request.Context().Value(targetKey{}).(*target)
	for _, hm := range t.response {
		hm.Apply(res.Header)
	}
	return nil
}

// errorHandler answers 502 when the endpoint cannot be reached, as nginx,
// and 504 on a timeout.
func errorHandler(w http.ResponseWriter, r *http.Request, err error) {
	if errors.Is(err, context.Canceled) {
		// The client went away; nobody reads the answer.
		w.WriteHeader(499)
		return
	}
	slog.Debug("ingress: backend request failed", "host", r.Host, "path", r.URL.Path, "err", err)
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		http.Error(w, "504 Gateway Time-out", http.StatusGatewayTimeout)
		return
	}
	http.Error(w, "502 Bad Gateway", http.StatusBadGateway)
}

// statusWriter remembers the status written, and the backend chosen, for
// the metrics; Unwrap lets http.ResponseController (the reverse proxy's
// flushes and upgrades) reach the connection's own writer.
type statusWriter struct {
	http.ResponseWriter
	code    int
	backend *routes.Backend
}

func (w *statusWriter) WriteHeader(code int) {
	if (w.code == 0 && code >= 200) || code == http.StatusSwitchingProtocols {
		w.code = code
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *statusWriter) Write(b []byte) (int, error) {
	if w.code == 0 {
		w.code = http.StatusOK
	}
	return w.ResponseWriter.Write(b)
}

func (w *statusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

func (w *statusWriter) status() int {
	if w.code == 0 {
		return http.StatusOK
	}
	return w.code
}

// bufferPool lends the reverse proxy its copy buffers, which it would
// otherwise allocate (32 KiB) per request.
type bufferPool struct{}

var buffers = sync.Pool{New: func() any { b := make([]byte, 32<<10); return &b }}

func (bufferPool) Get() []byte  { return *buffers.Get().(*[]byte) }
func (bufferPool) Put(b []byte) { buffers.Put(&b) }

// TLSConfig picks the certificate of listener name of the current table
// by SNI, and offers HTTP/2 and HTTP/1.1.
func (p *Proxy) TLSConfig(name string) *tls.Config {
	return &tls.Config{
		NextProtos: []string{"h2", "http/1.1"},
		MinVersion: tls.VersionTLS12,
		GetCertificate: func(hello *tls.ClientHelloInfo) (*tls.Certificate, error) {
			l := p.table.Load().Listeners[name]
			if l == nil {
				return nil, fmt.Errorf("no listener %s", name)
			}
			c := l.Certificate(hello.ServerName)
			if c == nil {
				return nil, fmt.Errorf("no certificate for %q", hello.ServerName)
			}
			return c, nil
		},
	}
}

// Listener is one port the proxy serves.
type Listener struct {
	// Name is the table's listener served.
	Name string
	// Listener accepts the connections; Port is what clients connect to.
	Listener net.Listener
	Port     int
	TLS      bool
}

// Serve serves the listeners until ctx ends, then lets requests in flight
// finish for up to grace.
func (p *Proxy) Serve(ctx context.Context, grace time.Duration, ls ...Listener) error {
	errs := make(chan error, len(ls))
	var servers []*http.Server
	for _, l := range ls {
		srv := &http.Server{
			Handler:           p.Handler(l.Name, l.Port, l.TLS),
			ReadHeaderTimeout: 30 * time.Second,
			IdleTimeout:       75 * time.Second,
			ErrorLog:          slog.NewLogLogger(slog.Default().Handler(), slog.LevelDebug),
		}
		if l.TLS {
			srv.TLSConfig = p.TLSConfig(l.Name)
		}
		servers = append(servers, srv)
		go func() {
			var err error
			if l.TLS {
				err = srv.ServeTLS(l.Listener, "", "")
			} else {
				err = srv.Serve(l.Listener)
			}
			if errors.Is(err, http.ErrServerClosed) {
				err = nil
			} else {
				err = fmt.Errorf("serve %s on %s: %w", l.Name, l.Listener.Addr(), err)
			}
			errs <- err
		}()
	}
	var first error
	received := 0
	select {
	case <-ctx.Done():
	case first = <-errs:
		received++
	}
	shutdown, cancel := context.WithTimeout(context.WithoutCancel(ctx), grace)
	defer cancel()
	for _, srv := range servers {
		if err := srv.Shutdown(shutdown); err != nil {
			srv.Close()
		}
	}
	for ; received < len(servers); received++ {
		if err := <-errs; first == nil {
			first = err
		}
	}
	return first
}
