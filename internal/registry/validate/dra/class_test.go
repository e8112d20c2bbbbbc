package dra

import (
	"testing"

	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

func classConfig(raw string) resourceapi.DeviceClassConfiguration {
	return resourceapi.DeviceClassConfiguration{DeviceConfiguration: opaque(raw)}
}

func classOf(spec resourceapi.DeviceClassSpec) *resourceapi.DeviceClass {
	return &resourceapi.DeviceClass{ObjectMeta: metav1.ObjectMeta{Name: goodName}, Spec: spec}
}

func TestDeviceClass(t *testing.T) {
	for name, tc := range map[string]struct {
		spec resourceapi.DeviceClassSpec
		want []want
	}{
		"empty": {},
		"full": {spec: resourceapi.DeviceClassSpec{
			Selectors:            celSelectors(`device.driver == "dra.example.com"`, `device.capacity["dra.example.com"].memory.compareTo(quantity("1Gi")) >= 0`),
			Config:               []resourceapi.DeviceClassConfiguration{classConfig(`{"foo": 42}`), classConfig(jsonOfLength(resourceapi.OpaqueParametersMaxLength))},
			ExtendedResourceName: ptr.To("example.com/gpu"),
		}},
		// The declarative format check replaces the handwritten one.
		"extended resource name without a domain": {
			spec: resourceapi.DeviceClassSpec{ExtendedResourceName: ptr.To("example.com")},
			want: []want{invalid("spec.extendedResourceName", "a name must be a domain-prefixed path, such as 'example.com/my-prop'")},
		},
		"native resource name": {
			spec: resourceapi.DeviceClassSpec{ExtendedResourceName: ptr.To("kubernetes.io/gpu")},
			want: []want{invalid("spec.extendedResourceName", `must not have "kubernetes.io/" domain`)},
		},
		"bad selectors": {
			spec: resourceapi.DeviceClassSpec{Selectors: append(celSelectors("true"), resourceapi.DeviceSelector{}, celSelectors("noSuchVar")[0])},
			want: []want{
				required("spec.selectors[1].cel"),
				invalid("spec.selectors[2].cel.expression", "compilation failed: ERROR: <input>:1:1: undeclared reference to 'noSuchVar' (in container '')"),
			},
		},
		"too many selectors": {
			spec: resourceapi.DeviceClassSpec{Selectors: celSelectorsOf(resourceapi.DeviceSelectorsMaxSize+1, "true")},
			want: []want{tooMany("spec.selectors")},
		},
		"bad configs": {
			spec: resourceapi.DeviceClassSpec{Config: []resourceapi.DeviceClassConfiguration{
				classConfig(`{}`),
				{DeviceConfiguration: resourceapi.DeviceConfiguration{Opaque: &resourceapi.OpaqueDeviceConfiguration{}}},
				classConfig(`xxx`),
				classConfig(`"hello-world"`),
				classConfig(`null`),
				{},
				classConfig(jsonOfLength(resourceapi.OpaqueParametersMaxLength + 1)),
				{DeviceConfiguration: resourceapi.DeviceConfiguration{Opaque: &resourceapi.OpaqueDeviceConfiguration{Driver: badName, Parameters: opaque(`{}`).Opaque.Parameters}}},
			}},
			want: []want{
				required("spec.config[1].opaque.driver"),
				required("spec.config[1].opaque.parameters"),
				invalid("spec.config[2].opaque.parameters", "error parsing data as JSON: invalid character 'x' looking for beginning of value"),
				invalid("spec.config[3].opaque.parameters", "must be a valid JSON object"),
				required("spec.config[4].opaque.parameters"),
				required("spec.config[5].opaque"),
				tooLong("spec.config[6].opaque.parameters"),
				invalid("spec.config[7].opaque.driver", "RFC 1123 subdomain"),
			},
		},
		"too many configs": {
			spec: resourceapi.DeviceClassSpec{Config: func() []resourceapi.DeviceClassConfiguration {
				var configs []resourceapi.DeviceClassConfiguration
				for range resourceapi.DeviceConfigMaxSize + 1 {
					configs = append(configs, classConfig(`{}`))
				}
				return configs
			}()},
			want: []want{tooMany("spec.config")},
		},
	} {
		t.Run(name, func(t *testing.T) {
			assertErrors(t, DeviceClass(classOf(tc.spec)), tc.want)
		})
	}
}

func celSelectorsOf(n int, expression string) []resourceapi.DeviceSelector {
	var expressions []string
	for range n {
		expressions = append(expressions, expression)
	}
	return celSelectors(expressions...)
}

func TestDeviceClassUpdate(t *testing.T) {
	// stored holds what new objects may no longer have: an expression
	// that does not compile (as if the CEL environment had shrunk) and
	// oversized parameters.
	stored := classOf(resourceapi.DeviceClassSpec{
		Selectors: celSelectors("true", "noSuchVar"),
		Config:    []resourceapi.DeviceClassConfiguration{classConfig(jsonOfLength(resourceapi.OpaqueParametersMaxLength + 1))},
	})
	for name, tc := range map[string]struct {
		update func(*resourceapi.DeviceClass)
		want   []want
	}{
		"no change": {update: func(*resourceapi.DeviceClass) {}},
		"metadata change": {
			update: func(c *resourceapi.DeviceClass) { c.Labels = map[string]string{"a": "b"} },
		},
		"reordered selectors are new": {
			update: func(c *resourceapi.DeviceClass) { c.Spec.Selectors = celSelectors("noSuchVar", "true") },
			want:   []want{invalid("spec.selectors[0].cel.expression", "undeclared reference to 'noSuchVar'")},
		},
		"changed config is new": {
			update: func(c *resourceapi.DeviceClass) {
				c.Spec.Config = append(c.Spec.Config, classConfig(`{}`))
			},
			want: []want{tooLong("spec.config[0].opaque.parameters")},
		},
		"new config within limits": {
			update: func(c *resourceapi.DeviceClass) {
				c.Spec.Config = []resourceapi.DeviceClassConfiguration{classConfig(jsonOfLength(resourceapi.OpaqueParametersMaxLength))}
			},
		},
		"new bad extended resource name": {
			update: func(c *resourceapi.DeviceClass) { c.Spec.ExtendedResourceName = ptr.To("gpu") },
			want:   []want{invalid("spec.extendedResourceName", "a name must be a domain-prefixed path")},
		},
	} {
		t.Run(name, func(t *testing.T) {
			class := stored.DeepCopy()
			tc.update(class)
			assertErrors(t, DeviceClassUpdate(class, stored), tc.want)
		})
	}
}
