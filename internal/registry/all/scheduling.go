package all

import (
	"github.com/svcnet/svcnet/internal/registry"
	"github.com/svcnet/svcnet/internal/registry/priorityclass"
)

// scheduling returns the resources of scheduling.k8s.io/v1:
// PriorityClasses, which the API server's Priority admission applies to
// new pods.
func scheduling() []*registry.Resource {
	return []*registry.Resource{priorityclass.Resource()}
}
