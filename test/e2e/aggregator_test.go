package e2e

import (
	"encoding/base64"
	"strings"
	"testing"
	"time"

	"github.com/svcnet/svcnet/internal/pki"
)

// TestAggregator runs upstream's sample-apiserver (with its etcd) behind
// an APIService, as upstream's Aggregator conformance test does: the
// APIService turns Available once the Deployment serves, flunders are
// created, listed and deleted through the API server with kubectl,
// discovery lists them, and the APIService is unavailable again once the
// Service has no endpoints.
func TestAggregator(t *testing.T) {
	t.Parallel()
	c := startNodeCluster(t)
	dir := t.TempDir()
	ca, err := pki.LoadOrCreateCA(dir)
	if err != nil {
		t.Fatal(err)
	}
	serving, err := ca.Serving(dir, "sample-api", []string{"sample-api.wardle.svc"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	b64 := func(b []byte) string { return base64.StdEncoding.EncodeToString(b) }
	c.must("create", "namespace", "wardle")
	c.withStdin(`apiVersion: v1
kind: Secret
metadata: {name: sample-apiserver-secret, namespace: wardle}
data: {tls.crt: `+b64(serving.CertPEM)+`, tls.key: `+b64(serving.KeyPEM)+`}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata: {name: "wardler:wardle:auth-delegator"}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: "system:auth-delegator"}
subjects: [{kind: ServiceAccount, name: default, namespace: wardle}]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata: {name: wardler-auth-reader, namespace: kube-system}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: Role, name: extension-apiserver-authentication-reader}
subjects: [{kind: ServiceAccount, name: default, namespace: wardle}]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata: {name: sample-apiserver-reader}
rules:
- {apiGroups: [""], resources: [namespaces], verbs: [get, list, watch]}
- {apiGroups: [admissionregistration.k8s.io], resources: ["*"], verbs: [get, list, watch]}
- {apiGroups: [flowcontrol.apiserver.k8s.io], resources: [prioritylevelconfigurations, flowschemas], verbs: [get, list, watch]}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata: {name: "wardler:sample-apiserver-reader"}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: sample-apiserver-reader}
subjects: [{kind: ServiceAccount, name: default, namespace: wardle}]
---
apiVersion: apps/v1
kind: Deployment
metadata: {name: sample-apiserver-deployment, namespace: wardle}
spec:
  replicas: 1
  selector: {matchLabels: {apiserver: "true"}}
  template:
    metadata: {labels: {app: sample-apiserver, apiserver: "true"}}
    spec:
      terminationGracePeriodSeconds: 2
      containers:
      - name: sample-apiserver
        image: registry.k8s.io/e2e-test-images/sample-apiserver:1.29.2
        args: [--etcd-servers=http://127.0.0.1:2379, --tls-cert-file=/apiserver.local.config/certificates/tls.crt,
          --tls-private-key-file=/apiserver.local.config/certificates/tls.key, --audit-log-path=-, --audit-log-maxage=0, --audit-log-maxbackup=0]
        readinessProbe:
          httpGet: {scheme: HTTPS, port: 443, path: /readyz}
          periodSeconds: 1
        volumeMounts: [{name: apiserver-certs, mountPath: /apiserver.local.config/certificates, readOnly: true}]
      - name: etcd
        image: registry.k8s.io/etcd:3.7.0-0
        command: [/usr/local/bin/etcd, --listen-client-urls, "http://127.0.0.1:2379", --advertise-client-urls, "http://127.0.0.1:2379"]
      volumes: [{name: apiserver-certs, secret: {secretName: sample-apiserver-secret}}]
---
apiVersion: v1
kind: Service
metadata: {name: sample-api, namespace: wardle}
spec:
  selector: {apiserver: "true"}
  ports: [{port: 7443, targetPort: 443}]
`, "apply", "-f", "-")
	c.withStdin(`apiVersion: apiregistration.k8s.io/v1
kind: APIService
metadata: {name: v1alpha1.wardle.example.com}
spec:
  group: wardle.example.com
  version: v1alpha1
  service: {namespace: wardle, name: sample-api, port: 7443}
  caBundle: `+b64(ca.CertPEM)+`
  groupPriorityMinimum: 2000
  versionPriority: 200
`, "apply", "-f", "-")
	c.must("wait", "--for=condition=Available", "deployment/sample-apiserver-deployment", "-n", "wardle", "--timeout=120s")
	c.must("wait", "--for=condition=Available", "apiservice/v1alpha1.wardle.example.com", "--timeout=60s")
	if out := c.must("get", "apiservice", "v1alpha1.wardle.example.com", "-o", "jsonpath={.status.conditions[0].message}"); out != "all checks passed" {
		t.Errorf("Available message %q", out)
	}
	if out := c.must("get", "apiservice", "v1alpha1.wardle.example.com"); !strings.Contains(out, "wardle/sample-api") || !strings.Contains(out, "True") {
		t.Errorf("kubectl get apiservice:\n%s", out)
	}

	// kubectl finds flunders through discovery and reaches them through
	// the aggregator; the sample-apiserver answers with its own table.
	eventually(t, 30*time.Second, func() string {
		if out, err := c.kubectl("", "api-resources", "--api-group=wardle.example.com"); err != nil || !strings.Contains(out, "flunders") {
			return "api-resources: " + out
		}
		return ""
	})
	c.withStdin(`apiVersion: wardle.example.com/v1alpha1
kind: Flunder
metadata: {name: rest-flunder, namespace: default, labels: {sample-label: "true"}}
`, "create", "-f", "-")
	// The sample-apiserver's warning comes through, as from upstream's.
	deprecated := "Warning: wardle.example.com/v1alpha1 Flunder is deprecated in v1.3+, unavailable in v1.10+\n"
	if out := c.must("get", "flunders", "-n", "default"); !strings.Contains(out, "rest-flunder") || !strings.HasPrefix(out, deprecated) {
		t.Errorf("kubectl get flunders:\n%s", out)
	}
	if out := c.must("get", "flunder", "rest-flunder", "-n", "default", "-o", "jsonpath={.kind} {.metadata.labels.sample-label}"); strings.TrimPrefix(out, deprecated) != "Flunder true" {
		t.Errorf("flunder read back as %q", out)
	}
	// The API server authorizes before it proxies, as kube-apiserver's
	// filters: a user without rights is refused.
	out, err := c.kubectlEnv([]string{"KUBECONFIG=" + c.userKubeconfig("nobody")}, "get", "flunders", "-n", "default")
	if err == nil || !strings.Contains(out, "forbidden") {
		t.Errorf("a user without rights listed flunders: %v: %s", err, out)
	}
	c.must("delete", "flunder", "rest-flunder", "-n", "default")
	if out := c.must("get", "flunders", "-n", "default", "-o", "name"); strings.TrimPrefix(out, deprecated) != "" {
		t.Errorf("flunders after delete: %q", out)
	}

	// Without endpoints the APIService is unavailable and its paths 503.
	c.must("scale", "deployment/sample-apiserver-deployment", "-n", "wardle", "--replicas=0")
	c.must("wait", "--for=condition=Available=False", "apiservice/v1alpha1.wardle.example.com", "--timeout=60s")
	if out := c.must("get", "apiservice", "v1alpha1.wardle.example.com", "-o", "jsonpath={.status.conditions[0].reason}"); out != "MissingEndpoints" && out != "EndpointsNotFound" {
		t.Errorf("unavailable reason %q", out)
	}
	if out := c.fails("get", "flunders", "-n", "default"); !strings.Contains(out, "ServiceUnavailable") && !strings.Contains(out, "service unavailable") {
		t.Errorf("kubectl get flunders of an unavailable APIService: %s", out)
	}
}
