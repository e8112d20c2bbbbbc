package apiserver

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/svcnet/svcnet/internal/auth/authz"
	"github.com/svcnet/svcnet/internal/registry"
	"github.com/svcnet/svcnet/internal/registry/selfsubjectreview"
)

// do sends one request straight to the server's handler.
func do(t *testing.T, s *Server, method, path, contentType, accept, body string) *httptest.ResponseRecorder {
	t.Helper()
	req := httptest.NewRequest(method, path, strings.NewReader(body))
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	if accept != "" {
		req.Header.Set("Accept", accept)
	}
	rec := httptest.NewRecorder()
	s.ServeHTTP(rec, req)
	return rec
}

func TestBodiesInYAMLAndProtobuf(t *testing.T) {
	s, _ := newTestServer(t)
	rec := do(t, s, "POST", "/api/v1/namespaces/default/configmaps", "application/yaml", "application/yaml",
		"apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: yam\ndata:\n  k: v\n")
	if rec.Code != http.StatusCreated || !strings.Contains(rec.Body.String(), "name: yam") ||
		!strings.HasPrefix(rec.Header().Get("Content-Type"), "application/yaml") {
		t.Fatalf("YAML create: %d %s\n%s", rec.Code, rec.Header().Get("Content-Type"), rec.Body)
	}
	rec = do(t, s, "GET", "/api/v1/namespaces/default/configmaps/yam", "", "application/vnd.kubernetes.protobuf", "")
	if rec.Header().Get("Content-Type") != "application/vnd.kubernetes.protobuf" || !bytes.HasPrefix(rec.Body.Bytes(), []byte("k8s\x00")) {
		t.Fatalf("protobuf get: %s %q", rec.Header().Get("Content-Type"), rec.Body.Bytes())
	}
	info, _ := runtime.SerializerInfoForMediaType(registry.Codecs.SupportedMediaTypes(), mediaProtobuf)
	obj, _, err := info.Serializer.Decode(rec.Body.Bytes(), nil, nil)
	if err != nil || obj.(*corev1.ConfigMap).Data["k"] != "v" {
		t.Fatalf("decode protobuf answer: %v %v", err, obj)
	}
	// Unknown fields: Warn (the default) stores and warns; Strict refuses.
	body := `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"w"},"bogus":1}`
	rec = do(t, s, "POST", "/api/v1/namespaces/default/configmaps", "application/json", "", body)
	if rec.Code != http.StatusCreated || rec.Header().Get("Warning") != `299 - "unknown field \"bogus\""` {
		t.Fatalf("Warn: %d warning %q", rec.Code, rec.Header().Get("Warning"))
	}
	rec = do(t, s, "POST", "/api/v1/namespaces/default/configmaps?fieldValidation=Strict", "application/json", "",
		strings.Replace(body, `"w"`, `"w2"`, 1))
	if rec.Code != http.StatusBadRequest || !strings.Contains(rec.Body.String(), `strict decoding error: unknown field \"bogus\"`) {
		t.Fatalf("Strict: %d %s", rec.Code, rec.Body)
	}
}

func TestCompactedRevisionsAreGone(t *testing.T) {
	s, cs := newTestServer(t)
	ctx := context.Background()
	cms := cs.CoreV1().ConfigMaps("default")
	first, err := cms.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "a"}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range []string{"b", "c", "d"} {
		if _, err := cms.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: n}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	page, err := cms.List(ctx, metav1.ListOptions{Limit: 2})
	if err != nil || page.Continue == "" {
		t.Fatalf("first page: %v %v", err, page)
	}
	if _, err := cms.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "e"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	rev, err := s.store.Revision(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.store.Client.Compact(ctx, rev); err != nil {
		t.Fatal(err)
	}
	_, err = cms.List(ctx, metav1.ListOptions{Limit: 2, Continue: page.Continue})
	var expired *apierrors.StatusError
	if !errors.As(err, &expired) || !apierrors.IsResourceExpired(err) || !strings.HasPrefix(err.Error(), "The provided continue parameter is too old") {
		t.Fatalf("continue after compaction: %v", err)
	}
	// The answer carries a token that goes on at the latest revision.
	rest, err := cms.List(ctx, metav1.ListOptions{Limit: 2, Continue: expired.ErrStatus.ListMeta.Continue})
	if err != nil || len(rest.Items) != 2 || rest.Items[0].Name != "c" || rest.Items[1].Name != "d" || rest.ResourceVersion == page.ResourceVersion {
		t.Fatalf("continue with the expired answer's token: %v %v", err, rest)
	}
	w, err := cms.Watch(ctx, metav1.ListOptions{ResourceVersion: first.ResourceVersion})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	select {
	case ev := <-w.ResultChan():
		st, ok := ev.Object.(*metav1.Status)
		if ev.Type != watch.Error || !ok || st.Code != http.StatusGone || st.Reason != metav1.StatusReasonExpired ||
			!strings.HasPrefix(st.Message, "too old resource version: "+first.ResourceVersion) {
			t.Fatalf("watch from a compacted revision: %s %+v", ev.Type, ev.Object)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("no event for a watch from a compacted revision")
	}
}

func TestDeleteCollectionAndMetrics(t *testing.T) {
	s, cs := newTestServer(t)
	ctx := context.Background()
	cms := cs.CoreV1().ConfigMaps("default")
	for _, n := range []string{"x1", "x2", "y1"} {
		l := map[string]string{"g": n[:1]}
		if _, err := cms.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: n, Labels: l}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	if err := cms.DeleteCollection(ctx, metav1.DeleteOptions{}, metav1.ListOptions{LabelSelector: "g=x"}); err != nil {
		t.Fatal(err)
	}
	l, err := cms.List(ctx, metav1.ListOptions{})
	if err != nil || len(l.Items) != 1 || l.Items[0].Name != "y1" {
		t.Fatalf("after deletecollection: %v %v", err, l)
	}
	// Anonymous requests are authorized like any: here only the
	// public-info paths are allowed them.
	s.authz = authz.Union{authz.PrivilegedGroups{"system:masters"}, publicInfo{}}
	h := s.Handler()
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	if rec.Code != http.StatusForbidden || !strings.Contains(rec.Body.String(), `forbidden: User \"system:anonymous\" cannot get path \"/metrics\"`) {
		t.Fatalf("anonymous /metrics: %d %s, want 403", rec.Code, rec.Body)
	}
	rec = httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest("GET", "/api/v1/namespaces/default/configmaps", nil))
	if rec.Code != http.StatusForbidden || !strings.Contains(rec.Body.String(),
		`configmaps is forbidden: User \"system:anonymous\" cannot list resource \"configmaps\" in API group \"\" in the namespace \"default\"`) {
		t.Fatalf("anonymous list: %d %s, want 403", rec.Code, rec.Body)
	}
	rec = httptest.NewRecorder()
	req := httptest.NewRequest("GET", "/version", nil)
	req.Header.Set("Authorization", "Bearer nobody-knows-this")
	h.ServeHTTP(rec, req)
	if rec.Code != http.StatusUnauthorized {
		t.Fatalf("/version with an unknown token: %d, want 401", rec.Code)
	}
	// system:public-info-viewer: anyone may read the version.
	rec = httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest("GET", "/version", nil))
	if rec.Code != http.StatusOK || !strings.Contains(rec.Body.String(), `"gitVersion"`) {
		t.Fatalf("anonymous /version: %d %s, want 200 with the version", rec.Code, rec.Body)
	}
	rec = httptest.NewRecorder()
	s.metrics.ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	body, _ := io.ReadAll(rec.Body)
	for _, want := range []string{`apiserver_request_total{code="201",group="",resource="configmaps",subresource="",verb="POST"} 3`,
		`apiserver_request_duration_seconds_bucket{group="",resource="configmaps",subresource="",verb="LIST"`} {
		if !strings.Contains(string(body), want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}
	rec = httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest("GET", "/readyz", nil))
	if rec.Code != http.StatusOK || rec.Body.String() != "ok" {
		t.Fatalf("/readyz: %d %s", rec.Code, rec.Body)
	}
}

// publicInfo allows everyone what upstream's system:public-info-viewer
// does.
type publicInfo struct{}

func (publicInfo) Authorize(_ context.Context, a authz.Attributes) (authz.Decision, string, error) {
	switch a.Path {
	case "/healthz", "/livez", "/readyz", "/version", "/version/":
		if !a.ResourceRequest && a.Verb == "get" {
			return authz.Allow, "", nil
		}
	}
	return authz.NoOpinion, "", nil
}

// A review has no table convertor upstream: asked only for a Table, its
// create answers 406; asked for a Table or JSON, it is made (and here
// finds no user on the request).
func TestNoTableOfAReview(t *testing.T) {
	s, _ := newTestServer(t, selfsubjectreview.Resource())
	const path, body = "/apis/authentication.k8s.io/v1/selfsubjectreviews", `{"apiVersion":"authentication.k8s.io/v1","kind":"SelfSubjectReview"}`
	rec := do(t, s, "POST", path, "application/json", "application/json;as=Table;v=v1;g=meta.k8s.io", body)
	if rec.Code != http.StatusNotAcceptable {
		t.Errorf("create asking a Table: %d %s, want 406", rec.Code, rec.Body)
	}
	rec = do(t, s, "POST", path, "application/json", "application/json;as=Table;v=v1;g=meta.k8s.io,application/json", body)
	if rec.Code != http.StatusBadRequest || !strings.Contains(rec.Body.String(), "no user present on request") {
		t.Errorf("create asking a Table or JSON: %d %s", rec.Code, rec.Body)
	}
}
