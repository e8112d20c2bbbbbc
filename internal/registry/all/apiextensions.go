package all

import (
	"github.com/svcnet/svcnet/internal/registry"
	"github.com/svcnet/svcnet/internal/registry/customresourcedefinition"
)

// apiextensions returns the resources of apiextensions.k8s.io; the
// custom resources the definitions define join the set while the server
// runs (internal/apiextensions).
func apiextensions() []*registry.Resource {
	return []*registry.Resource{customresourcedefinition.Resource()}
}
