package namespace

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	fakediscovery "k8s.io/client-go/discovery/fake"
	metadatafake "k8s.io/client-go/metadata/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/svcnet/svcnet/internal/controller"
	"github.com/svcnet/svcnet/internal/controller/controllertest"
)

func TestEmptiesAndFinalizesTerminatingNamespace(t *testing.T) {
	deletionDelay = 0
	now := metav1.Now()
	ns := &corev1.Namespace{
		ObjectMeta: metav1.ObjectMeta{Name: "demo", DeletionTimestamp: &now},
		Spec:       corev1.NamespaceSpec{Finalizers: []corev1.FinalizerName{corev1.FinalizerKubernetes}},
		Status:     corev1.NamespaceStatus{Phase: corev1.NamespaceActive},
	}
	cs := controllertest.NewClient(ns)
	scheme := metadatafake.NewTestScheme()
	if err := metav1.AddMetaToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	cm := func(name, namespace string) *metav1.PartialObjectMetadata {
		return &metav1.PartialObjectMetadata{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "ConfigMap"},
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: namespace, UID: types.UID(namespace + name)}}
	}
	meta := metadatafake.NewSimpleMetadataClient(scheme, cm("a", "demo"), cm("b", "demo"), cm("c", "other"))
	disco := cs.Discovery().(*fakediscovery.FakeDiscovery)
	disco.Resources = []*metav1.APIResourceList{{GroupVersion: "v1", APIResources: []metav1.APIResource{
		{Name: "configmaps", Namespaced: true, Kind: "ConfigMap", Verbs: []string{"list", "delete"}},
		{Name: "namespaces", Namespaced: false, Kind: "Namespace", Verbs: []string{"list", "delete"}},
	}}}
	controllertest.Start(t, cs, func(ctx context.Context, d controller.Deps) []func(context.Context) {
		c, err := New(d, meta, disco, Options{Workers: 1, SyncPeriod: time.Minute})
		if err != nil {
			t.Fatal(err)
		}
		return []func(context.Context){c.Run}
	})
	controllertest.Eventually(t, func() string {
		got, err := cs.CoreV1().Namespaces().Get(context.Background(), "demo", metav1.GetOptions{})
		if err != nil {
			return err.Error()
		}
		if slices.Contains(got.Spec.Finalizers, corev1.FinalizerKubernetes) || got.Status.Phase != corev1.NamespaceTerminating {
			return fmt.Sprintf("namespace finalizers %v phase %s", got.Spec.Finalizers, got.Status.Phase)
		}
		return ""
	})
	for _, name := range []string{"a", "b"} {
		if _, err := meta.Resource(corev1.SchemeGroupVersion.WithResource("configmaps")).Namespace("demo").Get(context.Background(), name, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
			t.Errorf("configmap demo/%s survived: %v", name, err)
		}
	}
	if _, err := meta.Resource(corev1.SchemeGroupVersion.WithResource("configmaps")).Namespace("other").Get(context.Background(), "c", metav1.GetOptions{}); err != nil {
		t.Errorf("configmap in another namespace: %v", err)
	}
}

// TestPodsGoFirst: as upstream's OrderedNamespaceDeletion, nothing but
// pods is deleted while pods of the namespace remain.
func TestPodsGoFirst(t *testing.T) {
	deletionDelay = 0
	now := metav1.Now()
	ns := &corev1.Namespace{
		ObjectMeta: metav1.ObjectMeta{Name: "demo", DeletionTimestamp: &now},
		Spec:       corev1.NamespaceSpec{Finalizers: []corev1.FinalizerName{corev1.FinalizerKubernetes}},
		Status:     corev1.NamespaceStatus{Phase: corev1.NamespaceActive},
	}
	cs := controllertest.NewClient(ns)
	scheme := metadatafake.NewTestScheme()
	if err := metav1.AddMetaToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	object := func(kind, name string, finalizers ...string) *metav1.PartialObjectMetadata {
		return &metav1.PartialObjectMetadata{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: kind},
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "demo", UID: types.UID(kind + name), Finalizers: finalizers}}
	}
	meta := metadatafake.NewSimpleMetadataClient(scheme, object("Pod", "held", "example.com/hold"), object("ConfigMap", "settings"))
	// The pod stays, as a pod with a finalizer does.
	meta.PrependReactor("delete", "pods", func(k8stesting.Action) (bool, runtime.Object, error) { return true, nil, nil })
	disco := cs.Discovery().(*fakediscovery.FakeDiscovery)
	disco.Resources = []*metav1.APIResourceList{{GroupVersion: "v1", APIResources: []metav1.APIResource{
		{Name: "configmaps", Namespaced: true, Kind: "ConfigMap", Verbs: []string{"list", "delete"}},
		{Name: "pods", Namespaced: true, Kind: "Pod", Verbs: []string{"list", "delete"}},
	}}}
	controllertest.Start(t, cs, func(ctx context.Context, d controller.Deps) []func(context.Context) {
		c, err := New(d, meta, disco, Options{Workers: 1, SyncPeriod: time.Minute})
		if err != nil {
			t.Fatal(err)
		}
		return []func(context.Context){c.Run}
	})
	controllertest.Eventually(t, func() string {
		got, err := cs.CoreV1().Namespaces().Get(context.Background(), "demo", metav1.GetOptions{})
		if err != nil {
			return err.Error()
		}
		for _, c := range got.Status.Conditions {
			if c.Type == corev1.NamespaceContentRemaining && c.Status == corev1.ConditionTrue {
				return ""
			}
		}
		return fmt.Sprintf("no NamespaceContentRemaining condition: %v", got.Status.Conditions)
	})
	if _, err := meta.Resource(corev1.SchemeGroupVersion.WithResource("configmaps")).Namespace("demo").Get(context.Background(), "settings", metav1.GetOptions{}); err != nil {
		t.Errorf("the ConfigMap went while a pod remained: %v", err)
	}
}
