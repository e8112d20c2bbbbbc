package encryption

import (
	"log/slog"
	"strings"

	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apiserver/pkg/storage/value"
)

// registryPrefix is where the store keeps resources:
// /registry/<resource>/[<namespace>/]<name>.
const registryPrefix = "/registry/"

// ForKeys returns the transformer of each etcd key for the store (as
// storage.Transformers): a key under /registry/<resource>/ of one of
// resources gets that resource's transformer (see TransformerFor), any
// other key none. Resources sharing a key prefix (events and
// events.events.k8s.io, both in /registry/events/) take the core group's
// rule, as upstream stores them as the core group's and refuses
// '*.events.k8s.io' in the configuration. The resources under the prefixes
// in direct are stored as they are whatever the configuration says: other
// parts of the API server read and write them in etcd without the store
// (the allocator's IPAddresses and ServiceCIDRs); a configuration that
// would encrypt them gets a warning. A nil Config gives every resource
// upstream's default, identity.
func (c *Config) ForKeys(resources []schema.GroupResource, direct ...string) func(key string) value.Transformer {
	byResource := map[string]schema.GroupResource{}
	for _, gr := range resources {
		if prev, ok := byResource[gr.Resource]; ok && prev.Group == "" {
			continue
		}
		byResource[gr.Resource] = gr
	}
	transformers := make(map[string]value.Transformer, len(byResource))
	for name, gr := range byResource {
		transformers[name] = c.TransformerFor(gr)
	}
	for _, prefix := range direct {
		name := strings.TrimSuffix(strings.TrimPrefix(prefix, registryPrefix), "/")
		if gr, ok := byResource[name]; ok && c.Encrypts(gr) {
			slog.Warn("encryption at rest: svcnet stores this resource unencrypted, as its allocator reads and writes it in etcd directly",
				"resource", gr.String(), "config", c.Path)
		}
		delete(transformers, name)
	}
	return func(key string) value.Transformer {
		rest, ok := strings.CutPrefix(key, registryPrefix)
		if !ok {
			return nil
		}
		name, _, _ := strings.Cut(rest, "/")
		return transformers[name]
	}
}
