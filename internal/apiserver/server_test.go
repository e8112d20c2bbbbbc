package apiserver

import (
	"context"
	"net/http/httptest"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/svcnet/svcnet/internal/registry"
	"github.com/svcnet/svcnet/internal/registry/configmap"
	"github.com/svcnet/svcnet/internal/registry/pod"
	"github.com/svcnet/svcnet/internal/storage"
	"github.com/svcnet/svcnet/internal/storage/storagetest"
)

// testNamespaces is a minimal namespace resource for this package's tests;
// the real strategy lives in internal/registry/namespace.
type nsStrategy struct{ registry.Base }

func (nsStrategy) PrepareForCreate(obj runtime.Object) {
	ns := obj.(*corev1.Namespace)
	ns.Status.Phase = corev1.NamespaceActive
	ns.Spec.Finalizers = []corev1.FinalizerName{corev1.FinalizerKubernetes}
}

// newTestServer runs a Server over embedded etcd, without TLS, and returns
// a client-go clientset for it; it serves configmaps, pods, namespaces and
// the extra resources.
func newTestServer(t *testing.T, extra ...*registry.Resource) (*Server, kubernetes.Interface) {
	t.Helper()
	s, url := startTestServer(t, extra...)
	cs, err := kubernetes.NewForConfig(&rest.Config{Host: url})
	if err != nil {
		t.Fatal(err)
	}
	return s, cs
}

// startTestServer serves a Server of configmaps, pods, namespaces and
// extra over plain HTTP at the URL it returns.
func startTestServer(t *testing.T, extra ...*registry.Resource) (*Server, string) {
	t.Helper()
	return startTestServerOn(t, storagetest.Start(t), extra...)
}

// startTestServerOn is startTestServer on the etcd of cli.
func startTestServerOn(t *testing.T, cli *clientv3.Client, extra ...*registry.Resource) (*Server, string) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	set, err := registry.NewSet(append([]*registry.Resource{configmap.Resource(), pod.Resource(nil, nil), {
		Kind: corev1.SchemeGroupVersion.WithKind("Namespace"), Resource: "namespaces", Singular: "namespace",
		ShortNames: []string{"ns"}, Status: true, Strategy: nsStrategy{},
	}}, extra...)...)
	if err != nil {
		t.Fatal(err)
	}
	s, err := New(Config{Store: storage.New(cli, registry.JSONCodec{}), Resources: set})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Bootstrap(ctx); err != nil {
		t.Fatal(err)
	}
	// Everything but client-certificate authentication, which needs TLS.
	hs := httptest.NewServer(s.metrics.instrument(s))
	t.Cleanup(func() {
		hs.CloseClientConnections()
		hs.Close()
		cancel()
	})
	return s, hs.URL
}

func TestConfigMapLifecycle(t *testing.T) {
	_, cs := newTestServer(t)
	ctx := context.Background()
	cms := cs.CoreV1().ConfigMaps("default")

	w, err := cms.Watch(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()

	created, err := cms.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "web"}, Data: map[string]string{"a": "1"}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if created.UID == "" || created.ResourceVersion == "" || created.CreationTimestamp.IsZero() {
		t.Fatalf("created object lacks metadata: %+v", created.ObjectMeta)
	}
	if _, err := cms.Create(ctx, created, metav1.CreateOptions{}); !apierrors.IsBadRequest(err) {
		t.Fatalf("create with resourceVersion: got %v, want BadRequest", err)
	}
	created.ResourceVersion = ""
	if _, err := cms.Create(ctx, created, metav1.CreateOptions{}); !apierrors.IsAlreadyExists(err) {
		t.Fatalf("second create: got %v, want AlreadyExists", err)
	}

	got, err := cms.Get(ctx, "web", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	got.Data["b"] = "2"
	updated, err := cms.Update(ctx, got, metav1.UpdateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if updated.ResourceVersion == got.ResourceVersion {
		t.Fatal("update did not change resourceVersion")
	}
	// A stale resourceVersion is a conflict with upstream's message.
	got.Data["c"] = "3"
	_, err = cms.Update(ctx, got, metav1.UpdateOptions{})
	want := `Operation cannot be fulfilled on configmaps "web": the object has been modified; please apply your changes to the latest version and try again`
	if !apierrors.IsConflict(err) || err.Error() != want {
		t.Fatalf("stale update: got %v, want %q", err, want)
	}

	patched, err := cms.Patch(ctx, "web", types.StrategicMergePatchType, []byte(`{"data":{"c":"3"}}`), metav1.PatchOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if patched.Data["c"] != "3" || patched.Data["a"] != "1" {
		t.Fatalf("patched data = %v", patched.Data)
	}
	if err := cms.Delete(ctx, "web", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := cms.Get(ctx, "web", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Fatalf("get after delete: %v", err)
	}

	wantEvents := []watch.EventType{watch.Added, watch.Modified, watch.Modified, watch.Deleted}
	for i, want := range wantEvents {
		select {
		case ev := <-w.ResultChan():
			if ev.Type != want {
				t.Fatalf("event %d: %s, want %s", i, ev.Type, want)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("event %d (%s) not received", i, want)
		}
	}
}

func TestCreateInMissingNamespace(t *testing.T) {
	_, cs := newTestServer(t)
	_, err := cs.CoreV1().ConfigMaps("nope").Create(context.Background(), &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "x"}}, metav1.CreateOptions{})
	if !apierrors.IsNotFound(err) || err.Error() != `namespaces "nope" not found` {
		t.Fatalf("got %v, want namespaces \"nope\" not found", err)
	}
}
