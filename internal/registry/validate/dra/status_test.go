package dra

import (
	"fmt"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
)

const (
	resultsPath = "status.allocation.devices.results"
	shareA      = "aaaaaaaa-aaaa-aaaa-aaaa-aaaaaaaaaaaa"
	shareB      = "bbbbbbbb-bbbb-bbbb-bbbb-bbbbbbbbbbbb"
)

func result(request string) resourceapi.DeviceRequestAllocationResult {
	return resourceapi.DeviceRequestAllocationResult{Request: request, Driver: goodName, Pool: goodName, Device: goodName, AdminAccess: ptr.To(false)}
}

func allocationOf(results ...resourceapi.DeviceRequestAllocationResult) *resourceapi.AllocationResult {
	return &resourceapi.AllocationResult{Devices: resourceapi.DeviceAllocationResult{Results: results}}
}

func consumers(n int) []resourceapi.ResourceClaimConsumerReference {
	var refs []resourceapi.ResourceClaimConsumerReference
	for i := range n {
		refs = append(refs, resourceapi.ResourceClaimConsumerReference{Resource: "pods", Name: fmt.Sprintf("pod-%d", i), UID: types.UID(fmt.Sprint(i))})
	}
	return refs
}

func deviceStatusOf(device string) resourceapi.AllocatedDeviceStatus {
	return resourceapi.AllocatedDeviceStatus{Driver: goodName, Pool: goodName, Device: device}
}

func conditions(n int) []metav1.Condition {
	var list []metav1.Condition
	for i := range n {
		list = append(list, metav1.Condition{Type: fmt.Sprintf("test-%d", i), Status: metav1.ConditionTrue, Reason: "Test", LastTransitionTime: metav1.Now()})
	}
	return list
}

func TestResourceClaimStatusUpdate(t *testing.T) {
	allocated := claimOf(exactRequest(goodName))
	allocated.Status.Allocation = allocationOf(result(goodName))
	badLabelValue := &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{
		MatchExpressions: []corev1.NodeSelectorRequirement{{Key: "foo", Operator: corev1.NodeSelectorOpIn, Values: []string{"-1"}}},
	}}}
	for name, tc := range map[string]struct {
		old    *resourceapi.ResourceClaim
		update func(*resourceapi.ResourceClaim)
		want   []want
	}{
		"no change": {old: allocated, update: func(*resourceapi.ResourceClaim) {}},
		"add empty allocation": {
			old:    claimOf(exactRequest(goodName)),
			update: func(c *resourceapi.ResourceClaim) { c.Status.Allocation = &resourceapi.AllocationResult{} },
		},
		"add allocation": {
			old:    claimOf(exactRequest(goodName)),
			update: func(c *resourceapi.ResourceClaim) { c.Status.Allocation = allocationOf(result(goodName)) },
		},
		"add allocation for unknown request": {
			old:    claimOf(exactRequest(goodName)),
			update: func(c *resourceapi.ResourceClaim) { c.Status.Allocation = allocationOf(result(badName)) },
			want: []want{
				invalid(resultsPath+"[0].request", "RFC 1123 label"),
				invalid(resultsPath+"[0].request", requestRefMessage),
			},
		},
		"add allocation with bad driver, pool and device": {
			old: claimOf(exactRequest(goodName)),
			update: func(c *resourceapi.ResourceClaim) {
				r := result(goodName)
				r.Driver, r.Pool, r.Device = "", strings.Repeat("x/", 128)+"x", badName
				c.Status.Allocation = allocationOf(r)
			},
			want: []want{
				required(resultsPath + "[0].driver"),
				tooLong(resultsPath + "[0].pool"),
				invalid(resultsPath+"[0].device", "RFC 1123 label"),
			},
		},
		"add allocation for subrequests": {
			old: claimOf(prioritizedRequest()),
			update: func(c *resourceapi.ResourceClaim) {
				c.Status.Allocation = allocationOf(result("foo/bar"), result("foo/foo/foo"), result("foo/baz"), result(badName+"/&^%$"))
			},
			want: []want{
				invalid(resultsPath+"[1].request", requestRefMessage),
				invalid(resultsPath+"[2].request", requestRefMessage),
				invalid(resultsPath+"[3].request", "RFC 1123 label"),
				invalid(resultsPath+"[3].request", "RFC 1123 label"),
				invalid(resultsPath+"[3].request", requestRefMessage),
			},
		},
		"empty node selector": {
			old: claimOf(exactRequest(goodName)),
			update: func(c *resourceapi.ResourceClaim) {
				c.Status.Allocation = &resourceapi.AllocationResult{NodeSelector: &corev1.NodeSelector{}}
			},
			want: []want{required("status.allocation.nodeSelector.nodeSelectorTerms", "must have at least one node selector term")},
		},
		"bad node selector label value": {
			old: claimOf(exactRequest(goodName)),
			update: func(c *resourceapi.ResourceClaim) {
				c.Status.Allocation = allocationOf(result(goodName))
				c.Status.Allocation.NodeSelector = badLabelValue
			},
			want: []want{invalid("status.allocation.nodeSelector.nodeSelectorTerms[0].matchExpressions[0].values[0]", "a valid label must be an empty string")},
		},
		"stored allocation is not checked again": {
			old: func() *resourceapi.ResourceClaim {
				claim := allocated.DeepCopy()
				claim.Status.Allocation.NodeSelector = badLabelValue
				return claim
			}(),
			update: func(c *resourceapi.ResourceClaim) { c.Status.ReservedFor = consumers(2) },
		},
		"allocation changed": {
			old:    allocated,
			update: func(c *resourceapi.ResourceClaim) { c.Status.Allocation.Devices.Results[0].Driver += "-2" },
			want:   []want{invalid("status.allocation", "field cannot be modified once set")},
		},
		"reservations up to the limit": {
			old: allocated,
			update: func(c *resourceapi.ResourceClaim) {
				c.Status.ReservedFor = consumers(resourceapi.ResourceClaimReservedForMaxSize)
			},
		},
		"reservations and allocation at once": {
			old: claimOf(exactRequest(goodName)),
			update: func(c *resourceapi.ResourceClaim) {
				c.Status.Allocation = allocationOf(result(goodName))
				c.Status.ReservedFor = consumers(3)
			},
		},
		"too many reservations": {
			old: allocated,
			update: func(c *resourceapi.ResourceClaim) {
				c.Status.ReservedFor = consumers(resourceapi.ResourceClaimReservedForMaxSize + 1)
			},
			want: []want{tooMany("status.reservedFor")},
		},
		"bad reservations": {
			old: allocated,
			update: func(c *resourceapi.ResourceClaim) {
				c.Status.ReservedFor = append(consumers(1), consumers(1)[0], resourceapi.ResourceClaimConsumerReference{})
			},
			want: []want{
				duplicate("status.reservedFor[1]"),
				required("status.reservedFor[2].resource"),
				required("status.reservedFor[2].name"),
				required("status.reservedFor[2].uid"),
			},
		},
		"reservation without allocation": {
			old:    claimOf(exactRequest(goodName)),
			update: func(c *resourceapi.ResourceClaim) { c.Status.ReservedFor = consumers(1) },
			want:   []want{forbidden("status.reservedFor", "may not be specified when `allocated` is not set")},
		},
		"new reservation while deleting": {
			old: func() *resourceapi.ResourceClaim {
				claim := allocated.DeepCopy()
				claim.DeletionTimestamp = &metav1.Time{}
				claim.Status.ReservedFor = consumers(1)
				return claim
			}(),
			update: func(c *resourceapi.ResourceClaim) { c.Status.ReservedFor = consumers(2) },
			want:   []want{forbidden("status.reservedFor", "new entries may not be added while `deallocationRequested` or `deletionTimestamp` are set")},
		},
		"fewer reservations while deleting": {
			old: func() *resourceapi.ResourceClaim {
				claim := allocated.DeepCopy()
				claim.DeletionTimestamp = &metav1.Time{}
				claim.Status.ReservedFor = consumers(2)
				return claim
			}(),
			update: func(c *resourceapi.ResourceClaim) { c.Status.ReservedFor = consumers(1) },
		},
		"allocation configs": {
			old: claimOf(exactRequest(goodName)),
			update: func(c *resourceapi.ResourceClaim) {
				c.Status.Allocation = allocationOf(result(goodName))
				fromClaim := func(config resourceapi.DeviceConfiguration, requests ...string) resourceapi.DeviceAllocationConfiguration {
					return resourceapi.DeviceAllocationConfiguration{Source: resourceapi.AllocationConfigSourceClaim, Requests: requests, DeviceConfiguration: config}
				}
				c.Status.Allocation.Devices.Config = []resourceapi.DeviceAllocationConfiguration{
					fromClaim(opaque(`{}`), goodName),
					{DeviceConfiguration: opaque(`{}`)},
					{Source: "no-such-source", DeviceConfiguration: opaque(`{}`)},
					fromClaim(resourceapi.DeviceConfiguration{}),
					fromClaim(resourceapi.DeviceConfiguration{Opaque: &resourceapi.OpaqueDeviceConfiguration{}}),
					fromClaim(opaque(jsonOfLength(resourceapi.OpaqueParametersMaxLength + 1))),
					fromClaim(opaque(`{}`), goodName, goodName, badName),
				}
			},
			want: []want{
				required("status.allocation.devices.config[1].source"),
				notSupported("status.allocation.devices.config[2].source", `"FromClaim", "FromClass"`),
				required("status.allocation.devices.config[3].opaque"),
				required("status.allocation.devices.config[4].opaque.driver"),
				required("status.allocation.devices.config[4].opaque.parameters"),
				tooLong("status.allocation.devices.config[5].opaque.parameters"),
				duplicate("status.allocation.devices.config[6].requests[1]"),
				invalid("status.allocation.devices.config[6].requests[2]", "RFC 1123 label"),
				invalid("status.allocation.devices.config[6].requests[2]", requestRefMessage),
			},
		},
		"stored oversized config is not checked again": {
			old: func() *resourceapi.ResourceClaim {
				claim := allocated.DeepCopy()
				claim.Status.Allocation.Devices.Config = []resourceapi.DeviceAllocationConfiguration{{
					Source:              resourceapi.AllocationConfigSourceClass,
					DeviceConfiguration: opaque(jsonOfLength(resourceapi.OpaqueParametersMaxLength + 1)),
				}}
				return claim
			}(),
			update: func(c *resourceapi.ResourceClaim) { c.Status.ReservedFor = consumers(1) },
		},
		"binding conditions": {
			old: claimOf(exactRequest(goodName)),
			update: func(c *resourceapi.ResourceClaim) {
				withConditions := func(conditions, failures []string) resourceapi.DeviceRequestAllocationResult {
					r := result(goodName)
					r.BindingConditions, r.BindingFailureConditions = conditions, failures
					return r
				}
				c.Status.Allocation = allocationOf(
					withConditions([]string{"example.com/c1", "c2", "c3", "c4"}, []string{"example.com/c5", "c6", "c7", "c8"}),
					withConditions([]string{"c1", "c2", "c3", "c4", "c5"}, []string{"c6"}),
					withConditions([]string{"c1"}, []string{"c2", "c3", "c4", "c5", "c6"}),
					withConditions([]string{"c1", "c2!"}, []string{"c3!", "c1", "c3!"}),
					withConditions(nil, []string{"c1"}),
					withConditions([]string{"c1"}, nil),
				)
			},
			want: []want{
				tooMany(resultsPath + "[1].bindingConditions"),
				tooMany(resultsPath + "[2].bindingFailureConditions"),
				invalid(resultsPath+"[3].bindingConditions[1]", "name part must consist of alphanumeric characters"),
				invalid(resultsPath+"[3].bindingFailureConditions[0]", "name part must consist of alphanumeric characters"),
				invalid(resultsPath+"[3].bindingFailureConditions[2]", "name part must consist of alphanumeric characters"),
				invalid(resultsPath+"[3].bindingFailureConditions[1]", "bindingFailureConditions must not overlap with bindingConditions"),
				duplicate(resultsPath + "[3].bindingFailureConditions[2]"),
				invalid(resultsPath+"[4].bindingConditions", "bindingConditions are required to use bindingFailureConditions"),
				invalid(resultsPath+"[5].bindingFailureConditions", "bindingFailureConditions are required to use bindingConditions"),
			},
		},
		"skipped node operations": {
			old: claimOf(exactRequest(goodName)),
			update: func(c *resourceapi.ResourceClaim) {
				skipping := func(ops ...resourceapi.SkipNodeOperation) resourceapi.DeviceRequestAllocationResult {
					r := result(goodName)
					r.SkipNodeOperations = ops
					return r
				}
				c.Status.Allocation = allocationOf(
					skipping(resourceapi.SkipNodeOperationNodePrepareResources, resourceapi.SkipNodeOperationNodeUnprepareResources),
					skipping(resourceapi.SkipNodeOperationAll, resourceapi.SkipNodeOperationNodePrepareResources),
					skipping(resourceapi.SkipNodeOperationNodePrepareResources),
					skipping("Unknown", resourceapi.SkipNodeOperationAll, resourceapi.SkipNodeOperationAll),
				)
			},
			want: []want{
				invalid(resultsPath+"[2].skipNodeOperations", "NodePrepareResources cannot be skipped unless NodeUnprepareResources is also skipped"),
				notSupported(resultsPath+"[3].skipNodeOperations[0]", `"*", "NodePrepareResources", "NodeUnprepareResources"`),
				duplicate(resultsPath + "[3].skipNodeOperations[2]"),
			},
		},
		"share IDs": {
			old: claimOf(exactRequest(goodName)),
			update: func(c *resourceapi.ResourceClaim) {
				shared := func(id string) resourceapi.DeviceRequestAllocationResult {
					r := result(goodName)
					r.ShareID = ptr.To(types.UID(id))
					return r
				}
				c.Status.Allocation = allocationOf(shared(shareA), shared("a"), shared(strings.ToUpper(shareA)))
				c.Status.Devices = []resourceapi.AllocatedDeviceStatus{{Driver: goodName, Pool: goodName, Device: goodName, ShareID: ptr.To("a")}}
			},
			// The declarative format check replaces the handwritten one.
			want: []want{
				invalid(resultsPath+"[1].shareID", "must be a lowercase UUID in 8-4-4-4-12 format"),
				invalid(resultsPath+"[2].shareID", "must be a lowercase UUID in 8-4-4-4-12 format"),
				invalid("status.devices[0].shareID", "must be a lowercase UUID in 8-4-4-4-12 format"),
			},
		},
		"device statuses": {
			old: func() *resourceapi.ResourceClaim {
				claim := allocated.DeepCopy()
				shared := result(goodName)
				shared.ShareID = ptr.To(types.UID(shareA))
				claim.Status.Allocation.Devices.Results = append(claim.Status.Allocation.Devices.Results, shared)
				return claim
			}(),
			update: func(c *resourceapi.ResourceClaim) {
				full := deviceStatusOf(goodName)
				full.Conditions = conditions(2)
				full.Data = &runtime.RawExtension{Raw: []byte(`{"a": 1}`)}
				full.NetworkData = &resourceapi.NetworkDeviceData{InterfaceName: "eth0", IPs: []string{"10.9.8.0/24", "2001:db8::1/64"}, HardwareAddress: "ea:9f:cb:40:b1:7b"}
				share := deviceStatusOf(goodName)
				share.ShareID = ptr.To(shareA)
				otherShare := deviceStatusOf(goodName)
				otherShare.ShareID = ptr.To(shareB)
				c.Status.Devices = []resourceapi.AllocatedDeviceStatus{full, share, deviceStatusOf(goodName), otherShare, deviceStatusOf("bar")}
			},
			want: []want{
				duplicate("status.devices[2]"),
				invalid("status.devices[3]", "must be an allocated device in the claim"),
				invalid("status.devices[4]", "must be an allocated device in the claim"),
			},
		},
		"bad device status data": {
			old: allocated,
			update: func(c *resourceapi.ResourceClaim) {
				status := deviceStatusOf(goodName)
				status.Conditions = conditions(resourceapi.AllocatedDeviceStatusMaxConditions + 1)
				status.Data = &runtime.RawExtension{Raw: []byte(jsonOfLength(resourceapi.AllocatedDeviceStatusDataMaxLength + 1))}
				status.NetworkData = &resourceapi.NetworkDeviceData{
					InterfaceName:   strings.Repeat("𝄞", resourceapi.NetworkDeviceDataInterfaceNameMaxLength/4+1),
					HardwareAddress: strings.Repeat("x", resourceapi.NetworkDeviceDataHardwareAddressMaxLength+1),
					IPs:             []string{"300.9.8.0/24", "010.009.008.000/24", "2001:0db8::1/64", "10.9.8.7/24", "10.9.8.7/24"},
				}
				bad := deviceStatusOf(goodName)
				bad.Driver = "dra.example.com"
				bad.Data = &runtime.RawExtension{Raw: []byte(`foo`)}
				bad.Conditions = []metav1.Condition{{Type: "ok", Status: "maybe", Reason: "Test", LastTransitionTime: metav1.Now()}}
				c.Status.Devices = []resourceapi.AllocatedDeviceStatus{status, bad}
			},
			want: []want{
				tooMany("status.devices[0].conditions"),
				tooLong("status.devices[0].data"),
				tooLong("status.devices[0].networkData.interfaceName"),
				tooLong("status.devices[0].networkData.hardwareAddress"),
				invalid("status.devices[0].networkData.ips[0]", "must be a valid address in CIDR form"),
				invalid("status.devices[0].networkData.ips[1]", `must be in canonical form ("10.9.8.0/24")`),
				invalid("status.devices[0].networkData.ips[2]", `must be in canonical form ("2001:db8::1/64")`),
				duplicate("status.devices[0].networkData.ips[4]"),
				invalid("status.devices[1]", "must be an allocated device in the claim"),
				notSupported("status.devices[1].conditions[0].status"),
				invalid("status.devices[1].data", "error parsing data as JSON: invalid character 'o' in literal false (expecting 'a')"),
			},
		},
		"too many IPs": {
			old: allocated,
			update: func(c *resourceapi.ResourceClaim) {
				status := deviceStatusOf(goodName)
				status.NetworkData = &resourceapi.NetworkDeviceData{}
				for i := range resourceapi.NetworkDeviceDataMaxIPs + 1 {
					status.NetworkData.IPs = append(status.NetworkData.IPs, fmt.Sprintf("10.9.8.%d/24", i))
				}
				c.Status.Devices = []resourceapi.AllocatedDeviceStatus{status}
			},
			want: []want{tooMany("status.devices[0].networkData.ips")},
		},
	} {
		t.Run(name, func(t *testing.T) {
			claim := tc.old.DeepCopy()
			tc.update(claim)
			assertErrors(t, ResourceClaimStatusUpdate(claim, tc.old), tc.want)
		})
	}
}

// TestDeviceStatusValue checks that an unallocated device is named in the
// error as upstream names it.
func TestDeviceStatusValue(t *testing.T) {
	claim := claimOf(exactRequest(goodName))
	claim.Status.Devices = []resourceapi.AllocatedDeviceStatus{{Driver: "b", Pool: "a", Device: "r"}}
	errs := ResourceClaimStatusUpdate(claim, claimOf(exactRequest(goodName)))
	const want = `status.devices[0]: Invalid value: {"Driver":"b","Pool":"a","Device":"r","ShareID":""}: must be an allocated device in the claim`
	if len(errs) != 1 || errs[0].Error() != want {
		t.Errorf("got %v, want %s", errs, want)
	}
}
