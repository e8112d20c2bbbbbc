package apiserver

import (
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/httpstream/wsstream"
)

// servePodLog answers GET pods/{name}/log as kube-apiserver does: it picks
// and checks the container, then streams the log from the agent of the
// pod's node (its /containerLogs endpoint), flushing as bytes arrive so
// that `kubectl logs -f` follows, or in WebSocket messages to a client
// that upgrades.
func (s *Server) servePodLog(w http.ResponseWriter, r *http.Request, ri *requestInfo) error {
	if ri.verb != "get" {
		return apierrors.NewMethodNotSupported(ri.res.GroupResource(), ri.verb)
	}
	opts, err := logOptions(r.URL.Query())
	if err != nil {
		return err
	}
	obj, err := s.get(r.Context(), ri.res, ri.namespace, ri.name)
	if err != nil {
		return err
	}
	pod := obj.(*corev1.Pod)
	container, err := logContainer(pod, opts.Container)
	if err != nil {
		return err
	}
	if pod.Spec.NodeName == "" {
		// Not scheduled: nothing has run, so there is nothing to show.
		w.Header().Set("Content-Type", "text/plain")
		w.WriteHeader(http.StatusOK)
		return nil
	}
	endpoint, err := s.kubeletHost(r.Context(), pod.Spec.NodeName)
	if err != nil {
		return err
	}
	q := r.URL.Query()
	q.Del("container")
	q.Del("insecureSkipTLSVerifyBackend")
	target := url.URL{Scheme: "https", Host: endpoint, RawQuery: q.Encode(),
		Path: "/containerLogs/" + pod.Namespace + "/" + pod.Name + "/" + container}
	req, err := http.NewRequestWithContext(r.Context(), http.MethodGet, target.String(), nil)
	if err != nil {
		return apierrors.NewInternalError(err)
	}
	resp, err := s.kubelet.Do(req)
	if err != nil {
		return apierrors.NewServiceUnavailable(fmt.Sprintf("Get %q: %v", target.String(), err))
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return kubeletError(resp)
	}
	if wsstream.IsWebSocketRequest(r) {
		// As kube-apiserver answers a WebSocket client: the log in
		// messages of the protocol it asks for (binary.k8s.io,
		// base64.binary.k8s.io).
		_ = wsstream.NewReader(resp.Body, true, wsstream.NewDefaultReaderProtocols()).Copy(w, r)
		return nil
	}
	w.Header().Set("Content-Type", "text/plain")
	w.Header().Set("Transfer-Encoding", "chunked")
	w.WriteHeader(http.StatusOK)
	flusher, _ := w.(http.Flusher)
	buf := make([]byte, 32<<10)
	for {
		n, rerr := resp.Body.Read(buf)
		if n > 0 {
			if _, err := w.Write(buf[:n]); err != nil {
				return nil
			}
			if flusher != nil {
				flusher.Flush()
			}
		}
		if rerr != nil {
			return nil
		}
	}
}

// kubeletTLS is how the API server reaches node agents: with its client
// certificate, and, like kube-apiserver without
// --kubelet-certificate-authority, without verifying the agents' serving
// certificates.
func kubeletTLS(clientTLS *tls.Config) *tls.Config {
	cfg := &tls.Config{MinVersion: tls.VersionTLS12}
	if clientTLS != nil {
		cfg = clientTLS.Clone()
	}
	cfg.InsecureSkipVerify = true //nolint:gosec // upstream's default for kubelet connections
	return cfg
}

// logContainer is the container asked for, or the pod's only one, with
// kube-apiserver's messages.
func logContainer(pod *corev1.Pod, name string) (string, error) {
	names := func(cs []corev1.Container) string {
		var n []string
		for _, c := range cs {
			n = append(n, c.Name)
		}
		return strings.Join(n, " ")
	}
	if name == "" {
		switch len(pod.Spec.Containers) {
		case 1:
			return pod.Spec.Containers[0].Name, nil
		case 0:
			return "", apierrors.NewBadRequest(fmt.Sprintf("a container name must be specified for pod %s", pod.Name))
		}
		msg := fmt.Sprintf("a container name must be specified for pod %s, choose one of: [%s]", pod.Name, names(pod.Spec.Containers))
		if len(pod.Spec.InitContainers) > 0 {
			msg += fmt.Sprintf(" or one of the init containers: [%s]", names(pod.Spec.InitContainers))
		}
		return "", apierrors.NewBadRequest(msg)
	}
	for _, cs := range [][]corev1.Container{pod.Spec.Containers, pod.Spec.InitContainers} {
		for _, c := range cs {
			if c.Name == name {
				return name, nil
			}
		}
	}
	for _, c := range pod.Spec.EphemeralContainers {
		if c.Name == name {
			return name, nil
		}
	}
	return "", apierrors.NewBadRequest(fmt.Sprintf("container %s is not valid for pod %s", name, pod.Name))
}

// logOptions reads PodLogOptions from the query (the generated
// conversion lives in kube-apiserver, not in k8s.io/api) and applies
// upstream's checks.
func logOptions(q url.Values) (*corev1.PodLogOptions, error) {
	o := &corev1.PodLogOptions{Container: q.Get("container")}
	var msgs []string
	boolean := func(name string, into *bool) {
		if v := q.Get(name); v != "" {
			b, err := strconv.ParseBool(v)
			if err != nil {
				msgs = append(msgs, fmt.Sprintf("%s: Invalid value: %q", name, v))
			}
			*into = b
		}
	}
	integer := func(name string, into **int64) {
		if v := q.Get(name); v != "" {
			n, err := strconv.ParseInt(v, 10, 64)
			if err != nil {
				msgs = append(msgs, fmt.Sprintf("%s: Invalid value: %q", name, v))
			}
			*into = &n
		}
	}
	boolean("follow", &o.Follow)
	boolean("previous", &o.Previous)
	boolean("timestamps", &o.Timestamps)
	integer("sinceSeconds", &o.SinceSeconds)
	integer("tailLines", &o.TailLines)
	integer("limitBytes", &o.LimitBytes)
	if v := q.Get("sinceTime"); v != "" {
		t, err := time.Parse(time.RFC3339, v)
		if err != nil {
			msgs = append(msgs, fmt.Sprintf("sinceTime: Invalid value: %q", v))
		}
		o.SinceTime = &metav1.Time{Time: t}
	}
	if o.TailLines != nil && *o.TailLines < 0 {
		msgs = append(msgs, "tailLines: Invalid value: must be greater than or equal to 0")
	}
	if o.LimitBytes != nil && *o.LimitBytes < 1 {
		msgs = append(msgs, "limitBytes: Invalid value: must be greater than 0")
	}
	if o.SinceSeconds != nil && o.SinceTime != nil {
		msgs = append(msgs, "sinceSeconds: Forbidden: at most one of `sinceTime` or `sinceSeconds` may be specified")
	}
	if o.SinceSeconds != nil && *o.SinceSeconds < 1 {
		msgs = append(msgs, "sinceSeconds: Invalid value: must be greater than 0")
	}
	if len(msgs) > 0 {
		return nil, apierrors.NewBadRequest(strings.Join(msgs, ", "))
	}
	return o, nil
}

// kubeletError turns an agent's failure into the API error it reports.
func kubeletError(resp *http.Response) error {
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	var st metav1.Status
	if json.Unmarshal(body, &st) == nil && st.Kind == "Status" && st.Code != 0 {
		return &apierrors.StatusError{ErrStatus: st}
	}
	msg := strings.TrimSpace(string(body))
	if msg == "" {
		msg = errors.New(resp.Status).Error()
	}
	return apierrors.NewGenericServerResponse(resp.StatusCode, "get", corev1.Resource("pods/log"), "", msg, 0, false)
}
