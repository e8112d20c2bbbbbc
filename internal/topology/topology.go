// Package topology serves the live topology page of a cluster under the
// API server's /svcnet/topology/: Services → EndpointSlices → pods →
// nodes, kept current by the page's own watches of the API (the page is
// static; the browser lists and watches through the same origin that
// served it, kubectl proxy for a user), and the doctor's diagnosis of a
// Service on request. The API server authenticates and authorizes every
// request before it reaches this handler, and the doctor runs as the
// requesting user (impersonated through the API server's loopback
// client), so the page shows a user no more than the API would.
//
// The page's HTML, script and style sheet are embedded: it loads nothing
// from elsewhere and works offline.
package topology

import (
	"bytes"
	"context"
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/svcnet/svcnet/internal/apiserver"
	"github.com/svcnet/svcnet/internal/auth/authn"
	"github.com/svcnet/svcnet/internal/doctor"
)

// Path is where the page is served.
const Path = apiserver.TopologyPath

// diagnoseTimeout bounds one diagnosis (the doctor reads the API and each
// node's data plane).
const diagnoseTimeout = 30 * time.Second

//go:embed assets
var assets embed.FS

// asset is an embedded file with its content type and entity tag.
type asset struct {
	body        []byte
	contentType string
	etag        string
}

// Handler serves the page, its assets and the doctor endpoint.
type Handler struct {
	loopback *rest.Config
	assets   map[string]asset
	mux      *http.ServeMux
}

// New serves the page; loopback reaches the API server (apiserver's
// Loopback.Config()) and is used, impersonating the requesting user, to
// run the doctor.
func New(loopback *rest.Config) (*Handler, error) {
	h := &Handler{loopback: loopback, assets: map[string]asset{}, mux: http.NewServeMux()}
	for name, ct := range map[string]string{
		"index.html":   "text/html; charset=utf-8",
		"topology.js":  "text/javascript; charset=utf-8",
		"topology.css": "text/css; charset=utf-8",
	} {
		b, err := assets.ReadFile("assets/" + name)
		if err != nil {
			return nil, fmt.Errorf("topology page asset %s: %w", name, err)
		}
		sum := sha256.Sum256(b)
		h.assets[name] = asset{body: b, contentType: ct, etag: `"` + hex.EncodeToString(sum[:8]) + `"`}
	}
	h.mux.HandleFunc("GET /svcnet/topology", func(w http.ResponseWriter, r *http.Request) {
		// Relative, so that it works under a proxy's prefix too
		// (http.Redirect would make it absolute).
		w.Header().Set("Location", "topology/")
		w.WriteHeader(http.StatusMovedPermanently)
	})
	h.mux.HandleFunc("GET "+Path+"{$}", h.serveAsset("index.html"))
	h.mux.HandleFunc("GET "+Path+"topology.js", h.serveAsset("topology.js"))
	h.mux.HandleFunc("GET "+Path+"topology.css", h.serveAsset("topology.css"))
	h.mux.HandleFunc("GET "+Path+"api/namespaces/{namespace}/services/{name}/doctor", h.diagnose)
	return h, nil
}

// ServeHTTP answers a request the API server has authenticated and
// authorized.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("X-Content-Type-Options", "nosniff")
	// The page loads nothing but its own assets and talks to its own
	// origin only.
	w.Header().Set("Content-Security-Policy", "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; img-src 'self' data:; base-uri 'none'; form-action 'none'; frame-ancestors 'none'")
	w.Header().Set("Referrer-Policy", "no-referrer")
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		w.Header().Set("Allow", "GET, HEAD")
		writeStatus(w, apierrors.NewMethodNotSupported(schema.GroupResource{}, r.Method))
		return
	}
	if _, pattern := h.mux.Handler(r); pattern == "" {
		writeStatus(w, &apierrors.StatusError{ErrStatus: metav1.Status{Code: http.StatusNotFound,
			Reason: metav1.StatusReasonNotFound, Message: "the server could not find the requested resource"}})
		return
	}
	h.mux.ServeHTTP(w, r)
}

// serveAsset answers an embedded file, revalidated by its entity tag.
func (h *Handler) serveAsset(name string) http.HandlerFunc {
	a := h.assets[name]
	return func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", a.contentType)
		w.Header().Set("Cache-Control", "no-cache")
		w.Header().Set("ETag", a.etag)
		http.ServeContent(w, r, name, time.Time{}, bytes.NewReader(a.body))
	}
}

// Diagnosis is the doctor endpoint's answer: the doctor's report and,
// for each node, the Service's frontends in its data plane as lines
// (`10.96.0.10:53/UDP → 10.244.0.150:53/UDP`) or why they could not be
// read.
type Diagnosis struct {
	Report    *doctor.Report `json:"report"`
	DataPlane []NodeLines    `json:"dataPlane"`
}

// NodeLines is one node's frontends of a Service.
type NodeLines struct {
	Node  string   `json:"node"`
	Lines []string `json:"lines"`
	Error string   `json:"error,omitempty"`
}

// diagnose runs the doctor on one Service as the requesting user.
func (h *Handler) diagnose(w http.ResponseWriter, r *http.Request) {
	u, ok := authn.UserFrom(r.Context())
	if !ok {
		writeStatus(w, apierrors.NewUnauthorized("no user"))
		return
	}
	client, err := h.clientFor(u)
	if err != nil {
		slog.Error("topology page: doctor's client", "user", u.GetName(), "err", err)
		writeStatus(w, apierrors.NewInternalError(err))
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), diagnoseTimeout)
	defer cancel()
	ns, name := r.PathValue("namespace"), r.PathValue("name")
	report, err := doctor.Diagnose(ctx, client, ns, name, doctor.Options{DataPlane: doctor.NodesDataPlane(client),
		Resolver: doctor.NodesResolver(client), Core: client.CoreV1().RESTClient()})
	if err != nil {
		writeStatus(w, fmt.Errorf("diagnose service %s/%s: %w", ns, name, err))
		return
	}
	d := Diagnosis{Report: report, DataPlane: []NodeLines{}}
	for _, n := range report.DataPlane {
		l := NodeLines{Node: n.Node, Lines: []string{}, Error: n.Error}
		for _, f := range n.Frontends {
			l.Lines = append(l.Lines, f.String())
		}
		d.DataPlane = append(d.DataPlane, l)
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	if err := json.NewEncoder(w).Encode(d); err != nil {
		slog.Debug("topology page: write diagnosis", "err", err)
	}
}

// clientFor is a client of the API server acting as u.
func (h *Handler) clientFor(u user.Info) (kubernetes.Interface, error) {
	cfg := rest.CopyConfig(h.loopback)
	cfg.Impersonate = rest.ImpersonationConfig{UserName: u.GetName(), UID: u.GetUID(), Groups: u.GetGroups(), Extra: u.GetExtra()}
	c, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("client impersonating %s: %w", u.GetName(), err)
	}
	return c, nil
}

// writeStatus answers err as a metav1.Status: an API error keeps its
// code (the user's own 403, say), anything else is a 500.
func writeStatus(w http.ResponseWriter, err error) {
	var st metav1.Status
	var api apierrors.APIStatus
	if errors.As(err, &api) {
		st = api.Status()
		if st.Message != err.Error() {
			st.Message = err.Error()
		}
	} else {
		st = apierrors.NewInternalError(err).ErrStatus
	}
	st.Kind, st.APIVersion, st.Status = "Status", "v1", metav1.StatusFailure
	code := int(st.Code)
	if code == 0 {
		code = http.StatusInternalServerError
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(&st)
}
