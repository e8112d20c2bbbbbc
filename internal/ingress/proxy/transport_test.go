package proxy

import (
	"bufio"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httptrace"
	"net/textproto"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// countingServer serves h and counts the connections it accepted and
// closed.
func countingServer(t *testing.T, h http.HandlerFunc) (srv *httptest.Server, opened, closed *atomic.Int32) {
	opened, closed = new(atomic.Int32), new(atomic.Int32)
	srv = httptest.NewUnstartedServer(h)
	srv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		switch s {
		case http.StateNew:
			opened.Add(1)
		case http.StateClosed:
			closed.Add(1)
		}
	}
	srv.Start()
	t.Cleanup(srv.Close)
	return srv, opened, closed
}

func send(t *testing.T, tr http.RoundTripper, ctx context.Context, method, url string, body io.Reader) (*http.Response, error) {
	t.Helper()
	req, err := http.NewRequestWithContext(ctx, method, url, body)
	if err != nil {
		t.Fatal(err)
	}
	return tr.RoundTrip(req)
}

func readAll(t *testing.T, res *http.Response) string {
	t.Helper()
	b, err := io.ReadAll(res.Body)
	res.Body.Close()
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func TestBackendTransportKeepsConnections(t *testing.T) {
	srv, opened, _ := countingServer(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("X-Method", r.Method)
		io.WriteString(w, "hello "+r.URL.Path)
	})
	tr := newBackendTransport()
	for i := range 20 {
		method := http.MethodGet
		if i%2 == 1 {
			method = http.MethodHead
		}
		res, err := send(t, tr, context.Background(), method, srv.URL+"/x", nil)
		if err != nil {
			t.Fatal(err)
		}
		body := readAll(t, res)
		if res.Header.Get("X-Method") != method || (method == http.MethodGet && body != "hello /x") {
			t.Fatalf("%s: %s %q %v", method, res.Status, body, res.Header)
		}
	}
	if n := opened.Load(); n != 1 {
		t.Errorf("20 requests one after another opened %d connections, want 1", n)
	}
	// A request with a body goes by net/http's Transport, and arrives.
	srv.Config.Handler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		io.WriteString(w, r.Method+" "+string(b))
	})
	res, err := send(t, tr, context.Background(), http.MethodPost, srv.URL, strings.NewReader("form"))
	if err != nil {
		t.Fatal(err)
	}
	if body := readAll(t, res); body != "POST form" {
		t.Errorf("POST answered %q", body)
	}
}

// TestBackendTransportRetriesClosedConnection: an endpoint that closes a
// kept-alive connection after each answer (without saying so) costs no
// request a failure.
func TestBackendTransportRetriesClosedConnection(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	var accepted atomic.Int32
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			accepted.Add(1)
			if _, err := http.ReadRequest(bufio.NewReader(c)); err == nil {
				io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
			}
			c.Close()
		}
	}()
	tr := newBackendTransport()
	for i := range 3 {
		res, err := send(t, tr, context.Background(), http.MethodGet, "http://"+ln.Addr().String()+"/", nil)
		if err != nil {
			t.Fatalf("request %d: %v", i, err)
		}
		if body := readAll(t, res); body != "ok" {
			t.Fatalf("request %d: %q", i, body)
		}
	}
	if n := accepted.Load(); n < 3 {
		t.Errorf("3 requests took %d connections", n)
	}
}

// TestBackendTransportClosesUnread: a body closed before its end closes
// its connection at once (no draining of a long answer) and the next
// request takes a new one.
func TestBackendTransportClosesUnread(t *testing.T) {
	srv, opened, closed := countingServer(t, func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, strings.Repeat("x", 8<<20))
	})
	tr := newBackendTransport()
	res, err := send(t, tr, context.Background(), http.MethodGet, srv.URL, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.ReadFull(res.Body, make([]byte, 10)); err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	res, err = send(t, tr, context.Background(), http.MethodGet, srv.URL, nil)
	if err != nil {
		t.Fatal(err)
	}
	if body := readAll(t, res); len(body) != 8<<20 {
		t.Errorf("second answer has %d bytes", len(body))
	}
	if n := opened.Load(); n != 2 {
		t.Errorf("opened %d connections, want 2", n)
	}
	waitFor(t, func() bool { return closed.Load() == 1 }, "the unread answer's connection to close")
}

func TestBackendTransportCancel(t *testing.T) {
	arrived := make(chan struct{})
	release := make(chan struct{})
	defer close(release)
	srv, _, _ := countingServer(t, func(w http.ResponseWriter, r *http.Request) {
		close(arrived)
		<-release
	})
	tr := newBackendTransport()
	ctx, cancel := context.WithCancel(context.Background())
	go func() {
		<-arrived
		cancel()
	}()
	_, err := send(t, tr, ctx, http.MethodGet, srv.URL, nil)
	if !errors.Is(err, context.Canceled) {
		t.Errorf("a request whose client went away returned %v, want context.Canceled", err)
	}
}

func TestBackendTransportIdleTimeout(t *testing.T) {
	srv, _, closed := countingServer(t, func(w http.ResponseWriter, r *http.Request) {})
	tr := newBackendTransport()
	tr.idleTimeout = 20 * time.Millisecond
	res, err := send(t, tr, context.Background(), http.MethodGet, srv.URL, nil)
	if err != nil {
		t.Fatal(err)
	}
	readAll(t, res)
	waitFor(t, func() bool { return closed.Load() == 1 }, "the idle connection to close")
	tr.mu.Lock()
	defer tr.mu.Unlock()
	if tr.nIdle != 0 || len(tr.idle) != 0 {
		t.Errorf("an expired connection is still listed idle: %d %v", tr.nIdle, tr.idle)
	}
}

// TestBackendTransportEarlyHints: a 103 before the answer reaches the
// reverse proxy's trace, which forwards it to the client.
func TestBackendTransportEarlyHints(t *testing.T) {
	srv, _, _ := countingServer(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Link", "</style.css>; rel=preload")
		w.WriteHeader(http.StatusEarlyHints)
		io.WriteString(w, "page")
	})
	var hints []int
	ctx := httptrace.WithClientTrace(context.Background(), &httptrace.ClientTrace{
		Got1xxResponse: func(code int, h textproto.MIMEHeader) error {
			if h.Get("Link") != "" {
				hints = append(hints, code)
			}
			return nil
		},
	})
	res, err := send(t, newBackendTransport(), ctx, http.MethodGet, srv.URL, nil)
	if err != nil {
		t.Fatal(err)
	}
	if body := readAll(t, res); body != "page" || res.StatusCode != 200 || len(hints) != 1 || hints[0] != 103 {
		t.Errorf("answer %s %q, hints %v", res.Status, body, hints)
	}
}

func waitFor(t *testing.T, cond func() bool, what string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// TestBackendTransportConnectionClose: an answer with "Connection: close"
// leaves no connection idle.
func TestBackendTransportConnectionClose(t *testing.T) {
	srv, _, closed := countingServer(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Connection", "close")
		io.WriteString(w, "bye")
	})
	tr := newBackendTransport()
	res, err := send(t, tr, context.Background(), http.MethodGet, srv.URL, nil)
	if err != nil {
		t.Fatal(err)
	}
	if body := readAll(t, res); body != "bye" {
		t.Fatalf("answer %q", body)
	}
	if idle := idleConns(tr); idle != 0 {
		t.Errorf("%d connections idle after Connection: close", idle)
	}
	waitFor(t, func() bool { return closed.Load() == 1 }, "the connection to close")
}

// rawServer answers each request on a connection with the next of
// answers for that connection (by the order connections arrive), then
// closes it.
func rawServer(t *testing.T, answers ...[]string) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for i := 0; ; i++ {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			if i >= len(answers) {
				c.Close()
				continue
			}
			go func() {
				defer c.Close()
				br := bufio.NewReader(c)
				for _, a := range answers[i] {
					if _, err := http.ReadRequest(br); err != nil {
						return
					}
					io.WriteString(c, a)
				}
			}()
		}
	}()
	return "http://" + ln.Addr().String()
}

// TestBackendTransportLimits: a head too large fails the request; bytes
// beyond an answer keep its connection out of the idle list; a 408 on a
// reused connection (the endpoint's idle timeout) sends the request again.
func TestBackendTransportLimits(t *testing.T) {
	tr := newBackendTransport()
	url := rawServer(t, []string{"HTTP/1.1 200 OK\r\nX-Big: " + strings.Repeat("a", 2<<20) + "\r\nContent-Length: 0\r\n\r\n"})
	if _, err := send(t, tr, context.Background(), http.MethodGet, url, nil); !errors.Is(err, errHeadTooLarge) {
		t.Errorf("a 2 MiB head: %v", err)
	}

	url = rawServer(t, []string{"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nokEXTRA"})
	res, err := send(t, tr, context.Background(), http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	if body := readAll(t, res); body != "ok" {
		t.Errorf("answer %q", body)
	}
	if idle := idleConns(tr); idle != 0 {
		t.Errorf("a connection with bytes beyond the answer is idle")
	}

	url = rawServer(t,
		[]string{"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nfirst", "HTTP/1.1 408 Request Timeout\r\nConnection: close\r\nContent-Length: 0\r\n\r\n"},
		[]string{"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nfresh"})
	for _, want := range []string{"first", "fresh"} {
		res, err := send(t, tr, context.Background(), http.MethodGet, url, nil)
		if err != nil {
			t.Fatal(err)
		}
		if body := readAll(t, res); body != want || res.StatusCode != 200 {
			t.Errorf("answer %s %q, want 200 %q", res.Status, body, want)
		}
	}
}

// idleConns is how many connections tr keeps idle.
func idleConns(tr *backendTransport) int {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	return tr.nIdle
}
