package apiserver

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"strconv"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/proxy"

	"github.com/svcnet/svcnet/internal/admission"
	"github.com/svcnet/svcnet/internal/registry"
	nodereg "github.com/svcnet/svcnet/internal/registry/node"
)

// streamSubresources are the pods' connect subresources, which
// kube-apiserver proxies to the kubelet with the upgraded connection
// (kubectl speaks WebSocket or SPDY; the node agent speaks both).
var streamSubresources = map[string]bool{"exec": true, "attach": true, "portforward": true}

// servePodStream answers pods/exec, pods/attach and pods/portforward
// (GET or POST): it checks the request as kube-apiserver does, then passes
// the upgrade through to the agent of the pod's node, whose answer (the
// switch of protocols, or an error) goes back to the client as it is.
func (s *Server) servePodStream(w http.ResponseWriter, r *http.Request, ri *requestInfo) error {
	if r.Method != http.MethodGet && r.Method != http.MethodPost {
		return apierrors.NewMethodNotSupported(corev1.Resource("pods/"+ri.subresource), ri.verb)
	}
	obj, err := s.get(r.Context(), ri.res, ri.namespace, ri.name)
	if err != nil {
		return err
	}
	pod := obj.(*corev1.Pod)
	path, query, err := kubeletStreamPath(pod, ri.subresource, r.URL.Query())
	if err != nil {
		return err
	}
	// As upstream's connect handler: admission sees a CONNECT of the
	// request's options.
	opts := connectOptions(ri.subresource, r.URL.Query())
	if err := s.mutate(r.Context(), admission.Connect, ri.res, ri.subresource, ri.namespace, ri.name, opts, nil, false); err != nil {
		return err
	}
	if err := s.admit(r.Context(), admission.Connect, ri.res, ri.subresource, ri.namespace, ri.name, opts, nil, false); err != nil {
		return err
	}
	if pod.Spec.NodeName == "" {
		return apierrors.NewBadRequest(fmt.Sprintf("pod %s does not have a host assigned", pod.Name))
	}
	host, err := s.kubeletHost(r.Context(), pod.Spec.NodeName)
	if err != nil {
		return err
	}
	target := &url.URL{Scheme: "https", Host: host, Path: path, RawQuery: query.Encode()}
	h := proxy.NewUpgradeAwareHandler(target, s.kubelet.Transport, false, true, proxyResponder{})
	h.ServeHTTP(w, r)
	return nil
}

// connectOptions are a stream request's options as their kind
// (PodExecOptions, PodAttachOptions, PodPortForwardOptions), as
// admission sees them; the query is checked by kubeletStreamPath.
func connectOptions(sub string, q url.Values) runtime.Object {
	flag := func(name string) bool {
		b, _ := strconv.ParseBool(q.Get(name))
		return b
	}
	var opts runtime.Object
	switch sub {
	case "portforward":
		pf := &corev1.PodPortForwardOptions{}
		for _, p := range q["ports"] {
			if n, err := strconv.ParseUint(p, 10, 16); err == nil {
				pf.Ports = append(pf.Ports, int32(n))
			}
		}
		opts = pf
	case "exec":
		opts = &corev1.PodExecOptions{Stdin: flag("stdin"), Stdout: flag("stdout"), Stderr: flag("stderr"), TTY: flag("tty"),
			Container: q.Get("container"), Command: q["command"]}
	default:
		opts = &corev1.PodAttachOptions{Stdin: flag("stdin"), Stdout: flag("stdout"), Stderr: flag("stderr"), TTY: flag("tty"),
			Container: q.Get("container")}
	}
	registry.SetKind(opts)
	return opts
}

// kubeletStreamPath is the agent's path and query for a stream request,
// with the options checked as upstream checks them.
func kubeletStreamPath(pod *corev1.Pod, sub string, q url.Values) (string, url.Values, error) {
	if sub == "portforward" {
		out := url.Values{}
		for _, p := range q["ports"] {
			n, err := strconv.ParseUint(p, 10, 16)
			if err != nil || n == 0 {
				return "", nil, apierrors.NewBadRequest(fmt.Sprintf("invalid port %q", p))
			}
			out.Add("port", p)
		}
		return "/portForward/" + pod.Namespace + "/" + pod.Name, out, nil
	}
	container, err := logContainer(pod, q.Get("container"))
	if err != nil {
		return "", nil, err
	}
	out := url.Values{}
	streams := false
	for _, p := range []struct{ from, to string }{
		{"stdin", corev1.ExecStdinParam}, {"stdout", corev1.ExecStdoutParam}, {"stderr", corev1.ExecStderrParam}, {"tty", corev1.ExecTTYParam},
	} {
		if v := q.Get(p.from); v != "" {
			b, err := strconv.ParseBool(v)
			if err != nil {
				return "", nil, apierrors.NewBadRequest(fmt.Sprintf("%s: Invalid value: %q", p.from, v))
			}
			if b {
				out.Set(p.to, "1")
				streams = streams || p.from != "tty"
			}
		}
	}
	if !streams {
		return "", nil, apierrors.NewBadRequest("you must specify at least 1 of stdin, stdout, stderr")
	}
	if sub == "exec" {
		if len(q["command"]) == 0 {
			return "", nil, apierrors.NewBadRequest("you must specify at least one command for the container")
		}
		out["command"] = q["command"]
	}
	return "/" + sub + "/" + pod.Namespace + "/" + pod.Name + "/" + container, out, nil
}

// kubeletHost is host:port of the agent of the node named.
func (s *Server) kubeletHost(ctx context.Context, nodeName string) (string, error) {
	nodeObj, err := s.get(ctx, s.resources.ByGVR(corev1.SchemeGroupVersion.WithResource("nodes")), "", nodeName)
	if err != nil {
		return "", err
	}
	endpoint, err := nodereg.KubeletEndpoint(nodeObj.(*corev1.Node))
	if err != nil {
		return "", apierrors.NewServiceUnavailable(err.Error())
	}
	return endpoint, nil
}

// proxyResponder answers a failure to reach the agent as kube-apiserver
// does: a Status with the error's text.
type proxyResponder struct{}

func (proxyResponder) Error(w http.ResponseWriter, r *http.Request, err error) {
	writeError(w, r, &apierrors.StatusError{ErrStatus: metav1.Status{
		Status: metav1.StatusFailure, Code: http.StatusInternalServerError, Message: err.Error(),
	}})
}
