package resourcequota

import (
	"context"
	"fmt"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	metadatafake "k8s.io/client-go/metadata/fake"

	"github.com/svcnet/svcnet/internal/controller"
	"github.com/svcnet/svcnet/internal/controller/controllertest"
)

const ns = "team"

func quotaOf(name string, hard corev1.ResourceList) *corev1.ResourceQuota {
	return &corev1.ResourceQuota{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns}, Spec: corev1.ResourceQuotaSpec{Hard: hard}}
}

func podOf(name, cpu string, phase corev1.PodPhase) *corev1.Pod {
	return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Resources: corev1.ResourceRequirements{
			Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(cpu)}}}}},
		Status: corev1.PodStatus{Phase: phase}}
}

func serviceOf(name string, typ corev1.ServiceType) *corev1.Service {
	return &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns}, Spec: corev1.ServiceSpec{Type: typ,
		Ports: []corev1.ServicePort{{Port: 80}}}}
}

// deploymentOf is a Deployment as the metadata client sees it.
func deploymentOf(name string) *metav1.PartialObjectMetadata {
	return &metav1.PartialObjectMetadata{TypeMeta: metav1.TypeMeta{APIVersion: "apps/v1", Kind: "Deployment"},
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns}}
}

// start runs the controller over a fake API holding objects (typed) and
// metadataObjects (seen through the metadata client).
func start(t *testing.T, objects []runtime.Object, metadataObjects ...runtime.Object) controller.Deps {
	t.Helper()
	scheme := runtime.NewScheme()
	if err := metav1.AddMetaToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	meta := metadatafake.NewSimpleMetadataClient(scheme, metadataObjects...)
	cs := controllertest.NewClient(objects...)
	opts := DefaultOptions()
	opts.SyncPeriod = time.Hour
	return controllertest.Start(t, cs, func(_ context.Context, d controller.Deps) []func(context.Context) {
		c, err := New(d, meta, deployments{}, opts)
		if err != nil {
			t.Fatal(err)
		}
		return []func(context.Context){c.Run}
	})
}

// deployments maps apps' deployments, as discovery would; nothing else
// is served.
type deployments struct{}

func (deployments) ResourceFor(in schema.GroupVersionResource) (schema.GroupVersionResource, error) {
	if in.GroupResource() == (schema.GroupResource{Group: "apps", Resource: "deployments"}) {
		return appsv1.SchemeGroupVersion.WithResource("deployments"), nil
	}
	return schema.GroupVersionResource{}, &meta.NoResourceMatchError{PartialResource: in}
}

func wantUsed(t *testing.T, d controller.Deps, name string, want corev1.ResourceList) {
	t.Helper()
	controllertest.Eventually(t, func() string {
		q, err := d.Client.CoreV1().ResourceQuotas(ns).Get(context.Background(), name, metav1.GetOptions{})
		if err != nil {
			return err.Error()
		}
		if len(q.Status.Used) != len(want) {
			return fmt.Sprintf("quota %s: used %v, want %v", name, q.Status.Used, want)
		}
		for k, v := range want {
			if got, ok := q.Status.Used[k]; !ok || got.Cmp(v) != 0 {
				return fmt.Sprintf("quota %s: used %v, want %v", name, q.Status.Used, want)
			}
		}
		for k, v := range q.Spec.Hard {
			if got := q.Status.Hard[k]; got.Cmp(v) != 0 {
				return fmt.Sprintf("quota %s: status hard %v, want the spec's %v", name, q.Status.Hard, q.Spec.Hard)
			}
		}
		return ""
	})
}

func list(pairs ...string) corev1.ResourceList {
	l := corev1.ResourceList{}
	for i := 0; i < len(pairs); i += 2 {
		l[corev1.ResourceName(pairs[i])] = resource.MustParse(pairs[i+1])
	}
	return l
}

// TestUsageComputed: a new quota's status says what the namespace's
// objects use of each limit, pods that ended counting for nothing; a
// quota whose limits change is computed anew.
func TestUsageComputed(t *testing.T) {
	d := start(t, []runtime.Object{
		quotaOf("compute", list("pods", "10", "requests.cpu", "4", "count/pods", "10")),
		quotaOf("objects", list("services", "5", "services.nodeports", "5", "configmaps", "3")),
		podOf("a", "500m", corev1.PodRunning), podOf("b", "1", corev1.PodPending), podOf("done", "2", corev1.PodSucceeded),
		serviceOf("web", corev1.ServiceTypeClusterIP), serviceOf("np", corev1.ServiceTypeNodePort),
		&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "cm", Namespace: ns}},
		&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "elsewhere", Namespace: "other"}},
	})
	// count/pods counts every pod stored, ended or not.
	wantUsed(t, d, "compute", list("pods", "2", "requests.cpu", "1500m", "count/pods", "3"))
	wantUsed(t, d, "objects", list("services", "2", "services.nodeports", "1", "configmaps", "1"))

	q, err := d.Client.CoreV1().ResourceQuotas(ns).Get(context.Background(), "objects", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	q.Spec.Hard = list("services", "5", "secrets", "1")
	if _, err := d.Client.CoreV1().ResourceQuotas(ns).Update(context.Background(), q, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	wantUsed(t, d, "objects", list("services", "2", "secrets", "0"))
}

// TestReplenished: deleting an object, or an update that releases what it
// used (a pod that ends, a NodePort Service made ClusterIP), lowers the
// usage of the quotas that count it.
func TestReplenished(t *testing.T) {
	d := start(t, []runtime.Object{
		quotaOf("q", list("pods", "10", "services", "5", "services.nodeports", "5")),
		podOf("a", "1", corev1.PodRunning), podOf("b", "1", corev1.PodRunning), serviceOf("np", corev1.ServiceTypeNodePort),
	})
	wantUsed(t, d, "q", list("pods", "2", "services", "1", "services.nodeports", "1"))
	ctx := context.Background()
	if err := d.Client.CoreV1().Pods(ns).Delete(ctx, "a", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	wantUsed(t, d, "q", list("pods", "1", "services", "1", "services.nodeports", "1"))

	ended := podOf("b", "1", corev1.PodFailed)
	if _, err := d.Client.CoreV1().Pods(ns).UpdateStatus(ctx, ended, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	wantUsed(t, d, "q", list("pods", "0", "services", "1", "services.nodeports", "1"))

	if _, err := d.Client.CoreV1().Services(ns).Update(ctx, serviceOf("np", corev1.ServiceTypeClusterIP), metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	wantUsed(t, d, "q", list("pods", "0", "services", "1", "services.nodeports", "0"))
}

// TestCountsAnyResource: count/<resource>.<group> of a kind no evaluator
// knows counts its objects through their metadata; one not served has
// no usage, as upstream's (admission counts it once it is served).
func TestCountsAnyResource(t *testing.T) {
	d := start(t, []runtime.Object{quotaOf("q", list("count/deployments.apps", "3", "count/widgets.example.com", "1"))},
		deploymentOf("web"), deploymentOf("api"))
	wantUsed(t, d, "q", list("count/deployments.apps", "2"))
}
