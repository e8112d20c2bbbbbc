package apiserver

import (
	"context"
	"testing"

	autoscalingv1 "k8s.io/api/autoscaling/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/svcnet/svcnet/internal/registry/horizontalpodautoscaler"
)

// TestStorageVersion serves a kind at a version it is not stored at
// (registry.StorageVersion): autoscaling/v1 HorizontalPodAutoscalers,
// stored at v2.
func TestStorageVersion(t *testing.T) {
	_, cs := newTestServer(t, horizontalpodautoscaler.Resource(), horizontalpodautoscaler.ResourceV1())
	ctx := context.Background()
	if _, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "ns"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	v1 := &autoscalingv1.HorizontalPodAutoscaler{ObjectMeta: metav1.ObjectMeta{Name: "web"},
		Spec: autoscalingv1.HorizontalPodAutoscalerSpec{MaxReplicas: 3, TargetCPUUtilizationPercentage: ptr.To[int32](50),
			ScaleTargetRef: autoscalingv1.CrossVersionObjectReference{APIVersion: "apps/v1", Kind: "Deployment", Name: "web"}}}
	created, err := cs.AutoscalingV1().HorizontalPodAutoscalers("ns").Create(ctx, v1, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if p := created.Spec.TargetCPUUtilizationPercentage; p == nil || *p != 50 || ptr.Deref(created.Spec.MinReplicas, 0) != 1 {
		t.Errorf("created %+v, want the CPU target of 50 and minReplicas 1", created.Spec)
	}
	v2, err := cs.AutoscalingV2().HorizontalPodAutoscalers("ns").Get(ctx, "web", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if m := v2.Spec.Metrics; len(m) != 1 || m[0].Resource == nil || ptr.Deref(m[0].Resource.Target.AverageUtilization, 0) != 50 {
		t.Errorf("v2 metrics %+v, want the CPU target of 50", m)
	}
	got, err := cs.AutoscalingV1().HorizontalPodAutoscalers("ns").Get(ctx, "web", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got.UID != v2.UID || ptr.Deref(got.Spec.TargetCPUUtilizationPercentage, 0) != 50 {
		t.Errorf("v1 get %+v", got)
	}
	list, err := cs.AutoscalingV1().HorizontalPodAutoscalers("ns").List(ctx, metav1.ListOptions{FieldSelector: "metadata.name=web"})
	if err != nil {
		t.Fatal(err)
	}
	if len(list.Items) != 1 || ptr.Deref(list.Items[0].Spec.TargetCPUUtilizationPercentage, 0) != 50 {
		t.Errorf("v1 list %+v", list.Items)
	}
}
