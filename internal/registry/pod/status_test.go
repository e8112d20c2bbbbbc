package pod

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// A pods/status write keeps the stored owner references.
func TestStatusUpdateKeepsOwnerReferences(t *testing.T) {
	owner := []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: "web", UID: "u1"}}
	old := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{OwnerReferences: owner}}
	cur := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"x": "y"}}}
	strategy{}.PrepareForStatusUpdate(cur, old)
	if len(cur.OwnerReferences) != 1 || cur.OwnerReferences[0].UID != "u1" || cur.Labels["x"] != "y" {
		t.Errorf("after a status write: %+v", cur.ObjectMeta)
	}
}
