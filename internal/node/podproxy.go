package node

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
)

// podProxy passes a request of the API server's pods/proxy or
// services/proxy on to one of this node's pods (GET|POST|...
// /podProxy/{scheme}/{ip:port}/{path}): the pod's IP routes from the
// node's network namespace, which the API server's may not share.
// Only this node's pods and the node's own address are reached; https is not verified, as kube-apiserver's proxy does not.
func (s *server) podProxy(w http.ResponseWriter, r *http.Request) {
	scheme, hostPort := r.PathValue("scheme"), r.PathValue("hostport")
	if scheme != "http" && scheme != "https" {
		writeStatus(w, apierrors.NewBadRequest(fmt.Sprintf("unsupported scheme %q", scheme)))
		return
	}
	host, _, err := net.SplitHostPort(hostPort)
	if err != nil {
		host = hostPort
	}
	if !s.agent.servesPodIP(host) {
		writeStatus(w, apierrors.NewBadRequest(fmt.Sprintf("%s is no pod of node %s", host, s.agent.cfg.NodeName)))
		return
	}
	target := &url.URL{Scheme: scheme, Host: hostPort}
	rp := &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			pr.Out.URL.Scheme, pr.Out.URL.Host = target.Scheme, target.Host
			pr.Out.URL.Path, pr.Out.URL.RawPath = "/"+r.PathValue("path"), ""
			pr.Out.Host = target.Host
		},
		// Dialled from the node's network namespace, where pod IPs
		// route (as the probes dial), and never through an HTTP proxy.
		Transport: &http.Transport{
			DialContext:       s.agent.net.Dialer().DialContext,
			TLSClientConfig:   &tls.Config{InsecureSkipVerify: true}, //nolint:gosec // as kube-apiserver's pod proxy
			DisableKeepAlives: true,
		},
		ErrorHandler: func(w http.ResponseWriter, _ *http.Request, err error) {
			writeStatus(w, apierrors.NewServiceUnavailable(fmt.Sprintf("error trying to reach service: %v", err)))
		},
	}
	rp.ServeHTTP(w, r)
}

// servesPodIP reports whether ip is the IP of a pod on this node, or
// the node's own (nodes/proxy to a port other than the kubelet's).
func (a *Agent) servesPodIP(ip string) bool {
	if a.nodeIP != nil && a.nodeIP.String() == ip {
		return true
	}
	for _, p := range listPods(a.podLister) {
		for _, pip := range p.Status.PodIPs {
			if pip.IP == ip {
				return true
			}
		}
	}
	return false
}

// podConnectProtocol is the Upgrade token of /podConnect: after the
// switch, the connection carries the pod's TCP stream as it is.
const podConnectProtocol = "svcnet-tcp"

// podConnect opens a TCP connection from the node's network namespace to
// one of this node's pods (POST /podConnect/{ip:port}, upgraded to
// podConnectProtocol) and joins the API server's connection to it, so
// that the API server can speak TLS of its own with the pod: the
// admission webhooks behind a Service are called this way. The streams
// end when either side closes, or when the server stops.
func (s *server) podConnect(w http.ResponseWriter, r *http.Request) {
	hostPort := r.PathValue("hostport")
	host, _, err := net.SplitHostPort(hostPort)
	switch {
	case err != nil:
		writeStatus(w, apierrors.NewBadRequest(fmt.Sprintf("invalid address %q", hostPort)))
		return
	case !strings.EqualFold(r.Header.Get("Upgrade"), podConnectProtocol):
		writeStatus(w, apierrors.NewBadRequest("the connection must be upgraded to "+podConnectProtocol))
		return
	case !s.agent.servesPodIP(host):
		writeStatus(w, apierrors.NewBadRequest(fmt.Sprintf("%s is no pod of node %s", host, s.agent.cfg.NodeName)))
		return
	}
	pod, err := s.agent.net.Dialer().DialContext(r.Context(), "tcp", hostPort)
	if err != nil {
		writeStatus(w, apierrors.NewServiceUnavailable(fmt.Sprintf("error trying to reach service: %v", err)))
		return
	}
	defer pod.Close()
	hj, ok := w.(http.Hijacker)
	if !ok {
		writeStatus(w, apierrors.NewInternalError(errors.New("the connection cannot be taken over")))
		return
	}
	client, buf, err := hj.Hijack()
	if err != nil {
		return
	}
	defer client.Close()
	stop := context.AfterFunc(r.Context(), func() { client.Close(); pod.Close() })
	defer stop()
	if _, err := fmt.Fprintf(client, "HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: %s\r\n\r\n", podConnectProtocol); err != nil {
		return
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		_, _ = io.Copy(pod, buf)
		closeWrite(pod)
	}()
	_, _ = io.Copy(client, pod)
	closeWrite(client)
	<-done
}

// closeWrite half-closes a connection that can, else closes it.
func closeWrite(c net.Conn) {
	if cw, ok := c.(interface{ CloseWrite() error }); ok {
		_ = cw.CloseWrite()
		return
	}
	_ = c.Close()
}
