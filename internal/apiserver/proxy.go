package apiserver

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	utilnet "k8s.io/apimachinery/pkg/util/net"
	"k8s.io/apimachinery/pkg/util/proxy"
	"k8s.io/utils/ptr"

	nodereg "github.com/svcnet/svcnet/internal/registry/node"
)

// proxySubresource is pods/proxy, services/proxy and nodes/proxy:
// kube-apiserver passes the request on to the pod (or to one of the
// Service's ready endpoints, or to the node's kubelet) at
// `[scheme:]name[:port]`, the rest of the path after `/proxy` being the
// target's path. kube-apiserver dials the pod itself; here the agent of
// the pod's node does, as it does for exec (the node's network namespace
// is where pod IPs route), at its /podProxy endpoint.
const proxySubresource = "proxy"

// proxyPath is the target's path of a proxy request: what follows
// /{resource}/{name}/proxy in the request's path ("" when nothing does).
func proxyPath(r *http.Request, ri *requestInfo) string {
	marker := "/" + ri.res.Resource + "/" + ri.name + "/" + proxySubresource
	_, rest, _ := strings.Cut(r.URL.Path, marker)
	return rest
}

// serveProxy answers pods/proxy, services/proxy and nodes/proxy.
func (s *Server) serveProxy(w http.ResponseWriter, r *http.Request, ri *requestInfo) error {
	scheme, name, port, ok := utilnet.SplitSchemeNamePort(ri.name)
	if !ok || name == "" {
		return apierrors.NewBadRequest(fmt.Sprintf("invalid request %q", ri.name))
	}
	if ri.res.Resource == "nodes" {
		target, err := s.nodeTarget(r.Context(), ri, scheme, name, port)
		if err != nil {
			return err
		}
		s.proxyTo(w, r, ri, target)
		return nil
	}
	if scheme == "" {
		scheme = "http"
	}
	var nodeName, ip string
	var err error
	switch ri.res.Resource {
	case "pods":
		nodeName, ip, port, err = s.podTarget(r.Context(), ri, name, port)
	case "services":
		nodeName, ip, port, err = s.serviceTarget(r.Context(), ri.namespace, name, port, ri.name)
	default:
		return apierrors.NewNotFound(ri.res.GroupResource(), ri.name)
	}
	if err != nil {
		return err
	}
	host, err := s.kubeletHost(r.Context(), nodeName)
	if err != nil {
		return err
	}
	s.proxyTo(w, r, ri, viaAgent(host, scheme, ip, port))
	return nil
}

// proxyTo passes r on to target (the agent's URL, without the target's
// path) as kube-apiserver's proxy subresources do: the answer's links and
// redirects that point into the target are rewritten to come through the
// API server again, below the request's path up to the target's, and the
// target's CORS headers are dropped (the upgrade-aware handler's wrapped
// transport, which keys the prefix on a location path of the target's
// own and so cannot be used with the agent's).
func (s *Server) proxyTo(w http.ResponseWriter, r *http.Request, ri *requestInfo, target *url.URL) {
	path := proxyPath(r, ri)
	if path == "" {
		// As upstream, a GET of the target's root without its slash is
		// sent to the path with it.
		if r.Method == http.MethodGet || r.Method == http.MethodHead {
			loc := r.URL.Path + "/"
			if r.URL.RawQuery != "" {
				loc += "?" + r.URL.RawQuery
			}
			w.Header().Set("Location", loc)
			w.WriteHeader(http.StatusMovedPermanently)
			return
		}
		path = "/"
	}
	target.Path += path
	target.RawQuery = r.URL.RawQuery
	rewriting := &proxy.Transport{Scheme: r.URL.Scheme, Host: r.URL.Host,
		PathPrepend: strings.TrimSuffix(r.URL.Path, path), RoundTripper: s.kubelet.Transport}
	proxy.NewUpgradeAwareHandler(target, corsRemoving{rewriting}, false, false, proxyResponder{}).ServeHTTP(w, r)
}

// corsRemoving drops the CORS headers of a proxied answer, as
// kube-apiserver's proxy does.
type corsRemoving struct{ http.RoundTripper }

func (rt corsRemoving) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := rt.RoundTripper.RoundTrip(req)
	if err != nil {
		return nil, err
	}
	for _, h := range []string{"Access-Control-Allow-Credentials", "Access-Control-Allow-Headers", "Access-Control-Allow-Methods", "Access-Control-Allow-Origin"} {
		resp.Header.Del(h)
	}
	return resp, nil
}

// WrappedRoundTripper lets an upgrade find the TLS configuration below.
func (rt corsRemoving) WrappedRoundTripper() http.RoundTripper { return rt.RoundTripper }

// viaAgent is the URL of the /podProxy endpoint at which the agent
// serving at host reaches ip:port with scheme, without the target's path.
func viaAgent(host, scheme, ip, port string) *url.URL {
	hostPort := ip
	if port != "" {
		hostPort = net.JoinHostPort(ip, port)
	}
	return &url.URL{Scheme: "https", Host: host, Path: "/podProxy/" + scheme + "/" + hostPort}
}

// nodeTarget is where nodes/proxy goes, as upstream's node
// ResourceLocation: the node's kubelet when no port is given or the
// kubelet's port is (whatever the scheme asked), else the port given on
// the node's address with the scheme asked (http by default), which the
// node's agent dials from the node's network namespace.
func (s *Server) nodeTarget(ctx context.Context, ri *requestInfo, scheme, name, port string) (*url.URL, error) {
	obj, err := s.get(ctx, ri.res, "", name)
	if err != nil {
		return nil, err
	}
	n := obj.(*corev1.Node)
	host, err := nodereg.KubeletEndpoint(n)
	if err != nil {
		return nil, apierrors.NewServiceUnavailable(err.Error())
	}
	if port == "" || port == strconv.Itoa(int(n.Status.DaemonEndpoints.KubeletEndpoint.Port)) {
		return &url.URL{Scheme: "https", Host: host}, nil
	}
	ip := nodereg.PreferredAddress(n)
	if ip == "" {
		return nil, apierrors.NewServiceUnavailable(fmt.Sprintf("node %q reports no address", name))
	}
	if scheme == "" {
		scheme = "http"
	}
	return viaAgent(host, scheme, ip, port), nil
}

// podTarget is the node, IP and port of pods/proxy's pod: the port given,
// else the first one its containers declare, as upstream's.
func (s *Server) podTarget(ctx context.Context, ri *requestInfo, name, port string) (node, ip, p string, err error) {
	obj, err := s.get(ctx, ri.res, ri.namespace, name)
	if err != nil {
		return "", "", "", err
	}
	pod := obj.(*corev1.Pod)
	if port == "" {
		for _, c := range pod.Spec.Containers {
			if len(c.Ports) > 0 {
				port = strconv.Itoa(int(c.Ports[0].ContainerPort))
				break
			}
		}
	}
	if pod.Spec.NodeName == "" || pod.Status.PodIP == "" {
		return "", "", "", apierrors.NewServiceUnavailable(fmt.Sprintf("pod %s has no IP yet", name))
	}
	// As upstream's IsProxyableIP: never the node's own loopback or
	// link-local addresses (a hostNetwork pod's IP is the node's).
	if ip := net.ParseIP(pod.Status.PodIP); ip == nil || ip.IsLoopback() || ip.IsLinkLocalUnicast() || ip.IsLinkLocalMulticast() || ip.IsUnspecified() {
		return "", "", "", apierrors.NewBadRequest("address not allowed")
	}
	return pod.Spec.NodeName, pod.Status.PodIP, port, nil
}

// serviceTarget is the node, IP and port of a ready endpoint of a
// Service, chosen at random, for the Service port named or numbered (the
// only one when none is given), as upstream's services/proxy; id names
// the Service in errors.
func (s *Server) serviceTarget(ctx context.Context, namespace, name, port, id string) (node, ip, p string, err error) {
	obj, err := s.get(ctx, s.resources.ByGVR(corev1.SchemeGroupVersion.WithResource("services")), namespace, name)
	if err != nil {
		return "", "", "", err
	}
	svc := obj.(*corev1.Service)
	var sp *corev1.ServicePort
	for i := range svc.Spec.Ports {
		cand := &svc.Spec.Ports[i]
		if (port == "" && len(svc.Spec.Ports) == 1) || cand.Name == port || strconv.Itoa(int(cand.Port)) == port {
			sp = cand
			break
		}
	}
	if sp == nil {
		return "", "", "", apierrors.NewServiceUnavailable(fmt.Sprintf("no endpoints available for service %q", id))
	}
	esRes := s.resources.ByGVR(discoveryv1.SchemeGroupVersion.WithResource("endpointslices"))
	sel, err := newSelector(esRes, labels.Set{discoveryv1.LabelServiceName: name}.String(), "")
	if err != nil {
		return "", "", "", err
	}
	list, err := s.listObjects(ctx, esRes, namespace, &metav1.ListOptions{}, sel, false)
	if err != nil {
		return "", "", "", err
	}
	type candidate struct{ node, ip, port string }
	var ready []candidate
	for _, obj := range list.Items {
		es := obj.(*discoveryv1.EndpointSlice)
		var epPort int32
		for _, p := range es.Ports {
			if ptr.Deref(p.Name, "") == sp.Name && p.Port != nil {
				epPort = *p.Port
			}
		}
		if epPort == 0 {
			continue
		}
		for _, ep := range es.Endpoints {
			if ep.Conditions.Ready != nil && !*ep.Conditions.Ready || ep.NodeName == nil || len(ep.Addresses) == 0 {
				continue
			}
			ready = append(ready, candidate{*ep.NodeName, ep.Addresses[0], strconv.Itoa(int(epPort))})
		}
	}
	if len(ready) == 0 {
		return "", "", "", apierrors.NewServiceUnavailable(fmt.Sprintf("no endpoints available for service %q", id))
	}
	c := ready[rand.IntN(len(ready))]
	return c.node, c.ip, c.port, nil
}

// DialService connects to a ready endpoint of a Service's port (its
// number), through the agent of the endpoint's node, where pod IPs
// route: as kube-apiserver reaches an admission webhook's Service with
// --enable-aggregator-routing.
func (s *Server) DialService(ctx context.Context, namespace, name string, port int32) (net.Conn, error) {
	node, ip, p, err := s.serviceTarget(ctx, namespace, name, strconv.Itoa(int(port)), namespace+"/"+name)
	if apierrors.IsNotFound(err) {
		// As kube-apiserver's resolver, which reads a Service lister.
		return nil, apierrors.NewNotFound(corev1.Resource("service"), name)
	}
	if err != nil {
		return nil, err
	}
	host, err := s.kubeletHost(ctx, node)
	if err != nil {
		return nil, err
	}
	return dialViaAgent(ctx, s.kubeletTLS, host, net.JoinHostPort(ip, p))
}

// dialViaAgent opens a TCP stream to target (a pod's ip:port) through
// the agent at host: the agent's /podConnect upgrades the connection to
// the pod's stream.
func dialViaAgent(ctx context.Context, tlsConfig *tls.Config, host, target string) (net.Conn, error) {
	conn, err := (&tls.Dialer{Config: tlsConfig}).DialContext(ctx, "tcp", host)
	if err != nil {
		return nil, fmt.Errorf("dial the node agent at %s: %w", host, err)
	}
	if deadline, ok := ctx.Deadline(); ok {
		_ = conn.SetDeadline(deadline)
	}
	req := &http.Request{Method: http.MethodPost, URL: &url.URL{Path: "/podConnect/" + target}, Host: host,
		Header: http.Header{"Connection": {"Upgrade"}, "Upgrade": {podConnectProtocol}}, ProtoMajor: 1, ProtoMinor: 1}
	br := bufio.NewReader(conn)
	resp, err := func() (*http.Response, error) {
		if err := req.Write(conn); err != nil {
			return nil, err
		}
		return http.ReadResponse(br, req)
	}()
	if err != nil {
		conn.Close()
		return nil, fmt.Errorf("connect to %s through the node agent at %s: %w", target, host, err)
	}
	if resp.StatusCode != http.StatusSwitchingProtocols {
		body, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
		conn.Close()
		return nil, fmt.Errorf("connect to %s through the node agent at %s: %s: %s", target, host, resp.Status, bytes.TrimSpace(body))
	}
	_ = conn.SetDeadline(time.Time{})
	return &bufferedConn{Conn: conn, r: br}, nil
}

// podConnectProtocol is the Upgrade token of the agent's /podConnect.
const podConnectProtocol = "svcnet-tcp"

// bufferedConn reads what its reader buffered before the connection.
type bufferedConn struct {
	net.Conn
	r *bufio.Reader
}

func (c *bufferedConn) Read(p []byte) (int, error) { return c.r.Read(p) }
