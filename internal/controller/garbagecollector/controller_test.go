package garbagecollector

import (
	"context"
	"fmt"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	fakediscovery "k8s.io/client-go/discovery/fake"
	metadatafake "k8s.io/client-go/metadata/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/svcnet/svcnet/internal/controller"
	"github.com/svcnet/svcnet/internal/controller/controllertest"
)

var configmaps = corev1.SchemeGroupVersion.WithResource("configmaps")

// object is a ConfigMap's metadata, owned by owners.
func object(name string, owners ...string) *metav1.PartialObjectMetadata {
	m := &metav1.PartialObjectMetadata{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "ConfigMap"},
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default", UID: types.UID(name)},
	}
	for _, o := range owners {
		m.OwnerReferences = append(m.OwnerReferences, metav1.OwnerReference{
			APIVersion: "v1", Kind: "ConfigMap", Name: o, UID: types.UID(o), BlockOwnerDeletion: new(true),
		})
	}
	return m
}

// deleting marks an object as deleted with a finalizer.
func deleting(m *metav1.PartialObjectMetadata, finalizer string) *metav1.PartialObjectMetadata {
	now := metav1.Now()
	m.DeletionTimestamp = &now
	m.Finalizers = []string{finalizer}
	return m
}

func start(t *testing.T, objects ...runtime.Object) *metadatafake.FakeMetadataClient {
	t.Helper()
	scheme := metadatafake.NewTestScheme()
	if err := metav1.AddMetaToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	client := metadatafake.NewSimpleMetadataClient(scheme, objects...)
	disco := &fakediscovery.FakeDiscovery{Fake: &k8stesting.Fake{}}
	disco.Resources = []*metav1.APIResourceList{{GroupVersion: "v1", APIResources: []metav1.APIResource{
		{Name: "configmaps", Namespaced: true, Kind: "ConfigMap", Verbs: []string{"get", "list", "watch", "delete", "patch"}},
		{Name: "events", Namespaced: true, Kind: "Event", Verbs: []string{"get", "list", "watch", "delete"}},
	}}}
	c, err := New(controller.NewMetrics(prometheus.NewRegistry()), client, disco, 2)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		c.Run(ctx)
		close(done)
	}()
	t.Cleanup(func() {
		cancel()
		<-done
	})
	return client
}

func get(client *metadatafake.FakeMetadataClient, name string) (*metav1.PartialObjectMetadata, error) {
	return client.Resource(configmaps).Namespace("default").Get(context.Background(), name, metav1.GetOptions{})
}

func gone(t *testing.T, client *metadatafake.FakeMetadataClient, name string) {
	t.Helper()
	controllertest.Eventually(t, func() string {
		if _, err := get(client, name); !apierrors.IsNotFound(err) {
			return fmt.Sprintf("%s still exists (%v)", name, err)
		}
		return ""
	})
}

func TestBackgroundDeletion(t *testing.T) {
	client := start(t, object("owner"), object("dependent", "owner"), object("orphaned", "never-existed"), object("shared", "owner", "other"), object("other"))
	gone(t, client, "orphaned")
	if err := client.Resource(configmaps).Namespace("default").Delete(context.Background(), "owner", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	gone(t, client, "dependent")
	// A dependent with another owner stays, without the gone owner.
	controllertest.Eventually(t, func() string {
		m, err := get(client, "shared")
		if err != nil || len(m.OwnerReferences) != 1 || m.OwnerReferences[0].Name != "other" {
			return fmt.Sprintf("shared: %v %+v", err, m)
		}
		return ""
	})
}

func TestForegroundDeletion(t *testing.T) {
	client := start(t, deleting(object("owner"), metav1.FinalizerDeleteDependents), object("dependent", "owner"))
	gone(t, client, "dependent")
	controllertest.Eventually(t, func() string {
		m, err := get(client, "owner")
		if err != nil || len(m.Finalizers) != 0 {
			return fmt.Sprintf("owner: %v, finalizers %v", err, m.Finalizers)
		}
		return ""
	})
}

func TestOrphanDeletion(t *testing.T) {
	client := start(t, deleting(object("owner"), metav1.FinalizerOrphanDependents), object("dependent", "owner"))
	controllertest.Eventually(t, func() string {
		owner, err1 := get(client, "owner")
		dep, err2 := get(client, "dependent")
		if err1 != nil || err2 != nil || len(owner.Finalizers) != 0 || len(dep.OwnerReferences) != 0 {
			return fmt.Sprintf("owner %v %v, dependent %v %v", err1, owner, err2, dep)
		}
		return ""
	})
}
