package dra

import (
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/utils/ptr"
)

// TestMessages checks whole messages where kube-apiserver's differ from
// what the handwritten rules alone would say: declarative errors that
// replace them, and values rendered from upstream's internal types.
func TestMessages(t *testing.T) {
	template := &resourceapi.ResourceClaimTemplate{Spec: resourceapi.ResourceClaimTemplateSpec{
		ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "x"}},
		Spec: resourceapi.ResourceClaimSpec{Devices: resourceapi.DeviceClaim{
			Requests: []resourceapi.DeviceRequest{{Name: goodName, Exactly: &resourceapi.ExactDeviceRequest{
				DeviceClassName: goodName, AllocationMode: resourceapi.DeviceAllocationModeExactCount, Count: 1,
				Capacity: &resourceapi.CapacityRequirements{Requests: map[resourceapi.QualifiedName]resource.Quantity{"memory": resource.MustParse("1Gi")}},
			}}},
			Config: []resourceapi.DeviceClaimConfiguration{claimConfig(`{"a":1}`)},
		}},
	}}
	changedTemplate := template.DeepCopy()
	changedTemplate.Spec.Spec.Devices.Requests[0].Exactly.DeviceClassName = "bar"
	notJSON := &resourceapi.ResourceClaimTemplate{Spec: resourceapi.ResourceClaimTemplateSpec{Spec: claimOf(exactRequest(goodName)).Spec}}
	changedNotJSON := notJSON.DeepCopy()
	changedNotJSON.Spec.Spec.Devices.Config = []resourceapi.DeviceClaimConfiguration{claimConfig(``)}

	allocated := claimOf(exactRequest(goodName))
	allocated.Status.Allocation = allocationOf(result(goodName))
	reallocated := allocated.DeepCopy()
	reallocated.Status.Allocation.Devices.Results[0].Device = "bar"
	changedClaim := allocated.DeepCopy()
	changedClaim.Spec.Devices.Requests[0].Exactly.Count = 2

	twoTerms := withSpec(func(s *resourceapi.ResourceSliceSpec) {
		s.NodeName = nil
		s.NodeSelector = &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{
			{MatchFields: []corev1.NodeSelectorRequirement{{Key: "metadata.name", Operator: corev1.NodeSelectorOpIn, Values: []string{"a"}}}}, {},
		}}
	})
	partitioned := withSpec(func(s *resourceapi.ResourceSliceSpec) {
		s.Devices[0].ConsumesCounters = []resourceapi.DeviceCounterConsumption{consumption("counterset-0", 1)}
		s.PartitionTypeAttribute = ptr.To(resourceapi.FullyQualifiedName(testDriver + "/int"))
	})
	emptyList := withDevice(1, 0, func(d *resourceapi.Device) {
		d.Attributes = map[resourceapi.QualifiedName]resourceapi.DeviceAttribute{"a": {IntValues: []int64{1}, StringValues: []string{}}}
	})

	for name, tc := range map[string]struct {
		errs field.ErrorList
		want []string
	}{
		"claim spec changed": {
			errs: ResourceClaimUpdate(changedClaim, allocated),
			want: []string{"spec: Invalid value: null: field is immutable"},
		},
		"allocation changed": {
			errs: ResourceClaimStatusUpdate(reallocated, allocated),
			want: []string{"status.allocation: Invalid value: null: field cannot be modified once set"},
		},
		"template spec changed": {
			errs: ResourceClaimTemplateUpdate(changedTemplate, template),
			want: []string{`spec: Invalid value: {"labels":{"app":"x"},"Spec":{"Devices":{"Requests":[{"Name":"foo","Exactly":{"DeviceClassName":"bar","Selectors":null,"AllocationMode":"ExactCount","Count":1,"AdminAccess":null,"Tolerations":null,"Capacity":{"Requests":{"memory":"1Gi"}},"DerivedAttributes":null},"FirstAvailable":null}],"Constraints":null,"Config":[{"Requests":null,"Opaque":{"Driver":"dra.example.com","Parameters":{"a":1}}}]}}}: field is immutable`},
		},
		"node selector terms": {
			errs: ResourceSlice(twoTerms),
			want: []string{`spec.nodeSelector.nodeSelectorTerms: Invalid value: [{"MatchExpressions":null,"MatchFields":[{"Key":"metadata.name","Operator":"In","Values":["a"]}]},{"MatchExpressions":null,"MatchFields":null}]: must have exactly one node selector term`},
		},
		"partition type attribute": {
			errs: ResourceSlice(partitioned),
			want: []string{`spec.devices[0].attributes[test.example.com/int]: Invalid value: {"IntValue":42,"BoolValue":null,"StringValue":null,"VersionValue":null,"IntValues":null,"BoolValues":null,"StringValues":null,"VersionValues":null}: must be a string value because ` + "`partitionTypeAttribute`" + ` names this attribute`},
		},
		"empty list attribute": {
			errs: ResourceSlice(emptyList),
			want: []string{
				`spec.devices[0].attributes[a].strings: Invalid value: []: must not be empty if specified`,
				`spec.devices[0].attributes[a]: Invalid value: {"IntValue":null,"BoolValue":null,"StringValue":null,"VersionValue":null,"IntValues":[1],"BoolValues":null,"StringValues":[],"VersionValues":null}: exactly one value must be specified`,
			},
		},
	} {
		t.Run(name, func(t *testing.T) {
			var got []string
			for _, err := range tc.errs {
				got = append(got, err.Error())
			}
			if strings.Join(got, "\n") != strings.Join(tc.want, "\n") {
				t.Errorf("got:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(tc.want, "\n"))
			}
		})
	}

	// Empty parameters (which only a Go client could send) cannot be
	// rendered as JSON; the value then falls back to Go syntax, as
	// upstream's does.
	errs := ResourceClaimTemplateUpdate(changedNotJSON, notJSON)
	if !slices.ContainsFunc(errs, func(err *field.Error) bool {
		return strings.HasPrefix(err.Error(), "spec: Invalid value: v1.ResourceClaimTemplateSpec{")
	}) {
		t.Errorf("got %v, want a value in Go syntax", errs)
	}
}
