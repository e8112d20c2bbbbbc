package apiserver

import (
	"io"
	"net/http"
	"sync"

	"k8s.io/client-go/rest"
)

// LoopbackConfig is a client configuration that reaches this server in
// process, as upstream's loopback client does, for the API server's own
// controllers (the `kubernetes` Service, repair events). Requests skip TLS
// and client authentication, and are not rate limited.
func (s *Server) LoopbackConfig() *rest.Config {
	return &rest.Config{
		Host:      "http://apiserver.loopback",
		Transport: loopback{handler: s.metrics.instrument(http.HandlerFunc(s.ServeHTTP))},
		QPS:       -1,
	}
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
