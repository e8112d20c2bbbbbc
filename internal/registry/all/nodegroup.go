package all

import (
	"github.com/svcnet/svcnet/internal/registry"
	"github.com/svcnet/svcnet/internal/registry/runtimeclass"
)

// nodeGroup returns the resources of node.k8s.io/v1: RuntimeClasses, which
// the API server's RuntimeClass admission applies to the pods naming them.
func nodeGroup() []*registry.Resource {
	return []*registry.Resource{runtimeclass.Resource()}
}
