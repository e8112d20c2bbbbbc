package dra

import (
	resourceapi "k8s.io/api/resource/v1"
	apivalidation "k8s.io/apimachinery/pkg/api/validation"
	metav1validation "k8s.io/apimachinery/pkg/apis/meta/v1/validation"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"

	svcvalidate "github.com/svcnet/svcnet/internal/registry/validate"
)

// claimStatus checks a write of a claim's status against the stored one.
func claimStatus(claim *resourceapi.ResourceClaim, old *resourceapi.ResourceClaimStatus, path *field.Path) field.ErrorList {
	status := &claim.Status
	errs := uniqueList(status.ReservedFor, resourceapi.ResourceClaimReservedForMaxSize, path.Child("reservedFor"), consumerRef,
		func(ref resourceapi.ResourceClaimConsumerReference) types.UID { return ref.UID })
	errs = append(errs, deviceStatuses(status, path.Child("devices"))...)
	errs = append(errs, reservations(status, old, claim.DeletionTimestamp != nil, path.Child("reservedFor"))...)
	allocationPath := path.Child("allocation")
	switch {
	case status.Allocation != nil && old.Allocation != nil:
		// An allocation cannot change; it is not checked again either,
		// because the rules for new allocations may be stricter now.
		errs = append(errs, apivalidation.ValidateImmutableField(status.Allocation, old.Allocation, allocationPath).WithOrigin("update").MarkCoveredByDeclarative()...)
	case status.Allocation != nil:
		errs = append(errs, allocation(status.Allocation, requestNamesOf(&claim.Spec.Devices), allocationPath)...)
	}
	return errs
}

func consumerRef(ref resourceapi.ResourceClaimConsumerReference, path *field.Path) field.ErrorList {
	var errs field.ErrorList
	if ref.Resource == "" {
		errs = append(errs, field.Required(path.Child("resource"), ""))
	}
	if ref.Name == "" {
		errs = append(errs, field.Required(path.Child("name"), ""))
	}
	if ref.UID == "" {
		errs = append(errs, field.Required(path.Child("uid"), ""))
	}
	return errs
}

// reservations checks that only an allocated claim is reserved, and that
// no consumer is added once the claim is being deleted.
func reservations(status, old *resourceapi.ResourceClaimStatus, deleting bool, path *field.Path) field.ErrorList {
	switch {
	case len(status.ReservedFor) == 0:
		return nil
	case status.Allocation == nil:
		return field.ErrorList{field.Forbidden(path, "may not be specified when `allocated` is not set")}
	case !deleting:
		return nil
	}
	before := make(map[resourceapi.ResourceClaimConsumerReference]bool, len(old.ReservedFor))
	for _, ref := range old.ReservedFor {
		before[ref] = true
	}
	for _, ref := range status.ReservedFor {
		if !before[ref] {
			return field.ErrorList{field.Forbidden(path, "new entries may not be added while `deallocationRequested` or `deletionTimestamp` are set")}
		}
	}
	return nil
}

// allocation checks a new allocation result.
func allocation(a *resourceapi.AllocationResult, names requestNames, path *field.Path) field.ErrorList {
	devicesPath := path.Child("devices")
	errs := boundedList(a.Devices.Results, resourceapi.AllocationResultsMaxSize, devicesPath.Child("results"),
		func(result resourceapi.DeviceRequestAllocationResult, path *field.Path) field.ErrorList {
			return allocatedDevice(result, names, path)
		})
	// Configs come from the class and from the claim, hence twice the limit.
	errs = append(errs, boundedList(a.Devices.Config, 2*resourceapi.DeviceConfigMaxSize, devicesPath.Child("config"),
		func(config resourceapi.DeviceAllocationConfiguration, path *field.Path) field.ErrorList {
			return allocationConfig(config, names, path)
		})...)
	if a.NodeSelector != nil {
		errs = append(errs, svcvalidate.NodeSelector(a.NodeSelector, path.Child("nodeSelector"))...)
	}
	return errs
}

func allocatedDevice(result resourceapi.DeviceRequestAllocationResult, names requestNames, path *field.Path) field.ErrorList {
	errs := requestRef(result.Request, names, path.Child("request"))
	errs = append(errs, driverName(result.Driver, path.Child("driver")).MarkCoveredByDeclarative()...)
	errs = append(errs, poolName(result.Pool, path.Child("pool")).MarkCoveredByDeclarative()...)
	errs = append(errs, label(result.Device, path.Child("device"))...)
	errs = append(errs, bindingConditions(result.BindingConditions, result.BindingFailureConditions, path)...)
	errs = append(errs, eachItem(result.Tolerations, path.Child("tolerations"), toleration)...)
	if result.ShareID != nil {
		errs = append(errs, shareID(string(*result.ShareID), path.Child("shareID"))...)
	}
	return append(errs, skipNodeOperations(result.SkipNodeOperations, path.Child("skipNodeOperations"))...)
}

// configSources are the sources upstream lists when it rejects one.
var configSources = []resourceapi.AllocationConfigSource{resourceapi.AllocationConfigSourceClaim, resourceapi.AllocationConfigSourceClass}

func allocationConfig(config resourceapi.DeviceAllocationConfiguration, names requestNames, path *field.Path) field.ErrorList {
	errs := oneOf(config.Source, configSources, path.Child("source"))
	errs = append(errs, uniqueList(config.Requests, resourceapi.DeviceRequestsMaxSize, path.Child("requests"),
		func(ref string, path *field.Path) field.ErrorList { return requestRef(ref, names, path) }, itself)...)
	return append(errs, deviceConfiguration(config.DeviceConfiguration, false, path)...)
}

// deviceKey identifies one allocated device, or one share of it. It is the
// value of errors about device statuses and renders as upstream's.
type deviceKey struct {
	Driver, Pool, Device, ShareID string
}

// deviceStatuses checks what drivers report about allocated devices: one
// entry per allocated device (or share of one) at most.
func deviceStatuses(status *resourceapi.ResourceClaimStatus, path *field.Path) field.ErrorList {
	allocated := make(map[deviceKey]bool)
	if status.Allocation != nil {
		for _, result := range status.Allocation.Devices.Results {
			key := deviceKey{Driver: result.Driver, Pool: result.Pool, Device: result.Device}
			if result.ShareID != nil {
				key.ShareID = string(*result.ShareID)
			}
			allocated[key] = true
		}
	}
	return uniqueList(status.Devices, -1, path,
		func(device resourceapi.AllocatedDeviceStatus, path *field.Path) field.ErrorList {
			return deviceStatus(device, allocated, path)
		}, statusKey)
}

func statusKey(device resourceapi.AllocatedDeviceStatus) deviceKey {
	key := deviceKey{Driver: device.Driver, Pool: device.Pool, Device: device.Device}
	if device.ShareID != nil {
		key.ShareID = *device.ShareID
	}
	return key
}

func deviceStatus(device resourceapi.AllocatedDeviceStatus, allocated map[deviceKey]bool, path *field.Path) field.ErrorList {
	errs := driverName(device.Driver, path.Child("driver"))
	errs = append(errs, poolName(device.Pool, path.Child("pool"))...)
	errs = append(errs, label(device.Device, path.Child("device"))...)
	if device.ShareID != nil {
		errs = append(errs, shareID(*device.ShareID, path.Child("shareID"))...)
	}
	if key := statusKey(device); !allocated[key] {
		errs = append(errs, field.Invalid(path, key, "must be an allocated device in the claim"))
	}
	conditionsPath := path.Child("conditions")
	errs = append(errs, overLimit(len(device.Conditions), resourceapi.AllocatedDeviceStatusMaxConditions, conditionsPath)...)
	errs = append(errs, metav1validation.ValidateConditions(device.Conditions, conditionsPath)...)
	if device.Data != nil && len(device.Data.Raw) > 0 {
		errs = append(errs, rawJSONObject(*device.Data, false, resourceapi.AllocatedDeviceStatusDataMaxLength, path.Child("data"))...)
	}
	return append(errs, networkData(device.NetworkData, path.Child("networkData"))...)
}

func networkData(data *resourceapi.NetworkDeviceData, path *field.Path) field.ErrorList {
	if data == nil {
		return nil
	}
	errs := maxBytes(data.InterfaceName, resourceapi.NetworkDeviceDataInterfaceNameMaxLength, path.Child("interfaceName"))
	errs = append(errs, maxBytes(data.HardwareAddress, resourceapi.NetworkDeviceDataHardwareAddressMaxLength, path.Child("hardwareAddress"))...)
	return append(errs, uniqueList(data.IPs, resourceapi.NetworkDeviceDataMaxIPs, path.Child("ips"),
		func(ip string, path *field.Path) field.ErrorList { return validation.IsValidInterfaceAddress(path, ip) }, itself)...)
}

// maxBytes checks a string of at most limit bytes, a limit upstream also
// declares.
func maxBytes(value string, limit int, path *field.Path) field.ErrorList {
	if len(value) > limit {
		return field.ErrorList{field.TooLong(path, "", limit).WithOrigin("maxBytes").MarkCoveredByDeclarative()}
	}
	return nil
}
