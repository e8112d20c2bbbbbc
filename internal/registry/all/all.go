// Package all lists every resource svcnet serves; the API server is built
// from this set.
package all

import "github.com/svcnet/svcnet/internal/registry"

// Resources returns fresh descriptors of every served resource.
func Resources() []*registry.Resource {
	return append(core(), groups()...)
}

// Set indexes Resources for the API server.
func Set() (*registry.Set, error) {
	return registry.NewSet(Resources()...)
}
