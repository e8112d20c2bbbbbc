package node

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strconv"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/httpstream"
	"k8s.io/apimachinery/pkg/util/httpstream/spdy"
	"k8s.io/apimachinery/pkg/util/httpstream/wsstream"
	"k8s.io/apimachinery/pkg/util/remotecommand"
)

// The streaming side of the kubelet API (/exec, /attach): the API server
// passes kubectl's upgraded connection through, and this end speaks the
// remote command protocols to it, WebSocket (channel.k8s.io up to
// v5.channel.k8s.io, one byte of channel before each message) and SPDY
// (v2 to v4.channel.k8s.io, one SPDY stream per channel, named by the
// streamType header). From v4 on, the error channel carries a Status whose
// ExitCode cause is the command's exit code.

const (
	// streamIdleTimeout ends a session without traffic, the kubelet's
	// --streaming-connection-idle-timeout.
	streamIdleTimeout = 4 * time.Hour
	// streamCreationTimeout bounds the wait for a SPDY client's streams.
	streamCreationTimeout = 30 * time.Second
	// spdyPingPeriod keeps idle SPDY connections open through proxies.
	spdyPingPeriod = 5 * time.Second
)

// termSize is a terminal size as clients send it on the resize channel.
type termSize struct {
	Width  uint16
	Height uint16
}

// session is one exec or attach session's streams, as the client asked for
// them; the ones not asked for are nil.
type session struct {
	stdin  io.Reader
	stdout io.Writer
	stderr io.Writer
	tty    bool
	// resize delivers terminal sizes while the session lasts (TTY only).
	resize <-chan termSize
}

// exitCodeError is a command that ended with a non-zero code.
type exitCodeError struct {
	argv []string
	code int
}

func (e exitCodeError) Error() string {
	return fmt.Sprintf("error executing command %v, exit code %d", e.argv, e.code)
}

// sessionOptions are the streams asked for in the query, with the
// kubelet's parameter names (input, output, error, tty).
type sessionOptions struct{ stdin, stdout, stderr, tty bool }

func parseSessionOptions(r *http.Request) (sessionOptions, error) {
	q := r.URL.Query()
	flag := func(name string) bool {
		b, _ := strconv.ParseBool(q.Get(name))
		return b
	}
	o := sessionOptions{stdin: flag(corev1.ExecStdinParam), stdout: flag(corev1.ExecStdoutParam),
		stderr: flag(corev1.ExecStderrParam), tty: flag(corev1.ExecTTYParam)}
	if o.tty {
		// A terminal has one output.
		o.stderr = false
	}
	if !o.stdin && !o.stdout && !o.stderr {
		return o, errors.New("you must specify at least 1 of stdin, stdout, stderr")
	}
	return o, nil
}

// serveSession upgrades the request to a remote command session and runs
// run on it; run returns when the command has ended and its output has
// been written. Errors before the upgrade are answered as a Status.
func serveSession(w http.ResponseWriter, r *http.Request, run func(context.Context, *session) error) {
	opts, err := parseSessionOptions(r)
	if err != nil {
		writeStatus(w, apierrors.NewBadRequest(err.Error()))
		return
	}
	if wsstream.IsWebSocketRequest(r) {
		serveWebSocketSession(w, r, opts, run)
		return
	}
	serveSPDYSession(w, r, opts, run)
}

// webSocketProtocols are the channel protocols with their encoding; the
// empty protocol is channel.k8s.io for clients that name none.
var webSocketProtocols = map[string]bool{ // protocol -> binary
	"":                                 true,
	remotecommand.StreamProtocolV1Name: true,
	"base64." + remotecommand.StreamProtocolV1Name: false,
	remotecommand.StreamProtocolV4Name:             true,
	"v4.base64.channel.k8s.io":                     false,
	remotecommand.StreamProtocolV5Name:             true,
}

func serveWebSocketSession(w http.ResponseWriter, r *http.Request, opts sessionOptions, run func(context.Context, *session) error) {
	channel := func(on bool, t wsstream.ChannelType) wsstream.ChannelType {
		if on {
			return t
		}
		return wsstream.IgnoreChannel
	}
	channels := []wsstream.ChannelType{
		remotecommand.StreamStdIn:  channel(opts.stdin, wsstream.ReadChannel),
		remotecommand.StreamStdOut: channel(opts.stdout, wsstream.WriteChannel),
		remotecommand.StreamStdErr: channel(opts.stderr, wsstream.WriteChannel),
		remotecommand.StreamErr:    wsstream.WriteChannel,
		remotecommand.StreamResize: channel(opts.tty, wsstream.ReadChannel),
	}
	protocols := map[string]wsstream.ChannelProtocolConfig{}
	for name, binary := range webSocketProtocols {
		protocols[name] = wsstream.ChannelProtocolConfig{Binary: binary, Channels: channels}
	}
	conn := wsstream.NewConn(protocols)
	conn.SetIdleTimeout(streamIdleTimeout)
	protocol, rwc, err := conn.Open(w, r)
	if err != nil {
		slog.Debug("open websocket session", "err", err)
		return
	}
	defer conn.Close()
	s := &session{tty: opts.tty}
	// An empty message on the first writable channel tells the client
	// that the session is established.
	_, _ = rwc[remotecommand.StreamErr].Write(nil)
	if opts.stdin {
		s.stdin = rwc[remotecommand.StreamStdIn]
	}
	if opts.stdout {
		s.stdout = rwc[remotecommand.StreamStdOut]
	}
	if opts.stderr {
		s.stderr = rwc[remotecommand.StreamStdErr]
	}
	ctx, cancel := context.WithCancel(r.Context())
	defer cancel()
	if opts.tty {
		s.resize = decodeResizes(ctx, rwc[remotecommand.StreamResize])
	}
	writeResult(rwc[remotecommand.StreamErr], protocol, run(ctx, s))
}

// spdyProtocols are the SPDY versions served, newest first.
var spdyProtocols = []string{remotecommand.StreamProtocolV4Name, remotecommand.StreamProtocolV3Name, remotecommand.StreamProtocolV2Name}

func serveSPDYSession(w http.ResponseWriter, r *http.Request, opts sessionOptions, run func(context.Context, *session) error) {
	protocol, err := httpstream.Handshake(r, w, spdyProtocols)
	if err != nil {
		// Handshake has answered the client.
		slog.Debug("remote command handshake", "err", err)
		return
	}
	want := 1
	for _, on := range []bool{opts.stdin, opts.stdout, opts.stderr, opts.tty && protocol != remotecommand.StreamProtocolV2Name} {
		if on {
			want++
		}
	}
	ctx, cancel := context.WithCancel(r.Context())
	defer cancel()
	conn, streams := upgradeSPDY(ctx, w, r)
	if conn == nil {
		return
	}
	defer conn.Close()
	got := map[string]httpstream.Stream{}
	timeout := time.NewTimer(streamCreationTimeout)
	defer timeout.Stop()
	for len(got) < want {
		select {
		case st := <-streams:
			got[st.Headers().Get(corev1.StreamType)] = st
		case <-timeout.C:
			slog.Debug("remote command: timed out waiting for the client's streams", "have", len(got), "want", want)
			return
		case <-conn.CloseChan():
			return
		case <-ctx.Done():
			return
		}
	}
	errStream := got[corev1.StreamTypeError]
	if errStream == nil {
		slog.Debug("remote command: the client opened no error stream")
		return
	}
	s := &session{tty: opts.tty, stdin: readerOf(got[corev1.StreamTypeStdin])}
	if st := got[corev1.StreamTypeStdout]; st != nil {
		s.stdout = st
	}
	if st := got[corev1.StreamTypeStderr]; st != nil {
		s.stderr = st
	}
	if st := got[corev1.StreamTypeResize]; st != nil {
		s.resize = decodeResizes(ctx, st)
	}
	err = run(ctx, s)
	// The client reads its output to the end before the error channel.
	for _, t := range []string{corev1.StreamTypeStdout, corev1.StreamTypeStderr} {
		if st := got[t]; st != nil {
			_ = st.Close()
		}
	}
	writeResult(errStream, protocol, err)
	_ = errStream.Close()
}

// readerOf is a stream as a reader, nil for no stream.
func readerOf(st httpstream.Stream) io.Reader {
	if st == nil {
		return nil
	}
	return st
}

// upgradeSPDY answers the upgrade and returns the connection with the
// streams the client opens; nil when the upgrade failed (the client has
// been answered).
func upgradeSPDY(ctx context.Context, w http.ResponseWriter, r *http.Request) (httpstream.Connection, <-chan httpstream.Stream) {
	streams := make(chan httpstream.Stream)
	conn := spdy.NewResponseUpgraderWithPings(spdyPingPeriod).UpgradeResponse(w, r, func(st httpstream.Stream, replySent <-chan struct{}) error {
		go func() {
			<-replySent
			select {
			case streams <- st:
			case <-ctx.Done():
			}
		}()
		return nil
	})
	if conn == nil {
		return nil, nil
	}
	conn.SetIdleTimeout(streamIdleTimeout)
	return conn, streams
}

// decodeResizes reads terminal sizes from r until it ends or ctx does.
func decodeResizes(ctx context.Context, r io.Reader) <-chan termSize {
	ch := make(chan termSize, 1)
	go func() {
		defer close(ch)
		dec := json.NewDecoder(r)
		for {
			var size termSize
			if err := dec.Decode(&size); err != nil {
				return
			}
			select {
			case ch <- size:
			case <-ctx.Done():
				return
			}
		}
	}()
	return ch
}

// writeResult reports the session's end on the error channel: a Status
// from v4 on (success too), the bare message before.
func writeResult(w io.Writer, protocol string, err error) {
	switch protocol {
	case remotecommand.StreamProtocolV4Name, "v4.base64.channel.k8s.io", remotecommand.StreamProtocolV5Name:
	default:
		if err != nil {
			_, _ = io.WriteString(w, err.Error())
		}
		return
	}
	st := metav1.Status{Status: metav1.StatusSuccess}
	var exit exitCodeError
	switch {
	case errors.As(err, &exit):
		st = metav1.Status{
			Status: metav1.StatusFailure,
			Reason: remotecommand.NonZeroExitCodeReason,
			Details: &metav1.StatusDetails{Causes: []metav1.StatusCause{
				{Type: remotecommand.ExitCodeCauseType, Message: strconv.Itoa(exit.code)},
			}},
			Message: "command terminated with non-zero exit code: " + exit.Error(),
		}
	case err != nil:
		st = apierrors.NewInternalError(err).Status()
	}
	b, _ := json.Marshal(st)
	_, _ = w.Write(b)
}
