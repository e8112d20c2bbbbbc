package resourceclaimtemplate

import (
	"testing"

	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/svcnet/svcnet/internal/registry"
	"github.com/svcnet/svcnet/internal/registry/registrytest"
)

type template = *resourceapi.ResourceClaimTemplate

var s = strategy{}

// conformance is the template upstream's conformance test creates.
func conformance() template {
	return &resourceapi.ResourceClaimTemplate{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "template-e2e"},
		Spec: resourceapi.ResourceClaimTemplateSpec{Spec: resourceapi.ResourceClaimSpec{Devices: resourceapi.DeviceClaim{
			Requests: []resourceapi.DeviceRequest{{Name: "req-0", Exactly: &resourceapi.ExactDeviceRequest{DeviceClassName: "dra.example.com"}}},
		}}},
	}
}

// defaulted is conformance with a ResourceClaim's defaults.
func defaulted() template {
	t := conformance()
	t.Spec.Spec.Devices.Requests[0].Exactly.AllocationMode = resourceapi.DeviceAllocationModeExactCount
	t.Spec.Spec.Devices.Requests[0].Exactly.Count = 1
	return t
}

// derived asks the request for a derived attribute (DRADerivedAttributes,
// off).
func derived(t template) template {
	t.Spec.Spec.Devices.Requests[0].Exactly.DerivedAttributes = []resourceapi.DeviceDerivedAttribute{{}}
	return t
}

func TestDefault(t *testing.T) {
	registrytest.RunDefault(t, s, []registrytest.DefaultCase[template]{
		{Name: "exactly one device", In: conformance(), Want: defaulted()},
	})
}

// TestDisabledFields: a create drops the fields of disabled features, an
// update too unless the stored template has them.
func TestDisabledFields(t *testing.T) {
	if got := registrytest.Created(s, derived(conformance())); got.String() != defaulted().String() {
		t.Errorf("created %v", got)
	}
	next := derived(defaulted())
	s.PrepareForUpdate(next, defaulted())
	if next.Spec.Spec.Devices.Requests[0].Exactly.DerivedAttributes != nil {
		t.Error("update kept derived attributes")
	}
	next = derived(defaulted())
	s.PrepareForUpdate(next, derived(defaulted()))
	if next.Spec.Spec.Devices.Requests[0].Exactly.DerivedAttributes == nil {
		t.Error("update dropped the derived attributes the stored template has")
	}
}

// TestConformance: what upstream's conformance test writes is accepted.
func TestConformance(t *testing.T) {
	c := registrytest.Created(s, conformance())
	registrytest.ExpectErrors(t, s.Validate(c))
	next := c.DeepCopy()
	next.Labels = map[string]string{"test.dra.example.com": "test"}
	s.Default(next)
	s.PrepareForUpdate(next, c)
	registrytest.ExpectErrors(t, s.ValidateUpdate(next, c))
}

func TestResource(t *testing.T) {
	r := Resource()
	if r.Resource != "resourceclaimtemplates" || r.Singular != "resourceclaimtemplate" || r.ShortNames != nil || r.Categories != nil ||
		!r.Namespaced || r.Status || r.Generation || !r.ReturnDeletedObject || r.Fields != nil ||
		r.Kind != resourceapi.SchemeGroupVersion.WithKind("ResourceClaimTemplate") || !registry.Scheme.Recognizes(r.Kind) {
		t.Errorf("unexpected discovery data: %+v", r)
	}
	registrytest.ExpectRow(t, r.Columns, conformance(), []string{"Name", "Age"}, []interface{}{"template-e2e", "<unknown>"})
}
