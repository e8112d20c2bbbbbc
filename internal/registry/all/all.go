// Package all lists every resource svcnet serves; the API server is built
// from this set.
package all

import (
	"github.com/svcnet/svcnet/internal/allocator"
	"github.com/svcnet/svcnet/internal/registry"
)

// Resources returns fresh descriptors of every served resource; Services
// are allocated from the ranges of services.
func Resources(services allocator.Services) []*registry.Resource {
	return append(core(services), groups()...)
}

// Set indexes Resources for the API server.
func Set(services allocator.Services) (*registry.Set, error) {
	return registry.NewSet(Resources(services)...)
}
