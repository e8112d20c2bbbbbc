package proxy

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"net/http/httptrace"
	"net/textproto"
	"sync"
	"time"

	"golang.org/x/net/http/httpguts"
)

// backendTransport sends the common request, idempotent and without a
// body, over kept-alive HTTP/1.1 connections of its own, written and read
// by the goroutine that serves the request: net/http's Transport hands
// each request to a writing and a reading goroutine of the connection, and
// those hand-offs cost about a tenth of the proxy's CPU per small request
// (bench/ingress). The request is written and the response parsed by
// net/http itself (Request.Write, ReadResponse). Every other request
// (a body, an upgrade) goes to fallback.
type backendTransport struct {
	fallback *http.Transport
	dial     func(ctx context.Context, network, addr string) (net.Conn, error)
	// idleTimeout closes a connection left idle that long; at most
	// maxIdlePerHost idle connections are kept per endpoint and maxIdle in
	// all.
	idleTimeout             time.Duration
	maxIdle, maxIdlePerHost int

	mu    sync.Mutex
	idle  map[string][]*backendConn
	nIdle int
}

// backendConn is one connection to an endpoint; br reads it through
// Read, which holds a response's head to maxResponseHead.
type backendConn struct {
	t    *backendTransport
	addr string
	nc   net.Conn
	br   *bufio.Reader
	bw   *bufio.Writer
	// limit is what may still be read: maxResponseHead while a head is
	// read, unlimited for bodies.
	limit int64
	// idleTimer closes the connection once idle too long; it runs only
	// while the connection is in the idle list.
	idleTimer *time.Timer
}

func newBackendTransport() *backendTransport {
	dialer := &net.Dialer{Timeout: 5 * time.Second, KeepAlive: 30 * time.Second}
	t := &backendTransport{
		dial:           dialer.DialContext,
		idleTimeout:    60 * time.Second,
		maxIdle:        4096,
		maxIdlePerHost: 1024,
		idle:           map[string][]*backendConn{},
	}
	// No Proxy func: endpoints are dialled straight, whatever HTTP_PROXY
	// says.
	t.fallback = &http.Transport{
		DialContext:         t.dial,
		MaxIdleConns:        t.maxIdle,
		MaxIdleConnsPerHost: t.maxIdlePerHost,
		IdleConnTimeout:     t.idleTimeout,
		// Requests go as the client sent them: no Accept-Encoding of the
		// proxy's own, no answers unzipped on the way.
		DisableCompression: true,
	}
	return t
}

// own reports whether the request is one this transport sends itself: an
// idempotent method without a body or an upgrade, to an http URL. Only
// those may be sent again when a kept-alive connection turns out to have
// been closed by the endpoint, as net/http's Transport does.
func own(req *http.Request) bool {
	switch req.Method {
	case http.MethodGet, http.MethodHead, http.MethodOptions, http.MethodTrace:
	default:
		return false
	}
	return req.URL.Scheme == "http" && (req.Body == nil || req.Body == http.NoBody) &&
		!httpguts.HeaderValuesContainsToken(req.Header["Connection"], "Upgrade")
}

// RoundTrip sends req and returns the response whose body, once read to
// its end, gives the connection back for the next request.
func (t *backendTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	if !own(req) {
		return t.fallback.RoundTrip(req)
	}
	ctx := req.Context()
	for {
		c, reused, err := t.get(ctx, req.URL.Host)
		if err != nil {
			return nil, err
		}
		res, sent, err := c.roundTrip(req, reused)
		if err == nil {
			return res, nil
		}
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		// A kept-alive connection the endpoint closed fails before any
		// answer arrives; a new connection is tried, as net/http's
		// Transport does, and its failure is final.
		if !reused || sent {
			return nil, err
		}
	}
}

// get takes an idle connection to addr or dials one; reused says which.
func (t *backendTransport) get(ctx context.Context, addr string) (c *backendConn, reused bool, err error) {
	t.mu.Lock()
	for conns := t.idle[addr]; len(conns) > 0; conns = t.idle[addr] {
		c = conns[len(conns)-1]
		t.setIdle(addr, conns[:len(conns)-1])
		// A timer that already fired is closing the connection.
		if c.idleTimer.Stop() {
			t.mu.Unlock()
			return c, true, nil
		}
	}
	t.mu.Unlock()
	nc, err := t.dial(ctx, "tcp", addr)
	if err != nil {
		return nil, false, err
	}
	c = &backendConn{t: t, addr: addr, nc: nc, bw: bufio.NewWriter(nc), limit: math.MaxInt64}
	c.br = bufio.NewReader(c)
	return c, false, nil
}

// Limits on an endpoint's answer, as net/http's Transport has them: the
// size of a response's head and the informational (1xx) responses before
// the final one.
const (
	maxResponseHead   = 1 << 20
	maxInformationals = 5
)

var errHeadTooLarge = errors.New("response head too large")

// Read reads the connection within c.limit.
func (c *backendConn) Read(p []byte) (int, error) {
	if c.limit <= 0 {
		return 0, errHeadTooLarge
	}
	if int64(len(p)) > c.limit {
		p = p[:c.limit]
	}
	n, err := c.nc.Read(p)
	c.limit -= int64(n)
	return n, err
}

// setIdle replaces addr's idle list, keeping the count; t.mu is held.
func (t *backendTransport) setIdle(addr string, conns []*backendConn) {
	t.nIdle += len(conns) - len(t.idle[addr])
	if len(conns) == 0 {
		delete(t.idle, addr)
		return
	}
	t.idle[addr] = conns
}

// put makes c idle, or closes it when the lists are full.
func (t *backendTransport) put(c *backendConn) {
	t.mu.Lock()
	conns := t.idle[c.addr]
	if len(conns) >= t.maxIdlePerHost || t.nIdle >= t.maxIdle {
		t.mu.Unlock()
		c.nc.Close()
		return
	}
	t.setIdle(c.addr, append(conns, c))
	if c.idleTimer == nil {
		c.idleTimer = time.AfterFunc(t.idleTimeout, c.expire)
	} else {
		c.idleTimer.Reset(t.idleTimeout)
	}
	t.mu.Unlock()
}

// expire closes c, idle too long.
func (c *backendConn) expire() {
	t := c.t
	t.mu.Lock()
	conns := t.idle[c.addr]
	for i, o := range conns {
		if o == c {
			t.setIdle(c.addr, append(conns[:i:i], conns[i+1:]...))
			break
		}
	}
	t.mu.Unlock()
	c.nc.Close()
}

// aLongTimeAgo is a deadline that makes blocked reads and writes return.
var aLongTimeAgo = time.Unix(1, 0)

// errStale is a 408 Request Timeout on a reused connection: the
// endpoint had closed it for idleness, and the request may go again.
var errStale = errors.New("the endpoint timed the kept-alive connection out")

// roundTrip writes req on c (reused: kept alive from an earlier request)
// and reads the response's head; sent says whether any of the answer had
// arrived when it failed. On a failure c is closed.
func (c *backendConn) roundTrip(req *http.Request, reused bool) (res *http.Response, sent bool, err error) {
	// The request's end (the client went away) unblocks the connection.
	stop := context.AfterFunc(req.Context(), func() { _ = c.nc.SetDeadline(aLongTimeAgo) })
	fail := func(err error) (*http.Response, bool, error) {
		stop()
		c.nc.Close()
		return nil, sent, err
	}
	if err := req.Write(c.bw); err != nil {
		return fail(fmt.Errorf("write request to %s: %w", c.addr, err))
	}
	if err := c.bw.Flush(); err != nil {
		return fail(fmt.Errorf("write request to %s: %w", c.addr, err))
	}
	c.limit = maxResponseHead
	for informationals := 0; ; informationals++ {
		if _, err := c.br.Peek(1); err != nil {
			return fail(fmt.Errorf("read response from %s: %w", c.addr, err))
		}
		res, err = http.ReadResponse(c.br, req)
		if err != nil {
			sent = true
			return fail(fmt.Errorf("read response from %s: %w", c.addr, err))
		}
		if reused && informationals == 0 && res.StatusCode == http.StatusRequestTimeout {
			return fail(errStale)
		}
		sent = true
		if res.StatusCode == http.StatusSwitchingProtocols {
			return fail(fmt.Errorf("%s switched protocols unasked", c.addr))
		}
		if res.StatusCode >= 200 {
			break
		}
		if informationals == maxInformationals {
			return fail(fmt.Errorf("%s sent too many informational responses", c.addr))
		}
		// Informational answers (103 Early Hints) go to the client
		// through the reverse proxy's trace, as net/http's Transport
		// sends them.
		if trace := httptrace.ContextClientTrace(req.Context()); trace != nil && trace.Got1xxResponse != nil {
			if err := trace.Got1xxResponse(res.StatusCode, textproto.MIMEHeader(res.Header)); err != nil {
				return fail(err)
			}
		}
	}
	c.limit = math.MaxInt64
	b := &backendBody{c: c, res: res, body: res.Body, stop: stop}
	if res.Body == http.NoBody {
		b.finish(true)
		return res, true, nil
	}
	res.Body = b
	return res, true, nil
}

// backendBody gives its connection back once read to the end, and closes
// it when closed before.
type backendBody struct {
	c    *backendConn
	res  *http.Response
	body io.ReadCloser
	stop func() bool
	done bool
}

func (b *backendBody) Read(p []byte) (int, error) {
	if b.done {
		return 0, io.EOF
	}
	n, err := b.body.Read(p)
	if err != nil {
		b.finish(errors.Is(err, io.EOF))
	}
	return n, err
}

func (b *backendBody) Close() error {
	if !b.done {
		b.finish(false)
	}
	return nil
}

// finish ends the request on the connection: it goes back to the idle
// list if the whole answer was read, the request's context did not end
// and the endpoint keeps it open; otherwise it is closed.
func (b *backendBody) finish(whole bool) {
	b.done = true
	// Bytes beyond the answer are no answer to the next request.
	if b.stop() && whole && !b.res.Close && b.c.br.Buffered() == 0 {
		b.c.t.put(b.c)
		return
	}
	b.c.nc.Close()
}
