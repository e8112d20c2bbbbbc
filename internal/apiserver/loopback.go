package apiserver

import (
	"io"
	"net/http"
	"sync"
	"sync/atomic"

	"k8s.io/client-go/rest"

	"github.com/svcnet/svcnet/internal/auth/authn"
)

// Loopback is a client configuration that reaches a server in process,
// as upstream's loopback client does, for the API server's own
// controllers and caches (the `kubernetes` Service, repair events, the
// RBAC policy). It exists before the server it reaches (Config.Loopback),
// so that what the server is built from may read through it. Requests
// skip TLS and authentication: they are the API server's own
// (system:apiserver, in system:masters), and are not rate limited.
type Loopback struct {
	handler atomic.Pointer[http.Handler]
}

// serve is set by New: the server's handler for the API server's own
// requests. As upstream's loopback client, which passes the whole filter
// chain, a request may impersonate (rest.Config.Impersonate): a page the
// server serves acts as its user that way.
func (l *Loopback) serve(s *Server) {
	var h http.Handler = s.metrics.instrument(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		u, err := s.impersonate(r, authn.Loopback())
		if err != nil {
			writeError(w, r, err)
			return
		}
		s.authorize(w, r.WithContext(authn.WithUser(r.Context(), u)))
	}))
	l.handler.Store(&h)
}

// Config is the client configuration; its requests fail until the
// server is built.
func (l *Loopback) Config() *rest.Config {
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		served := l.handler.Load()
		if served == nil {
			http.Error(w, "the API server is not built yet", http.StatusServiceUnavailable)
			return
		}
		(*served).ServeHTTP(w, r)
	})
	return &rest.Config{Host: "http://apiserver.loopback", Transport: loopback{handler: h}, QPS: -1}
}

// loopback is an http.RoundTripper that serves each request with the
// handler; the body streams through a pipe, so watches work too.
type loopback struct{ handler http.Handler }

func (l loopback) RoundTrip(req *http.Request) (*http.Response, error) {
	pr, pw := io.Pipe()
	w := &pipeWriter{header: http.Header{}, body: pw, ready: make(chan struct{})}
	go func() {
		l.handler.ServeHTTP(w, req)
		w.WriteHeader(http.StatusOK) // a handler that wrote nothing
		_ = pw.Close()
	}()
	select {
	case <-w.ready:
	case <-req.Context().Done():
		_ = pr.CloseWithError(req.Context().Err())
		return nil, req.Context().Err()
	}
	return &http.Response{
		Status: http.StatusText(w.code), StatusCode: w.code, Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
		Header: w.sent, Body: pr, ContentLength: -1, Request: req,
	}, nil
}

// pipeWriter is the handler's side of a loopback response.
type pipeWriter struct {
	header http.Header
	body   *io.PipeWriter
	once   sync.Once
	code   int
	sent   http.Header // the headers as of WriteHeader
	ready  chan struct{}
}

func (w *pipeWriter) Header() http.Header { return w.header }

func (w *pipeWriter) WriteHeader(code int) {
	w.once.Do(func() {
		w.code, w.sent = code, w.header.Clone()
		close(w.ready)
	})
}

func (w *pipeWriter) Write(b []byte) (int, error) {
	w.WriteHeader(http.StatusOK)
	return w.body.Write(b)
}

// Flush is a no-op: every Write already reaches the reader.
func (w *pipeWriter) Flush() {}
