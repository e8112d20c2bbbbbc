package deviceclass

import (
	"testing"

	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/svcnet/svcnet/internal/registry"
	"github.com/svcnet/svcnet/internal/registry/registrytest"
)

// conformance is the class upstream's conformance test creates: one CEL
// selector that matches no device.
func conformance() *resourceapi.DeviceClass {
	return &resourceapi.DeviceClass{
		ObjectMeta: metav1.ObjectMeta{Name: "class-e2e"},
		Spec: resourceapi.DeviceClassSpec{
			Selectors: []resourceapi.DeviceSelector{{CEL: &resourceapi.CELDeviceSelector{Expression: "false"}}},
		},
	}
}

// TestConformance: v1 has no defaults for a class, and what upstream's
// conformance test writes is accepted.
func TestConformance(t *testing.T) {
	s := Resource().Strategy
	c := registrytest.Created(s, conformance())
	if want := conformance(); c.String() != want.String() {
		t.Errorf("created %v, want %v", c, want)
	}
	registrytest.ExpectErrors(t, s.Validate(c))
	next := c.DeepCopy()
	next.Spec.Selectors[0].CEL.Expression = "1 == 0"
	s.Default(next)
	s.PrepareForUpdate(next, c)
	registrytest.ExpectErrors(t, s.ValidateUpdate(next, c))
}

func TestResource(t *testing.T) {
	r := Resource()
	if r.Resource != "deviceclasses" || r.Singular != "deviceclass" || r.ShortNames != nil || r.Categories != nil ||
		r.Namespaced || r.Status || !r.Generation || !r.ReturnDeletedObject || r.Fields != nil ||
		r.Kind != resourceapi.SchemeGroupVersion.WithKind("DeviceClass") || !registry.Scheme.Recognizes(r.Kind) {
		t.Errorf("unexpected discovery data: %+v", r)
	}
	registrytest.ExpectRow(t, r.Columns, conformance(), []string{"Name", "Age"}, []interface{}{"class-e2e", "<unknown>"})
}
