package cluster

import (
	"fmt"
	"maps"
	"slices"

	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/svcnet/svcnet/internal/openapi"
	"github.com/svcnet/svcnet/internal/registry"
)

// openAPIHandler serves OpenAPI v2 and v3 for the resource set.
func openAPIHandler(set *registry.Set) (*openapi.Service, error) {
	var rs []openapi.Resource
	for _, r := range set.All() {
		if r.View != nil {
			// Read-only views (metrics.k8s.io) are not in svcnet's
			// generated definitions.
			continue
		}
		o := openapi.Resource{GVK: r.Kind, Plural: r.Resource, Namespaced: r.Namespaced, CreateOnly: r.Create != nil}
		for name, a := range r.Actions {
			if o.Actions == nil {
				o.Actions = map[string]schema.GroupVersionKind{}
			}
			o.Actions[name] = a.Kind
		}
		o.Subresources = slices.Sorted(maps.Keys(r.Subresources))
		if r.Status {
			o.Subresources = append(o.Subresources, "status")
		}
		if r.Scale != nil {
			o.Subresources = append(o.Subresources, "scale")
		}
		rs = append(rs, o)
	}
	svc, err := openapi.New(rs)
	if err != nil {
		return nil, fmt.Errorf("build OpenAPI documents: %w", err)
	}
	return svc, nil
}
