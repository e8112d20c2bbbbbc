package apiserver

import (
	"context"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/svcnet/svcnet/internal/registry/deployment"
)

// A Deployment's status write stores its annotations, as upstream's
// status strategy does, without bumping the generation; its labels stay.
func TestDeploymentStatusWriteKeepsAnnotations(t *testing.T) {
	_, cs := newTestServer(t, deployment.Resource())
	ctx := context.Background()
	labels := map[string]string{"app": "web"}
	d := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Labels: labels},
		Spec: appsv1.DeploymentSpec{
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{RestartPolicy: corev1.RestartPolicyAlways, Containers: []corev1.Container{{Name: "web", Image: "nginx"}}}},
		},
	}
	api := cs.AppsV1().Deployments("default")
	d, err := api.Create(ctx, d, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	d.Annotations = map[string]string{"deployment.kubernetes.io/revision": "1"}
	d.Labels = map[string]string{"app": "other"}
	d.Status.ObservedGeneration = d.Generation
	got, err := api.UpdateStatus(ctx, d, metav1.UpdateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got.Annotations["deployment.kubernetes.io/revision"] != "1" || got.Labels["app"] != "web" || got.Generation != 1 || got.Status.ObservedGeneration != 1 {
		t.Errorf("after a status write: annotations %v, labels %v, generation %d, observedGeneration %d",
			got.Annotations, got.Labels, got.Generation, got.Status.ObservedGeneration)
	}
}
