package e2e

import (
	"fmt"
	"strings"
	"testing"
	"time"
)

// TestAdmissionPolicies: a ValidatingAdmissionPolicy bound to a namespace
// refuses a Deployment its CEL expressions (with a variable) reject, with
// upstream's message, and a MutatingAdmissionPolicy's apply configuration
// labels the ConfigMaps it matches, as upstream's admission policy
// plugins do.
func TestAdmissionPolicies(t *testing.T) {
	t.Parallel()
	c := startCluster(t)
	c.must("create", "namespace", "guarded")
	c.must("label", "namespace", "guarded", "policy=on")
	c.withStdin(`apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicy
metadata: {name: replica-limit}
spec:
  failurePolicy: Fail
  matchConstraints:
    resourceRules:
    - {apiGroups: [apps], apiVersions: [v1], operations: [CREATE, UPDATE], resources: [deployments]}
  variables:
  - {name: replicas, expression: "object.spec.replicas"}
  validations:
  - expression: "variables.replicas <= 5"
    message: "replicas must be no greater than 5"
---
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicyBinding
metadata: {name: replica-limit-binding}
spec:
  policyName: replica-limit
  validationActions: [Deny]
  matchResources:
    namespaceSelector: {matchLabels: {policy: "on"}}
---
apiVersion: admissionregistration.k8s.io/v1
kind: MutatingAdmissionPolicy
metadata: {name: label-configmaps}
spec:
  failurePolicy: Fail
  reinvocationPolicy: Never
  matchConstraints:
    resourceRules:
    - {apiGroups: [""], apiVersions: [v1], operations: [CREATE], resources: [configmaps]}
  mutations:
  - patchType: ApplyConfiguration
    applyConfiguration:
      expression: 'Object{metadata: Object.metadata{labels: {"mutated-by": "policy"}}}'
---
apiVersion: admissionregistration.k8s.io/v1
kind: MutatingAdmissionPolicyBinding
metadata: {name: label-configmaps-binding}
spec:
  policyName: label-configmaps
  matchResources:
    namespaceSelector: {matchLabels: {policy: "on"}}
`, "apply", "-f", "-")

	// The plugins read policies through informers and compile them: the
	// first writes may come before.
	eventually(t, 30*time.Second, func() string {
		out, err := c.kubectl("", "create", "deployment", "big", "-n", "guarded", "--image=registry.k8s.io/pause:3.10", "--replicas=6")
		if err == nil {
			c.kubectl("", "delete", "deployment", "big", "-n", "guarded")
			return "a Deployment of 6 replicas was admitted"
		}
		if want := `deployments.apps "big" is forbidden: ValidatingAdmissionPolicy 'replica-limit' with binding 'replica-limit-binding' denied request: replicas must be no greater than 5`; !strings.Contains(out, want) {
			return "refusal " + out + ", want " + want
		}
		return ""
	})
	c.must("create", "deployment", "small", "-n", "guarded", "--image=registry.k8s.io/pause:3.10", "--replicas=5")
	c.must("create", "deployment", "big", "-n", "default", "--image=registry.k8s.io/pause:3.10", "--replicas=6")

	eventually(t, 30*time.Second, func() string {
		c.kubectl("", "delete", "configmap", "settings", "-n", "guarded", "--ignore-not-found")
		if out, err := c.kubectl("", "create", "configmap", "settings", "-n", "guarded", "--from-literal=a=b"); err != nil {
			return "create: " + out
		}
		if out, _ := c.kubectl("", "get", "configmap", "settings", "-n", "guarded", "-o", "jsonpath={.metadata.labels.mutated-by} {.data.a}"); out != "policy b" {
			return "ConfigMap label and data: " + out + ", want policy b"
		}
		return ""
	})
	c.must("create", "configmap", "settings", "-n", "default", "--from-literal=a=b")
	if out := c.must("get", "configmap", "settings", "-n", "default", "-o", "jsonpath={.metadata.labels}"); strings.Contains(out, "mutated-by") {
		t.Errorf("a ConfigMap outside the binding's namespaces was mutated: %s", out)
	}

	// The status controller type-checks each policy's generation against
	// the kinds it matches: none for replica-limit, two for a policy
	// comparing an int to a string.
	c.withStdin(`apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicy
metadata: {name: confused}
spec:
  matchConstraints:
    resourceRules:
    - {apiGroups: [apps], apiVersions: [v1], operations: [CREATE], resources: [deployments]}
  validations:
  - expression: "object.spec.replicas > '1'"
    messageExpression: "'wants replicas > 1, got ' + object.spec.replicas"
`, "apply", "-f", "-")
	status := func(policy, jsonpath string) string {
		return c.must("get", "validatingadmissionpolicy", policy, "-o", "jsonpath="+jsonpath)
	}
	eventually(t, 30*time.Second, func() string {
		for _, policy := range []string{"replica-limit", "confused"} {
			if got := status(policy, "{.status.observedGeneration}"); got != "1" {
				return "policy " + policy + " observedGeneration " + got + ", want 1"
			}
		}
		return ""
	})
	if got := status("replica-limit", "{.status.typeChecking}"); got != "{}" {
		t.Errorf("replica-limit typeChecking %s, want no warnings", got)
	}
	if got := status("confused", "{.status.typeChecking.expressionWarnings[*].fieldRef}"); got != "spec.validations[0].expression spec.validations[0].messageExpression" {
		t.Errorf("confused warns about %s", got)
	}
	for i, want := range []string{"found no matching overload for '_>_' applied to '(int, string)'", "found no matching overload for '_+_' applied to '(string, int)'"} {
		if got := status("confused", fmt.Sprintf("{.status.typeChecking.expressionWarnings[%d].warning}", i)); !strings.Contains(got, want) {
			t.Errorf("confused warning %d: %s, want %s", i, got, want)
		}
	}
}
