package node

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/util/httpstream"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/portforward"
	"k8s.io/client-go/tools/remotecommand"
	"k8s.io/client-go/transport/spdy"
	utilexec "k8s.io/client-go/util/exec"
)

// sessionServer serves remote command sessions with run, over TLS as the
// node's server does.
func sessionServer(t *testing.T, run func(context.Context, *session) error) (*rest.Config, string) {
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		serveSession(w, r, run)
	}))
	t.Cleanup(srv.Close)
	return &rest.Config{Host: srv.URL, TLSClientConfig: rest.TLSClientConfig{Insecure: true}}, srv.URL + "/exec/ns/pod/c"
}

// executors are kubectl's two transports: WebSocket (v5) and SPDY (v4).
func executors(t *testing.T, cfg *rest.Config, rawURL string) map[string]remotecommand.Executor {
	u, _ := url.Parse(rawURL)
	ws, err := remotecommand.NewWebSocketExecutor(cfg, "GET", rawURL)
	if err != nil {
		t.Fatal(err)
	}
	sp, err := remotecommand.NewSPDYExecutor(cfg, "POST", u)
	if err != nil {
		t.Fatal(err)
	}
	return map[string]remotecommand.Executor{"websocket": ws, "spdy": sp}
}

func TestSessionStreamsAndExitCode(t *testing.T) {
	cfg, base := sessionServer(t, func(_ context.Context, s *session) error {
		in, err := io.ReadAll(s.stdin)
		if err != nil {
			return err
		}
		fmt.Fprintf(s.stdout, "out:%s", in)
		fmt.Fprint(s.stderr, "err")
		return exitCodeError{argv: []string{"sh"}, code: 7}
	})
	for name, exec := range executors(t, cfg, base+"?input=1&output=1&error=1") {
		var out, errOut bytes.Buffer
		err := exec.StreamWithContext(context.Background(), remotecommand.StreamOptions{
			Stdin: strings.NewReader("hello"), Stdout: &out, Stderr: &errOut,
		})
		var code utilexec.CodeExitError
		if !errors.As(err, &code) || code.Code != 7 {
			t.Errorf("%s: err = %v, want exit code 7", name, err)
		}
		if out.String() != "out:hello" || errOut.String() != "err" {
			t.Errorf("%s: stdout %q stderr %q, want the input echoed and err", name, out.String(), errOut.String())
		}
	}
}

func TestSessionTTYGetsResizes(t *testing.T) {
	cfg, base := sessionServer(t, func(_ context.Context, s *session) error {
		if !s.tty || s.stderr != nil {
			return errors.New("want a terminal without stderr")
		}
		size := <-s.resize
		fmt.Fprintf(s.stdout, "%dx%d", size.Width, size.Height)
		return nil
	})
	for name, exec := range executors(t, cfg, base+"?output=1&error=1&tty=1") {
		var out bytes.Buffer
		sizes := sizeQueue{remotecommand.TerminalSize{Width: 120, Height: 40}}
		err := exec.StreamWithContext(context.Background(), remotecommand.StreamOptions{Stdout: &out, Tty: true, TerminalSizeQueue: &sizes})
		if err != nil || out.String() != "120x40" {
			t.Errorf("%s: out %q err %v, want the terminal's size", name, out.String(), err)
		}
	}
}

func TestSessionFailureIsAStatus(t *testing.T) {
	cfg, base := sessionServer(t, func(context.Context, *session) error { return errors.New("no such file") })
	for name, exec := range executors(t, cfg, base+"?output=1") {
		err := exec.StreamWithContext(context.Background(), remotecommand.StreamOptions{Stdout: io.Discard})
		if err == nil || !strings.Contains(err.Error(), "Internal error occurred: no such file") {
			t.Errorf("%s: err = %v, want the internal error", name, err)
		}
	}
}

type sizeQueue []remotecommand.TerminalSize

func (q *sizeQueue) Next() *remotecommand.TerminalSize {
	if len(*q) == 0 {
		return nil // the client stops asking
	}
	s := (*q)[0]
	*q = (*q)[1:]
	return &s
}

func TestPortForwardOverSPDYAndWebSocket(t *testing.T) {
	echo, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer echo.Close()
	go func() {
		for {
			c, err := echo.Accept()
			if err != nil {
				return
			}
			go func() { defer c.Close(); _, _ = io.Copy(c, c) }()
		}
	}()
	_, echoPort, _ := net.SplitHostPort(echo.Addr().String())
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		servePortForward(w, r, "pod_ns", "uid", func(ctx context.Context, port uint16) (net.Conn, error) {
			if fmt.Sprint(port) != echoPort {
				return nil, fmt.Errorf("dial tcp4 127.0.0.1:%d: connect: connection refused", port)
			}
			return (&net.Dialer{}).DialContext(ctx, "tcp", echo.Addr().String())
		})
	}))
	defer srv.Close()
	cfg := &rest.Config{Host: srv.URL, TLSClientConfig: rest.TLSClientConfig{Insecure: true}}
	u, _ := url.Parse(srv.URL + "/portForward/ns/pod")
	rt, upgrader, err := spdy.RoundTripperFor(cfg)
	if err != nil {
		t.Fatal(err)
	}
	tunnel, err := portforward.NewSPDYOverWebsocketDialer(u, cfg)
	if err != nil {
		t.Fatal(err)
	}
	for name, d := range map[string]httpstream.Dialer{
		"spdy":      spdy.NewDialer(upgrader, &http.Client{Transport: rt}, "POST", u),
		"websocket": tunnel,
	} {
		stop, ready := make(chan struct{}), make(chan struct{})
		var out bytes.Buffer
		fw, err := portforward.NewOnAddresses(d, []string{"127.0.0.1"}, []string{"0:" + echoPort}, stop, ready, &out, &out)
		if err != nil {
			t.Fatal(err)
		}
		errc := make(chan error, 1)
		go func() { errc <- fw.ForwardPorts() }()
		<-ready
		ports, _ := fw.GetPorts()
		conn, err := net.Dial("tcp", fmt.Sprintf("127.0.0.1:%d", ports[0].Local))
		if err != nil {
			t.Fatal(err)
		}
		_, _ = conn.Write([]byte("ping"))
		buf := make([]byte, 4)
		_ = conn.SetReadDeadline(time.Now().Add(10 * time.Second))
		if _, err := io.ReadFull(conn, buf); err != nil || string(buf) != "ping" {
			t.Errorf("%s: read %q (%v) through the forward, want ping", name, buf, err)
		}
		conn.Close()
		close(stop)
		if err := <-errc; err != nil {
			t.Errorf("%s: ForwardPorts: %v", name, err)
		}
	}
}
