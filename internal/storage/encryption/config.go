// Package encryption is encryption at rest, kube-apiserver's
// --encryption-provider-config: it reads an apiserver.config.k8s.io/v1
// EncryptionConfiguration and turns it into the value transformers the
// store applies to each resource's values in etcd.
//
// It follows upstream's k8s.io/apiserver/pkg/server/options/encryptionconfig
// without importing it (that loader brings KMS's gRPC plugins, CEL and
// metrics along): the configuration types and the aescbc, aesgcm, secretbox
// and identity transformers are upstream's own packages, the loading and
// validation are written here with upstream's messages. For each resources
// entry the first provider encrypts what is written and every provider can
// read, each behind its prefix ("k8s:enc:aescbc:v1:key1:" then the
// ciphertext); a value read through another provider than the first is
// stale and is rewritten by the next update, even one that changes
// nothing, which is how keys are rotated. Resources the configuration does
// not name are stored as they are, and reading encrypted data for them is
// an error, as upstream's identity transformer says. KMS providers are
// refused.
package encryption

import (
	"crypto/sha256"
	"fmt"
	"os"
	"sort"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/apiserver/pkg/apis/apiserver"
	apiserverv1 "k8s.io/apiserver/pkg/apis/apiserver/v1"
	"k8s.io/apiserver/pkg/storage/value"
	"k8s.io/apiserver/pkg/storage/value/encrypt/identity"
)

var codecs = func() serializer.CodecFactory {
	scheme := runtime.NewScheme()
	utilruntime.Must(apiserver.AddToScheme(scheme))
	utilruntime.Must(apiserverv1.AddToScheme(scheme))
	return serializer.NewCodecFactory(scheme, serializer.EnableStrict)
}()

// Config is a loaded EncryptionConfiguration: the transformer of each
// resource (or wildcard) it names.
type Config struct {
	// Path is the file it was read from.
	Path string
	// Hash is upstream's hash of the file's content ("sha256:..."), which
	// tells two configurations apart without showing their keys.
	Hash string
	// rules are the transformers by resource, as the file names them:
	// {"", "secrets"}, {"apps", "*"}, {"*", "*"}.
	rules map[schema.GroupResource]*rule
}

// rule is what one resource (or wildcard) is stored with.
type rule struct {
	transformer value.Transformer
	// writes is the first provider's name ("aescbc", "identity", ...).
	writes string
}

// anyGroupAnyResource is the "*.*" wildcard.
var anyGroupAnyResource = schema.GroupResource{Group: "*", Resource: "*"}

// Load reads and validates the EncryptionConfiguration at path and builds
// its transformers. Its errors are upstream's LoadEncryptionConfig's.
func Load(path string) (*Config, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		err = fmt.Errorf("error reading encryption provider configuration file %q: %w", path, err)
		return nil, fmt.Errorf("error while parsing file: error while loading file: %w", err)
	}
	if len(data) == 0 {
		err = fmt.Errorf("encryption provider configuration file %q is empty", path)
		return nil, fmt.Errorf("error while parsing file: error while loading file: %w", err)
	}
	return Parse(path, data)
}

// Parse is Load of a file's content; name is the file's name in errors.
func Parse(name string, data []byte) (*Config, error) {
	obj, gvk, err := codecs.UniversalDecoder().Decode(data, nil, nil)
	if err != nil {
		return nil, fmt.Errorf("error while parsing file: error decoding encryption provider configuration file %q: %w", name, err)
	}
	ec, ok := obj.(*apiserver.EncryptionConfiguration)
	if !ok {
		return nil, fmt.Errorf("error while parsing file: got unexpected config type: %v", gvk)
	}
	if err := Validate(ec).ToAggregate(); err != nil {
		return nil, fmt.Errorf("error while parsing file: %w", err)
	}
	rules, err := build(ec)
	if err != nil {
		return nil, fmt.Errorf("error while building transformers: %w", err)
	}
	return &Config{Path: name, Hash: fmt.Sprintf("sha256:%x", sha256.Sum256(data)), rules: rules}, nil
}

// build makes the transformer of every resource the configuration names:
// the providers of every entry naming it, in order, behind upstream's
// prefixes.
func build(ec *apiserver.EncryptionConfiguration) (map[schema.GroupResource]*rule, error) {
	lists := map[schema.GroupResource][]value.PrefixTransformer{}
	writes := map[schema.GroupResource]string{}
	for _, entry := range ec.Resources {
		transformers, err := prefixTransformers(entry)
		if err != nil {
			return nil, err
		}
		for _, name := range entry.Resources {
			gr := schema.ParseGroupResource(name)
			// An earlier wildcard covers this resource already: the rule
			// would never apply.
			anyInGroup := schema.GroupResource{Group: gr.Group, Resource: "*"}
			if _, masked := lists[anyInGroup]; masked {
				return nil, fmt.Errorf("resource %q is masked by earlier rule %q", grYAMLString(gr), grYAMLString(anyInGroup))
			}
			if _, masked := lists[anyGroupAnyResource]; masked {
				return nil, fmt.Errorf("resource %q is masked by earlier rule %q", grYAMLString(gr), grYAMLString(anyGroupAnyResource))
			}
			if _, ok := writes[gr]; !ok {
				writes[gr] = providerName(entry.Providers[0])
			}
			lists[gr] = append(lists[gr], transformers...)
		}
	}
	rules := make(map[schema.GroupResource]*rule, len(lists))
	for gr, list := range lists {
		rules[gr] = &rule{transformer: value.NewPrefixTransformers(fmt.Errorf("no matching prefix found"), list...), writes: writes[gr]}
	}
	return rules, nil
}

// grYAMLString is how the configuration spells gr.
func grYAMLString(gr schema.GroupResource) string {
	if gr.Group == "" && gr.Resource == "*" {
		return "*."
	}
	return gr.String()
}

// find is the rule for gr, upstream's precedence: the resource itself,
// then its group's wildcard, then "*.*"; nil when none names it.
func (c *Config) find(gr schema.GroupResource) *rule {
	if c == nil {
		return nil
	}
	if r := c.rules[gr]; r != nil {
		return r
	}
	if r := c.rules[schema.GroupResource{Group: gr.Group, Resource: "*"}]; r != nil {
		return r
	}
	return c.rules[anyGroupAnyResource]
}

// TransformerFor returns the transformer of gr's values. A resource the
// configuration does not name (or a nil Config: no configuration) gets
// upstream's default, the identity transformer that refuses to read
// encrypted data.
func (c *Config) TransformerFor(gr schema.GroupResource) value.Transformer {
	if r := c.find(gr); r != nil {
		return r.transformer
	}
	return identity.NewEncryptCheckTransformer()
}

// Encrypts reports whether writes of gr are encrypted: a rule names it and
// its first provider is not identity.
func (c *Config) Encrypts(gr schema.GroupResource) bool {
	r := c.find(gr)
	return r != nil && r.writes != "identity"
}

// Resources lists the resources and wildcards the configuration names, with
// the provider that writes each ("secrets: aescbc"), for the log.
func (c *Config) Resources() []string {
	if c == nil {
		return nil
	}
	var out []string
	for gr, r := range c.rules {
		out = append(out, grYAMLString(gr)+": "+r.writes)
	}
	sort.Strings(out)
	return out
}
