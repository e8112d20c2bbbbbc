package dra

import (
	"fmt"
	"strings"
	"testing"

	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/ptr"
)

const (
	goodName = "foo"
	badName  = "!@#$%^"
	// requestsPath is where a claim's requests are.
	requestsPath = "spec.devices.requests"
	// nestedLoops costs far more than a selector may: seven nested loops.
	nestedLoops = `[1, 2, 3, 4, 5, 6, 7, 8, 9, 10].all(x, [1, 2, 3, 4, 5, 6, 7, 8, 9, 10].all(y, [1, 2, 3, 4, 5, 6, 7, 8, 9, 10].all(z, [1, 2, 3, 4, 5, 6, 7, 8, 9, 10].all(z2, [1, 2, 3, 4, 5, 6, 7, 8, 9, 10].all(z3, [1, 2, 3, 4, 5, 6, 7, 8, 9, 10].all(z4, [1, 2, 3, 4, 5, 6, 7, 8, 9, 10].all(z5, int('1'.find('[0-9]*')) < 100)))))))`
	// fiveLoops costs a bit more than half of a claim's derived budget.
	fiveLoops      = `[1, 2, 3, 4, 5, 6, 7, 8, 9, 10].all(x, [1, 2, 3, 4, 5, 6, 7, 8, 9, 10].all(y, [1, 2, 3, 4, 5, 6, 7, 8, 9, 10].all(z, [1, 2, 3, 4, 5, 6, 7, 8, 9, 10].all(z2, [1, 2, 3, 4, 5, 6, 7, 8, 9, 10].all(z3, int('1'.find('[0-9]*')) < 100)))))`
	numaExpression = `device.attributes["dra.example.com"]["numa"]`
)

func exactRequest(name string) resourceapi.DeviceRequest {
	return resourceapi.DeviceRequest{
		Name: name,
		Exactly: &resourceapi.ExactDeviceRequest{
			DeviceClassName: goodName,
			AllocationMode:  resourceapi.DeviceAllocationModeExactCount,
			Count:           1,
		},
	}
}

func subRequest(name string) resourceapi.DeviceSubRequest {
	return resourceapi.DeviceSubRequest{
		Name:            name,
		DeviceClassName: goodName,
		AllocationMode:  resourceapi.DeviceAllocationModeExactCount,
		Count:           1,
	}
}

// prioritizedRequest is request "foo" with subrequests "foo" and "bar".
func prioritizedRequest() resourceapi.DeviceRequest {
	return resourceapi.DeviceRequest{Name: goodName, FirstAvailable: []resourceapi.DeviceSubRequest{subRequest(goodName), subRequest("bar")}}
}

func claimOf(requests ...resourceapi.DeviceRequest) *resourceapi.ResourceClaim {
	return &resourceapi.ResourceClaim{
		ObjectMeta: metav1.ObjectMeta{Name: goodName, Namespace: "ns"},
		Spec:       resourceapi.ResourceClaimSpec{Devices: resourceapi.DeviceClaim{Requests: requests}},
	}
}

func opaque(raw string) resourceapi.DeviceConfiguration {
	return resourceapi.DeviceConfiguration{Opaque: &resourceapi.OpaqueDeviceConfiguration{
		Driver:     "dra.example.com",
		Parameters: runtime.RawExtension{Raw: []byte(raw)},
	}}
}

// jsonOfLength is a JSON object of exactly n bytes.
func jsonOfLength(n int) string {
	return `{"str": "` + strings.Repeat("x", n-len(`{"str": ""}`)) + `"}`
}

func claimConfig(raw string, requests ...string) resourceapi.DeviceClaimConfiguration {
	return resourceapi.DeviceClaimConfiguration{Requests: requests, DeviceConfiguration: opaque(raw)}
}

func matching(attribute string, requests ...string) resourceapi.DeviceConstraint {
	return resourceapi.DeviceConstraint{Requests: requests, MatchAttribute: ptr.To(resourceapi.FullyQualifiedName(attribute))}
}

func celSelectors(expressions ...string) []resourceapi.DeviceSelector {
	var selectors []resourceapi.DeviceSelector
	for _, e := range expressions {
		selectors = append(selectors, resourceapi.DeviceSelector{CEL: &resourceapi.CELDeviceSelector{Expression: e}})
	}
	return selectors
}

// withDerived gives the first request of a claim derived attributes.
func withDerived(claim *resourceapi.ResourceClaim, attributes ...resourceapi.DeviceDerivedAttribute) *resourceapi.ResourceClaim {
	claim.Spec.Devices.Requests[0].Exactly.DerivedAttributes = attributes
	return claim
}

func derived(name, expression string) resourceapi.DeviceDerivedAttribute {
	return resourceapi.DeviceDerivedAttribute{Name: resourceapi.FullyQualifiedName(name), Expression: expression}
}

func TestResourceClaim(t *testing.T) {
	req0 := requestsPath + "[0]"
	for name, tc := range map[string]struct {
		claim *resourceapi.ResourceClaim
		want  []want
	}{
		"valid": {claim: claimOf(exactRequest(goodName))},
		"valid with limits reached": {claim: func() *resourceapi.ResourceClaim {
			claim := claimOf()
			for i := range resourceapi.DeviceRequestsMaxSize {
				claim.Spec.Devices.Requests = append(claim.Spec.Devices.Requests, exactRequest(fmt.Sprintf("r%d", i)))
			}
			for range resourceapi.DeviceConstraintsMaxSize {
				claim.Spec.Devices.Constraints = append(claim.Spec.Devices.Constraints, matching("foo/bar"))
			}
			for range resourceapi.DeviceConfigMaxSize {
				claim.Spec.Devices.Config = append(claim.Spec.Devices.Config, claimConfig(`{}`))
			}
			return claim
		}()},
		"too many requests, constraints and configs": {
			claim: func() *resourceapi.ResourceClaim {
				claim := claimOf()
				for i := range resourceapi.DeviceRequestsMaxSize + 1 {
					claim.Spec.Devices.Requests = append(claim.Spec.Devices.Requests, exactRequest(fmt.Sprintf("r%d", i)))
				}
				for range resourceapi.DeviceConstraintsMaxSize + 1 {
					claim.Spec.Devices.Constraints = append(claim.Spec.Devices.Constraints, matching(badName))
				}
				for range resourceapi.DeviceConfigMaxSize + 1 {
					claim.Spec.Devices.Config = append(claim.Spec.Devices.Config, claimConfig(``))
				}
				return claim
			}(),
			want: []want{tooMany(requestsPath), tooMany("spec.devices.constraints"), tooMany("spec.devices.config")},
		},
		"bad class name": {
			claim: func() *resourceapi.ResourceClaim {
				claim := claimOf(exactRequest(goodName))
				claim.Spec.Devices.Requests[0].Exactly.DeviceClassName = badName
				return claim
			}(),
			want: []want{invalid(req0+".exactly.deviceClassName", "RFC 1123 subdomain")},
		},
		"missing class name": {
			claim: func() *resourceapi.ResourceClaim {
				claim := claimOf(exactRequest(goodName))
				claim.Spec.Devices.Requests[0].Exactly.DeviceClassName = ""
				return claim
			}(),
			want: []want{required(req0 + ".exactly.deviceClassName")},
		},
		"bad references and attributes": {
			claim: func() *resourceapi.ResourceClaim {
				claim := claimOf(exactRequest(goodName))
				claim.Spec.Devices.Constraints = []resourceapi.DeviceConstraint{
					matching("missing-domain", goodName, badName),
					matching(""),
					{},
					{DistinctAttribute: ptr.To(resourceapi.FullyQualifiedName("dra.example.com/model"))},
				}
				claim.Spec.Devices.Config = []resourceapi.DeviceClaimConfiguration{claimConfig(`{}`, goodName, badName, "a/b/c")}
				return claim
			}(),
			want: []want{
				invalid("spec.devices.constraints[0].requests[1]", "RFC 1123 label"),
				invalid("spec.devices.constraints[0].requests[1]", requestRefMessage),
				invalid("spec.devices.constraints[0].matchAttribute", "C identifier"),
				invalid("spec.devices.constraints[0].matchAttribute", "a fully qualified name must be a domain and a name separated by a slash"),
				invalid("spec.devices.constraints[1].matchAttribute", "C identifier"),
				invalid("spec.devices.constraints[1].matchAttribute", "fully qualified"),
				required("spec.devices.constraints[2]", `exactly one of "matchAttribute" or "distinctAttribute" is required`),
				invalid("spec.devices.config[0].requests[1]", "RFC 1123 label"),
				invalid("spec.devices.config[0].requests[1]", requestRefMessage),
				invalid("spec.devices.config[0].requests[2]", requestRefMessage),
			},
		},
		// The declarative format check, which kube-apiserver enforces, looks
		// at both attributes of a constraint and wants a lowercase domain.
		"declarative attribute checks": {
			claim: func() *resourceapi.ResourceClaim {
				claim := claimOf(exactRequest(goodName))
				claim.Spec.Devices.Constraints = []resourceapi.DeviceConstraint{
					{MatchAttribute: ptr.To(resourceapi.FullyQualifiedName("dra.example.com/a")), DistinctAttribute: ptr.To(resourceapi.FullyQualifiedName("b"))},
					matching("Example.com/a"),
				}
				return claim
			}(),
			want: []want{
				invalid("spec.devices.constraints[0].distinctAttribute", "a fully qualified name must be a domain and a name separated by a slash"),
				invalid("spec.devices.constraints[1].matchAttribute", "prefix: a lowercase RFC 1123 subdomain"),
			},
		},
		"duplicate references": {
			claim: func() *resourceapi.ResourceClaim {
				claim := claimOf(exactRequest(goodName))
				claim.Spec.Devices.Constraints = []resourceapi.DeviceConstraint{matching("dra.example.com/model", goodName, goodName)}
				claim.Spec.Devices.Config = []resourceapi.DeviceClaimConfiguration{claimConfig(`{}`, goodName, goodName)}
				return claim
			}(),
			want: []want{duplicate("spec.devices.constraints[0].requests[1]"), duplicate("spec.devices.config[0].requests[1]")},
		},
		"allocation modes": {
			claim: func() *resourceapi.ResourceClaim {
				claim := claimOf(exactRequest(goodName), exactRequest("all"), exactRequest("negative"), exactRequest("other"), exactRequest("all-counted"), exactRequest(goodName))
				set := func(i int, mode resourceapi.DeviceAllocationMode, count int64) {
					claim.Spec.Devices.Requests[i].Exactly.AllocationMode, claim.Spec.Devices.Requests[i].Exactly.Count = mode, count
				}
				set(1, resourceapi.DeviceAllocationModeAll, 0)
				set(2, resourceapi.DeviceAllocationModeExactCount, -1)
				set(3, "other", 1)
				set(4, resourceapi.DeviceAllocationModeAll, 2)
				return claim
			}(),
			want: []want{
				invalid(requestsPath+"[2].exactly.count", "must be greater than zero"),
				notSupported(requestsPath + "[3].exactly.allocationMode"),
				invalid(requestsPath+"[4].exactly.count", "must not be specified when allocationMode is 'All'"),
				duplicate(requestsPath + "[5]"),
			},
		},
		"configuration parameters": {
			claim: func() *resourceapi.ResourceClaim {
				claim := claimOf(exactRequest(goodName))
				for _, raw := range []string{``, `{`, `"hello-world"`, `null`, jsonOfLength(resourceapi.OpaqueParametersMaxLength), jsonOfLength(resourceapi.OpaqueParametersMaxLength + 1)} {
					claim.Spec.Devices.Config = append(claim.Spec.Devices.Config, claimConfig(raw))
				}
				claim.Spec.Devices.Config = append(claim.Spec.Devices.Config, resourceapi.DeviceClaimConfiguration{})
				return claim
			}(),
			want: []want{
				required("spec.devices.config[0].opaque.parameters"),
				invalid("spec.devices.config[1].opaque.parameters", "error parsing data as JSON: unexpected end of JSON input"),
				invalid("spec.devices.config[2].opaque.parameters", "must be a valid JSON object"),
				required("spec.devices.config[3].opaque.parameters"),
				tooLong("spec.devices.config[5].opaque.parameters"),
				required("spec.devices.config[6].opaque"),
			},
		},
		"CEL selectors": {
			claim: func() *resourceapi.ResourceClaim {
				claim := claimOf(exactRequest(goodName))
				tooLongExpression := `device.driver == "` + strings.Repeat("x", resourceapi.CELSelectorExpressionMaxLength) + `"`
				claim.Spec.Devices.Requests[0].Exactly.Selectors = celSelectors(`device.driver == "dra.example.com"`, `device.attributes[true].someBoolean`, tooLongExpression, nestedLoops)
				claim.Spec.Devices.Requests[0].Exactly.Selectors = append(claim.Spec.Devices.Requests[0].Exactly.Selectors, resourceapi.DeviceSelector{})
				return claim
			}(),
			want: []want{
				invalid(req0+".exactly.selectors[1].cel.expression", "compilation failed: ERROR: <input>:1:18: found no matching overload for '_[_]'"),
				tooLong(req0 + ".exactly.selectors[2].cel.expression"),
				forbidden(req0+".exactly.selectors[3].cel.expression", "too complex, exceeds cost limit"),
				required(req0 + ".exactly.selectors[4].cel"),
			},
		},
		"consumable capacity in CEL": {
			claim: func() *resourceapi.ResourceClaim {
				claim := claimOf(exactRequest(goodName))
				claim.Spec.Devices.Requests[0].Exactly.Selectors = celSelectors(`device.allowMultipleAllocations == true`)
				return claim
			}(),
		},
		"derived attribute used by the request's constraint": {
			claim: func() *resourceapi.ResourceClaim {
				claim := withDerived(claimOf(exactRequest(goodName)), derived("dra.example.com/sharedNumaNode", numaExpression))
				claim.Spec.Devices.Constraints = []resourceapi.DeviceConstraint{matching("dra.example.com/sharedNumaNode", goodName)}
				return claim
			}(),
		},
		"derived attribute used by a claim-wide constraint": {
			claim: func() *resourceapi.ResourceClaim {
				claim := withDerived(claimOf(exactRequest(goodName)), derived("derived/sharedNumaNode", numaExpression))
				claim.Spec.Devices.Constraints = []resourceapi.DeviceConstraint{matching("derived/sharedNumaNode")}
				return claim
			}(),
		},
		"derived attribute of a subrequest used by its parent's constraint": {
			claim: func() *resourceapi.ResourceClaim {
				claim := claimOf(prioritizedRequest())
				claim.Spec.Devices.Requests[0].FirstAvailable[1].DerivedAttributes = []resourceapi.DeviceDerivedAttribute{derived("derived/numa", numaExpression)}
				claim.Spec.Devices.Constraints = []resourceapi.DeviceConstraint{{Requests: []string{goodName}, DistinctAttribute: ptr.To(resourceapi.FullyQualifiedName("derived/numa"))}}
				return claim
			}(),
		},
		"derived attribute used by another request's constraint": {
			claim: func() *resourceapi.ResourceClaim {
				claim := withDerived(claimOf(exactRequest(goodName), exactRequest("bar")), derived("derived/numa", numaExpression))
				claim.Spec.Devices.Constraints = []resourceapi.DeviceConstraint{matching("derived/numa", "bar")}
				return claim
			}(),
			want: []want{invalid(req0+".exactly.derivedAttributes[0].name", "must be referenced by at least one matchAttribute or distinctAttribute constraint targeting this request")},
		},
		"derived attributes with errors": {
			claim: func() *resourceapi.ResourceClaim {
				claim := withDerived(claimOf(exactRequest(goodName)),
					derived("derived/a", numaExpression),
					derived("derived/a", numaExpression),
					derived("derived/b", `device.attributes[true].someBoolean`),
					derived("derived/c", `device.attributes`),
					derived("derived/d", `[1, 2, 3]`),
					derived("derived/e", strings.Repeat("x", resourceapi.CELSelectorExpressionMaxLength+1)),
					derived("", ""),
					derived("nodomain", "1"),
				)
				claim.Spec.Devices.Constraints = []resourceapi.DeviceConstraint{matching("derived/a"), matching("derived/b"), matching("derived/c"), matching("derived/d"), matching("derived/e")}
				return claim
			}(),
			want: []want{
				duplicate(req0 + ".exactly.derivedAttributes[1]"),
				invalid(req0+".exactly.derivedAttributes[2].expression", "compilation failed"),
				invalid(req0+".exactly.derivedAttributes[3].expression", "must evaluate to a primitive scalar (string, integer, boolean, semver), not map(string, map(string, google.protobuf.Any))"),
				invalid(req0+".exactly.derivedAttributes[4].expression", "must evaluate to a primitive scalar (string, integer, boolean, semver), not list(int)"),
				tooLong(req0 + ".exactly.derivedAttributes[5].expression"),
				required(req0 + ".exactly.derivedAttributes[6].name"),
				required(req0 + ".exactly.derivedAttributes[6].expression"),
				invalid(req0+".exactly.derivedAttributes[7].name", "a fully qualified name must be a domain and a name separated by a slash"),
				invalid(req0+".exactly.derivedAttributes[7].name", "must be referenced"),
			},
		},
		"derived attribute too complex": {
			claim: func() *resourceapi.ResourceClaim {
				claim := withDerived(claimOf(exactRequest(goodName)), derived("derived/a", nestedLoops))
				claim.Spec.Devices.Constraints = []resourceapi.DeviceConstraint{matching("derived/a")}
				return claim
			}(),
			want: []want{
				forbidden(req0+".exactly.derivedAttributes[0].expression", "too complex, exceeds cost limit"),
				forbidden("spec.devices", "too complex, total cost of derived attribute CEL expressions in the claim exceeds cost limit"),
			},
		},
		"derived attributes within budget each but not together": {
			claim: func() *resourceapi.ResourceClaim {
				claim := withDerived(claimOf(exactRequest(goodName)), derived("derived/a", fiveLoops), derived("derived/b", fiveLoops))
				claim.Spec.Devices.Constraints = []resourceapi.DeviceConstraint{matching("derived/a"), matching("derived/b")}
				return claim
			}(),
			want: []want{forbidden("spec.devices", "total cost of derived attribute CEL expressions")},
		},
		"prioritized list": {claim: claimOf(prioritizedRequest())},
		"both exactly and firstAvailable": {
			claim: func() *resourceapi.ResourceClaim {
				claim := claimOf(prioritizedRequest())
				claim.Spec.Devices.Requests[0].Exactly = &resourceapi.ExactDeviceRequest{}
				return claim
			}(),
			want: []want{invalid(req0, "exactly one of `exactly` or `firstAvailable` is required, but multiple fields are set")},
		},
		"neither exactly nor firstAvailable": {
			claim: claimOf(resourceapi.DeviceRequest{Name: goodName}),
			want:  []want{required(req0, "exactly one of `exactly` or `firstAvailable` is required")},
		},
		"bad subrequests": {
			claim: func() *resourceapi.ResourceClaim {
				claim := claimOf(prioritizedRequest())
				claim.Spec.Devices.Requests[0].FirstAvailable = append(claim.Spec.Devices.Requests[0].FirstAvailable, resourceapi.DeviceSubRequest{Name: badName}, subRequest(goodName))
				return claim
			}(),
			want: []want{
				invalid(req0+".firstAvailable[2].name", "RFC 1123 label"),
				required(req0 + ".firstAvailable[2].deviceClassName"),
				notSupported(req0 + ".firstAvailable[2].allocationMode"),
				duplicate(req0 + ".firstAvailable[3]"),
			},
		},
		"too many subrequests": {
			claim: func() *resourceapi.ResourceClaim {
				request := resourceapi.DeviceRequest{Name: goodName}
				for i := range resourceapi.FirstAvailableDeviceRequestMaxSize + 1 {
					request.FirstAvailable = append(request.FirstAvailable, subRequest(fmt.Sprintf("sub-%d", i)))
				}
				return claimOf(request)
			}(),
			want: []want{tooMany(req0 + ".firstAvailable")},
		},
		"references to subrequests": {
			claim: func() *resourceapi.ResourceClaim {
				claim := claimOf(prioritizedRequest())
				claim.Spec.Devices.Config = []resourceapi.DeviceClaimConfiguration{claimConfig(`{}`, "foo/bar", goodName, "foo/baz")}
				claim.Spec.Devices.Constraints = []resourceapi.DeviceConstraint{matching("dra.example.com/driverVersion", "foo/bar", goodName, "foo/baz")}
				return claim
			}(),
			want: []want{
				invalid("spec.devices.config[0].requests[2]", requestRefMessage),
				invalid("spec.devices.constraints[0].requests[2]", requestRefMessage),
			},
		},
		"tolerations": {
			claim: func() *resourceapi.ResourceClaim {
				claim := claimOf(prioritizedRequest(), exactRequest("other"))
				claim.Spec.Devices.Requests[0].FirstAvailable[0].Tolerations = []resourceapi.DeviceToleration{{}}
				claim.Spec.Devices.Requests[1].Exactly.Tolerations = []resourceapi.DeviceToleration{
					{Operator: resourceapi.DeviceTolerationOpExists},
					{Key: "example.com/taint", Operator: resourceapi.DeviceTolerationOpExists, Effect: resourceapi.DeviceTaintEffectNoExecute},
					{Key: "example.com/taint", Operator: resourceapi.DeviceTolerationOpEqual, Value: "tainted", Effect: resourceapi.DeviceTaintEffectNoSchedule},
					{Key: goodName, Operator: "some-other-op"},
					{Key: badName, Operator: resourceapi.DeviceTolerationOpEqual, Value: badName, Effect: "some-other-effect"},
					{Operator: resourceapi.DeviceTolerationOpExists, Value: "x"},
				}
				return claim
			}(),
			want: []want{
				required(req0 + ".firstAvailable[0].tolerations[0].operator"),
				notSupported(requestsPath+"[1].exactly.tolerations[3].operator", `"Equal", "Exists"`),
				invalid(requestsPath+"[1].exactly.tolerations[4].key", "name part must consist of alphanumeric characters"),
				invalid(requestsPath+"[1].exactly.tolerations[4].value", "a valid label must be an empty string"),
				notSupported(requestsPath+"[1].exactly.tolerations[4].effect", `"NoExecute", "NoSchedule", "None"`),
				invalid(requestsPath+"[1].exactly.tolerations[5].value", "must be empty for operator `Exists`"),
			},
		},
	} {
		t.Run(name, func(t *testing.T) {
			assertErrors(t, ResourceClaim(tc.claim), tc.want)
		})
	}
}

func TestDerivedAttributesLimit(t *testing.T) {
	claim := claimOf(exactRequest(goodName))
	for i := range resourceapi.DeviceDerivedAttributesMaxSize + 1 {
		name := fmt.Sprintf("derived/a%d", i)
		withDerived(claim, append(claim.Spec.Devices.Requests[0].Exactly.DerivedAttributes, derived(name, "true"))...)
		if i < resourceapi.DeviceConstraintsMaxSize {
			claim.Spec.Devices.Constraints = append(claim.Spec.Devices.Constraints, matching(name))
		}
	}
	path := requestsPath + "[0].exactly.derivedAttributes"
	// The limit is declarative and stops only the declarative checks of
	// the items.
	assertErrors(t, ResourceClaim(claim), []want{
		tooMany(path),
		invalid(fmt.Sprintf("%s[%d].name", path, resourceapi.DeviceDerivedAttributesMaxSize), "must be referenced"),
	})
}

func TestResourceClaimUpdate(t *testing.T) {
	stored := claimOf(exactRequest(goodName))
	stored.Spec.Devices.Config = []resourceapi.DeviceClaimConfiguration{claimConfig(jsonOfLength(resourceapi.OpaqueParametersMaxLength + 1))}
	for name, tc := range map[string]struct {
		update func(*resourceapi.ResourceClaim)
		want   []want
	}{
		"no change, stored parameters stay valid": {update: func(*resourceapi.ResourceClaim) {}},
		"metadata change":                         {update: func(c *resourceapi.ResourceClaim) { c.Labels = map[string]string{"a": "b"} }},
		"spec change": {
			update: func(c *resourceapi.ResourceClaim) { c.Spec.Devices.Requests[0].Exactly.DeviceClassName += "2" },
			want:   []want{invalid("spec", "field is immutable")},
		},
	} {
		t.Run(name, func(t *testing.T) {
			claim := stored.DeepCopy()
			tc.update(claim)
			assertErrors(t, ResourceClaimUpdate(claim, stored), tc.want)
		})
	}
}

func templateOf(requests ...resourceapi.DeviceRequest) *resourceapi.ResourceClaimTemplate {
	return &resourceapi.ResourceClaimTemplate{
		ObjectMeta: metav1.ObjectMeta{Name: goodName, Namespace: "ns"},
		Spec:       resourceapi.ResourceClaimTemplateSpec{Spec: claimOf(requests...).Spec},
	}
}

func TestResourceClaimTemplate(t *testing.T) {
	for name, tc := range map[string]struct {
		template *resourceapi.ResourceClaimTemplate
		want     []want
	}{
		"valid":                  {template: templateOf(exactRequest(goodName))},
		"valid prioritized list": {template: templateOf(prioritizedRequest())},
		"valid claim metadata": {template: func() *resourceapi.ResourceClaimTemplate {
			template := templateOf(exactRequest(goodName))
			template.Spec.Labels = map[string]string{"app": goodName}
			template.Spec.Annotations = map[string]string{"example.com/note": "anything goes"}
			return template
		}()},
		"bad claim metadata": {
			template: func() *resourceapi.ResourceClaimTemplate {
				template := templateOf(exactRequest(goodName))
				template.Spec.Labels = map[string]string{"app": "spaces not allowed"}
				template.Spec.Annotations = map[string]string{badName: "x"}
				template.Spec.Name = goodName
				template.Spec.Finalizers = []string{"example.com/f"}
				return template
			}(),
			want: []want{
				invalid("spec.metadata.labels", "a valid label must be an empty string"),
				invalid("spec.metadata.annotations", "name part must consist of alphanumeric characters"),
				forbidden("spec.metadata.name", "cannot be set"),
				forbidden("spec.metadata.finalizers", "cannot be set"),
			},
		},
		"bad class name": {
			template: func() *resourceapi.ResourceClaimTemplate {
				template := templateOf(prioritizedRequest())
				template.Spec.Spec.Devices.Requests[0].FirstAvailable[0].DeviceClassName = badName
				return template
			}(),
			want: []want{invalid("spec.spec.devices.requests[0].firstAvailable[0].deviceClassName", "RFC 1123 subdomain")},
		},
		"both exactly and firstAvailable": {
			template: func() *resourceapi.ResourceClaimTemplate {
				template := templateOf(prioritizedRequest())
				template.Spec.Spec.Devices.Requests[0].Exactly = &resourceapi.ExactDeviceRequest{DeviceClassName: goodName, AllocationMode: resourceapi.DeviceAllocationModeAll}
				return template
			}(),
			want: []want{invalid("spec.spec.devices.requests[0]", "but multiple fields are set")},
		},
	} {
		t.Run(name, func(t *testing.T) {
			assertErrors(t, ResourceClaimTemplate(tc.template), tc.want)
		})
	}
}

func TestResourceClaimTemplateUpdate(t *testing.T) {
	stored := templateOf(prioritizedRequest())
	for name, tc := range map[string]struct {
		update func(*resourceapi.ResourceClaimTemplate)
		want   []want
	}{
		"no change":       {update: func(*resourceapi.ResourceClaimTemplate) {}},
		"metadata change": {update: func(t *resourceapi.ResourceClaimTemplate) { t.Labels = map[string]string{"a": "b"} }},
		"class change": {
			update: func(t *resourceapi.ResourceClaimTemplate) {
				t.Spec.Spec.Devices.Requests[0].FirstAvailable[0].DeviceClassName += "2"
			},
			want: []want{invalid("spec", "field is immutable")},
		},
		"claim label change": {
			update: func(t *resourceapi.ResourceClaimTemplate) { t.Spec.Labels = map[string]string{"a": "b"} },
			want:   []want{invalid("spec", "field is immutable")},
		},
	} {
		t.Run(name, func(t *testing.T) {
			template := stored.DeepCopy()
			tc.update(template)
			assertErrors(t, ResourceClaimTemplateUpdate(template, stored), tc.want)
		})
	}
}
