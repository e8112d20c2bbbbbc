package topology

import (
	"encoding/json"
	"io/fs"
	"net/http"
	"net/http/httptest"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"

	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/client-go/rest"

	"github.com/svcnet/svcnet/internal/auth/authn"
)

// fakeAPI answers the doctor's reads: the Service default/typo (whose
// selector app=ngnix matches no pod), a pod app=nginx, 403 for the Service
// default/secret, and empty lists otherwise; it records the impersonation
// headers of each request.
type fakeAPI struct {
	mu      sync.Mutex
	headers []http.Header
}

var listKinds = map[string]string{
	"pods": "PodList", "services": "ServiceList", "endpointslices": "EndpointSliceList",
	"events": "EventList", "nodes": "NodeList", "endpoints": "EndpointsList",
}

func (f *fakeAPI) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	f.headers = append(f.headers, r.Header.Clone())
	f.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	p := r.URL.Path
	switch {
	case p == "/api/v1/namespaces/default/services/typo":
		_, _ = w.Write([]byte(`{"kind":"Service","apiVersion":"v1","metadata":{"name":"typo","namespace":"default"},
			"spec":{"selector":{"app":"ngnix"},"ports":[{"port":80,"protocol":"TCP","targetPort":80}],"clusterIP":"10.96.0.20","clusterIPs":["10.96.0.20"],"type":"ClusterIP"}}`))
		return
	case p == "/api/v1/namespaces/default/services/secret":
		w.WriteHeader(http.StatusForbidden)
		_, _ = w.Write([]byte(`{"kind":"Status","apiVersion":"v1","status":"Failure","reason":"Forbidden","code":403,
			"message":"services \"secret\" is forbidden: User \"alice\" cannot get resource \"services\" in API group \"\" in the namespace \"default\""}`))
		return
	case p == "/api/v1/namespaces/default/pods":
		_, _ = w.Write([]byte(`{"kind":"PodList","apiVersion":"v1","metadata":{},"items":[{"metadata":{"name":"nginx","namespace":"default","labels":{"app":"nginx"}},
			"spec":{"nodeName":"node-1","containers":[{"name":"nginx","image":"nginx:1.25"}]},"status":{"phase":"Running","podIP":"10.244.0.5"}}]}`))
		return
	}
	parts := strings.Split(strings.Trim(p, "/"), "/")
	kind, ok := listKinds[parts[len(parts)-1]]
	if !ok {
		w.WriteHeader(http.StatusNotFound)
		_, _ = w.Write([]byte(`{"kind":"Status","apiVersion":"v1","status":"Failure","reason":"NotFound","code":404}`))
		return
	}
	apiVersion := "v1"
	if parts[0] == "apis" {
		apiVersion = parts[1] + "/" + parts[2]
	}
	_ = json.NewEncoder(w).Encode(map[string]any{"kind": kind, "apiVersion": apiVersion, "metadata": map[string]any{}, "items": []any{}})
}

func newHandler(t *testing.T) (*Handler, *fakeAPI) {
	t.Helper()
	api := &fakeAPI{}
	srv := httptest.NewServer(api)
	t.Cleanup(srv.Close)
	h, err := New(&rest.Config{Host: srv.URL, QPS: -1})
	if err != nil {
		t.Fatal(err)
	}
	return h, api
}

func serve(h http.Handler, r *http.Request) *httptest.ResponseRecorder {
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	return w
}

func TestAssets(t *testing.T) {
	h, _ := newHandler(t)
	for _, c := range []struct{ path, contentType, contains string }{
		{Path, "text/html; charset=utf-8", `<script src="topology.js"`},
		{Path + "topology.js", "text/javascript; charset=utf-8", "window.topologyReady"},
		{Path + "topology.css", "text/css; charset=utf-8", ".vlist"},
	} {
		w := serve(h, httptest.NewRequest(http.MethodGet, c.path, nil))
		if w.Code != http.StatusOK || w.Header().Get("Content-Type") != c.contentType || !strings.Contains(w.Body.String(), c.contains) {
			t.Errorf("GET %s: %d %q, want 200 %q with %q", c.path, w.Code, w.Header().Get("Content-Type"), c.contentType, c.contains)
		}
		if csp := w.Header().Get("Content-Security-Policy"); !strings.Contains(csp, "default-src 'none'") || !strings.Contains(csp, "connect-src 'self'") {
			t.Errorf("GET %s: Content-Security-Policy %q", c.path, csp)
		}
		if w.Header().Get("X-Content-Type-Options") != "nosniff" {
			t.Errorf("GET %s: no X-Content-Type-Options: nosniff", c.path)
		}
		// Revalidated by its entity tag.
		r := httptest.NewRequest(http.MethodGet, c.path, nil)
		r.Header.Set("If-None-Match", w.Header().Get("ETag"))
		if w := serve(h, r); w.Code != http.StatusNotModified {
			t.Errorf("GET %s with its ETag: %d, want 304", c.path, w.Code)
		}
	}
	w := serve(h, httptest.NewRequest(http.MethodGet, "/svcnet/topology", nil))
	if w.Code != http.StatusMovedPermanently || w.Header().Get("Location") != "topology/" {
		t.Errorf("GET /svcnet/topology: %d Location %q, want 301 topology/", w.Code, w.Header().Get("Location"))
	}
	for _, c := range []struct {
		method, path string
		code         int
	}{
		{http.MethodGet, Path + "missing.js", http.StatusNotFound},
		{http.MethodGet, "/svcnet/other/", http.StatusNotFound},
		{http.MethodGet, Path + "api/namespaces/default/services/typo", http.StatusNotFound},
		{http.MethodPost, Path, http.StatusMethodNotAllowed},
		{http.MethodDelete, Path + "api/namespaces/default/services/typo/doctor", http.StatusMethodNotAllowed},
	} {
		w := serve(h, httptest.NewRequest(c.method, c.path, nil))
		var st struct {
			Kind string
			Code int
		}
		if err := json.Unmarshal(w.Body.Bytes(), &st); err != nil || w.Code != c.code || st.Kind != "Status" || st.Code != c.code ||
			w.Header().Get("Content-Type") != "application/json" {
			t.Errorf("%s %s: %d %q %s, want a %d Status", c.method, c.path, w.Code, w.Header().Get("Content-Type"), w.Body, c.code)
		}
	}
}

// TestNoExternalAssets: the page loads its own three files and nothing
// else, so that it works offline.
func TestNoExternalAssets(t *testing.T) {
	var names []string
	err := fs.WalkDir(assets, "assets", func(path string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			names = append(names, path)
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"assets/index.html", "assets/topology.css", "assets/topology.js"}; !slices.Equal(names, want) {
		t.Errorf("assets %q, want %q", names, want)
	}
	external := regexp.MustCompile(`(?i)(https?|wss?|ftp):|//[a-z0-9-]+\.[a-z0-9.-]+/|@import|url\(|<iframe|<object|<embed|<img|import\(|new Worker|sourceMappingURL`)
	for _, name := range names {
		b, err := assets.ReadFile(name)
		if err != nil {
			t.Fatal(err)
		}
		if m := external.FindAll(b, -1); m != nil {
			t.Errorf("%s refers to what is not its own: %q", name, m)
		}
	}
	html, _ := assets.ReadFile("assets/index.html")
	refs := regexp.MustCompile(`(?i)(src|href)="([^"]*)"`).FindAllSubmatch(html, -1)
	var got []string
	for _, m := range refs {
		got = append(got, string(m[2]))
	}
	if want := []string{"topology.css", "topology.js"}; !slices.Equal(got, want) {
		t.Errorf("index.html loads %q, want %q", got, want)
	}
}

func TestDiagnoseImpersonates(t *testing.T) {
	h, api := newHandler(t)
	alice := &user.DefaultInfo{Name: "alice", UID: "a-1", Groups: []string{"dev", user.AllAuthenticated},
		Extra: map[string][]string{"scopes": {"view"}}}
	r := httptest.NewRequest(http.MethodGet, Path+"api/namespaces/default/services/typo/doctor", nil)
	w := serve(h, r.WithContext(authn.WithUser(r.Context(), alice)))
	if w.Code != http.StatusOK || w.Header().Get("Content-Type") != "application/json" {
		t.Fatalf("doctor: %d %q %s", w.Code, w.Header().Get("Content-Type"), w.Body)
	}
	var d Diagnosis
	if err := json.Unmarshal(w.Body.Bytes(), &d); err != nil {
		t.Fatal(err)
	}
	if d.Report == nil || d.Report.Healthy || len(d.Report.Findings) == 0 || d.Report.Findings[0].Code != "SelectorMatchesNoPods" || d.DataPlane == nil {
		t.Errorf("diagnosis %s", w.Body)
	}
	api.mu.Lock()
	defer api.mu.Unlock()
	if len(api.headers) == 0 {
		t.Fatal("the doctor read nothing")
	}
	for _, hd := range api.headers {
		if hd.Get("Impersonate-User") != "alice" || hd.Get("Impersonate-Uid") != "a-1" ||
			!slices.Equal(hd.Values("Impersonate-Group"), []string{"dev", user.AllAuthenticated}) || hd.Get("Impersonate-Extra-Scopes") != "view" {
			t.Errorf("a request of the doctor's did not act as alice: %v", hd)
		}
	}
}

func TestDiagnoseErrors(t *testing.T) {
	h, api := newHandler(t)
	r := httptest.NewRequest(http.MethodGet, Path+"api/namespaces/default/services/typo/doctor", nil)
	if w := serve(h, r); w.Code != http.StatusUnauthorized {
		t.Errorf("doctor without a user: %d, want 401: %s", w.Code, w.Body)
	}
	if len(api.headers) != 0 {
		t.Errorf("the doctor ran without a user")
	}
	// The user's own refusal comes back as it is.
	r = httptest.NewRequest(http.MethodGet, Path+"api/namespaces/default/services/secret/doctor", nil)
	w := serve(h, r.WithContext(authn.WithUser(r.Context(), &user.DefaultInfo{Name: "alice"})))
	if w.Code != http.StatusForbidden || !strings.Contains(w.Body.String(), `cannot get resource \"services\"`) {
		t.Errorf("doctor of a forbidden Service: %d %s, want 403", w.Code, w.Body)
	}
}
