package node

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/json"
	"k8s.io/client-go/rest"

	"github.com/svcnet/svcnet/internal/dns/lookup"
	"github.com/svcnet/svcnet/internal/httpserve"
	"github.com/svcnet/svcnet/internal/netns"
	"github.com/svcnet/svcnet/internal/nftrace"
	"github.com/svcnet/svcnet/internal/pki"
	"github.com/svcnet/svcnet/internal/proxy"
)

// server is the node's HTTPS endpoint for the API server, as the kubelet's
// port 10250: /containerLogs, /exec and /attach/{namespace}/{pod}/{container},
// /portForward/{namespace}/{pod}, /metrics, /metrics/resource, /stats/summary,
// /pods, /logs/ and /healthz; and svcnet's /proxy/frontends, the Service
// proxy's data plane read back, /dns/resolve, a question to the
// cluster DNS from the node's network, and /proxy/trace, one connection
// from a pod followed through the node's netfilter (internal/nftrace).
// Clients must present a certificate of the
// cluster's CA: the API server's, which reaches these paths through the
// nodes/proxy subresource once its authorizer has allowed that, as
// kube-apiserver reaches the kubelet.
type server struct {
	agent  *Agent
	ln     net.Listener
	tls    *tls.Config
	tracer *nftrace.Tracer
}

// newServer listens on the configured address with a certificate of the
// node's own CA in the data dir.
func newServer(a *Agent) (*server, error) {
	clientCAs, err := clusterCAs(a.cfg.REST)
	if err != nil {
		return nil, err
	}
	listen := net.Listen
	if a.cfg.ListenInNodeNamespace {
		listen = a.net.Listen
	}
	ln, err := listen("tcp", a.cfg.ListenAddress)
	if err != nil {
		return nil, fmt.Errorf("listen on %s: %w", a.cfg.ListenAddress, err)
	}
	dir := filepath.Join(a.cfg.DataDir, "pki")
	ca, err := pki.LoadOrCreateCA(dir)
	if err != nil {
		ln.Close()
		return nil, err
	}
	host, _, _ := net.SplitHostPort(ln.Addr().String())
	pair, err := ca.Serving(dir, "kubelet", []string{a.cfg.NodeName, "localhost"}, []net.IP{net.ParseIP(host), a.nodeIP})
	if err != nil {
		ln.Close()
		return nil, err
	}
	cert, err := pair.TLS()
	if err != nil {
		ln.Close()
		return nil, fmt.Errorf("load kubelet certificate: %w", err)
	}
	return &server{agent: a, ln: ln, tls: &tls.Config{
		Certificates: []tls.Certificate{cert},
		ClientAuth:   tls.RequireAndVerifyClientCert,
		ClientCAs:    clientCAs,
		MinVersion:   tls.VersionTLS12,
	}, tracer: nftrace.New(netns.Path(a.cfg.NetNS))}, nil
}

// clusterCAs is the CA the API client trusts, which also signs the API
// server's client certificate.
func clusterCAs(cfg *rest.Config) (*x509.CertPool, error) {
	data := cfg.CAData
	if len(data) == 0 && cfg.CAFile != "" {
		b, err := os.ReadFile(cfg.CAFile)
		if err != nil {
			return nil, fmt.Errorf("read cluster CA: %w", err)
		}
		data = b
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(data) {
		return nil, errors.New("the kubeconfig holds no cluster CA to verify the API server's client certificate with")
	}
	return pool, nil
}

// endpoint is where the API server reaches this server.
func (s *server) endpoint() string {
	host, port, _ := net.SplitHostPort(s.ln.Addr().String())
	if ip := net.ParseIP(host); ip == nil || ip.IsUnspecified() {
		host = s.agent.nodeIP.String()
	}
	return net.JoinHostPort(host, port)
}

func (s *server) port() int32 {
	_, port, _ := net.SplitHostPort(s.ln.Addr().String())
	n, _ := strconv.Atoi(port)
	return int32(n)
}

func (s *server) serve(ctx context.Context) error {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, r *http.Request) { _, _ = w.Write([]byte("ok")) })
	mux.HandleFunc("GET /containerLogs/{namespace}/{pod}/{container}", s.containerLogs)
	mux.Handle("GET /metrics", s.agent.kubeletMetrics())
	mux.Handle("GET /metrics/resource", s.agent.resourceMetrics())
	mux.HandleFunc("GET /stats/summary", s.agent.summary)
	mux.HandleFunc("/podProxy/{scheme}/{hostport}/{path...}", s.podProxy)
	mux.HandleFunc("POST /podConnect/{hostport}", s.podConnect)
	mux.HandleFunc("GET /pods", s.pods)
	mux.HandleFunc("GET /"+lookup.Path, s.dnsResolve)
	if s.agent.cfg.ProxyFrontends != nil {
		mux.HandleFunc("GET /proxy/frontends", s.proxyFrontends)
	}
	mux.HandleFunc("POST /"+nftrace.Path, s.proxyTrace)
	// As the kubelet's /logs/: the node's log directory, listed and read.
	mux.Handle("GET /logs/", http.StripPrefix("/logs/", http.FileServer(http.Dir(nodeLogDir))))
	for _, m := range []string{"GET", "POST"} {
		mux.HandleFunc(m+" /exec/{namespace}/{pod}/{container}", s.exec)
		mux.HandleFunc(m+" /attach/{namespace}/{pod}/{container}", s.attach)
		mux.HandleFunc(m+" /portForward/{namespace}/{pod}", s.portForward)
	}
	if err := httpserve.ServeTLS(ctx, s.ln, mux, s.tls, 2*time.Second); err != nil {
		return fmt.Errorf("serve kubelet API: %w", err)
	}
	return nil
}

// nodeLogDir is the directory the kubelet serves at /logs/.
const nodeLogDir = "/var/log"

// pods serves the pods bound to this node as a v1 PodList, as the
// kubelet's /pods.
func (s *server) pods(w http.ResponseWriter, _ *http.Request) {
	list := &corev1.PodList{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "PodList"}}
	for _, p := range listPods(s.agent.podLister) {
		list.Items = append(list.Items, *p)
	}
	w.Header().Set("Content-Type", "application/json")
	if err := json.NewEncoder(w).Encode(list); err != nil {
		slog.Debug("write /pods", "err", err)
	}
}

// proxyFrontends serves the Service proxy's frontends, read back from its
// data plane, as a proxy.FrontendList: only those of the Service its
// query's service names (namespace/name), if it does.
func (s *server) proxyFrontends(w http.ResponseWriter, r *http.Request) {
	list, err := s.agent.cfg.ProxyFrontends.ListFrontends(r.Context(), r.URL.Query().Get("service"))
	if err != nil {
		writeStatus(w, fmt.Errorf("read the Service proxy's data plane: %w", err))
		return
	}
	if list.Frontends == nil {
		list.Frontends = []proxy.Frontend{}
	}
	w.Header().Set("Content-Type", "application/json")
	if err := json.NewEncoder(w).Encode(list); err != nil {
		slog.Debug("write /proxy/frontends", "err", err)
	}
}

// proxyTrace follows a connection from one of this node's pods, an
// nftrace.Request, and answers an nftrace.Result.
func (s *server) proxyTrace(w http.ResponseWriter, r *http.Request) {
	var req nftrace.Request
	body, err := io.ReadAll(io.LimitReader(r.Body, 1<<16))
	if err == nil {
		err = json.Unmarshal(body, &req)
	}
	if err != nil {
		writeStatus(w, apierrors.NewBadRequest(fmt.Sprintf("read the trace request: %v", err)))
		return
	}
	if err := req.Validate(); err != nil {
		writeStatus(w, apierrors.NewBadRequest(err.Error()))
		return
	}
	pod, err := s.agent.podLister.Pods(req.Namespace).Get(req.Pod)
	if err != nil {
		writeStatus(w, apierrors.NewNotFound(schema.GroupResource{Resource: "pods"}, req.Pod))
		return
	}
	rec, err := s.agent.loadPodRecord(string(pod.UID))
	if err != nil || rec.IP == "" {
		writeStatus(w, apierrors.NewServiceUnavailable(fmt.Sprintf("pod %s/%s has no network on node %s yet", req.Namespace, req.Pod, s.agent.cfg.NodeName)))
		return
	}
	src := nftrace.Source{IP: rec.IP, NetNS: rec.NetNS, ResolvConf: filepath.Join(s.agent.rt.podDir(string(pod.UID)), "etc", "resolv.conf")}
	res, err := s.tracer.Trace(r.Context(), src, req)
	if err != nil {
		writeStatus(w, fmt.Errorf("trace from pod %s/%s: %w", req.Namespace, req.Pod, err))
		return
	}
	res.Node = s.agent.cfg.NodeName
	w.Header().Set("Content-Type", "application/json")
	if err := json.NewEncoder(w).Encode(res); err != nil {
		slog.Debug("write /proxy/trace", "err", err)
	}
}

// containerLogs serves one container's log with pods/log's options.
func (s *server) containerLogs(w http.ResponseWriter, r *http.Request) {
	ns, name, cname := r.PathValue("namespace"), r.PathValue("pod"), r.PathValue("container")
	pod, err := s.agent.podLister.Pods(ns).Get(name)
	if err != nil {
		writeStatus(w, apierrors.NewNotFound(schema.GroupResource{Resource: "pods"}, name))
		return
	}
	opts, err := parseLogOptions(r)
	if err != nil {
		writeStatus(w, apierrors.NewBadRequest(err.Error()))
		return
	}
	previous := r.URL.Query().Get("previous") == "true"
	if isMirrorPod(pod) {
		s.staticPodLogs(w, r, pod, cname, previous, opts)
		return
	}
	c, err := s.agent.logRun(pod, cname, previous)
	if err != nil {
		writeStatus(w, err)
		return
	}
	w.Header().Set("Content-Type", "text/plain")
	w.Header().Set("Transfer-Encoding", "chunked")
	fw := &flushWriter{w: w}
	fw.flush()
	if err := s.agent.rt.readLog(r.Context(), c, opts, fw); err != nil {
		slog.Debug("serve container log", "pod", ns+"/"+name, "container", cname, "err", err)
	}
}

// staticPodLogs serves the log of a component that a mirror pod shows:
// one container that has not restarted, logging as long as the node runs.
func (s *server) staticPodLogs(w http.ResponseWriter, r *http.Request, pod *corev1.Pod, cname string, previous bool, opts logOptions) {
	sp := s.agent.static.byName(pod.Namespace, pod.Name)
	if sp == nil {
		writeStatus(w, apierrors.NewNotFound(schema.GroupResource{Resource: "pods"}, pod.Name))
		return
	}
	if specContainer(sp.pod, cname) == nil {
		writeStatus(w, apierrors.NewBadRequest(fmt.Sprintf("container %s is not valid for pod %s", cname, pod.Name)))
		return
	}
	if previous {
		writeStatus(w, apierrors.NewBadRequest(fmt.Sprintf("previous terminated container %q in pod %q not found", cname, pod.Name)))
		return
	}
	if started, _, _ := sp.state(); started.IsZero() {
		writeStatus(w, apierrors.NewBadRequest(fmt.Sprintf("container %q in pod %q is waiting to start: ContainerCreating", cname, pod.Name)))
		return
	}
	w.Header().Set("Content-Type", "text/plain")
	w.Header().Set("Transfer-Encoding", "chunked")
	fw := &flushWriter{w: w}
	fw.flush()
	if err := readLogFile(r.Context(), sp.Log, opts, fw, func() bool { return false }); err != nil {
		slog.Debug("serve static pod log", "pod", klogRef(pod), "container", cname, "err", err)
	}
}

// flushWriter flushes after each write, for followed logs.
type flushWriter struct{ w http.ResponseWriter }

func (f *flushWriter) Write(p []byte) (int, error) { return f.w.Write(p) }
func (f *flushWriter) Flush()                      { f.flush() }
func (f *flushWriter) flush() {
	if fl, ok := f.w.(http.Flusher); ok {
		fl.Flush()
	}
}

func parseLogOptions(r *http.Request) (logOptions, error) {
	q := r.URL.Query()
	o := logOptions{follow: q.Get("follow") == "true", timestamps: q.Get("timestamps") == "true"}
	for _, p := range []struct {
		name string
		into **int64
	}{{"tailLines", &o.tailLines}, {"limitBytes", &o.limitBytes}} {
		if v := q.Get(p.name); v != "" {
			n, err := strconv.ParseInt(v, 10, 64)
			if err != nil || n < 0 {
				return o, fmt.Errorf("invalid %s %q", p.name, v)
			}
			*p.into = &n
		}
	}
	if v := q.Get("sinceSeconds"); v != "" {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n < 1 {
			return o, fmt.Errorf("invalid sinceSeconds %q", v)
		}
		o.since = time.Now().Add(-time.Duration(n) * time.Second)
	}
	if v := q.Get("sinceTime"); v != "" {
		t, err := time.Parse(time.RFC3339, v)
		if err != nil {
			return o, fmt.Errorf("invalid sinceTime %q", v)
		}
		o.since = t
	}
	return o, nil
}

// logRun picks the container run whose log is asked for, with the
// kubelet's errors for a container that has none yet.
func (a *Agent) logRun(pod *corev1.Pod, name string, previous bool) (*container, error) {
	if specContainer(pod, name) == nil {
		return nil, apierrors.NewBadRequest(fmt.Sprintf("container %s is not valid for pod %s", name, pod.Name))
	}
	runs, err := a.rt.containers(string(pod.UID))
	if err != nil {
		return nil, apierrors.NewInternalError(err)
	}
	var mine []*container
	for _, c := range runs {
		if c.Spec.Name == name {
			mine = append(mine, c)
		}
	}
	if previous {
		if len(mine) < 2 {
			return nil, apierrors.NewBadRequest(fmt.Sprintf("previous terminated container %q in pod %q not found", name, pod.Name))
		}
		return mine[len(mine)-2], nil
	}
	if len(mine) == 0 {
		reason := "ContainerCreating"
		for _, cs := range append(append([]corev1.ContainerStatus{}, pod.Status.InitContainerStatuses...), pod.Status.ContainerStatuses...) {
			if cs.Name == name && cs.State.Waiting != nil && cs.State.Waiting.Reason != "" {
				reason = cs.State.Waiting.Reason
			}
		}
		return nil, apierrors.NewBadRequest(fmt.Sprintf("container %q in pod %q is waiting to start: %s", name, pod.Name, strings.TrimSpace(reason)))
	}
	return mine[len(mine)-1], nil
}

// writeStatus answers an API error as a Status object.
func writeStatus(w http.ResponseWriter, err error) {
	var se apierrors.APIStatus
	st := metav1.Status{Status: metav1.StatusFailure, Message: err.Error(), Code: http.StatusInternalServerError}
	if errors.As(err, &se) {
		st = se.Status()
	}
	st.Kind, st.APIVersion = "Status", "v1"
	b, _ := json.Marshal(st)
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(int(st.Code))
	_, _ = w.Write(b)
}
