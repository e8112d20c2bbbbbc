package all

import (
	"github.com/svcnet/svcnet/internal/registry"
	"github.com/svcnet/svcnet/internal/registry/event"
)

// eventsGroup returns the resources of events.k8s.io/v1: Events, the
// core/v1 Events in their newer shape.
func eventsGroup() []*registry.Resource {
	return []*registry.Resource{event.ResourceV1()}
}
