package resourceclaim

import (
	"reflect"
	"testing"

	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	"github.com/svcnet/svcnet/internal/registry"
	"github.com/svcnet/svcnet/internal/registry/registrytest"
)

type claim = *resourceapi.ResourceClaim

var s = strategy{}

// conformance is the claim upstream's conformance test creates: one
// request for a device of a class.
func conformance() claim {
	return &resourceapi.ResourceClaim{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "claim-e2e"},
		Spec: resourceapi.ResourceClaimSpec{Devices: resourceapi.DeviceClaim{Requests: []resourceapi.DeviceRequest{{
			Name: "req-0", Exactly: &resourceapi.ExactDeviceRequest{DeviceClassName: "dra.example.com"},
		}}}},
	}
}

// withRequests is a claim with these requests.
func withRequests(rs ...resourceapi.DeviceRequest) claim {
	c := conformance()
	c.Spec.Devices.Requests = rs
	return c
}

func TestDefault(t *testing.T) {
	exact := func(mode resourceapi.DeviceAllocationMode, count int64, ts ...resourceapi.DeviceToleration) resourceapi.DeviceRequest {
		return resourceapi.DeviceRequest{Name: "r", Exactly: &resourceapi.ExactDeviceRequest{
			DeviceClassName: "c", AllocationMode: mode, Count: count, Tolerations: ts}}
	}
	sub := func(mode resourceapi.DeviceAllocationMode, count int64, ts ...resourceapi.DeviceToleration) resourceapi.DeviceSubRequest {
		return resourceapi.DeviceSubRequest{Name: "s", DeviceClassName: "c", AllocationMode: mode, Count: count, Tolerations: ts}
	}
	op := func(o resourceapi.DeviceTolerationOperator) resourceapi.DeviceToleration {
		return resourceapi.DeviceToleration{Key: "k", Operator: o}
	}
	const exactCount, all = resourceapi.DeviceAllocationModeExactCount, resourceapi.DeviceAllocationModeAll
	allocated := func(ts ...resourceapi.DeviceToleration) claim {
		c := withRequests(exact(exactCount, 1))
		c.Status.Allocation = &resourceapi.AllocationResult{Devices: resourceapi.DeviceAllocationResult{
			Results: []resourceapi.DeviceRequestAllocationResult{{Request: "req-0", Driver: "d", Pool: "p", Device: "dev", Tolerations: ts}}}}
		return c
	}
	registrytest.RunDefault(t, s, []registrytest.DefaultCase[claim]{
		{Name: "exactly one device", In: withRequests(exact("", 0)), Want: withRequests(exact(exactCount, 1))},
		{Name: "count given", In: withRequests(exact("", 3)), Want: withRequests(exact(exactCount, 3))},
		{Name: "all devices have no count", In: withRequests(exact(all, 0)), Want: withRequests(exact(all, 0))},
		{Name: "tolerations", In: withRequests(exact(exactCount, 1, op(""), op("Exists"))),
			Want: withRequests(exact(exactCount, 1, op("Equal"), op("Exists")))},
		{Name: "sub-requests",
			In: withRequests(resourceapi.DeviceRequest{Name: "r", FirstAvailable: []resourceapi.DeviceSubRequest{
				sub("", 0, op("")), sub(all, 0), sub(exactCount, 2)}}),
			Want: withRequests(resourceapi.DeviceRequest{Name: "r", FirstAvailable: []resourceapi.DeviceSubRequest{
				sub(exactCount, 1, op("Equal")), sub(all, 0), sub(exactCount, 2)}})},
		{Name: "tolerations of allocated devices", In: allocated(op("")), Want: allocated(op("Equal"))},
	})
}

// derived asks the first request for a derived attribute
// (DRADerivedAttributes, off).
func derived(c claim) claim {
	c.Spec.Devices.Requests[0].Exactly.DerivedAttributes = []resourceapi.DeviceDerivedAttribute{{}}
	return c
}

// TestStatus: a create starts without status and without the fields of
// disabled features, an update keeps the stored status (and a disabled
// field the stored claim has), a status write keeps spec and metadata.
func TestStatus(t *testing.T) {
	c := derived(conformance())
	c.Status.Allocation = &resourceapi.AllocationResult{}
	got := registrytest.Created(s, c)
	if got.Status.Allocation != nil || got.Spec.Devices.Requests[0].Exactly.DerivedAttributes != nil {
		t.Errorf("created %+v", got)
	}

	old := conformance()
	old.Status.Allocation = &resourceapi.AllocationResult{}
	next := derived(old.DeepCopy())
	next.Status.Allocation = nil
	s.PrepareForUpdate(next, old)
	if next.Status.Allocation == nil || next.Spec.Devices.Requests[0].Exactly.DerivedAttributes != nil {
		t.Errorf("update kept %+v", next)
	}
	old = derived(conformance())
	next = old.DeepCopy()
	s.PrepareForUpdate(next, old)
	if next.Spec.Devices.Requests[0].Exactly.DerivedAttributes == nil {
		t.Error("update dropped the derived attributes the stored claim has")
	}

	old = conformance()
	next = conformance()
	next.Spec.Devices.Requests[0].Name = "other"
	next.Labels, next.Finalizers = map[string]string{"a": "b"}, []string{"f"}
	next.Status.Allocation = &resourceapi.AllocationResult{}
	var su registry.StatusUpdater = s
	su.PrepareForStatusUpdate(next, old)
	if next.Spec.Devices.Requests[0].Name != "req-0" || next.Labels != nil || next.Finalizers != nil || next.Status.Allocation == nil {
		t.Errorf("status write kept %+v", next)
	}
}

// result is an allocated device, shared when share is not "".
func result(device, share string) resourceapi.DeviceRequestAllocationResult {
	r := resourceapi.DeviceRequestAllocationResult{Request: "req-0", Driver: "d", Pool: "p", Device: device}
	if share != "" {
		r.ShareID = ptr.To(types.UID(share))
	}
	return r
}

// deviceStatus is a driver's status of a device, shared when share is
// not "".
func deviceStatus(device, share string) resourceapi.AllocatedDeviceStatus {
	d := resourceapi.AllocatedDeviceStatus{Driver: "d", Pool: "p", Device: device}
	if share != "" {
		d.ShareID = ptr.To(share)
	}
	return d
}

func allocation(rs ...resourceapi.DeviceRequestAllocationResult) *resourceapi.AllocationResult {
	return &resourceapi.AllocationResult{Devices: resourceapi.DeviceAllocationResult{Results: rs}}
}

// TestStatusWrite: a status write drops the status of the devices it
// deallocates, and skipNodeOperations (DRAOptionalNodeOperations, off)
// unless the stored allocation has some.
func TestStatusWrite(t *testing.T) {
	for _, tt := range []struct {
		name          string
		old, next     *resourceapi.AllocationResult
		devices, want []resourceapi.AllocatedDeviceStatus
	}{
		{"deallocated", allocation(result("a", ""), result("b", "")), nil,
			[]resourceapi.AllocatedDeviceStatus{deviceStatus("a", ""), deviceStatus("b", "")}, nil},
		{"one device deallocated", allocation(result("a", ""), result("b", "")), allocation(result("b", "")),
			[]resourceapi.AllocatedDeviceStatus{deviceStatus("a", ""), deviceStatus("b", "")},
			[]resourceapi.AllocatedDeviceStatus{deviceStatus("b", "")}},
		{"one share deallocated", allocation(result("a", "s1"), result("a", "s2")), allocation(result("a", "s2")),
			[]resourceapi.AllocatedDeviceStatus{deviceStatus("a", "s1"), deviceStatus("a", "s2"), deviceStatus("a", "")},
			[]resourceapi.AllocatedDeviceStatus{deviceStatus("a", "s2"), deviceStatus("a", "")}},
		{"device never allocated", nil, nil,
			[]resourceapi.AllocatedDeviceStatus{deviceStatus("a", "")}, []resourceapi.AllocatedDeviceStatus{deviceStatus("a", "")}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			old := conformance()
			old.Status.Allocation, old.Status.Devices = tt.old, tt.devices
			next := old.DeepCopy()
			next.Status.Allocation = tt.next
			s.PrepareForStatusUpdate(next, old)
			if got := next.Status.Devices; !reflect.DeepEqual(got, tt.want) {
				t.Errorf("devices %+v, want %+v", got, tt.want)
			}
		})
	}

	skip := []resourceapi.SkipNodeOperation{resourceapi.SkipNodeOperationNodePrepareResources}
	old := conformance()
	next := old.DeepCopy()
	next.Status.Allocation = allocation(result("a", ""))
	next.Status.Allocation.Devices.Results[0].SkipNodeOperations = skip
	s.PrepareForStatusUpdate(next, old)
	if next.Status.Allocation.Devices.Results[0].SkipNodeOperations != nil {
		t.Error("a new allocation kept skipNodeOperations")
	}
	old = next.DeepCopy()
	old.Status.Allocation.Devices.Results[0].SkipNodeOperations = skip
	next = old.DeepCopy()
	s.PrepareForStatusUpdate(next, old)
	if next.Status.Allocation.Devices.Results[0].SkipNodeOperations == nil {
		t.Error("skipNodeOperations the stored allocation has were dropped")
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
	status := next.DeepCopy()
	status.Status.Allocation = &resourceapi.AllocationResult{}
	s.Default(status)
	s.PrepareForStatusUpdate(status, next)
	registrytest.ExpectErrors(t, s.ValidateUpdate(status, next))
}

func TestResource(t *testing.T) {
	r := Resource()
	if r.Resource != "resourceclaims" || r.Singular != "resourceclaim" || r.ShortNames != nil || r.Categories != nil ||
		!r.Namespaced || !r.Status || r.Generation || r.KeepStatusOnCreate || !r.ReturnDeletedObject || r.Fields != nil ||
		r.Kind != resourceapi.SchemeGroupVersion.WithKind("ResourceClaim") || !registry.Scheme.Recognizes(r.Kind) {
		t.Errorf("unexpected discovery data: %+v", r)
	}
}

func TestColumns(t *testing.T) {
	deleting := metav1.Now()
	for _, tt := range []struct {
		name      string
		deleting  bool
		allocated bool
		reserved  bool
		want      string
	}{
		{"pending", false, false, false, "pending"},
		{"allocated", false, true, false, "allocated"},
		{"reserved", false, true, true, "allocated,reserved"},
		{"deleted", true, false, false, "deleted"},
		{"deleted while in use", true, true, true, "deleted,allocated,reserved"},
	} {
		c := conformance()
		if tt.deleting {
			c.DeletionTimestamp = &deleting
		}
		if tt.allocated {
			c.Status.Allocation = &resourceapi.AllocationResult{}
		}
		if tt.reserved {
			c.Status.ReservedFor = []resourceapi.ResourceClaimConsumerReference{{Resource: "pods", Name: "web", UID: "uid"}}
		}
		registrytest.ExpectRow(t, Resource().Columns, c, []string{"Name", "State", "Age"}, []interface{}{"claim-e2e", tt.want, "<unknown>"})
	}
}
