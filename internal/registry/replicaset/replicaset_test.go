package replicaset

import (
	"reflect"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/utils/ptr"

	"github.com/svcnet/svcnet/internal/registry/registrytest"
)

func valid() *appsv1.ReplicaSet {
	rs := &appsv1.ReplicaSet{
		ObjectMeta: metav1.ObjectMeta{Name: "web-5d4f", Namespace: "default"},
		Spec: appsv1.ReplicaSetSpec{
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}},
			Template: registrytest.PodTemplate(map[string]string{"app": "web", "pod-template-hash": "5d4f"},
				corev1.Container{Name: "nginx", Image: "nginx:1"}),
		},
	}
	strategy{}.Default(rs)
	return rs
}

func TestDefault(t *testing.T) {
	for _, tt := range []struct {
		name string
		in   *int32
		want int32
	}{{"unset", nil, 1}, {"zero kept", ptr.To[int32](0), 0}, {"three kept", ptr.To[int32](3), 3}} {
		t.Run(tt.name, func(t *testing.T) {
			rs := &appsv1.ReplicaSet{Spec: appsv1.ReplicaSetSpec{Replicas: tt.in}}
			strategy{}.Default(rs)
			if rs.Spec.Replicas == nil || *rs.Spec.Replicas != tt.want {
				t.Errorf("replicas = %v, want %d", rs.Spec.Replicas, tt.want)
			}
		})
	}
}

func TestValidate(t *testing.T) {
	registrytest.RunValidate(t, strategy{}, valid, []registrytest.Case[*appsv1.ReplicaSet]{
		{Name: "valid", Change: func(*appsv1.ReplicaSet) {}},
		{Name: "negative replicas and min ready", Change: func(rs *appsv1.ReplicaSet) {
			rs.Spec.Replicas = ptr.To[int32](-1)
			rs.Spec.MinReadySeconds = -3
		}, Want: []string{
			"spec.replicas: Invalid value: -1: must be greater than or equal to 0",
			"spec.minReadySeconds: Invalid value: -3: must be greater than or equal to 0",
		}},
		{Name: "empty selector", Change: func(rs *appsv1.ReplicaSet) { rs.Spec.Selector = &metav1.LabelSelector{} }, Want: []string{
			// Upstream's wording, "deployment" included.
			"spec.selector: Invalid value: {}: empty selector is invalid for deployment",
		}},
		{Name: "selector does not match", Change: func(rs *appsv1.ReplicaSet) { rs.Spec.Selector.MatchLabels["app"] = "db" }, Want: []string{
			"spec.template.metadata.labels: Invalid value: {\"app\":\"web\",\"pod-template-hash\":\"5d4f\"}: `selector` does not match template `labels`",
		}},
		{Name: "restart on failure", Change: func(rs *appsv1.ReplicaSet) { rs.Spec.Template.Spec.RestartPolicy = corev1.RestartPolicyOnFailure }, Want: []string{
			"spec.template.spec.restartPolicy: Unsupported value: \"OnFailure\": supported values: \"Always\"",
		}},
	})
}

func TestValidateUpdateSelectorImmutable(t *testing.T) {
	old := valid()
	rs := old.DeepCopy()
	rs.Spec.Selector.MatchLabels = map[string]string{"pod-template-hash": "5d4f"}
	registrytest.ExpectErrors(t, strategy{}.ValidateUpdate(rs, old),
		"spec.selector: Invalid value: {\"matchLabels\":{\"pod-template-hash\":\"5d4f\"}}: field is immutable")
	rs = old.DeepCopy()
	rs.Spec.Replicas = ptr.To[int32](0)
	if errs := (strategy{}).ValidateUpdate(rs, old); len(errs) != 0 {
		t.Errorf("scaling to zero refused: %v", errs)
	}
}

func TestResourceAndScale(t *testing.T) {
	r := Resource()
	if r.Resource != "replicasets" || !reflect.DeepEqual(r.ShortNames, []string{"rs"}) || !reflect.DeepEqual(r.Categories, []string{"all"}) ||
		!r.Status || !r.Generation || r.Kind.Kind != "ReplicaSet" {
		t.Errorf("unexpected discovery data: %+v", r)
	}
	rs := valid()
	rs.Status.Replicas = 1
	if spec, status, sel := r.Scale.Get(rs); spec != 1 || status != 1 || sel != "app=web" {
		t.Errorf("scale Get = %d, %d, %q", spec, status, sel)
	}
	if got := r.Fields(rs); !reflect.DeepEqual(got, fields.Set{"status.replicas": "1"}) {
		t.Errorf("fields %v", got)
	}
}

func TestColumns(t *testing.T) {
	rs := valid()
	rs.Spec.Replicas = ptr.To[int32](3)
	rs.Status = appsv1.ReplicaSetStatus{Replicas: 3, ReadyReplicas: 2}
	registrytest.ExpectRow(t, Resource().Columns, rs,
		[]string{"Name", "Desired", "Current", "Ready", "Age", "Containers", "Images", "Selector"},
		[]interface{}{"web-5d4f", int64(3), int64(3), int64(2), "<unknown>", "nginx", "nginx:1", "app=web"})
	rs.Spec.Selector = nil
	if got := Resource().Columns[7].Cell(rs); got != "<none>" {
		t.Errorf("selector cell for no selector = %q, want <none>", got)
	}
}
