// Package csinode is the storage.k8s.io/v1 CSINode strategy. Upstream's
// kubelet keeps one CSINode per node, named and owned by its Node, listing
// the CSI drivers registered there; svcnet has no CSI drivers and its node
// agent writes none, but the kind is served as upstream serves it so that
// discovery and clients find it: cluster-scoped, without a generation,
// upstream's validation (driver names, node IDs, topology keys,
// allocatable counts, no driver twice, a driver's fields fixed once
// registered but for its allocatable count), the NAME/DRIVERS/AGE table,
// and the status subresource, whose only field, status.storageHealth,
// belongs to the alpha CSIVolumeHealth feature, off as upstream's default:
// it is dropped from every write, so the status stays empty.
package csinode

import (
	"fmt"

	storagev1 "k8s.io/api/storage/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/validation"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/svcnet/svcnet/internal/registry"
	"github.com/svcnet/svcnet/internal/registry/validate"
)

// maxNodeIDLength is upstream's limit on a driver's nodeID.
const maxNodeIDLength = 256

// Resource describes csinodes.
func Resource() *registry.Resource {
	return &registry.Resource{
		Kind:     storagev1.SchemeGroupVersion.WithKind("CSINode"),
		Resource: "csinodes",
		Singular: "csinode",
		// Upstream's strategy leaves metadata.generation alone.
		Status:              true,
		ReturnDeletedObject: true,
		Strategy:            strategy{},
		// Upstream's printer, with its description of the count.
		Columns: []registry.Column{
			registry.NameColumn(),
			{TableColumnDefinition: metav1.TableColumnDefinition{Name: "Drivers", Type: "integer",
				Description: "Drivers indicates the number of CSI drivers registered on the node"},
				Cell: func(o runtime.Object) interface{} { return int64(len(o.(*storagev1.CSINode).Spec.Drivers)) }},
			registry.AgeColumn(),
		},
	}
}

type strategy struct{ registry.Base }

// PrepareForCreate starts a CSINode without a status.
func (strategy) PrepareForCreate(obj runtime.Object) {
	obj.(*storagev1.CSINode).Status = storagev1.CSINodeStatus{}
}

// PrepareForUpdate keeps the stored status: an update of the CSINode
// itself changes only its metadata and spec.
func (strategy) PrepareForUpdate(obj, old runtime.Object) {
	obj.(*storagev1.CSINode).Status = old.(*storagev1.CSINode).Status
}

// PrepareForStatusUpdate keeps the stored spec and, as upstream's
// dropDisabledCSINodeFields with CSIVolumeHealth off, drops
// status.storageHealth unless the stored object has it already.
func (strategy) PrepareForStatusUpdate(obj, old runtime.Object) {
	n, prev := obj.(*storagev1.CSINode), old.(*storagev1.CSINode)
	n.Spec = prev.Spec
	if len(prev.Status.StorageHealth) == 0 {
		n.Status.StorageHealth = nil
	}
}

// Validate is upstream's ValidateCSINode without the object metadata,
// which the API server checks for every kind (a CSINode's name, a node's
// name, is a DNS-1123 subdomain).
func (strategy) Validate(obj runtime.Object) field.ErrorList {
	return validateDrivers(obj.(*storagev1.CSINode).Spec.Drivers, field.NewPath("spec", "drivers"))
}

// ValidateUpdate is upstream's ValidateCSINodeUpdate: a driver listed
// before and after keeps all its fields but allocatable
// (MutableCSINodeAllocatableCount, GA and locked on), drivers may come and
// go. As upstream's, the error shows the changed driver as its internal
// type encodes, with untagged field names and no allocatable.
func (strategy) ValidateUpdate(obj, old runtime.Object) field.ErrorList {
	n, prev := obj.(*storagev1.CSINode), old.(*storagev1.CSINode)
	errs := validateDrivers(n.Spec.Drivers, field.NewPath("spec", "drivers"))
	for _, was := range prev.Spec.Drivers {
		for _, is := range n.Spec.Drivers {
			if was.Name != is.Name {
				continue
			}
			was, is := was.DeepCopy(), is.DeepCopy()
			was.Allocatable, is.Allocatable = nil, nil
			if !apiequality.Semantic.DeepEqual(is, was) {
				errs = append(errs, field.Invalid(field.NewPath("spec", "drivers"), internalDriverOf(is), validation.FieldImmutableErrorMsg))
			}
		}
	}
	return errs
}

// internalDriver has the fields, and so the untagged JSON, of upstream's
// internal storage.CSINodeDriver:
// {"Name":"a.example.com","NodeID":"n1","TopologyKeys":null,"Allocatable":null}.
type internalDriver struct {
	Name         string
	NodeID       string
	TopologyKeys []string
	Allocatable  *struct{ Count *int32 }
}

// internalDriverOf converts a driver without its allocatable, as
// ValidateUpdate compares them; nil keys stay nil, as upstream's
// conversion keeps them.
func internalDriverOf(d *storagev1.CSINodeDriver) *internalDriver {
	return &internalDriver{Name: d.Name, NodeID: d.NodeID, TopologyKeys: d.TopologyKeys}
}

// validateDrivers follows upstream's validateCSINodeDrivers, with its
// paths: the errors of a topology key name the driver, not the key.
func validateDrivers(drivers []storagev1.CSINodeDriver, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	names := sets.New[string]()
	for i, d := range drivers {
		dp := p.Index(i)
		errs = append(errs, validate.CSIDriverName(d.Name, dp.Child("name"))...)
		errs = append(errs, validateNodeID(d.NodeID, dp.Child("nodeID"))...)
		if d.Allocatable != nil && d.Allocatable.Count != nil {
			errs = append(errs, validation.ValidateNonnegativeField(int64(*d.Allocatable.Count), dp.Child("allocatable", "count"))...)
		}
		if names.Has(d.Name) {
			errs = append(errs, field.Duplicate(dp.Child("name"), d.Name))
		}
		names.Insert(d.Name)
		keys := sets.New[string]()
		for _, key := range d.TopologyKeys {
			if key == "" {
				errs = append(errs, field.Required(dp, key))
			}
			if keys.Has(key) {
				errs = append(errs, field.Duplicate(dp, key))
			}
			keys.Insert(key)
			errs = append(errs, validate.QualifiedName(key, dp)...)
		}
	}
	return errs
}

// validateNodeID: a driver's nodeID is required and at most 256
// characters.
func validateNodeID(id string, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	if id == "" {
		errs = append(errs, field.Required(p, id))
	}
	if len(id) > maxNodeIDLength {
		errs = append(errs, field.Invalid(p, id, fmt.Sprintf("must be %d characters or less", maxNodeIDLength)))
	}
	return errs
}
