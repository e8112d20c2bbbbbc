package apiserver

import (
	"context"
	"net/http"
	"testing"

	batchv1 "k8s.io/api/batch/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/svcnet/svcnet/internal/registry/deployment"
)

// The bodies kube-apiserver answers for paths it does not serve: a Status
// from the go-restful web service that owns the path (under /api and under
// a served group), or the plain-text 404 at the end of the delegation chain.
const (
	goRestful404 = `{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"the server could not find the requested resource","reason":"NotFound","details":{},"code":404}` + "\n"
	chainEnd404  = "404 page not found\n"
)

func TestUnservedPathsAnswerUpstreams404(t *testing.T) {
	s, _ := newTestServer(t, deployment.Resource())
	for _, tc := range []struct {
		method, path string
		body         string
		contentType  string
	}{
		// Groups this server does not serve.
		{"GET", "/apis/example.com/v1/widgets", chainEnd404, "text/plain; charset=utf-8"},
		{"GET", "/apis/example.com/v1", chainEnd404, "text/plain; charset=utf-8"},
		{"GET", "/apis/example.com", chainEnd404, "text/plain; charset=utf-8"},
		{"POST", "/apis/batch/v1/namespaces/default/jobs", chainEnd404, "text/plain; charset=utf-8"},
		{"GET", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions", chainEnd404, "text/plain; charset=utf-8"},
		{"GET", "/apis/appsx/v1/deployments", chainEnd404, "text/plain; charset=utf-8"},
		{"GET", "/nothing/here", chainEnd404, "text/plain; charset=utf-8"},
		// Unknown versions, resources and subresources of served groups.
		{"GET", "/apis/apps/v2/deployments", goRestful404, "application/json;charset=utf-8"},
		{"GET", "/apis/apps/v2", goRestful404, "application/json;charset=utf-8"},
		{"GET", "/apis/apps/v1/widgets", goRestful404, "application/json;charset=utf-8"},
		{"POST", "/apis/apps/v1/namespaces/default/daemonsets", goRestful404, "application/json;charset=utf-8"},
		{"GET", "/api/v2", goRestful404, "application/json;charset=utf-8"},
		{"GET", "/api/v1/widgets", goRestful404, "application/json;charset=utf-8"},
		{"GET", "/api/v1/namespaces/default/pods/p/bogus", goRestful404, "application/json;charset=utf-8"},
		{"GET", "/api/v1/namespaces/default/pods/p/status/more", goRestful404, "application/json;charset=utf-8"},
	} {
		rec := do(t, s, tc.method, tc.path, "application/json", "", "{}")
		if rec.Code != http.StatusNotFound || rec.Body.String() != tc.body || rec.Header().Get("Content-Type") != tc.contentType {
			t.Errorf("%s %s: %d %q %q, want 404 %q %q", tc.method, tc.path, rec.Code, rec.Header().Get("Content-Type"), rec.Body, tc.contentType, tc.body)
		}
	}
}

// A missing object of a served resource still names itself, and client-go
// (so kubectl) reads the plain-text 404 as upstream's NotFound.
func TestNotFoundMessagesThroughClientGo(t *testing.T) {
	_, cs := newTestServer(t)
	ctx := context.Background()
	_, err := cs.CoreV1().ConfigMaps("default").Get(ctx, "nope", metav1.GetOptions{})
	if !apierrors.IsNotFound(err) || err.Error() != `configmaps "nope" not found` {
		t.Errorf("missing configmap: %v", err)
	}
	_, err = cs.BatchV1().Jobs("default").Create(ctx, &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Name: "x"}}, metav1.CreateOptions{})
	if !apierrors.IsNotFound(err) || err.Error() != "the server could not find the requested resource (post jobs.batch)" {
		t.Errorf("create in an unserved group: %v", err)
	}
	_, err = cs.Discovery().RESTClient().Get().AbsPath("/apis/example.com/v1/widgets").DoRaw(ctx)
	if !apierrors.IsNotFound(err) || err.Error() != "the server could not find the requested resource" {
		t.Errorf("raw get in an unserved group: %v", err)
	}
	_, err = cs.Discovery().RESTClient().Get().AbsPath("/api/v1/widgets").DoRaw(ctx)
	if !apierrors.IsNotFound(err) || err.Error() != "the server could not find the requested resource" {
		t.Errorf("raw get of an unserved core resource: %v", err)
	}
}
