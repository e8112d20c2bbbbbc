package resourceslice

import (
	"reflect"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/utils/ptr"

	"github.com/svcnet/svcnet/internal/registry"
	"github.com/svcnet/svcnet/internal/registry/registrytest"
)

type slice = *resourceapi.ResourceSlice

// now is the strategy's clock in these tests.
var now = time.Date(2026, 5, 1, 10, 0, 0, 500, time.UTC)

var s = strategy{now: func() time.Time { return now }}

// conformance is the slice upstream's conformance test creates: an empty
// pool of one node.
func conformance() slice {
	return &resourceapi.ResourceSlice{
		ObjectMeta: metav1.ObjectMeta{Name: "slice-e2e"},
		Spec: resourceapi.ResourceSliceSpec{
			Driver:   "dra.example.com",
			Pool:     resourceapi.ResourcePool{Name: "cluster", Generation: 1, ResourceSliceCount: 1},
			NodeName: ptr.To("no-such-node"),
		},
	}
}

// withDevice is conformance with one device that has an attribute.
func withDevice() slice {
	sl := conformance()
	sl.Spec.Devices = []resourceapi.Device{{Name: "device-0",
		Attributes:       map[resourceapi.QualifiedName]resourceapi.DeviceAttribute{"model": {StringValue: ptr.To("a")}},
		ConsumesCounters: []resourceapi.DeviceCounterConsumption{{CounterSet: "set"}},
	}}
	return sl
}

// The fields of the features that are off by default, one setter each.
func partitionType(sl slice) {
	sl.Spec.PartitionTypeAttribute = ptr.To(resourceapi.FullyQualifiedName("dra.example.com/type"))
}
func skipNodeOps(sl slice) {
	sl.Spec.SkipNodeOperations = []resourceapi.SkipNodeOperation{resourceapi.SkipNodeOperationAll}
}
func compatibility(sl slice) {
	sl.Spec.Devices[0].ConsumesCounters[0].CompatibilityGroups = []string{"g"}
}
func nodeAllocatable(sl slice) {
	sl.Spec.Devices[0].NodeAllocatableResources = map[corev1.ResourceName]resourceapi.NodeAllocatableResource{"cpu": {}}
}
func listAttribute(sl slice) {
	sl.Spec.Devices[0].Attributes["model"] = resourceapi.DeviceAttribute{StringValue: ptr.To("a"), StringValues: []string{"a", "b"}}
}

var disabled = []func(slice){partitionType, skipNodeOps, compatibility, nodeAllocatable, listAttribute}

// with is withDevice changed by each of set.
func with(set ...func(slice)) slice {
	sl := withDevice()
	for _, f := range set {
		f(sl)
	}
	return sl
}

func TestDefault(t *testing.T) {
	earlier := &metav1.Time{Time: time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)}
	tainted := func(times ...*metav1.Time) slice {
		sl := withDevice()
		for _, at := range times {
			sl.Spec.Devices[0].Taints = append(sl.Spec.Devices[0].Taints,
				resourceapi.DeviceTaint{Key: "k", Effect: resourceapi.DeviceTaintEffectNoSchedule, TimeAdded: at})
		}
		return sl
	}
	registrytest.RunDefault(t, s, []registrytest.DefaultCase[slice]{
		{Name: "no device", In: conformance(), Want: conformance()},
		{Name: "taints added now, to the second", In: tainted(nil, earlier),
			Want: tainted(&metav1.Time{Time: now.Truncate(time.Second)}, earlier)},
	})
}

// TestDisabledFields: a create drops the fields of disabled features, an
// update drops those the stored slice does not use.
func TestDisabledFields(t *testing.T) {
	for _, tt := range []struct {
		name            string
		old, next, want slice
	}{
		{"create", nil, with(disabled...), withDevice()},
		{"update", withDevice(), with(disabled...), withDevice()},
		{"update of a slice using them", with(disabled...), with(disabled...), with(disabled...)},
		{"update of a slice using list attributes", with(listAttribute), with(disabled...), with(listAttribute)},
		{"update of a slice skipping node operations", with(skipNodeOps), with(disabled...), with(skipNodeOps)},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if tt.old == nil {
				s.PrepareForCreate(tt.next)
			} else {
				s.PrepareForUpdate(tt.next, tt.old)
			}
			if !reflect.DeepEqual(tt.next, tt.want) {
				t.Errorf("prepared\n got %v\nwant %v", tt.next, tt.want)
			}
		})
	}
}

// TestConformance: what upstream's conformance test writes is accepted.
func TestConformance(t *testing.T) {
	sl := registrytest.Created(s, conformance())
	registrytest.ExpectErrors(t, s.Validate(sl))
	next := sl.DeepCopy()
	next.Spec.Devices = []resourceapi.Device{{Name: "device-0"}}
	s.Default(next)
	s.PrepareForUpdate(next, sl)
	registrytest.ExpectErrors(t, s.ValidateUpdate(next, sl))
}

func TestResource(t *testing.T) {
	r := Resource()
	if r.Resource != "resourceslices" || r.Singular != "resourceslice" || r.ShortNames != nil || r.Categories != nil ||
		r.Namespaced || r.Status || !r.Generation || !r.ReturnDeletedObject ||
		r.Kind != resourceapi.SchemeGroupVersion.WithKind("ResourceSlice") || !registry.Scheme.Recognizes(r.Kind) {
		t.Errorf("unexpected discovery data: %+v", r)
	}
	want := fields.Set{"spec.nodeName": "no-such-node", "spec.driver": "dra.example.com", "spec.pool.name": "cluster"}
	if got := r.Fields(conformance()); !reflect.DeepEqual(got, want) {
		t.Errorf("fields %v", got)
	}
	clusterWide := conformance()
	clusterWide.Spec.NodeName, clusterWide.Spec.AllNodes = nil, ptr.To(true)
	if got := r.Fields(clusterWide)["spec.nodeName"]; got != "" {
		t.Errorf("spec.nodeName of a slice without node %q", got)
	}
}

func TestColumns(t *testing.T) {
	cols := Resource().Columns
	registrytest.ExpectRow(t, cols, conformance(), []string{"Name", "Node", "Driver", "Pool", "Age"},
		[]interface{}{"slice-e2e", "no-such-node", "dra.example.com", "cluster", "<unknown>"})
	clusterWide := conformance()
	clusterWide.Spec.NodeName = nil
	if got := registrytest.TextRow(t, cols, clusterWide); got != "slice-e2e||dra.example.com|cluster" {
		t.Errorf("row %q", got)
	}
}
