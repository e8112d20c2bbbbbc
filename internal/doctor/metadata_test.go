package doctor

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/rest"
)

// With Options.Core, the namespace's pods for near misses are read as
// metadata, and the suggestion comes from their labels.
func TestNearMissesFromMetadata(t *testing.T) {
	var accept string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/api/v1/namespaces/default/pods" {
			http.NotFound(w, r)
			return
		}
		accept = r.Header.Get("Accept")
		w.Header().Set("Content-Type", "application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1")
		_, _ = w.Write([]byte(`{"kind":"PartialObjectMetadataList","apiVersion":"meta.k8s.io/v1","metadata":{"resourceVersion":"7"},"items":[` +
			`{"metadata":{"name":"nginx","namespace":"default","labels":{"app":"nginx"},"managedFields":[{"manager":"kubectl"}]}},` +
			`{"metadata":{"name":"unlabelled","namespace":"default"}}]}`))
	}))
	defer srv.Close()
	core, err := kubernetes.NewForConfig(&rest.Config{Host: srv.URL})
	if err != nil {
		t.Fatal(err)
	}
	client := fake.NewClientset(service("web", map[string]string{"app": "ngnix"}))
	r, err := Diagnose(context.Background(), client, "default", "web", Options{Core: core.CoreV1().RESTClient()})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(accept, "as=PartialObjectMetadataList") {
		t.Errorf("Accept %q, want a metadata list", accept)
	}
	if len(r.Findings) == 0 || r.Findings[0].Code != SelectorMatchesNoPods || !strings.Contains(r.Findings[0].Sentence, "Did you mean app=nginx?") ||
		r.Findings[0].Evidence[1].Value != "2" {
		t.Errorf("findings %+v", r.Findings)
	}
}
