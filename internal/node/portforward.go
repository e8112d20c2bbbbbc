package node

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"runtime"
	"strconv"
	"sync"

	gwebsocket "github.com/gorilla/websocket"
	"github.com/vishvananda/netns"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/httpstream"
	"k8s.io/apimachinery/pkg/util/httpstream/spdy"
	"k8s.io/apimachinery/pkg/util/httpstream/wsstream"
	pfconst "k8s.io/apimachinery/pkg/util/portforward"
	"k8s.io/client-go/tools/portforward"
)

// Port forwarding speaks portforward.k8s.io: SPDY, or SPDY tunnelled in a
// WebSocket (kubectl's default since 1.31, offered as
// SPDY/3.1+portforward.k8s.io). Each forwarded connection is a pair of
// streams, data and error, with the same requestID header and the port in
// the port header; the data stream is joined to a connection to
// localhost:port inside the pod's network namespace, and a failure is
// written to the error stream.

// forwardDialer connects to a port of the pod.
type forwardDialer func(ctx context.Context, port uint16) (net.Conn, error)

// portForward serves /portForward/{namespace}/{pod}.
func (s *server) portForward(w http.ResponseWriter, r *http.Request) {
	ns, name := r.PathValue("namespace"), r.PathValue("pod")
	pod, err := s.agent.podLister.Pods(ns).Get(name)
	if err != nil {
		http.Error(w, "pod does not exist", http.StatusNotFound)
		return
	}
	rec, err := s.agent.loadPodRecord(string(pod.UID))
	if err != nil {
		http.Error(w, "pod does not exist", http.StatusNotFound)
		return
	}
	dial := func(ctx context.Context, port uint16) (net.Conn, error) {
		addr := net.JoinHostPort("localhost", strconv.Itoa(int(port)))
		if rec.NetNS == "" {
			return (&net.Dialer{}).DialContext(ctx, "tcp4", addr)
		}
		return dialInNetNS(ctx, rec.NetNS, addr)
	}
	servePortForward(w, r, fmt.Sprintf("%s_%s", pod.Name, pod.Namespace), pod.UID, dial)
}

// dialInNetNS connects to addr from the network namespace at path.
func dialInNetNS(ctx context.Context, path, addr string) (net.Conn, error) {
	target, err := netns.GetFromPath(path)
	if err != nil {
		return nil, fmt.Errorf("open network namespace %s: %w", path, err)
	}
	defer target.Close()
	type result struct {
		conn net.Conn
		err  error
	}
	done := make(chan result, 1)
	// The socket is made on a thread inside the namespace and stays
	// there; the thread, whose namespace cannot be trusted afterwards,
	// ends with the goroutine since it is never unlocked.
	go func() {
		runtime.LockOSThread()
		if err := netns.Set(target); err != nil {
			done <- result{err: fmt.Errorf("enter network namespace %s: %w", path, err)}
			return
		}
		conn, err := (&net.Dialer{}).DialContext(ctx, "tcp4", addr)
		done <- result{conn, err}
	}()
	res := <-done
	return res.conn, res.err
}

// servePortForward upgrades the request and forwards its stream pairs
// with dial until the client closes the connection.
func servePortForward(w http.ResponseWriter, r *http.Request, podName string, uid types.UID, dial forwardDialer) {
	ctx, cancel := context.WithCancel(r.Context())
	defer cancel()
	var (
		conn    httpstream.Connection
		streams <-chan httpstream.Stream
	)
	if wsstream.IsWebSocketRequestWithTunnelingProtocol(r) {
		upgrader := gwebsocket.Upgrader{
			Subprotocols: []string{pfconst.WebsocketsSPDYTunnelingPortForwardV1},
			CheckOrigin:  func(*http.Request) bool { return true },
		}
		ws, err := upgrader.Upgrade(w, r, nil)
		if err != nil {
			slog.Debug("port-forward: websocket upgrade", "err", err)
			return
		}
		ch := make(chan httpstream.Stream)
		c, err := spdy.NewServerConnectionWithPings(portforward.NewTunnelingConnection("server", ws), acceptStreams(ctx, ch), spdyPingPeriod)
		if err != nil {
			_ = ws.Close()
			slog.Debug("port-forward: spdy in websocket", "err", err)
			return
		}
		c.SetIdleTimeout(streamIdleTimeout)
		conn, streams = c, ch
	} else {
		if _, err := httpstream.Handshake(r, w, []string{pfconst.PortForwardV1Name}); err != nil {
			slog.Debug("port-forward handshake", "err", err)
			return
		}
		if conn, streams = upgradeSPDY(ctx, w, r); conn == nil {
			return
		}
	}
	defer conn.Close()
	pf := &forwarder{conn: conn, dial: dial, pod: podName, uid: uid, pairs: map[string]*streamPair{}}
	var wg sync.WaitGroup
	defer wg.Wait()
	defer cancel()
	for {
		select {
		case <-conn.CloseChan():
			return
		case <-ctx.Done():
			return
		case st := <-streams:
			if p := pf.add(st); p != nil {
				wg.Go(func() { pf.forward(ctx, p) })
			}
		}
	}
}

// acceptStreams hands each new stream to ch once its reply has been sent.
func acceptStreams(ctx context.Context, ch chan<- httpstream.Stream) httpstream.NewStreamHandler {
	return func(st httpstream.Stream, replySent <-chan struct{}) error {
		go func() {
			<-replySent
			select {
			case ch <- st:
			case <-ctx.Done():
			}
		}()
		return nil
	}
}

type streamPair struct{ data, errs httpstream.Stream }

type forwarder struct {
	conn  httpstream.Connection
	dial  forwardDialer
	pod   string
	uid   types.UID
	pairs map[string]*streamPair
}

// add files a stream under its request and returns the pair once it is
// complete; a stream without a request ID or a known type is reset.
func (f *forwarder) add(st httpstream.Stream) *streamPair {
	id := st.Headers().Get(corev1.PortForwardRequestIDHeader)
	typ := st.Headers().Get(corev1.StreamType)
	if id == "" || (typ != corev1.StreamTypeData && typ != corev1.StreamTypeError) {
		_ = st.Reset()
		return nil
	}
	p := f.pairs[id]
	if p == nil {
		p = &streamPair{}
		f.pairs[id] = p
	}
	if typ == corev1.StreamTypeData {
		p.data = st
	} else {
		p.errs = st
	}
	if p.data == nil || p.errs == nil {
		return nil
	}
	delete(f.pairs, id)
	return p
}

// forward joins one pair's data stream to the pod's port.
func (f *forwarder) forward(ctx context.Context, p *streamPair) {
	defer f.conn.RemoveStreams(p.data, p.errs)
	defer p.errs.Close()
	portText := p.data.Headers().Get(corev1.PortHeader)
	port, err := strconv.ParseUint(portText, 10, 16)
	if err == nil && port == 0 {
		err = fmt.Errorf("port must be > 0")
	}
	if err != nil {
		fmt.Fprintf(p.errs, "invalid port %q: %v", portText, err)
		_ = p.data.Close()
		return
	}
	if err := f.copy(ctx, uint16(port), p.data); err != nil {
		fmt.Fprintf(p.errs, "error forwarding port %d to pod %s, uid %v: %v", port, f.pod, f.uid, err)
	}
}

// copy joins the stream to a new connection to port until the pod's side
// ends.
func (f *forwarder) copy(ctx context.Context, port uint16, data httpstream.Stream) error {
	defer data.Close()
	conn, err := f.dial(ctx, port)
	if err != nil {
		return err
	}
	defer conn.Close()
	go func() {
		// The client's side: ends with its close, or with the stream's
		// reset when the connection goes.
		_, _ = io.Copy(conn, data)
		if tc, ok := conn.(*net.TCPConn); ok {
			_ = tc.CloseWrite()
		}
	}()
	if _, err := io.Copy(data, conn); err != nil && ctx.Err() == nil {
		return fmt.Errorf("copy from the pod: %w", err)
	}
	return nil
}
