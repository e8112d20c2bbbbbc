package node

import (
	"crypto/tls"
	"fmt"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"

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
