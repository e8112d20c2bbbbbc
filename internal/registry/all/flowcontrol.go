package all

import (
	"github.com/svcnet/svcnet/internal/registry"
	"github.com/svcnet/svcnet/internal/registry/flowschema"
	"github.com/svcnet/svcnet/internal/registry/prioritylevelconfiguration"
	"github.com/svcnet/svcnet/internal/registry/storageversionmigration"
)

// flowcontrol returns the resources of flowcontrol.apiserver.k8s.io/v1:
// FlowSchemas and PriorityLevelConfigurations, which the API server
// creates at start from upstream's bootstrap configuration
// (internal/controlplane/apfbootstrap) but does not act on.
func flowcontrol() []*registry.Resource {
	return []*registry.Resource{flowschema.Resource(), prioritylevelconfiguration.Resource()}
}

// storagemigration returns the resources of storagemigration.k8s.io/v1:
// StorageVersionMigrations, stored and listed; no migrator runs them.
func storagemigration() []*registry.Resource {
	return []*registry.Resource{storageversionmigration.Resource()}
}
