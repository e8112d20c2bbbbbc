package all

import (
	"github.com/svcnet/svcnet/internal/registry"
	"github.com/svcnet/svcnet/internal/registry/deviceclass"
	"github.com/svcnet/svcnet/internal/registry/devicetaintrule"
	"github.com/svcnet/svcnet/internal/registry/resourceclaim"
	"github.com/svcnet/svcnet/internal/registry/resourceclaimtemplate"
	"github.com/svcnet/svcnet/internal/registry/resourceslice"
)

// resourceGroup returns the resources of resource.k8s.io/v1, dynamic
// resource allocation: DeviceClasses, ResourceClaims and their templates,
// ResourceSlices and DeviceTaintRules. They are stored and served; no
// scheduler plugin or driver of svcnet allocates devices.
func resourceGroup() []*registry.Resource {
	return []*registry.Resource{
		deviceclass.Resource(),
		resourceclaim.Resource(),
		resourceclaimtemplate.Resource(),
		resourceslice.Resource(),
		devicetaintrule.Resource(),
	}
}
