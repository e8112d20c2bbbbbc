// Package resourceclaim is the resource.k8s.io/v1 ResourceClaim strategy,
// after upstream's pkg/registry/resource/resourceclaim and v1's defaults.
// A claim asks for devices: each request wants exactly some devices of a
// class (allocationMode ExactCount and count 1 by default) or the first
// available of several sub-requests (defaulted the same way), and a
// toleration's operator defaults to Equal. The spec never changes (package
// dra refuses a change). A create starts without status, an update of the
// claim keeps the stored one, and the status subresource, which the
// scheduler and drivers write (allocation, reservedFor, devices), changes
// neither spec nor metadata; when it deallocates devices it also drops
// their entries from status.devices. Fields of features that are off by
// default in v1.37 (DRADerivedAttributes, DRAOptionalNodeOperations) are
// dropped unless the stored claim uses them. A delete answers with the
// deleted claim, and `kubectl get resourceclaims` shows NAME, STATE and
// AGE.
package resourceclaim

import (
	"strings"

	resourceapi "k8s.io/api/resource/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/svcnet/svcnet/internal/registry"
	"github.com/svcnet/svcnet/internal/registry/validate/dra"
)

// Resource describes resourceclaims.
func Resource() *registry.Resource {
	return &registry.Resource{
		Kind:                resourceapi.SchemeGroupVersion.WithKind("ResourceClaim"),
		Resource:            "resourceclaims",
		Singular:            "resourceclaim",
		Namespaced:          true,
		Status:              true,
		ReturnDeletedObject: true,
		Strategy:            strategy{},
		Columns: []registry.Column{
			registry.NameColumn(),
			{TableColumnDefinition: metav1.TableColumnDefinition{Name: "State", Type: "string",
				Description: "A summary of the current state (allocated, pending, reserved, etc.)."},
				Cell: func(o runtime.Object) interface{} { return State(o.(*resourceapi.ResourceClaim)) }},
			registry.AgeColumn(),
		},
	}
}

// State is the STATE column, as upstream's printer: "deleted" when the
// claim is being deleted, then "allocated" (and "reserved" when something
// uses it) or, unless deleted, "pending", joined by commas.
func State(c *resourceapi.ResourceClaim) string {
	var states []string
	if c.DeletionTimestamp != nil {
		states = append(states, "deleted")
	}
	switch {
	case c.Status.Allocation != nil:
		states = append(states, "allocated")
		if len(c.Status.ReservedFor) > 0 {
			states = append(states, "reserved")
		}
	case c.DeletionTimestamp == nil:
		states = append(states, "pending")
	}
	return strings.Join(states, ",")
}

type strategy struct{ registry.Base }

var (
	_ registry.Strategy      = strategy{}
	_ registry.StatusUpdater = strategy{}
)

// DefaultSpec is v1's defaulting of a claim's spec, shared with
// ResourceClaimTemplates: a request for exactly some devices, and each
// sub-request, allocates ExactCount devices, one unless told otherwise,
// and their tolerations' operator is Equal.
func DefaultSpec(spec *resourceapi.ResourceClaimSpec) {
	for i := range spec.Devices.Requests {
		r := &spec.Devices.Requests[i]
		if e := r.Exactly; e != nil {
			defaultCount(&e.AllocationMode, &e.Count)
			defaultTolerations(e.Tolerations)
		}
		for j := range r.FirstAvailable {
			sub := &r.FirstAvailable[j]
			defaultCount(&sub.AllocationMode, &sub.Count)
			defaultTolerations(sub.Tolerations)
		}
	}
}

// defaultCount is SetDefaults_ExactDeviceRequest's and
// SetDefaults_DeviceSubRequest's.
func defaultCount(mode *resourceapi.DeviceAllocationMode, count *int64) {
	if *mode == "" {
		*mode = resourceapi.DeviceAllocationModeExactCount
	}
	if *mode == resourceapi.DeviceAllocationModeExactCount && *count == 0 {
		*count = 1
	}
}

func defaultTolerations(ts []resourceapi.DeviceToleration) {
	for i := range ts {
		if ts[i].Operator == "" {
			ts[i].Operator = resourceapi.DeviceTolerationOpEqual
		}
	}
}

// Default defaults the spec and the tolerations of the allocated devices.
func (strategy) Default(obj runtime.Object) {
	c := obj.(*resourceapi.ResourceClaim)
	DefaultSpec(&c.Spec)
	if a := c.Status.Allocation; a != nil {
		for i := range a.Devices.Results {
			defaultTolerations(a.Devices.Results[i].Tolerations)
		}
	}
}

// DropDisabledSpecFields drops from spec the derivedAttributes of its
// requests and sub-requests (DRADerivedAttributes, alpha, off), unless
// old, the stored spec (nil on create), has some: upstream's
// resourceclaimspec.DropDisabledFields with v1.37's default gates, shared
// with ResourceClaimTemplates.
func DropDisabledSpecFields(spec, old *resourceapi.ResourceClaimSpec) {
	if old != nil && derivedAttributesInUse(old) {
		return
	}
	for i := range spec.Devices.Requests {
		r := &spec.Devices.Requests[i]
		if r.Exactly != nil {
			r.Exactly.DerivedAttributes = nil
		}
		for j := range r.FirstAvailable {
			r.FirstAvailable[j].DerivedAttributes = nil
		}
	}
}

func derivedAttributesInUse(spec *resourceapi.ResourceClaimSpec) bool {
	for _, r := range spec.Devices.Requests {
		if r.Exactly != nil && len(r.Exactly.DerivedAttributes) > 0 {
			return true
		}
		for _, sub := range r.FirstAvailable {
			if len(sub.DerivedAttributes) > 0 {
				return true
			}
		}
	}
	return false
}

// PrepareForCreate starts the claim without status.
func (strategy) PrepareForCreate(obj runtime.Object) {
	c := obj.(*resourceapi.ResourceClaim)
	c.Status = resourceapi.ResourceClaimStatus{}
	DropDisabledSpecFields(&c.Spec, nil)
}

// PrepareForUpdate keeps the stored status: only the status subresource
// writes it.
func (strategy) PrepareForUpdate(obj, old runtime.Object) {
	c, prev := obj.(*resourceapi.ResourceClaim), old.(*resourceapi.ResourceClaim)
	c.Status = prev.Status
	DropDisabledSpecFields(&c.Spec, &prev.Spec)
}

// PrepareForStatusUpdate keeps the stored spec, labels, annotations,
// finalizers and owner references (upstream's ResetObjectMetaForStatus),
// drops skipNodeOperations of allocated devices (DRAOptionalNodeOperations,
// alpha, off) unless the stored allocation has some, and drops the
// status.devices entries of the devices the write deallocates.
func (strategy) PrepareForStatusUpdate(obj, old runtime.Object) {
	c, prev := obj.(*resourceapi.ResourceClaim), old.(*resourceapi.ResourceClaim)
	c.Spec = prev.Spec
	c.Labels, c.Annotations, c.Finalizers, c.OwnerReferences = prev.Labels, prev.Annotations, prev.Finalizers, prev.OwnerReferences
	if a := c.Status.Allocation; a != nil && !skipNodeOperationsInUse(prev) {
		for i := range a.Devices.Results {
			a.Devices.Results[i].SkipNodeOperations = nil
		}
	}
	dropDeallocatedDevices(c, prev)
}

func skipNodeOperationsInUse(c *resourceapi.ResourceClaim) bool {
	if c.Status.Allocation == nil {
		return false
	}
	for _, r := range c.Status.Allocation.Devices.Results {
		if len(r.SkipNodeOperations) > 0 {
			return true
		}
	}
	return false
}

// deviceKey names one allocated device, or one share of it.
type deviceKey struct {
	driver, pool, device string
	share                string
	shared               bool
}

func allocatedKeys(c *resourceapi.ResourceClaim) map[deviceKey]bool {
	keys := map[deviceKey]bool{}
	if c.Status.Allocation == nil {
		return keys
	}
	for _, r := range c.Status.Allocation.Devices.Results {
		k := deviceKey{driver: r.Driver, pool: r.Pool, device: r.Device}
		if r.ShareID != nil {
			k.share, k.shared = string(*r.ShareID), true
		}
		keys[k] = true
	}
	return keys
}

// dropDeallocatedDevices removes from c's status.devices the devices old
// had allocated and c no longer has, so that a deallocation leaves no
// stale device status behind.
func dropDeallocatedDevices(c, old *resourceapi.ResourceClaim) {
	gone := allocatedKeys(old)
	for k := range allocatedKeys(c) {
		delete(gone, k)
	}
	kept := c.Status.Devices[:0]
	for _, d := range c.Status.Devices {
		k := deviceKey{driver: d.Driver, pool: d.Pool, device: d.Device}
		if d.ShareID != nil {
			k.share, k.shared = *d.ShareID, true
		}
		if !gone[k] {
			kept = append(kept, d)
		}
	}
	if len(kept) == 0 {
		kept = nil
	}
	c.Status.Devices = kept
}

// Validate checks a new claim.
func (strategy) Validate(obj runtime.Object) field.ErrorList {
	return dra.ResourceClaim(obj.(*resourceapi.ResourceClaim))
}

// ValidateUpdate checks an update of the claim and, when the status
// changes (only a status write changes it), the status.
func (strategy) ValidateUpdate(obj, old runtime.Object) field.ErrorList {
	c, prev := obj.(*resourceapi.ResourceClaim), old.(*resourceapi.ResourceClaim)
	errs := dra.ResourceClaimUpdate(c, prev)
	if !apiequality.Semantic.DeepEqual(c.Status, prev.Status) {
		errs = append(errs, dra.ResourceClaimStatusUpdate(c, prev)...)
	}
	return errs
}
