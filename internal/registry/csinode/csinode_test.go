package csinode

import (
	"reflect"
	"strings"
	"testing"

	storagev1 "k8s.io/api/storage/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/svcnet/svcnet/internal/registry"
	"github.com/svcnet/svcnet/internal/registry/registrytest"
)

type node = *storagev1.CSINode

func valid() node {
	return &storagev1.CSINode{
		ObjectMeta: metav1.ObjectMeta{Name: "node-1", ResourceVersion: "7",
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "v1", Kind: "Node", Name: "node-1", UID: "node-uid"}}},
		Spec: storagev1.CSINodeSpec{Drivers: []storagev1.CSINodeDriver{
			{Name: "ebs.csi.aws.com", NodeID: "i-0123", TopologyKeys: []string{"topology.ebs.csi.aws.com/zone"},
				Allocatable: &storagev1.VolumeNodeResources{Count: ptr.To[int32](25)}},
			{Name: "hostpath.csi.k8s.io", NodeID: "node-1"},
		}},
	}
}

const (
	subdomain = `a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')`
	namePart  = `name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')`
)

// The messages and paths are upstream's (ValidateCSINode and the helpers
// it calls), the errors of topology keys at the driver's path included.
func TestValidate(t *testing.T) {
	long := strings.Repeat("x", 257)
	registrytest.RunValidate(t, strategy{}, valid, []registrytest.Case[node]{
		{Name: "valid", Change: func(node) {}},
		{Name: "no drivers", Change: func(n node) { n.Spec.Drivers = nil }},
		{Name: "upper case driver name", Change: func(n node) { n.Spec.Drivers[0].Name = "EBS.csi.aws.com" }},
		{Name: "no driver name", Change: func(n node) { n.Spec.Drivers[1].Name = "" }, Want: []string{
			"spec.drivers[1].name: Required value",
		}},
		{Name: "bad driver name", Change: func(n node) { n.Spec.Drivers[0].Name = "csi_" + strings.Repeat("a", 60) }, Want: []string{
			"spec.drivers[0].name: Too long: may not be more than 63 bytes",
			`spec.drivers[0].name: Invalid value: "csi_` + strings.Repeat("a", 60) + `": ` + subdomain,
		}},
		{Name: "node ID", Change: func(n node) { n.Spec.Drivers[0].NodeID = ""; n.Spec.Drivers[1].NodeID = long }, Want: []string{
			"spec.drivers[0].nodeID: Required value",
			`spec.drivers[1].nodeID: Invalid value: "` + long + `": must be 256 characters or less`,
		}},
		{Name: "node ID of 256 characters", Change: func(n node) { n.Spec.Drivers[0].NodeID = long[1:] }},
		{Name: "negative count", Change: func(n node) { n.Spec.Drivers[0].Allocatable.Count = ptr.To[int32](-1) }, Want: []string{
			"spec.drivers[0].allocatable.count: Invalid value: -1: must be greater than or equal to 0",
		}},
		{Name: "allocatable without a count", Change: func(n node) { n.Spec.Drivers[0].Allocatable = &storagev1.VolumeNodeResources{} }},
		{Name: "a driver twice", Change: func(n node) {
			n.Spec.Drivers = append(n.Spec.Drivers, storagev1.CSINodeDriver{Name: "ebs.csi.aws.com", NodeID: "i-0456"})
		}, Want: []string{
			`spec.drivers[2].name: Duplicate value: "ebs.csi.aws.com"`,
		}},
		{Name: "topology keys", Change: func(n node) {
			n.Spec.Drivers[1].TopologyKeys = []string{"zone", "example.com/rack", "", "zone", "bad key", "a/b/c"}
		}, Want: []string{
			"spec.drivers[1]: Required value",
			`spec.drivers[1]: Invalid value: "": name part must be non-empty`,
			`spec.drivers[1]: Invalid value: "": ` + namePart,
			`spec.drivers[1]: Duplicate value: "zone"`,
			`spec.drivers[1]: Invalid value: "bad key": ` + namePart,
			`spec.drivers[1]: Invalid value: "a/b/c": a valid label key ` + namePart[len("name part "):] + ` with an optional DNS subdomain prefix and '/' (e.g. 'example.com/MyName')`,
		}},
	})
}

func TestValidateUpdate(t *testing.T) {
	registrytest.RunValidateUpdate(t, strategy{}, valid, []registrytest.Case[node]{
		{Name: "unchanged", Change: func(node) {}},
		{Name: "a driver added", Change: func(n node) {
			n.Spec.Drivers = append(n.Spec.Drivers, storagev1.CSINodeDriver{Name: "nfs.csi.k8s.io", NodeID: "node-1"})
		}},
		{Name: "a driver removed", Change: func(n node) { n.Spec.Drivers = n.Spec.Drivers[1:] }},
		{Name: "drivers reordered", Change: func(n node) { n.Spec.Drivers[0], n.Spec.Drivers[1] = n.Spec.Drivers[1], n.Spec.Drivers[0] }},
		// MutableCSINodeAllocatableCount is GA: the count may change.
		{Name: "allocatable count", Change: func(n node) {
			n.Spec.Drivers[0].Allocatable.Count = ptr.To[int32](39)
			n.Spec.Drivers[1].Allocatable = &storagev1.VolumeNodeResources{Count: ptr.To[int32](5)}
		}},
		{Name: "no topology keys as an empty list", Change: func(n node) { n.Spec.Drivers[1].TopologyKeys = []string{} }},
		{Name: "node ID", Change: func(n node) { n.Spec.Drivers[1].NodeID = "node-2" }, Want: []string{
			`spec.drivers: Invalid value: {"Name":"hostpath.csi.k8s.io","NodeID":"node-2","TopologyKeys":null,"Allocatable":null}: field is immutable`,
		}},
		{Name: "topology keys", Change: func(n node) {
			n.Spec.Drivers[0].TopologyKeys = append(n.Spec.Drivers[0].TopologyKeys, "topology.kubernetes.io/zone")
		}, Want: []string{
			`spec.drivers: Invalid value: {"Name":"ebs.csi.aws.com","NodeID":"i-0123","TopologyKeys":["topology.ebs.csi.aws.com/zone","topology.kubernetes.io/zone"],"Allocatable":null}: field is immutable`,
		}},
		{Name: "invalid and changed", Change: func(n node) { n.Spec.Drivers[1].NodeID = "" }, Want: []string{
			"spec.drivers[1].nodeID: Required value",
			`spec.drivers: Invalid value: {"Name":"hostpath.csi.k8s.io","NodeID":"","TopologyKeys":null,"Allocatable":null}: field is immutable`,
		}},
	})
}

func TestStatusHandling(t *testing.T) {
	health := []storagev1.StorageHealth{{Name: "ebs.csi.aws.com", HealthConditions: []storagev1.StorageHealthCondition{
		{Status: storagev1.StorageDegraded, Reason: "SlowIO"}}}}
	withHealth := func() node {
		n := valid()
		n.Status.StorageHealth = health
		return n
	}
	// A create starts without a status.
	if n := registrytest.Created(strategy{}, withHealth()); !reflect.DeepEqual(n.Status, storagev1.CSINodeStatus{}) {
		t.Errorf("create kept status %+v", n.Status)
	}

	// An update keeps the stored status and takes the spec.
	old := withHealth()
	next := valid()
	next.Spec.Drivers = next.Spec.Drivers[:1]
	strategy{}.PrepareForUpdate(next, old)
	if !reflect.DeepEqual(next.Status, old.Status) || len(next.Spec.Drivers) != 1 {
		t.Errorf("update: spec %+v, status %+v", next.Spec, next.Status)
	}

	// A status write keeps the stored spec; with CSIVolumeHealth off it
	// drops storageHealth, unless the stored object has it already.
	next = withHealth()
	next.Spec.Drivers = nil
	strategy{}.PrepareForStatusUpdate(next, valid())
	if !reflect.DeepEqual(next.Spec, valid().Spec) || next.Status.StorageHealth != nil {
		t.Errorf("status write: spec %+v, status %+v", next.Spec, next.Status)
	}
	next = withHealth()
	strategy{}.PrepareForStatusUpdate(next, withHealth())
	if !reflect.DeepEqual(next.Status.StorageHealth, health) {
		t.Errorf("status write dropped the stored storageHealth: %+v", next.Status)
	}
	var _ registry.StatusUpdater = strategy{}
}

func TestResource(t *testing.T) {
	r := Resource()
	if r.Resource != "csinodes" || r.Singular != "csinode" || r.ShortNames != nil || r.Categories != nil ||
		r.Namespaced || !r.Status || r.Generation || r.KeepStatusOnCreate || !r.ReturnDeletedObject ||
		r.Scale != nil || r.Fields != nil || r.NameValidation != nil || r.Subresources != nil ||
		r.Kind != storagev1.SchemeGroupVersion.WithKind("CSINode") || !registry.Scheme.Recognizes(r.Kind) {
		t.Errorf("unexpected discovery data: %+v", r)
	}
}

func TestColumns(t *testing.T) {
	names := []string{"Name", "Drivers", "Age"}
	columns := Resource().Columns
	registrytest.ExpectRow(t, columns, valid(), names, []interface{}{"node-1", int64(2), "<unknown>"})
	registrytest.ExpectRow(t, columns, &storagev1.CSINode{ObjectMeta: metav1.ObjectMeta{Name: "node-2"}}, names,
		[]interface{}{"node-2", int64(0), "<unknown>"})
	if c := columns[1]; c.Type != "integer" || c.Description != "Drivers indicates the number of CSI drivers registered on the node" {
		t.Errorf("DRIVERS column %+v", c.TableColumnDefinition)
	}
}
