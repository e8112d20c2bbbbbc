package e2e

import (
	"encoding/base64"
	"strings"
	"testing"
	"time"

	"github.com/svcnet/svcnet/internal/pki"
)

// TestWebhooks: the API server calls the webhooks the cluster registers,
// behind Services whose pods run agnhost's webhook and
// crd-conversion-webhook (as upstream's AdmissionWebhook and
// CustomResourceConversionWebhook conformance tests deploy them): a
// mutating webhook's patch is stored (pruned of what a custom resource's
// schema does not declare), a validating webhook's refusal reaches
// kubectl with its message, a CONNECT of pods/attach is refused too, a
// webhook that cannot be called fails the write under the Fail policy and
// lets it through under Ignore, and a custom resource stored at v1 is
// read at v2 as its definition's conversion webhook converts it.
func TestWebhooks(t *testing.T) {
	t.Parallel()
	needRoot(t)
	c := startNodeCluster(t)
	dir := t.TempDir()
	ca, err := pki.LoadOrCreateCA(dir)
	if err != nil {
		t.Fatal(err)
	}
	serving, err := ca.Serving(dir, "webhook", []string{"e2e-webhook.default.svc", "e2e-conversion.default.svc"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	b64 := func(b []byte) string { return base64.StdEncoding.EncodeToString(b) }
	c.withStdin(`apiVersion: v1
kind: Secret
metadata: {name: webhook-certs}
data: {tls.crt: `+b64(serving.CertPEM)+`, tls.key: `+b64(serving.KeyPEM)+`}
---
apiVersion: v1
kind: Pod
metadata: {name: webhook, labels: {app: webhook}}
spec:
  nodeName: `+nodeName+`
  terminationGracePeriodSeconds: 2
  containers:
  - name: webhook
    image: registry.k8s.io/e2e-test-images/agnhost:2.53
    args: [webhook, --tls-cert-file=/certs/tls.crt, --tls-private-key-file=/certs/tls.key, -v=4, --port=8444]
    ports: [{containerPort: 8444}]
    readinessProbe:
      httpGet: {scheme: HTTPS, port: 8444, path: /readyz}
      periodSeconds: 1
    volumeMounts: [{name: certs, mountPath: /certs, readOnly: true}]
  volumes: [{name: certs, secret: {secretName: webhook-certs}}]
---
apiVersion: v1
kind: Service
metadata: {name: e2e-webhook}
spec:
  selector: {app: webhook}
  ports: [{port: 8443, targetPort: 8444}]
---
apiVersion: v1
kind: Pod
metadata: {name: conversion, labels: {app: conversion}}
spec:
  nodeName: `+nodeName+`
  terminationGracePeriodSeconds: 2
  containers:
  - name: webhook
    image: registry.k8s.io/e2e-test-images/agnhost:2.53
    args: [crd-conversion-webhook, --tls-cert-file=/certs/tls.crt, --tls-private-key-file=/certs/tls.key, -v=4, --port=9444]
    readinessProbe:
      httpGet: {scheme: HTTPS, port: 9444, path: /readyz}
      periodSeconds: 1
    volumeMounts: [{name: certs, mountPath: /certs, readOnly: true}]
  volumes: [{name: certs, secret: {secretName: webhook-certs}}]
---
apiVersion: v1
kind: Service
metadata: {name: e2e-conversion}
spec:
  selector: {app: conversion}
  ports: [{port: 9443, targetPort: 9444}]
---
apiVersion: v1
kind: Pod
metadata: {name: to-be-attached-pod}
spec:
  nodeName: `+nodeName+`
  terminationGracePeriodSeconds: 2
  containers:
  - name: container1
    image: registry.k8s.io/pause:3.10
`, "apply", "-f", "-")
	c.waitReady("webhook", "True", 60*time.Second)
	c.waitReady("to-be-attached-pod", "True", 60*time.Second)
	c.waitReady("conversion", "True", 60*time.Second)
	hook := func(name, path, group, resources, operations string) string {
		return `- name: ` + name + `
  clientConfig:
    service: {namespace: default, name: e2e-webhook, port: 8443, path: ` + path + `}
    caBundle: ` + b64(ca.CertPEM) + `
  rules: [{operations: [` + operations + `], apiGroups: ["` + group + `"], apiVersions: [v1], resources: [` + resources + `]}]
  namespaceSelector: {matchLabels: {webhook-e2e: "true"}}
  sideEffects: None
  admissionReviewVersions: [v1]
`
	}
	c.must("create", "namespace", "hooked")
	c.must("label", "namespace", "hooked", "webhook-e2e=true")
	c.withStdin(`apiVersion: admissionregistration.k8s.io/v1
kind: MutatingWebhookConfiguration
metadata: {name: e2e-mutating}
webhooks:
`+hook("adding-configmap-data-stage-1.k8s.io", "/mutating-configmaps", "", "configmaps", "CREATE")+`---
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingWebhookConfiguration
metadata: {name: e2e-validating}
webhooks:
`+hook("deny-unwanted-configmap-data.k8s.io", "/configmaps", "", "configmaps", "CREATE, UPDATE")+
		hook("deny-attaching-pod.k8s.io", "/pods/attach", "", "pods/attach", "CONNECT"), "apply", "-f", "-")
	c.must("label", "namespace", "default", "webhook-e2e=true")

	// The configuration is read from an informer: the first writes may
	// come before it.
	eventually(t, 30*time.Second, func() string {
		c.kubectl("", "delete", "configmap", "mutated", "-n", "hooked", "--ignore-not-found")
		if out, err := c.kubectl("", "create", "configmap", "mutated", "-n", "hooked", "--from-literal=mutation-start=yes"); err != nil {
			return "create: " + out
		}
		out, _ := c.kubectl("", "get", "configmap", "mutated", "-n", "hooked", "-o", "jsonpath={.data.mutation-stage-1}")
		if out != "yes" {
			return "mutation-stage-1=" + out + ", want yes"
		}
		return ""
	})
	out := c.fails("create", "configmap", "denied", "-n", "hooked", "--from-literal=webhook-e2e-test=webhook-disallow")
	if want := `admission webhook "deny-unwanted-configmap-data.k8s.io" denied the request: the configmap contains unwanted key and value`; !strings.Contains(out, want) {
		t.Errorf("refused create says %q, want %q", out, want)
	}
	if _, err := c.kubectl("", "get", "configmap", "denied", "-n", "hooked"); err == nil {
		t.Error("the refused ConfigMap was stored")
	}
	// Namespaces the selector leaves out are not asked.
	c.must("create", "configmap", "free", "--from-literal=webhook-e2e-test=webhook-disallow", "-n", "kube-public")
	// A CONNECT: attaching to the pod's container1 with stdin.
	out = c.fails("attach", "to-be-attached-pod", "-i", "-c", "container1")
	if want := "attaching to pod 'to-be-attached-pod' is not allowed"; !strings.Contains(out, want) {
		t.Errorf("refused attach says %q, want %q", out, want)
	}

	// A webhook that cannot be called: Fail refuses, Ignore lets through.
	unreachable := func(policy string) string {
		return `apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingWebhookConfiguration
metadata: {name: e2e-unreachable}
webhooks:
- name: unreachable.k8s.io
  clientConfig:
    service: {namespace: default, name: no-such-service, port: 443, path: /configmaps}
    caBundle: ` + b64(ca.CertPEM) + `
  rules: [{operations: [CREATE], apiGroups: [""], apiVersions: [v1], resources: [secrets]}]
  namespaceSelector: {matchLabels: {webhook-e2e: "true"}}
  failurePolicy: ` + policy + `
  sideEffects: None
  admissionReviewVersions: [v1]
`
	}
	c.withStdin(unreachable("Fail"), "apply", "-f", "-")
	eventually(t, 30*time.Second, func() string {
		out, err := c.kubectl("", "create", "secret", "generic", "s1", "-n", "hooked")
		if err == nil {
			c.kubectl("", "delete", "secret", "s1", "-n", "hooked")
			return "a create passed a webhook that cannot be called, under failurePolicy Fail"
		}
		if want := `failed calling webhook "unreachable.k8s.io"`; !strings.Contains(out, want) {
			return "refusal says " + out + ", want " + want
		}
		return ""
	})
	c.withStdin(unreachable("Ignore"), "apply", "-f", "-")
	eventually(t, 30*time.Second, func() string {
		if out, err := c.kubectl("", "create", "secret", "generic", "s2", "-n", "hooked"); err != nil {
			return "create under failurePolicy Ignore: " + out
		}
		return ""
	})

	// A custom resource's mutations keep only what its schema declares:
	// the second webhook's mutation-stage-2 is pruned.
	c.withStdin(`apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {name: pruned.webhook.example.com}
spec:
  group: webhook.example.com
  scope: Namespaced
  names: {plural: pruned, singular: pruned, kind: Pruned, listKind: PrunedList}
  versions:
`+crdVersion("v1", true, `mutation-start: {type: string}, mutation-stage-1: {type: string}`)+`---
apiVersion: admissionregistration.k8s.io/v1
kind: MutatingWebhookConfiguration
metadata: {name: e2e-mutating-cr}
webhooks:
`+hook("mutate-custom-resource-data-stage-1.k8s.io", "/mutating-custom-resource", "webhook.example.com", "pruned", "CREATE")+
		hook("mutate-custom-resource-data-stage-2.k8s.io", "/mutating-custom-resource", "webhook.example.com", "pruned", "CREATE"), "apply", "-f", "-")
	c.must("wait", "--for", "condition=established", "crd/pruned.webhook.example.com")
	eventually(t, 30*time.Second, func() string {
		c.kubectl("", "delete", "pruned", "cr", "-n", "hooked", "--ignore-not-found")
		if out, err := c.kubectl(`{"apiVersion": "webhook.example.com/v1", "kind": "Pruned", "metadata": {"name": "cr"}, "data": {"mutation-start": "yes"}}`,
			"create", "-n", "hooked", "-f", "-"); err != nil {
			return "create: " + out
		}
		out, _ := c.kubectl("", "get", "pruned", "cr", "-n", "hooked", "-o", "jsonpath={.data}")
		if want := `{"mutation-stage-1":"yes","mutation-start":"yes"}`; out != want {
			return "data " + out + ", want " + want
		}
		return ""
	})

	// A definition converted by its webhook: v1's hostPort is v2's host
	// and port, both ways.
	c.withStdin(`apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {name: hostports.stable.example.com}
spec:
  group: stable.example.com
  scope: Namespaced
  names: {plural: hostports, singular: hostport, kind: HostPort, listKind: HostPortList}
  versions:
`+crdVersion("v1", true, "")+crdVersion("v2", false, "")+`  conversion:
    strategy: Webhook
    webhook:
      conversionReviewVersions: [v1, v1beta1]
      clientConfig:
        service: {namespace: default, name: e2e-conversion, port: 9443, path: /crdconvert}
        caBundle: `+b64(ca.CertPEM)+`
`, "apply", "-f", "-")
	c.must("wait", "--for", "condition=established", "crd/hostports.stable.example.com")
	c.withStdin(`{"apiVersion": "stable.example.com/v1", "kind": "HostPort", "metadata": {"name": "web"}, "hostPort": "localhost:8080"}`, "create", "-f", "-")
	if out := c.must("get", "hostports.v2.stable.example.com", "web", "-o", "jsonpath={.apiVersion} {.host} {.port} {.hostPort}"); out != "stable.example.com/v2 localhost 8080 " {
		t.Errorf("v1 object read at v2: %q, want host and port", out)
	}
	c.withStdin(`{"apiVersion": "stable.example.com/v2", "kind": "HostPort", "metadata": {"name": "db"}, "host": "db", "port": "5432"}`, "create", "-f", "-")
	if out := c.must("get", "hostports.v1.stable.example.com", "db", "-o", "jsonpath={.apiVersion} {.hostPort}"); out != "stable.example.com/v1 db:5432" {
		t.Errorf("v2 object read at v1: %q, want hostPort", out)
	}
	if out := c.must("get", "hostports.v2.stable.example.com", "-o", "jsonpath={range .items[*]}{.metadata.name}={.host}:{.port} {end}"); out != "db=db:5432 web=localhost:8080 " {
		t.Errorf("list at v2: %q", out)
	}
}

// crdVersion is a served version of the webhook tests' definitions, its
// schema declaring the properties given (any when none are).
func crdVersion(name string, storage bool, dataProperties string) string {
	schema := `{type: object, x-kubernetes-preserve-unknown-fields: true}`
	if dataProperties != "" {
		schema = `{type: object, properties: {data: {type: object, properties: {` + dataProperties + `}}}}`
	}
	return `  - name: ` + name + `
    served: true
    storage: ` + map[bool]string{true: "true", false: "false"}[storage] + `
    schema: {openAPIV3Schema: ` + schema + `}
`
}
