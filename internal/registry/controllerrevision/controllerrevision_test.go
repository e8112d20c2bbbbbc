package controllerrevision

import (
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/svcnet/svcnet/internal/registry/registrytest"
)

func valid() *appsv1.ControllerRevision {
	return &appsv1.ControllerRevision{
		ObjectMeta: metav1.ObjectMeta{Name: "web-7b9c5d", Namespace: "default"},
		Data:       runtime.RawExtension{Raw: []byte(`{"spec":{"template":{"$patch":"replace","spec":{"containers":[{"name":"nginx","image":"nginx"}]}}}}`)},
		Revision:   1,
	}
}

func TestValidate(t *testing.T) {
	registrytest.RunValidate(t, strategy{}, valid, []registrytest.Case[*appsv1.ControllerRevision]{
		{Name: "valid", Change: func(*appsv1.ControllerRevision) {}},
		{Name: "revision zero", Change: func(cr *appsv1.ControllerRevision) { cr.Revision = 0 }},
		{Name: "no data, negative revision", Change: func(cr *appsv1.ControllerRevision) {
			cr.Data = runtime.RawExtension{}
			cr.Revision = -1
		}, Want: []string{
			"data: Required value: data is mandatory",
			"revision: Invalid value: -1: must be greater than or equal to 0",
		}},
	})
}

func TestValidateUpdate(t *testing.T) {
	registrytest.RunValidateUpdate(t, strategy{}, valid, []registrytest.Case[*appsv1.ControllerRevision]{
		{Name: "renumbered by a rollback", Change: func(cr *appsv1.ControllerRevision) { cr.Revision = 3 }},
		{Name: "same data re-encoded", Change: func(cr *appsv1.ControllerRevision) {
			cr.Data.Raw = []byte(`{"spec": {"template": {"spec": {"containers": [{"image": "nginx", "name": "nginx"}]}, "$patch": "replace"}}}`)
		}},
		{Name: "data changed", Change: func(cr *appsv1.ControllerRevision) {
			cr.Data.Raw = []byte(`{"spec":{}}`)
		}, Want: []string{`data: Invalid value: "{\"spec\":{}}": field is immutable`}},
	})
}

func TestColumns(t *testing.T) {
	cr := valid()
	registrytest.ExpectRow(t, Resource().Columns, cr,
		[]string{"Name", "Controller", "Revision", "Age"},
		[]interface{}{"web-7b9c5d", "<none>", int64(1), "<unknown>"})
	set := &appsv1.StatefulSet{ObjectMeta: metav1.ObjectMeta{Name: "web", UID: "uid-web"}}
	cr.OwnerReferences = []metav1.OwnerReference{*metav1.NewControllerRef(set, appsv1.SchemeGroupVersion.WithKind("StatefulSet"))}
	if got := Resource().Columns[1].Cell(cr); got != "statefulset.apps/web" {
		t.Errorf("controller cell %q, want statefulset.apps/web", got)
	}
}
